#include "report/advise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/names.h"
#include "common/stats.h"
#include "report/render/common.h"

namespace hetbench::report {

namespace {

struct Profile {
  const v1::Task* task = nullptr;
  // Each layer's forward + backward and its backward alone, scaled so that
  // with the optimizer they sum to the measured step; its optimizer share as
  // timed (LayerTiming.optimizer; zeros when the profile has none).
  std::vector<double> layer_ns, backward_ns, optimizer_ns;
  double measured_step_ns = 0, profiled_sum_ns = 0, optimizer_sum_ns = 0;
  double watts = 0;
  bool watts_modeled = false;
  // Each layer's own training power, when the job resolved all of them
  // (layers.energy_seconds); empty otherwise.
  std::vector<double> layer_watts;
  double usd_per_hour = 0;
};

// The layers' resolved training power in layer order (empty unless every
// layer has one), and whether any of it is modeled.
std::vector<double> LayerTrainWatts(const v1::TaskResult& r, bool* modeled) {
  std::vector<double> watts(static_cast<size_t>(r.layers_size()), 0);
  for (const v1::LayerEnergy& e : r.layer_energy()) {
    if (e.phase() == v1::PHASE_TRAIN && e.resolved() && e.layer() >= 0 &&
        static_cast<size_t>(e.layer()) < watts.size()) {
      watts[static_cast<size_t>(e.layer())] = e.average_watts();
      *modeled = *modeled || e.source() == v1::POWER_SOURCE_MODELED;
    }
  }
  if (watts.empty() || std::any_of(watts.begin(), watts.end(), [](double w) { return w <= 0; })) return {};
  return watts;
}

double Score(const Prediction& p, Objective o) {
  return o == Objective::kTime ? p.step_ns : o == Objective::kEnergy ? p.energy_joules : p.usd_per_1000_samples;
}

}  // namespace

const char* ObjectiveName(Objective o) {
  return o == Objective::kTime ? "time" : o == Objective::kEnergy ? "energy" : "cost";
}

absl::StatusOr<Objective> ParseObjective(const std::string& name) {
  if (name == "time") return Objective::kTime;
  if (name == "energy") return Objective::kEnergy;
  if (name == "cost") return Objective::kCost;
  return absl::InvalidArgumentError(absl::StrCat("--objective ", name, ": use time, energy or cost"));
}

std::string StageLayers(const Stage& s, size_t layers) {
  return static_cast<size_t>(s.end) == layers ? absl::StrCat(s.begin, "-")
         : s.end - s.begin == 1               ? absl::StrCat(s.begin)
                                              : absl::StrCat(s.begin, "-", s.end - 1);
}

std::string SplitFlag(const Prediction& plan, size_t layers) {
  std::vector<std::string> parts;
  for (const Stage& s : plan.stages) parts.push_back(absl::StrCat(StageLayers(s, layers), ":", DeviceKindName(s.kind)));
  return absl::StrJoin(parts, ",");
}

namespace {

using Profiles = std::map<v1::DeviceKind, Profile>;
using KindTasks = std::map<v1::DeviceKind, const v1::Task*>;
struct Group {
  std::string model;
  int batch_size = 0;
  KindTasks tasks;  // the first succeeded task with layer timings, per kind
  std::map<v1::DeviceKind, std::vector<const v1::Task*>> runs;  // every such task per kind (repeats), in order
};

// The (model, batch size) with succeeded per-layer timings on the most kinds.
absl::StatusOr<Group> ChooseGroup(const v1::Job& job, const AdviseOptions& options) {
  std::map<std::pair<std::string, int>, std::map<v1::DeviceKind, std::vector<const v1::Task*>>> groups;
  for (const v1::Task& t : job.tasks()) {
    if (t.state() != v1::TASK_STATE_SUCCEEDED || t.result().layers_size() == 0 || t.gang().world_size() > 1 ||
        t.result().split_size() > 0 || render::FindPhase(t, v1::PHASE_TRAIN) == nullptr) {
      continue;
    }
    const std::string model = render::TaskModel(job, t);
    if (!options.model.empty() && model != options.model) continue;
    if (options.batch_size > 0 && t.batch_size() != options.batch_size) continue;
    groups[{model, t.batch_size()}][t.device_kind()].push_back(&t);
  }
  const std::map<v1::DeviceKind, std::vector<const v1::Task*>>* chosen = nullptr;
  std::pair<std::string, int> key;
  for (const auto& [k, kinds] : groups) {
    if (chosen == nullptr || kinds.size() > chosen->size()) chosen = &kinds, key = k;
  }
  if (chosen == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id(), " has no succeeded task with per-layer timings",
        options.model.empty() ? "" : absl::StrCat(" of ", options.model),
        "; submit the model on each device kind with --layers, e.g. hetbench submit -m qnn -t cpu -t qpu-sim --layers"));
  }
  KindTasks first;
  for (const auto& [kind, runs] : *chosen) first[kind] = runs.front();
  return Group{key.first, key.second, first, *chosen};
}

// Each kind's layer times (scaled to its measured step), power and rate;
// kinds with per-layer power are listed in `advice.per_layer_power`.
absl::StatusOr<Profiles> BuildProfiles(const KindTasks& chosen, size_t layers, Advice& advice) {
  Profiles profiles;
  for (const auto& [kind, task] : chosen) {
    if (static_cast<size_t>(task->result().layers_size()) != layers) {
      return absl::FailedPreconditionError(absl::StrCat("tasks ", chosen.begin()->second->id(), " and ", task->id(),
                                                        " timed different layer counts; they are not one model"));
    }
    Profile p;
    p.task = task;
    for (const v1::LayerTiming& l : task->result().layers()) {
      const double backward = std::max(0.0, l.backward().p50_ns());
      const double ns = l.forward().p50_ns() + backward;
      p.layer_ns.push_back(ns);
      p.backward_ns.push_back(backward);
      p.optimizer_ns.push_back(l.optimizer().count() > 0 ? std::max(0.0, l.optimizer().p50_ns()) : 0.0);
      p.profiled_sum_ns += ns;
      p.optimizer_sum_ns += p.optimizer_ns.back();
    }
    p.measured_step_ns = render::FindPhase(*task, v1::PHASE_TRAIN)->stats().p50_ns();
    if (!(p.optimizer_sum_ns < p.measured_step_ns)) {  // cannot be the step's share: spread it with the rest
      std::fill(p.optimizer_ns.begin(), p.optimizer_ns.end(), 0.0);
      p.optimizer_sum_ns = 0;
    }
    if (p.profiled_sum_ns > 0) {
      const double scale = (p.measured_step_ns - p.optimizer_sum_ns) / p.profiled_sum_ns;
      for (double& ns : p.layer_ns) ns *= scale;
      for (double& ns : p.backward_ns) ns *= scale;
    }
    for (const v1::EnergyResult& e : task->result().energy()) {
      if (e.phase() == v1::PHASE_TRAIN && e.average_watts() > 0) {
        p.watts = e.average_watts();
        p.watts_modeled = e.source() == v1::POWER_SOURCE_MODELED;
        break;
      }
    }
    bool layers_modeled = false;
    p.layer_watts = LayerTrainWatts(task->result(), &layers_modeled);
    if (!p.layer_watts.empty()) {
      p.watts_modeled = p.watts_modeled || layers_modeled;
      advice.per_layer_power.push_back(DeviceKindName(kind));
    }
    if (const v1::CostResult* c = render::FindCost(*task, v1::PHASE_TRAIN)) p.usd_per_hour = c->usd_per_hour();
    profiles[kind] = std::move(p);
  }

  return profiles;
}

// An objective the job has no figures for is refused, not optimised on zeros.
absl::Status CheckObjective(const Profiles& profiles, Objective objective) {
  for (const auto& [kind, p] : profiles) {
    if (objective == Objective::kEnergy && p.watts <= 0 && p.layer_watts.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("--objective energy: task ", p.task->id(), " (",
                                                        DeviceKindName(kind), ") has no training energy figure"));
    }
    if (objective == Objective::kCost && p.usd_per_hour <= 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("--objective cost: task ", p.task->id(), " has no hourly rate for ", DeviceKindName(kind),
                       "; submit with --cost ", DeviceKindName(kind), "=USD_PER_HOUR (or start the agent with "
                       "--cost-usd-per-hour)"));
    }
  }
  return absl::OkStatus();
}

// The link: what the job's split tasks measured (or those of options.link_job;
// across agents only splits across agents count), else the option, else 1 GB/s
// assumed. Each split task's own figures too (advice.link_runs), for the interval.
absl::Status ChooseLink(const v1::Job& job, const AdviseOptions& options, Advice& advice) {
  const v1::Job& link_job = options.link_job != nullptr ? *options.link_job : job;
  double bytes = 0, ns = 0;
  std::vector<double> latency_ns, gbytes_per_second;  // the links' probes (splits across agents)
  std::vector<double> handoff_ns;                     // per boundary, each split task's
  struct TaskLink {
    std::vector<double> latency_ns, gbytes_per_second;
    double bytes = 0, ns = 0, handoff_ns = 0;
  };
  std::vector<TaskLink> tasks;
  for (const v1::Task& t : link_job.tasks()) {
    if (options.across_agents != link_job.spec().split().across_agents()) continue;
    const auto& split = t.result().split();
    if (split.empty()) continue;
    TaskLink& own = tasks.emplace_back();
    if (options.across_agents && split.size() >= 2 && split[0].step_ns() > 0) {
      double rest = split[0].step_ns() - split[0].transfer_ns();
      for (const v1::SplitStageResult& s : split) rest -= s.forward_ns() + s.backward_ns();
      own.handoff_ns = std::max(0.0, rest) / static_cast<double>(split.size() - 1);
      handoff_ns.push_back(own.handoff_ns);
    }
    for (const v1::SplitStageResult& s : split) {
      own.bytes += s.transfer_bytes(), own.ns += s.transfer_ns();
      if (s.link_gbytes_per_second() > 0 && s.link_latency_ns() >= 0) {
        own.latency_ns.push_back(s.link_latency_ns());
        own.gbytes_per_second.push_back(s.link_gbytes_per_second());
      }
    }
    bytes += own.bytes, ns += own.ns;
    latency_ns.insert(latency_ns.end(), own.latency_ns.begin(), own.latency_ns.end());
    gbytes_per_second.insert(gbytes_per_second.end(), own.gbytes_per_second.begin(), own.gbytes_per_second.end());
  }
  const std::string from = options.link_job != nullptr ? link_job.id() : "this job";
  if (!handoff_ns.empty()) advice.handoff_ns = MedianInPlace(handoff_ns);
  if (options.link_gbytes_per_second > 0) {
    advice.link_gbytes_per_second = options.link_gbytes_per_second;
    advice.link_source = "given (--link-gbytes-per-second)";
  } else if (!gbytes_per_second.empty()) {
    // A boundary's messages are seldom the size of the link job's: its
    // probe's latency and bandwidth scale to any size, its steps' do not.
    advice.link_latency_ns = MedianInPlace(latency_ns);
    advice.link_gbytes_per_second = MedianInPlace(gbytes_per_second);
    advice.link_source = absl::StrFormat("probed by %s's split tasks across agents: %.1f us one way + bytes at "
                                         "%.3g GB/s",
                                         from, advice.link_latency_ns / 1e3, advice.link_gbytes_per_second);
    for (TaskLink& t : tasks) {
      if (t.gbytes_per_second.empty()) continue;
      advice.link_runs.push_back({MedianInPlace(t.latency_ns), MedianInPlace(t.gbytes_per_second), t.handoff_ns});
    }
  } else if (bytes > 0 && ns > 0) {
    advice.link_gbytes_per_second = bytes / ns;
    advice.link_source = absl::StrCat("measured by ", from, "'s split tasks", options.across_agents ? " across agents" : "");
    for (const TaskLink& t : tasks) {
      if (t.bytes > 0 && t.ns > 0) advice.link_runs.push_back({0, t.bytes / t.ns, t.handoff_ns});
    }
  } else if (options.link_job != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--link-from ", link_job.id(), ": no succeeded split task", options.across_agents ? " across agents" : "",
        " with transfers in it; run one (hetbench submit --split ...", options.across_agents ? " --split-across-agents" : "",
        ") or give --link-gbytes-per-second"));
  } else {
    advice.link_gbytes_per_second = 1.0;
    advice.link_source = "assumed (no split task in the job; give --link-gbytes-per-second)";
  }

  return absl::OkStatus();
}

// A plan's predicted step, energy and cost from the profiles, over the
// advice's link (or `link`: one run's figures).
Prediction Evaluate(const std::vector<Stage>& stages, const Profiles& profiles, const std::vector<int64_t>& out_bytes,
                    const Advice& advice, const Advice::LinkRun* link = nullptr) {
  const Advice::LinkRun l =
      link != nullptr ? *link
                      : Advice::LinkRun{advice.link_latency_ns, advice.link_gbytes_per_second, advice.handoff_ns};
  const double batch = advice.batch_size;
  Prediction p;
  p.stages = stages;
  double rate = 0;
  std::vector<v1::DeviceKind> held;
  // Per stage: its optimizer share, its backward, its forward, and the
  // transfer time of one direction over the boundary after it.
  std::vector<double> optimizer(stages.size(), 0), backward(stages.size(), 0), forward(stages.size(), 0),
      one_way(stages.size(), 0);
  for (size_t s = 0; s < stages.size(); ++s) {
    const Profile& prof = profiles.at(stages[s].kind);
    for (int l = stages[s].begin; l < stages[s].end; ++l) {
      const auto i = static_cast<size_t>(l);
      p.step_ns += prof.layer_ns[i];
      optimizer[s] += prof.optimizer_ns[i];
      backward[s] += prof.backward_ns[i];
      forward[s] += prof.layer_ns[i] - prof.backward_ns[i];
      const double watts = prof.layer_watts.empty() ? prof.watts : prof.layer_watts[i];
      p.energy_joules += (prof.layer_ns[i] + prof.optimizer_ns[i]) * 1e-9 * watts;
    }
    p.energy_modeled = p.energy_modeled || prof.watts_modeled;
    p.energy_known = p.energy_known && (prof.watts > 0 || !prof.layer_watts.empty());
    p.cost_known = p.cost_known && prof.usd_per_hour > 0;
    if (std::find(held.begin(), held.end(), stages[s].kind) == held.end()) {
      held.push_back(stages[s].kind);
      rate += prof.usd_per_hour;
    }
    if (s + 1 < stages.size()) {
      // The output forward and its gradient back, each latency + bytes / (GB/s) ns.
      // Across agents, plus the handoff the link's split measured.
      const double t = 2.0 * (l.latency_ns + static_cast<double>(out_bytes[static_cast<size_t>(stages[s].end - 1)]) *
                                                 batch / l.gbytes_per_second) +
                       (advice.across_agents ? l.handoff_ns : 0.0);
      p.transfer_ns += t;
      one_way[s] = t / 2;
      p.energy_joules += t * 1e-9 * (prof.watts + profiles.at(stages[s + 1].kind).watts);
    }
  }
  // On one agent one optimizer steps every layer after the backward. Across
  // agents each stage steps its own after its backward, while the earlier
  // stages still run theirs: a later stage delays the step only if its
  // optimizer is still running when the next step's forward reaches it.
  if (!advice.across_agents) {
    for (double ns : optimizer) p.optimizer_ns += ns;
  } else if (!stages.empty()) {
    // Stage s's backward ends `back` before stage 0's, and the next step's
    // forward reaches it `ahead` after stage 0's optimizer.
    double delay = 0, back = 0, ahead = 0;
    for (size_t s = 1; s < stages.size(); ++s) {
      back += backward[s - 1] + one_way[s - 1];
      ahead += forward[s - 1] + one_way[s - 1];
      delay = std::max(delay, optimizer[s] - back - (optimizer[0] + ahead));
    }
    p.optimizer_ns = optimizer[0] + delay;
  }
  p.step_ns += p.transfer_ns + p.optimizer_ns;
  p.usd_per_1000_samples = rate / 3600.0 * p.step_ns * 1e-9 / batch * 1000.0;
  return p;
}

// A given plan (--plan), parsed against the model's layers and the kinds timed.
absl::StatusOr<std::vector<Stage>> ParsePlan(const v1::Job& job, const AdviseOptions& options, const Advice& advice,
                                             const Profiles& profiles, size_t layers) {
  std::vector<Stage> plan;
  int next = 0;
  for (const std::string& st : options.plan) {
    const std::optional<v1::SplitStage> stage = ParseStageFlag(st);
    auto range = stage ? ParseLayerRange(stage->layers()) : absl::InvalidArgumentError("no kind");
    if (!range.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--plan ", st, ": expected LAYERS:KIND, e.g. 0-2:cpu or 3-:cpu"));
    }
    const v1::DeviceKind kind = stage->target().device_kind();
    const int end = range->end < 0 ? static_cast<int>(layers) : range->end;
    if (range->begin != next || end > static_cast<int>(layers) || end <= range->begin) {
      return absl::InvalidArgumentError(absl::StrCat("--plan ", st, ": ", advice.model, " has layers 0-", layers - 1,
                                                     "; the stages must cover them in order from ", next));
    }
    if (profiles.count(kind) == 0) {
      return absl::FailedPreconditionError(absl::StrCat("--plan ", st, ": job ", job.id(), " timed no ", advice.model,
                                                        " layers on ", DeviceKindName(kind)));
    }
    if (!plan.empty() && plan.back().kind == kind && !options.across_agents) {
      return absl::InvalidArgumentError(absl::StrCat("--plan ", st, ": the stage before is on ",
                                                     DeviceKindName(kind), " too; on one agent that is one stage "
                                                     "(give --across-agents for two agents of one kind)"));
    }
    plan.push_back(Stage{range->begin, end, kind});
    next = end;
  }
  if (next != static_cast<int>(layers)) {
    return absl::InvalidArgumentError(absl::StrCat("--plan: the stages end at layer ", next - 1, " of 0-",
                                                   layers - 1, "; the last must reach it (e.g. \"", next, "-:cpu\")"));
  }
  return plan;
}

// The best of every plan of at most max_stages contiguous ranges, neighbours on different kinds.
void SearchPlans(const Profiles& profiles, const std::vector<int64_t>& out_bytes, size_t layers,
                 const AdviseOptions& options, Advice& advice) {
  std::vector<v1::DeviceKind> kinds;
  for (const auto& [kind, p] : profiles) kinds.push_back(kind);
  bool have_best = false;
  std::vector<Stage> current;
  std::function<void(int)> extend = [&](int begin) {
    if (static_cast<size_t>(begin) == layers) {
      Prediction p = Evaluate(current, profiles, out_bytes, advice);
      ++advice.plans_considered;
      if (!have_best || Score(p, options.objective) < Score(advice.best, options.objective)) {
        advice.best = p;
        have_best = true;
      }
      return;
    }
    if (static_cast<int>(current.size()) >= options.max_stages) return;
    for (size_t end = static_cast<size_t>(begin) + 1; end <= layers; ++end) {
      for (v1::DeviceKind k : kinds) {
        if (!current.empty() && current.back().kind == k) continue;
        current.push_back(Stage{begin, static_cast<int>(end), k});
        extend(static_cast<int>(end));
        current.pop_back();
      }
    }
  };
  extend(0);
}

// With repeats (every kind run k >= 2 times): run r's profiles from run r of
// each kind; empty otherwise.
absl::StatusOr<std::vector<Profiles>> RunProfiles(const Group& group, size_t layers) {
  size_t k = SIZE_MAX;
  for (const auto& [kind, runs] : group.runs) k = std::min(k, runs.size());
  std::vector<Profiles> out;
  if (k < 2 || k == SIZE_MAX) return out;
  for (size_t r = 0; r < k; ++r) {
    KindTasks tasks;
    for (const auto& [kind, runs] : group.runs) tasks[kind] = runs[r];
    Advice scratch;  // per-layer power is listed once, from the first runs
    auto profiles = BuildProfiles(tasks, layers, scratch);
    if (!profiles.ok()) return profiles.status();
    out.push_back(std::move(*profiles));
  }
  return out;
}

// The profile the plans are searched on: each kind's measured step and each
// layer's time the median over the runs (no change with one run).
void MedianOverRuns(const std::vector<Profiles>& runs, Profiles& profiles) {
  if (runs.size() < 2) return;
  for (auto& [kind, p] : profiles) {
    std::vector<double> v;
    for (const Profiles& r : runs) v.push_back(r.at(kind).measured_step_ns);
    p.measured_step_ns = MedianInPlace(v);
    for (size_t l = 0; l < p.layer_ns.size(); ++l) {
      for (auto field : {&Profile::layer_ns, &Profile::backward_ns, &Profile::optimizer_ns}) {
        v.clear();
        for (const Profiles& r : runs) v.push_back((r.at(kind).*field)[l]);
        (p.*field)[l] = MedianInPlace(v);
      }
    }
  }
}

// The sample variance of the logs of the positive values; false below two of them.
bool LogVariance(const std::vector<double>& values, double& variance) {
  std::vector<double> logs;
  for (double v : values) {
    if (v > 0) logs.push_back(std::log(v));
  }
  if (logs.size() < 2) return false;
  double mean = 0;
  for (double l : logs) mean += l;
  mean /= static_cast<double>(logs.size());
  variance = 0;
  for (double l : logs) variance += (l - mean) * (l - mean);
  variance /= static_cast<double>(logs.size() - 1);
  return true;
}

// The advised plan under each run's profiles, and a 95% interval for one new
// run of it: from k runs' log predictions, variance s2, the median profile's
// prediction +/- t(0.975, k-1) x sqrt(s2 (1 + 1/k)). With m >= 2 runs of the
// link, the plan under each run's link (the median profile) adds its own
// variance l2 x (1 + 1/m), the degrees of freedom Welch-Satterthwaite's.
// It covers the noise between runs, not the model's own error (see the
// assumptions).
void PredictionInterval(const std::vector<Profiles>& runs, const Profiles& median,
                        const std::vector<int64_t>& out_bytes, Advice& advice) {
  if (runs.size() < 2 || !(advice.best.step_ns > 0)) return;
  for (const Profiles& r : runs)
    advice.run_step_ns.push_back(Evaluate(advice.best.stages, r, out_bytes, advice).step_ns);
  double s2 = 0;
  if (!LogVariance(advice.run_step_ns, s2)) return;
  const double k = static_cast<double>(runs.size());
  double a = s2 * (1 + 1 / k), b = 0, l2 = 0;
  const double m = static_cast<double>(advice.link_runs.size());
  if (advice.best.stages.size() >= 2 && advice.link_runs.size() >= 2) {
    for (const Advice::LinkRun& l : advice.link_runs) {
      advice.link_run_step_ns.push_back(Evaluate(advice.best.stages, median, out_bytes, advice, &l).step_ns);
    }
    if (LogVariance(advice.link_run_step_ns, l2)) {
      b = l2 * (1 + 1 / m);
      advice.interval_has_link = true;
    }
  }
  const double profile_half = StudentTQuantile(0.975, k - 1) * std::sqrt(a);
  advice.profile_interval_low_ns = advice.best.step_ns * std::exp(-profile_half);
  advice.profile_interval_high_ns = advice.best.step_ns * std::exp(profile_half);
  const double df = b > 0 ? (a + b) * (a + b) / (a * a / (k - 1) + b * b / (m - 1)) : k - 1;
  const double half = StudentTQuantile(0.975, df) * std::sqrt(a + b);
  advice.interval_low_ns = advice.best.step_ns * std::exp(-half);
  advice.interval_high_ns = advice.best.step_ns * std::exp(half);
}

}  // namespace

absl::StatusOr<Advice> Advise(const v1::Job& job, const AdviseOptions& options) {
  auto group = ChooseGroup(job, options);
  if (!group.ok()) return group.status();
  Advice advice;
  advice.job_id = job.id();
  advice.model = group->model;
  advice.batch_size = group->batch_size;
  advice.objective = options.objective;
  advice.across_agents = options.across_agents;
  const v1::TaskResult& first = group->tasks.begin()->second->result();
  const size_t layers = static_cast<size_t>(first.layers_size());
  std::vector<int64_t> out_bytes(layers, 0);
  for (const v1::LayerTiming& l : first.layers()) {
    advice.layer_names.push_back(l.name());
    out_bytes[static_cast<size_t>(l.index())] = l.output_bytes_per_sample();
  }
  auto profiles = BuildProfiles(group->tasks, layers, advice);
  if (!profiles.ok()) return profiles.status();
  auto per_run = RunProfiles(*group, layers);
  if (!per_run.ok()) return per_run.status();
  MedianOverRuns(*per_run, *profiles);
  advice.runs = static_cast<int>(std::max<size_t>(per_run->size(), 1));
  for (const auto& [kind, runs] : group->runs) {
    for (const v1::Task* t : runs) {
      if (!t->agent_id().empty() && std::find(advice.profile_agents.begin(), advice.profile_agents.end(),
                                              t->agent_id()) == advice.profile_agents.end()) {
        advice.profile_agents.push_back(t->agent_id());
      }
    }
  }
  if (auto s = CheckObjective(*profiles, options.objective); !s.ok()) return s;
  if (auto s = ChooseLink(job, options, advice); !s.ok()) return s;
  if (!options.plan.empty()) {
    auto plan = ParsePlan(job, options, advice, *profiles, layers);
    if (!plan.ok()) return plan.status();
    advice.best = Evaluate(*plan, *profiles, out_bytes, advice);
    advice.plans_considered = 1;
    advice.plan_given = true;
  } else {
    SearchPlans(*profiles, out_bytes, layers, options, advice);
  }
  for (const auto& [kind, prof] : *profiles) {
    SingleRun s;
    advice.optimizer_timed = advice.optimizer_timed || prof.optimizer_sum_ns > 0;
    s.kind = kind;
    s.task_id = prof.task->id();
    s.measured_step_ns = prof.measured_step_ns;
    s.profiled_sum_ns = prof.profiled_sum_ns;
    s.profiled_optimizer_ns = prof.optimizer_sum_ns;
    s.as_plan = Evaluate({Stage{0, static_cast<int>(layers), kind}}, *profiles, out_bytes, advice);
    advice.singles.push_back(std::move(s));
  }
  PredictionInterval(*per_run, *profiles, out_bytes, advice);
  AddAssumptions(options, advice);
  return advice;
}

}  // namespace hetbench::report
