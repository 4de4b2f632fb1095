#include "report/machine_state.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/stats.h"

namespace hetbench::report {
namespace {

// A run's reading farthest from `median` (log ns): its signed distance.
double FarthestFrom(const std::vector<double>& run, double median) {
  double farthest = 0;
  for (double r : run) farthest = std::abs(r - median) > std::abs(farthest) ? r - median : farthest;
  return farthest;
}

// The runs grouped into machine states (JudgeMachine's last rule), given
// each run's log readings and `median`, the median of all of them, a state
// counting with `min_runs` a side. Returns false when no comparison within
// states can be made; `weight`: the states' sum of n_a n_b / (n_a + n_b).
bool GroupByState(const std::vector<std::vector<double>> (&readings)[2], double median, size_t min_runs,
                  MachineJudgement* out, double* weight) {
  const double beyond = std::log1p(kProbeBeyond);
  struct Run {
    int side;
    size_t index;
    double level;  // its mean log reading
  };
  std::vector<Run> runs;
  std::vector<std::string> changed;
  std::vector<MachineJudgement::LeftOut> left;
  auto leave_out = [&](int side, size_t i) {
    left.push_back({side == 1, i, std::exp(FarthestFrom(readings[side][i], median))});
  };
  for (int side = 0; side < 2; ++side) {
    for (size_t i = 0; i < readings[side].size(); ++i) {
      const std::vector<double>& r = readings[side][i];
      if (r.size() == 2 && std::abs(r[1] - r[0]) > beyond) {
        leave_out(side, i);
        changed.push_back(absl::StrFormat("%s run %d (its probe %.2fx after as before)", side == 0 ? "A" : "B",
                                          static_cast<int>(i) + 1, std::exp(r[1] - r[0])));
        continue;
      }
      double level = 0;
      for (double x : r) level += x;
      runs.push_back({side, i, level / static_cast<double>(r.size())});
    }
  }
  std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.level < y.level; });
  // States in order of their first (lowest) run; each state's runs per side.
  struct State {
    double first;
    std::vector<const Run*> runs[2];
  };
  std::vector<State> states;
  for (const Run& r : runs) {
    if (states.empty() || r.level - states.back().first > beyond) states.push_back({r.level, {}});
    states.back().runs[r.side].push_back(&r);
  }
  std::vector<const State*> counted;
  size_t kept[2] = {0, 0};
  for (const State& s : states) {
    if (s.runs[0].empty() || s.runs[1].empty()) {
      for (int side = 0; side < 2; ++side) {
        for (const Run* r : s.runs[side]) leave_out(side, r->index);
      }
      continue;
    }
    counted.push_back(&s);
    kept[0] += s.runs[0].size();
    kept[1] += s.runs[1].size();
  }
  const int df = static_cast<int>(kept[0] + kept[1]) - static_cast<int>(counted.size()) - 1;
  for (const State* st : counted) {
    const double n0 = static_cast<double>(st->runs[0].size()), n1 = static_cast<double>(st->runs[1].size());
    *weight += n0 * n1 / (n0 + n1);
  }
  if (kept[0] < min_runs || kept[1] < min_runs || df < (min_runs < 2 ? 1 : 2)) return false;
  // State 0 is the one holding most runs (the lowest readings on a tie).
  std::stable_sort(counted.begin(), counted.end(), [](const State* x, const State* y) {
    return x->runs[0].size() + x->runs[1].size() > y->runs[0].size() + y->runs[1].size();
  });
  out->states[0].assign(readings[0].size(), -1);
  out->states[1].assign(readings[1].size(), -1);
  std::vector<std::string> named;
  std::vector<double> kept_levels[2];
  for (size_t s = 0; s < counted.size(); ++s) {
    std::vector<std::string> sides;
    for (int side = 0; side < 2; ++side) {
      std::vector<size_t> numbers;
      for (const Run* r : counted[s]->runs[side]) {
        out->states[side][r->index] = static_cast<int>(s);
        kept_levels[side].push_back(r->level);
        numbers.push_back(r->index + 1);
      }
      std::sort(numbers.begin(), numbers.end());
      sides.push_back(
          absl::StrCat(side == 0 ? "A run" : "B run", numbers.size() > 1 ? "s " : " ", absl::StrJoin(numbers, ", ")));
    }
    named.push_back(absl::StrFormat("state %d (probe %.2fx state 1's first run): %s", static_cast<int>(s) + 1,
                                    std::exp(counted[s]->first - counted[0]->first), absl::StrJoin(sides, " and ")));
  }
  out->states_note = absl::StrFormat(
      "compared within %d machine state%s (runs grouped by their probe readings, a state's runs within +/-%g%% of "
      "its first): %s",
      static_cast<int>(counted.size()), counted.size() > 1 ? "s" : "", kProbeBeyond * 100, absl::StrJoin(named, "; "));
  if (!changed.empty()) {
    absl::StrAppend(&out->states_note, "; left out, the state changed during the run: ", absl::StrJoin(changed, ", "));
  }
  if (left.size() > changed.size()) {
    absl::StrAppend(&out->states_note,
                    "; left out, in a state of one side's runs only: ", static_cast<int>(left.size() - changed.size()),
                    " run", left.size() - changed.size() > 1 ? "s" : "");
  }
  out->left_out = std::move(left);
  out->probe_ratio = std::exp(MedianInPlace(kept_levels[1]) - MedianInPlace(kept_levels[0]));
  if (counted.size() == 1) {  // one state: a comparison of the runs kept, as the first rule makes
    out->states[0].clear();
    out->states[1].clear();
  }
  return true;
}

}  // namespace

bool MachineJudgement::Kept(bool side_b, size_t run) const {
  return std::none_of(left_out.begin(), left_out.end(),
                      [&](const LeftOut& l) { return l.side_b == side_b && l.run == run; });
}

MachineJudgement JudgeMachine(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b,
                              bool leave_out, size_t min_runs) {
  MachineJudgement out;
  if (a.empty() || b.empty()) return out;
  const v1::Task& first = *a[0];
  const std::string& kernel = first.result().machine_probe().kernel();
  if (kernel.empty()) return out;
  // Each run's readings (log ns a call): before, and after when it was taken.
  std::vector<std::vector<double>> readings[2];
  for (int side = 0; side < 2; ++side) {
    for (const v1::Task* t : side == 0 ? a : b) {
      const v1::MachineProbe& p = t->result().machine_probe();
      if (p.kernel() != kernel || t->agent_id() != first.agent_id() || t->device_id() != first.device_id() ||
          p.before_ns() <= 0) {
        return out;  // incomparable probes: no judgement
      }
      std::vector<double> r = {std::log(static_cast<double>(p.before_ns()))};
      if (p.after_ns() > 0) r.push_back(std::log(static_cast<double>(p.after_ns())));
      readings[side].push_back(std::move(r));
    }
  }
  const double beyond = std::log1p(kProbeBeyond);
  std::vector<bool> keep[2] = {std::vector<bool>(a.size(), true), std::vector<bool>(b.size(), true)};
  std::string too_few;  // leaving out would leave a side fewer than min_runs runs
  // The median of every reading of both sides: the comparison's state.
  std::vector<double> all;
  for (const auto& side : readings) {
    for (const auto& run : side) all.insert(all.end(), run.begin(), run.end());
  }
  const double median_reading = MedianInPlace(all);
  // The runs grouped into states (the last rule), and what a comparison within them would weigh.
  MachineJudgement within;
  double within_weight = 0;
  const bool grouped = leave_out && GroupByState(readings, median_reading, min_runs, &within, &within_weight);
  if (leave_out) {
    std::vector<MachineJudgement::LeftOut> left;
    size_t kept[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      for (size_t i = 0; i < readings[side].size(); ++i) {
        const double farthest = FarthestFrom(readings[side][i], median_reading);
        if (std::abs(farthest) > beyond) {
          left.push_back({side == 1, i, std::exp(farthest)});
          keep[side][i] = false;
        } else {
          ++kept[side];
        }
      }
    }
    for (int side = 0; side < 2 && too_few.empty(); ++side) {
      if (kept[side] >= min_runs && kept[0] + kept[1] >= 3) continue;
      const size_t runs = readings[side].size();
      too_few = absl::StrFormat(
          "%s: %d of %s's %d runs were taken in another state (a probe reading beyond +/-%g%% of the comparison's "
          "median)",
          kMachineDiffered, static_cast<int>(runs - kept[side]), side == 0 ? "A" : "B", static_cast<int>(runs),
          kProbeBeyond * 100);
    }
    if (too_few.empty()) {
      // Runs in other states: compared within states instead when that weighs more than the runs kept.
      const double kept_weight = static_cast<double>(kept[0] * kept[1]) / static_cast<double>(kept[0] + kept[1]);
      if (!left.empty() && grouped && within_weight > kept_weight) return within;
      out.left_out = std::move(left);
    } else {  // judged on all runs: withheld, by the sides' medians below when they differ, else by too_few
      keep[0].assign(a.size(), true);
      keep[1].assign(b.size(), true);
    }
  }
  double median[2];
  for (int side = 0; side < 2; ++side) {
    std::vector<double> v;
    for (size_t i = 0; i < readings[side].size(); ++i) {
      if (keep[side][i]) v.insert(v.end(), readings[side][i].begin(), readings[side][i].end());
    }
    median[side] = MedianInPlace(v);
  }
  out.probe_ratio = std::exp(median[1] - median[0]);
  if (std::abs(median[1] - median[0]) > beyond) {
    out.differed = absl::StrFormat("%s: its probe took %.2fx as long around B's runs as around A's", kMachineDiffered,
                                   out.probe_ratio);
  } else {
    out.differed = too_few;
  }
  // Withheld by the rules above: within states, if the runs allow.
  return !out.differed.empty() && grouped ? within : out;
}

}  // namespace hetbench::report

namespace hetbench::report {
namespace {

struct Reading {
  int64_t pos;  // the step it sits before
  double ns;
};

// The readings around and during `phase` of a run of `steps` steps, in order
// of their position: the last reading before it (of an earlier phase, else
// the run's "before"), those during it, the first after it (of a later
// phase, else the run's "after"); empty when the probe was read around the
// run only.
std::vector<Reading> PhaseReadings(const v1::MachineProbe& probe, v1::Phase phase, int64_t steps) {
  std::vector<Reading> during;
  const v1::ProbeReading* before = nullptr;  // the last reading of an earlier phase
  const v1::ProbeReading* after = nullptr;   // the first of a later one
  for (const v1::ProbeReading& r : probe.during()) {
    if (r.median_ns() <= 0) continue;
    if (r.phase() == phase) {
      during.push_back({std::clamp<int64_t>(r.step(), 0, steps), static_cast<double>(r.median_ns())});
    } else if (phase == v1::PHASE_INFER && r.phase() == v1::PHASE_TRAIN) {
      before = &r;
    } else if (phase == v1::PHASE_TRAIN && r.phase() == v1::PHASE_INFER && after == nullptr) {
      after = &r;
    }
  }
  if (during.empty() && before == nullptr && after == nullptr) return during;
  std::vector<Reading> out;
  if (before != nullptr) {
    out.push_back({0, static_cast<double>(before->median_ns())});
  } else if (probe.before_ns() > 0) {
    out.push_back({0, static_cast<double>(probe.before_ns())});
  }
  out.insert(out.end(), during.begin(), during.end());
  if (after != nullptr) {
    out.push_back({steps, static_cast<double>(after->median_ns())});
  } else if (probe.after_ns() > 0) {
    out.push_back({steps, static_cast<double>(probe.after_ns())});
  }
  std::stable_sort(out.begin(), out.end(), [](const Reading& x, const Reading& y) { return x.pos < y.pos; });
  return out;
}

bool Within(double ns, double state) { return std::abs(ns / state - 1) <= kProbeBeyond; }

// Sets aside a reading beyond kProbeBeyond of both its neighbours while they
// agree within it: a moment's stall of the kernel (something else held a
// core: 438 us against 175 us, in 2 of about 5,000 readings of one bench run
// on this VM), not a state, which lasts seconds.
void SetStallsAside(std::vector<Reading>* readings) {
  std::vector<Reading>& r = *readings;
  std::vector<Reading> kept;
  for (size_t j = 0; j < r.size(); ++j) {
    const bool stall = j > 0 && j + 1 < r.size() && Within(r[j + 1].ns, r[j - 1].ns) && !Within(r[j].ns, r[j - 1].ns) &&
                       !Within(r[j].ns, r[j + 1].ns);
    if (!stall) kept.push_back(r[j]);
  }
  r = std::move(kept);
}

// The steps of `steps` taken in `state` by `readings`: each stretch between
// consecutive readings both within kProbeBeyond of it (before the first
// reading, that one alone decides). `all`: every stretch was.
std::vector<double> StepsIn(const std::vector<Reading>& readings, const std::vector<double>& steps, double state,
                            bool* all, std::vector<double>* around) {
  std::vector<double> kept;
  *all = true;
  const int64_t n = static_cast<int64_t>(steps.size());
  for (size_t j = 0; j <= readings.size(); ++j) {
    const int64_t lo = j == 0 ? 0 : readings[j - 1].pos;
    const int64_t hi = j == readings.size() ? n : readings[j].pos;
    if (lo >= hi) continue;
    const Reading& first = readings[j == 0 ? 0 : j - 1];
    const Reading& last = readings[j == readings.size() ? j - 1 : j];
    if (!Within(first.ns, state) || !Within(last.ns, state)) {
      *all = false;
      continue;
    }
    kept.insert(kept.end(), steps.begin() + lo, steps.begin() + hi);
    around->push_back(first.ns);
    around->push_back(last.ns);
  }
  return kept;
}

}  // namespace

CutRuns CutToMachineState(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b, v1::Phase phase,
                          const std::vector<std::vector<double>>& steps_a,
                          const std::vector<std::vector<double>>& steps_b) {
  CutRuns out;
  out.tasks[0] = a;
  out.tasks[1] = b;
  out.steps[0] = steps_a;
  out.steps[1] = steps_b;
  if (phase != v1::PHASE_TRAIN && phase != v1::PHASE_INFER) return out;
  std::vector<std::vector<Reading>> readings[2];
  std::vector<double> all;
  for (int side = 0; side < 2; ++side) {
    for (size_t i = 0; i < out.tasks[side].size() && i < out.steps[side].size(); ++i) {
      readings[side].push_back(PhaseReadings(out.tasks[side][i]->result().machine_probe(), phase,
                                             static_cast<int64_t>(out.steps[side][i].size())));
      SetStallsAside(&readings[side].back());
      for (const Reading& r : readings[side].back()) all.push_back(r.ns);
    }
  }
  if (all.empty()) return out;
  const double state = MedianInPlace(all);
  std::vector<std::string> named;
  for (int side = 0; side < 2; ++side) {
    for (size_t i = 0; i < readings[side].size(); ++i) {
      const std::vector<Reading>& r = readings[side][i];
      const std::vector<double>& steps = out.steps[side][i];
      if (r.empty()) continue;
      const size_t enough = std::max<size_t>(5, steps.size() / 4);
      bool whole = false;
      std::vector<double> around;
      std::vector<double> kept = StepsIn(r, steps, state, &whole, &around);
      if (!whole && kept.size() < enough) {  // too few in the comparison's state: the run's own
        std::vector<double> own;
        for (const Reading& x : r) own.push_back(x.ns);
        around.clear();
        kept = StepsIn(r, steps, MedianInPlace(own), &whole, &around);
        if (!whole && kept.size() < enough) continue;  // in flux throughout: as given
      }
      // Placed by the readings around its kept steps (all of them when whole), not by those around the run.
      auto copy = std::make_unique<v1::Task>(*out.tasks[side][i]);
      const double level = MedianInPlace(around);
      copy->mutable_result()->mutable_machine_probe()->set_before_ns(std::llround(level));
      copy->mutable_result()->mutable_machine_probe()->set_after_ns(std::llround(level));
      out.tasks[side][i] = copy.get();
      out.copies.push_back(std::move(copy));
      if (whole) continue;
      out.cut.push_back({side == 1, i, kept.size(), steps.size(), level / state});
      named.push_back(absl::StrFormat("%s run %d %d of %d steps (probe %.2fx)", side == 0 ? "A" : "B",
                                      static_cast<int>(i) + 1, kept.size(), steps.size(), level / state));
      out.steps[side][i] = std::move(kept);
    }
  }
  if (!named.empty()) {
    out.note = absl::StrFormat(
        "runs cut to their steps in one machine state (the probe read during them moved beyond +/-%g%%): %s",
        kProbeBeyond * 100, absl::StrJoin(named, "; "));
  }
  return out;
}

}  // namespace hetbench::report
