#include "report/render/answer.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/energy.h"
#include "common/names.h"
#include "report/render/common.h"

namespace hetbench::report {

namespace {

// One candidate: a task's phase with its figures.
struct Candidate {
  const v1::Task* task = nullptr;
  const v1::PhaseResult* phase = nullptr;
  std::string label;  // "a1/cpu0 (cpu), batch 64"
};

std::string Label(const v1::Task& t, bool batches) {
  return batches ? absl::StrCat(render::DeviceLabel(t), ", batch ", t.batch_size()) : render::DeviceLabel(t);
}

// A figure of each candidate where it has one; the best first (ascending or descending).
struct Ranked {
  const Candidate* c;
  double value, lo, hi;  // lo/hi: the figure at the slower and faster quartile step
};

std::vector<Ranked> Rank(const std::vector<Candidate>& all, bool higher_is_better,
                         bool (*figure)(const Candidate&, double* v, double* lo, double* hi)) {
  std::vector<Ranked> out;
  for (const Candidate& c : all) {
    double v = 0, lo = 0, hi = 0;
    if (figure(c, &v, &lo, &hi)) out.push_back({&c, v, lo, hi});
  }
  std::sort(out.begin(), out.end(), [higher_is_better](const Ranked& a, const Ranked& b) {
    return higher_is_better ? a.value > b.value : a.value < b.value;
  });
  return out;
}

// Per-sample seconds at a step time.
double PerSample(const v1::TimingStats& s, double step_ns) { return render::PerSampleNs(s, step_ns) * 1e-9; }

bool Throughput(const Candidate& c, double* v, double* lo, double* hi) {
  const v1::TimingStats& s = c.phase->stats();
  if (s.samples_per_second() <= 0 || s.p25_ns() <= 0 || s.p75_ns() <= 0) return false;
  *v = s.samples_per_second();
  *lo = 1 / PerSample(s, s.p75_ns());
  *hi = 1 / PerSample(s, s.p25_ns());
  return true;
}

bool Joules(const Candidate& c, double* v, double* lo, double* hi) {
  const EnergySummary e = SummarizeEnergy(c.task->result(), c.phase->phase());
  if (!e.ok || e.joules_per_sample <= 0) return false;
  const v1::TimingStats& s = c.phase->stats();
  *v = e.joules_per_sample;
  *lo = e.average_watts * PerSample(s, s.p25_ns());
  *hi = e.average_watts * PerSample(s, s.p75_ns());
  return true;
}

bool Cost(const Candidate& c, double* v, double* lo, double* hi) {
  const v1::CostResult* cost = render::FindCost(*c.task, c.phase->phase());
  if (cost == nullptr || cost->usd_per_1000_samples() <= 0) return false;
  const v1::TimingStats& s = c.phase->stats();
  const double per_second = cost->usd_per_hour() / 3600.0;
  *v = cost->usd_per_1000_samples();
  *lo = per_second * PerSample(s, s.p25_ns()) * 1000;
  *hi = per_second * PerSample(s, s.p75_ns()) * 1000;
  return true;
}

// "fastest: X: 8,581.6 samples/s, 1.68x X' [1.20-2.41]"; the range divides the
// quartile figures crosswise (best's worst over the runner-up's best, and back).
std::string Best(const char* what, const std::vector<Ranked>& r, const char* unit, const char* format,
                 bool higher_is_better) {
  if (r.empty()) return "";
  std::string out = absl::StrCat(what, ": ", r[0].c->label, ": ", absl::StrFormat(format, r[0].value), " ", unit);
  if (r.size() >= 2 && r[1].value > 0 && r[0].value > 0) {
    const double ratio = higher_is_better ? r[0].value / r[1].value : r[1].value / r[0].value;
    const double lo = higher_is_better ? r[0].lo / r[1].hi : r[1].lo / r[0].hi;
    const double hi = higher_is_better ? r[0].hi / r[1].lo : r[1].hi / r[0].lo;
    const std::string range =
        lo > 0 && hi > 0 ? absl::StrFormat(" [%.2f-%.2f at the step quartiles]", std::min(lo, hi), std::max(lo, hi))
                         : "";
    absl::StrAppend(&out,
                    higher_is_better ? absl::StrFormat(", %.2fx the next (%s)", ratio, r[1].c->label)
                                     : absl::StrFormat(", the next (%s) %.2fx", r[1].c->label, ratio),
                    range);
  }
  return out;
}

}  // namespace

std::vector<AnswerLine> Answers(const v1::Job& job) {
  std::map<std::pair<std::string, int>, std::vector<Candidate>> groups;
  std::map<std::pair<std::string, int>, int> invalid;
  std::map<std::string, std::set<int>> batches;
  for (const v1::Task& t : job.tasks()) batches[render::TaskModel(job, t)].insert(t.batch_size());
  for (const v1::Task& t : job.tasks()) {
    if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
    const std::string model = render::TaskModel(job, t);
    for (const v1::PhaseResult& p : t.result().phases()) {
      if (p.phase() != v1::PHASE_TRAIN && p.phase() != v1::PHASE_INFER) continue;
      const auto key = std::make_pair(model, static_cast<int>(p.phase()));
      if (!p.valid()) {
        ++invalid[key];
        groups[key];
        continue;
      }
      groups[key].push_back({&t, &p, Label(t, batches[model].size() > 1)});
    }
  }
  std::vector<AnswerLine> out;
  for (const auto& [key, candidates] : groups) {
    AnswerLine line{key.first, PhaseName(static_cast<v1::Phase>(key.second)), ""};
    std::vector<std::string> parts;
    if (candidates.empty()) {
      parts.push_back("no VALID phase: no answer (see Results for why)");
    } else {
      for (std::string s : {Best("fastest", Rank(candidates, true, Throughput), "samples/s", "%.1f", true),
                            Best("most frugal", Rank(candidates, false, Joules), "J/sample", "%.4g", false),
                            Best("cheapest", Rank(candidates, false, Cost), "USD/1,000 samples", "%.4g", false)}) {
        if (!s.empty()) parts.push_back(s);
      }
      if (candidates.size() == 1) parts.push_back("the only VALID one");
    }
    if (const int n = invalid[key]; n > 0) {
      parts.push_back(absl::StrCat(n, " INVALID phase", n == 1 ? "" : "s", " left out"));
    }
    line.text = absl::StrJoin(parts, "; ");
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace hetbench::report
