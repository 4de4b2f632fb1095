#include "report/render/plots.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/render/common.h"
#include "report/render/parallel.h"
#include "report/render/serving.h"
#include "report/render/svg.h"
#include "common/energy.h"
#include "common/names.h"

namespace hetbench::report {

namespace {

using render::FindCost;
using render::FindPhase;
using render::PerSampleNs;
using render::TaskModel;

// The series a task belongs to: its device, and the executor when not the default.
std::string SeriesName(const v1::Task& t) { return render::DeviceLabel(t); }

std::vector<const v1::Task*> Succeeded(const v1::Job& job) {
  std::vector<const v1::Task*> out;
  for (const v1::Task& t : job.tasks()) {
    if (t.state() == v1::TASK_STATE_SUCCEEDED || (t.state() == v1::TASK_STATE_CANCELLED && t.result().partial())) {
      out.push_back(&t);
    }
  }
  return out;
}

bool Simulated(const v1::Job& job) {
  for (const v1::Task& t : job.tasks()) {
    if (t.result().environment().simulated()) return true;
  }
  return false;
}

// Index of `name` in `names`, appended when new.
size_t IndexOf(std::vector<std::string>* names, const std::string& name) {
  auto it = std::find(names->begin(), names->end(), name);
  if (it != names->end()) return static_cast<size_t>(it - names->begin());
  names->push_back(name);
  return names->size() - 1;
}

double SecondsPerSample(const v1::TimingStats& s, double step_ns) { return PerSampleNs(s, step_ns) * 1e-9; }

// One metric over (category, series): the bars and their whiskers.
struct Metric {
  const char* slug;
  const char* what;
  const char* unit;
  // Fills the bar for a task's phase; false when the task has no such figure.
  bool (*fill)(const v1::Task&, const v1::PhaseResult&, svg::Bar*);
  const char* footnote;
};

bool Throughput(const v1::Task&, const v1::PhaseResult& p, svg::Bar* b) {
  const v1::TimingStats& s = p.stats();
  if (s.samples_per_second() <= 0) return false;
  b->value = s.samples_per_second();
  const double slow = SecondsPerSample(s, s.p75_ns()), fast = SecondsPerSample(s, s.p25_ns());
  if (slow > 0 && fast > 0) {
    b->lo = 1 / slow;
    b->hi = 1 / fast;
  }
  return true;
}

bool TimePerSample(const v1::Task&, const v1::PhaseResult& p, svg::Bar* b) {
  const v1::TimingStats& s = p.stats();
  if (s.items() <= 0) return false;
  b->value = SecondsPerSample(s, s.p50_ns()) * 1e3;
  b->lo = SecondsPerSample(s, s.p25_ns()) * 1e3;
  b->hi = SecondsPerSample(s, s.p75_ns()) * 1e3;
  return true;
}

bool EnergyPerSample(const v1::Task& t, const v1::PhaseResult& p, svg::Bar* b) {
  const EnergySummary e = SummarizeEnergy(t.result(), p.phase());
  if (!e.ok || e.joules_per_sample <= 0) return false;
  b->value = e.joules_per_sample * 1e3;
  // The spread of time per sample at the phase's average power.
  b->lo = e.average_watts * SecondsPerSample(p.stats(), p.stats().p25_ns()) * 1e3;
  b->hi = e.average_watts * SecondsPerSample(p.stats(), p.stats().p75_ns()) * 1e3;
  b->note = e.source == v1::POWER_SOURCE_MODELED ? "modeled*" : absl::StrCat("measured (", PowerSourceName(e.source), ")");
  if (e.short_window) b->note += "!";
  return true;
}

bool CostPer1000(const v1::Task& t, const v1::PhaseResult& p, svg::Bar* b) {
  const v1::CostResult* c = FindCost(t, p.phase());
  if (c == nullptr || c->usd_per_1000_samples() <= 0) return false;
  b->value = c->usd_per_1000_samples();
  const double per_second = c->usd_per_hour() / 3600.0;
  b->lo = per_second * SecondsPerSample(p.stats(), p.stats().p25_ns()) * 1000;
  b->hi = per_second * SecondsPerSample(p.stats(), p.stats().p75_ns()) * 1000;
  return true;
}

constexpr Metric kMetrics[] = {
    {"samples-per-second", "Throughput", "samples/s", Throughput,
     "bars: items / step time; whiskers: at the p75 and p25 step time"},
    {"time-per-sample", "Time per sample", "ms per sample", TimePerSample, "bars: p50; whiskers: p25-p75"},
    {"energy-per-sample", "Energy per sample", "mJ per sample", EnergyPerSample,
     "measured: sensor energy over the phase; modeled*: an estimate (nominal W x utilisation); "
     "whiskers: average W x p25/p75 time; ! window shorter than the sensor period"},
    {"cost-per-1000", "Cost per 1,000 samples", "USD per 1,000 samples", CostPer1000,
     "device cost per hour x time; whiskers: at p25/p75 time per sample"},
};

void DeviceComparison(const v1::Job& job, const std::vector<const v1::Task*>& tasks, std::vector<Plot>* out) {
  std::set<int> batches;
  std::set<std::string> models;
  for (const v1::Task* t : tasks) {
    batches.insert(t->batch_size());
    models.insert(TaskModel(job, *t));
  }
  const bool sim = Simulated(job);
  for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER}) {
    for (const Metric& m : kMetrics) {
      svg::BarChart c;
      c.title = absl::StrCat(m.what, ", ", PhaseName(phase), sim ? " (SIMULATED devices)" : "");
      c.y_label = m.unit;
      c.footnote = m.footnote;
      std::vector<std::pair<std::pair<size_t, size_t>, svg::Bar>> cells;
      bool invalid = false;
      for (const v1::Task* t : tasks) {
        const v1::PhaseResult* p = FindPhase(*t, phase);
        svg::Bar bar;
        if (p == nullptr || !m.fill(*t, *p, &bar)) continue;
        if (!p->valid()) {  // its verdict travels with the bar
          bar.note = bar.note.empty() ? "INVALID" : absl::StrCat(bar.note, " INVALID");
          invalid = true;
        }
        std::string category = TaskModel(job, *t);
        if (batches.size() > 1) absl::StrAppend(&category, ", batch ", t->batch_size());
        cells.push_back({{IndexOf(&c.categories, category), IndexOf(&c.series, SeriesName(*t))}, bar});
      }
      if (cells.empty()) continue;
      if (invalid) c.footnote += "; INVALID: that phase's verdict (see Results), not a comparable figure";
      c.bars.assign(c.series.size(), std::vector<svg::Bar>(c.categories.size()));
      double lo = 0, hi = 0;
      for (const auto& [at, bar] : cells) {
        c.bars[at.second][at.first] = bar;
        lo = lo == 0 ? bar.value : std::min(lo, bar.value);
        hi = std::max(hi, bar.value);
      }
      c.log_y = lo > 0 && hi / lo > 50;  // a GPU next to a QPU simulator
      if (c.log_y) c.footnote += "; log scale";
      out->push_back({absl::StrCat("compare-", PhaseName(phase), "-", m.slug), c.title, svg::Render(c)});
    }
  }
}

void BatchCurves(const v1::Job& job, const std::vector<const v1::Task*>& tasks, std::vector<Plot>* out) {
  std::vector<std::string> models;
  for (const v1::Task* t : tasks) IndexOf(&models, TaskModel(job, *t));
  for (const std::string& model : models) {
    for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER}) {
      svg::LineChart c;
      c.title = absl::StrCat("Time per sample by batch size, ", model, ", ", PhaseName(phase));
      c.x_label = "batch size (log scale)";
      c.y_label = "ms per sample";
      c.log_x = true;
      c.footnote = "line: p50; band: p25-p75";
      std::vector<std::string> series;
      std::set<int> batches;
      std::vector<std::string> invalid;  // "device at batch N"
      for (const v1::Task* t : tasks) {
        const v1::PhaseResult* p = FindPhase(*t, phase);
        if (TaskModel(job, *t) != model || p == nullptr || p->stats().items() <= 0) continue;
        if (!p->valid()) invalid.push_back(absl::StrCat(SeriesName(*t), " at batch ", t->batch_size()));
        const size_t i = IndexOf(&series, SeriesName(*t));
        if (c.lines.size() <= i) c.lines.push_back({series[i], {}});
        const v1::TimingStats& s = p->stats();
        c.lines[i].points.push_back({static_cast<double>(t->batch_size()), SecondsPerSample(s, s.p50_ns()) * 1e3,
                                     SecondsPerSample(s, s.p25_ns()) * 1e3, SecondsPerSample(s, s.p75_ns()) * 1e3});
        batches.insert(t->batch_size());
      }
      if (batches.size() < 2) continue;
      if (!invalid.empty()) absl::StrAppend(&c.footnote, "; INVALID points: ", absl::StrJoin(invalid, ", "));
      for (svg::Line& l : c.lines) {
        std::sort(l.points.begin(), l.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
      }
      out->push_back({absl::StrCat("batch-", model, "-", PhaseName(phase)), c.title, svg::Render(c)});
    }
  }
}

// "Conv2d(1, 32, ...)" -> "0 Conv2d".
std::string LayerName(const v1::LayerTiming& l) {
  std::string name = l.name().substr(0, l.name().find('('));
  return absl::StrCat(l.index(), " ", name.empty() ? "layer" : name);
}

// Past 7 layers the palette would repeat a colour: the 7 layers of most time
// keep theirs (in model order), the others are summed as "other layers" in grey.
void FoldSmallLayers(svg::StackedBarChart* c) {
  constexpr size_t kKeep = 7;
  if (c->stacks.size() <= kKeep + 1) return;
  std::vector<double> total(c->stacks.size(), 0.0);
  for (auto& row : c->values) {
    row.resize(c->stacks.size(), 0.0);
    for (size_t i = 0; i < row.size(); ++i) total[i] += row[i];
  }
  std::vector<size_t> order(c->stacks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return total[a] > total[b]; });
  std::vector<size_t> kept(order.begin(), order.begin() + kKeep);
  std::sort(kept.begin(), kept.end());
  std::vector<std::string> stacks;
  for (size_t i : kept) stacks.push_back(c->stacks[i]);
  stacks.push_back(absl::StrCat("other layers (", c->stacks.size() - kKeep, ")"));
  for (auto& row : c->values) {
    std::vector<double> folded;
    double other = 0;
    for (size_t i : kept) folded.push_back(row[i]);
    for (size_t i = kKeep; i < order.size(); ++i) other += row[order[i]];
    folded.push_back(other);
    row = std::move(folded);
  }
  c->stacks = std::move(stacks);
  c->other_last = true;
}

void LayerBars(const v1::Job& job, const std::vector<const v1::Task*>& tasks, std::vector<Plot>* out) {
  std::vector<std::pair<std::string, int>> groups;  // (model, batch) with layers
  for (const v1::Task* t : tasks) {
    if (t->result().layers_size() == 0) continue;
    const std::pair<std::string, int> g{TaskModel(job, *t), t->batch_size()};
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  for (const auto& [model, batch] : groups) {
    svg::StackedBarChart c;
    c.title = absl::StrCat("Per-layer time per step, ", model, ", batch ", batch);
    c.y_label = "ms per step (p50 per layer)";
    c.footnote = "fwd: training-mode forward; bwd: its share of backward; inf: eval forward. % = layer's share";
    for (const v1::Task* t : tasks) {
      if (TaskModel(job, *t) != model || t->batch_size() != batch || t->result().layers_size() == 0) continue;
      for (const v1::LayerTiming& l : t->result().layers()) IndexOf(&c.stacks, LayerName(l));
      const std::string device = SeriesName(*t);
      for (int part = 0; part < 3; ++part) {
        std::vector<double> row(c.stacks.size(), 0.0);
        bool any = false;
        for (const v1::LayerTiming& l : t->result().layers()) {
          const v1::TimingStats& s = part == 0 ? l.forward() : part == 1 ? l.backward() : l.inference();
          if (s.count() <= 0) continue;
          const size_t i = IndexOf(&c.stacks, LayerName(l));
          if (row.size() <= i) row.resize(i + 1, 0.0);
          row[i] = s.p50_ns() / 1e6;
          any = true;
        }
        if (!any) continue;
        c.categories.push_back(absl::StrCat(device, " ", part == 0 ? "fwd" : part == 1 ? "bwd" : "inf"));
        c.values.push_back(row);
      }
    }
    if (c.categories.empty()) continue;
    FoldSmallLayers(&c);
    out->push_back({absl::StrCat("layers-", model, "-b", batch), c.title, svg::Render(c)});
  }
}

// Watts over the task's time from one sensor's readings: the power column
// where the sensor gives one, else the counter's rate between readings.
std::map<std::string, svg::Line> PowerLines(const std::vector<v1::PowerBatch>& batches) {
  std::map<std::string, std::vector<std::tuple<int64_t, double, double>>> by_sensor;
  std::set<std::string> modeled;
  for (const v1::PowerBatch& b : batches) {
    if (b.sensor().source() == v1::POWER_SOURCE_MODELED) modeled.insert(b.sensor().name());
    auto& v = by_sensor[b.sensor().name()];
    for (int i = 0; i < b.t_ns_size() && i < b.watts_size() && i < b.joules_size(); ++i) {
      v.emplace_back(b.t_ns(i), b.watts(i), b.joules(i));
    }
  }
  std::map<std::string, svg::Line> out;
  for (auto& [sensor, readings] : by_sensor) {
    std::sort(readings.begin(), readings.end());
    // A modeled trace is an estimate (nominal W x utilisation): its legend says so.
    svg::Line line{absl::StrCat(sensor, modeled.count(sensor) ? " (W, MODELED: an estimate, not measured)" : " (W)"),
                   {}};
    for (size_t i = 0; i < readings.size(); ++i) {
      const auto& [t, w, j] = readings[i];
      double watts = w;
      if (!std::isfinite(watts) && i > 0) {
        const auto& [t0, w0, j0] = readings[i - 1];
        if (std::isfinite(j) && std::isfinite(j0) && t > t0) watts = (j - j0) / (static_cast<double>(t - t0) * 1e-9);
      }
      if (std::isfinite(watts)) line.points.push_back({static_cast<double>(t) * 1e-9, watts});
    }
    if (!line.points.empty()) out[sensor] = std::move(line);
  }
  return out;
}

void Timelines(const std::vector<const v1::Task*>& tasks, const PowerTraces& power, std::vector<Plot>* out) {
  for (const v1::Task* t : tasks) {
    const v1::TaskResult& r = t->result();
    svg::TimelineChart c;
    c.title = absl::StrCat("Phases and power, ", t->id(), " on ", SeriesName(*t), r.environment().simulated() ? " (SIMULATED)" : "");
    c.x_label = "seconds since the task started";
    c.y_label = "power (W)";
    double idle_end = 0, train_start = -1, train_end = -1, infer_start = -1;
    for (const v1::PhaseWindow& w : r.windows()) {
      const double s = static_cast<double>(w.start_ns()) * 1e-9, e = static_cast<double>(w.end_ns()) * 1e-9;
      if (w.phase() == v1::PHASE_IDLE) idle_end = e;
      if (w.phase() == v1::PHASE_TRAIN) {
        train_start = s;
        train_end = e;
      }
      if (w.phase() == v1::PHASE_INFER) infer_start = s;
    }
    // What ran between the measured windows, in the agent's order.
    const double first = train_start >= 0 ? train_start : infer_start;
    // Each phase keeps its colour in every timeline. Before the first measured
    // window the agent loads data, preprocesses (model, optimizer, shuffling)
    // and warms up, in that order: their timers place them (the warm-up is
    // what is left, clamped when timers and windows disagree by a hair).
    if (first > idle_end) {
      const double load_end = std::min(first, idle_end + r.data_load_seconds());
      const double prep_end = std::min(first, load_end + r.preprocess_seconds());
      if (load_end > idle_end) c.windows.push_back({"data load", idle_end, load_end, 3});
      if (prep_end > load_end) c.windows.push_back({"preprocess", load_end, prep_end, 6});
      if (first > prep_end) c.windows.push_back({"warm-up", prep_end, first, 1});
    }
    for (const v1::PhaseWindow& w : r.windows()) {
      const bool idle = w.phase() == v1::PHASE_IDLE, train = w.phase() == v1::PHASE_TRAIN;
      c.windows.push_back({idle ? "idle baseline" : train ? "train (measured)" : "evaluate (measured)",
                           static_cast<double>(w.start_ns()) * 1e-9, static_cast<double>(w.end_ns()) * 1e-9,
                           idle ? 7 : train ? 2 : 5});
    }
    if (train_end >= 0 && infer_start > train_end) {
      c.windows.push_back({"inference warm-up", train_end, infer_start, 4});
    }
    std::sort(c.windows.begin(), c.windows.end(), [](const svg::Window& a, const svg::Window& b) { return a.start < b.start; });
    auto trace = power.find(t->id());
    if (trace != power.end()) {
      for (auto& [sensor, line] : PowerLines(trace->second)) c.lines.push_back(std::move(line));
    }
    c.footnote = c.lines.empty() ? "no power readings fetched for this task"
                                 : absl::StrCat(r.power_readings_stored(), " power readings stored; shaded: phase windows");
    out->push_back({absl::StrCat("timeline-", t->id()), c.title, svg::Render(c)});
  }
}

// Each traced task's training step times against the time since the task
// started: a line of bucket medians with a p10-p90 band, so a run that flips
// between two speeds, or slows for a stretch, shows where and for how long.
void StepTimes(const v1::Job& job, const StepTraces& steps, std::vector<Plot>* out) {
  constexpr size_t kBuckets = 240;
  svg::LineChart c;
  c.title = "Training step time over the run";
  c.x_label = "seconds since the task started";
  c.y_label = "ms per step";
  bool invalid = false;
  for (const v1::Task* t : StepTraceTasks(job)) {
    auto it = steps.find(t->id());
    if (it == steps.end()) continue;
    std::vector<std::pair<int64_t, int64_t>> s;  // (start, duration) of each training step
    for (const v1::SampleBatch& b : it->second) {
      if (b.phase() != v1::PHASE_TRAIN) continue;
      for (int i = 0; i < b.duration_ns_size() && i < b.start_ns_size(); ++i) s.push_back({b.start_ns(i), b.duration_ns(i)});
    }
    if (s.size() < 2) continue;
    std::sort(s.begin(), s.end());
    const v1::PhaseResult* p = FindPhase(*t, v1::PHASE_TRAIN);
    const bool bad = p != nullptr && !p->valid();
    invalid |= bad;
    svg::Line line{absl::StrCat(t->id(), " ", SeriesName(*t), bad ? " INVALID" : ""), {}};
    const size_t per = (s.size() + kBuckets - 1) / kBuckets;
    for (size_t at = 0; at < s.size(); at += per) {
      const size_t end = std::min(s.size(), at + per);
      std::vector<double> ms;
      for (size_t i = at; i < end; ++i) ms.push_back(static_cast<double>(s[i].second) * 1e-6);
      std::sort(ms.begin(), ms.end());
      const auto q = [&ms](double f) { return ms[std::min(ms.size() - 1, static_cast<size_t>(f * static_cast<double>(ms.size())))]; };
      line.points.push_back({static_cast<double>(s[at].first) * 1e-9, q(0.5), q(0.1), q(0.9)});
    }
    c.lines.push_back(std::move(line));
  }
  if (c.lines.empty()) return;
  c.footnote = absl::StrCat("line: the median of consecutive steps (", kBuckets,
                            " groups at most); band: their p10-p90",
                            invalid ? "; INVALID: that phase's verdict (see Results)" : "");
  out->push_back({"step-time-train", c.title, svg::Render(c)});
}

void Roofline(const v1::Job& job, const std::vector<const v1::Task*>& tasks, std::vector<Plot>* out) {
  svg::BarChart c;
  c.title = "Achieved GFLOP/s against the calibrated GEMM peak";
  c.y_label = "GFLOP/s (log scale)";
  c.log_y = true;
  c.ceiling_label = "device's calibrated SGEMM peak";
  c.footnote = "achieved = FLOPs per sample x samples/s (training counts 3x forward)";
  std::vector<std::pair<std::pair<size_t, size_t>, svg::Bar>> cells;
  std::map<size_t, double> peaks;
  std::set<int> batches;
  for (const v1::Task* t : tasks) batches.insert(t->batch_size());
  for (const v1::Task* t : tasks) {
    for (const v1::PhaseResult& p : t->result().phases()) {
      const double g = render::AchievedGflops(*t, p);
      if (g <= 0) continue;
      const size_t k = IndexOf(&c.categories, SeriesName(*t));
      // A bar per batch size of a sweep, not the last one drawn over the others.
      const size_t s = IndexOf(&c.series, absl::StrCat(TaskModel(job, *t), " ", PhaseName(p.phase()),
                                                     batches.size() > 1 ? absl::StrCat(", batch ", t->batch_size())
                                                                        : std::string()));
      svg::Bar bar;
      bar.value = g;
      if (!p.valid()) bar.note = "INVALID";
      cells.push_back({{k, s}, bar});
      if (t->result().calibration().gemm_gflops() > 0) peaks[k] = t->result().calibration().gemm_gflops();
    }
  }
  if (cells.empty()) return;
  c.bars.assign(c.series.size(), std::vector<svg::Bar>(c.categories.size()));
  for (const auto& [at, bar] : cells) c.bars[at.second][at.first] = bar;
  c.ceilings.assign(c.categories.size(), svg::kNone);
  for (const auto& [k, peak] : peaks) c.ceilings[k] = peak;
  out->push_back({"roofline", c.title, svg::Render(c)});
}

}  // namespace

std::vector<const v1::Task*> TimelineTasks(const v1::Job& job) {
  // A job of a thousand tasks gets the first few timelines, not a thousand.
  constexpr size_t kMaxTimelines = 12;
  std::vector<const v1::Task*> out;
  for (const v1::Task* t : Succeeded(job)) {
    if (t->result().windows_size() > 0 && out.size() < kMaxTimelines) out.push_back(t);
  }
  return out;
}

std::vector<const v1::Task*> StepTraceTasks(const v1::Job& job) {
  constexpr size_t kMaxTraces = 6;
  std::vector<const v1::Task*> out;
  for (const v1::Task* t : TimelineTasks(job)) {
    if (t->result().samples_stored() > 0 && FindPhase(*t, v1::PHASE_TRAIN) != nullptr && out.size() < kMaxTraces) {
      out.push_back(t);
    }
  }
  return out;
}

std::vector<Plot> JobPlots(const v1::Job& job, const PowerTraces& power, const StepTraces& steps) {
  std::vector<Plot> out;
  const std::vector<const v1::Task*> tasks = Succeeded(job);
  if (tasks.empty()) return out;
  DeviceComparison(job, tasks, &out);
  BatchCurves(job, tasks, &out);
  LayerBars(job, tasks, &out);
  Timelines(TimelineTasks(job), power, &out);
  StepTimes(job, steps, &out);
  Roofline(job, tasks, &out);
  ParallelPlots(job, &out);
  ServingPlots(job, &out);
  return out;
}

}  // namespace hetbench::report
