// compare applied to tasks: which runs are compared with which statistic,
// the machine's judgement and the validity rule (report/compare.h:
// ComparePhase, CompareRunPhase); the statistics themselves are in
// report/compare.cc.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "report/compare.h"
#include "report/machine_state.h"
#include "report/render/common.h"
#include "report/run_spread.h"

namespace hetbench::report {

namespace {

// The validity rule: no verdict when a side's phase is INVALID or the
// machine differed (`invalid` lists them), unless `compare_anyway`, which
// marks it.
StepComparison Withheld(StepComparison c, const std::vector<std::string>& invalid, bool compare_anyway) {
  c.invalid = absl::StrJoin(invalid, ", ");
  if (c.invalid.empty() || c.verdict == "too few steps" || c.verdict == "too few runs") return c;
  c.verdict =
      compare_anyway ? absl::StrCat(c.verdict, " (", c.invalid, ")") : absl::StrCat("not comparable: ", c.invalid);
  return c;
}

}  // namespace

std::string InvalidSide(const v1::Task& t, v1::Phase phase, const char* run) {
  const v1::PhaseResult* p = render::FindPhase(t, phase);
  if (p == nullptr || p->valid()) return "";
  std::string why = p->invalid_reasons().empty() ? std::string("no reason recorded") : p->invalid_reasons(0);
  if (const size_t colon = why.find(':'); colon != std::string::npos) why.resize(colon);
  return absl::StrCat("run ", run, " ", PhaseName(phase), " INVALID (", why, ")");
}

double ComparedQuantile(const v1::Task& a, v1::Phase phase) {
  const bool serving = phase == v1::PHASE_SERVE || phase == v1::PHASE_TTFT || phase == v1::PHASE_TPOT;
  const double percentile = a.result().serving().percentile();
  return serving && percentile > 0 && percentile < 100 ? percentile / 100 : 0.5;
}

StepComparison ComparePhase(const v1::Task& a, const v1::Task& b, v1::Phase phase, const std::vector<double>& steps_a,
                            const std::vector<double>& steps_b, double threshold, bool compare_anyway) {
  StepComparison c = CompareSteps(steps_a, steps_b, threshold, 2000, 20261122, ComparedQuantile(a, phase));
  const MachineJudgement machine = JudgeMachine({&a}, {&b}, /*leave_out=*/false);
  c.probe_ratio = machine.probe_ratio;
  std::vector<std::string> sides;
  for (const std::string& side : {InvalidSide(a, phase, "A"), InvalidSide(b, phase, "B"), machine.differed}) {
    if (!side.empty()) sides.push_back(side);
  }
  return Withheld(std::move(c), sides, compare_anyway);
}

bool IsChange(const StepComparison& c) { return c.invalid.empty() && (c.verdict == "slower" || c.verdict == "faster"); }

std::vector<double> TimesPerSample(const std::vector<v1::SampleBatch>& batches, v1::Phase phase) {
  std::vector<double> out;
  for (const v1::SampleBatch& b : batches) {
    if (b.phase() != phase) continue;
    // A serving sample is one query's (request's) latency, TTFT or TPOT whatever its items.
    const bool serving = phase == v1::PHASE_SERVE || phase == v1::PHASE_TTFT || phase == v1::PHASE_TPOT;
    for (int i = 0; i < b.duration_ns_size() && i < b.items_size(); ++i) {
      if (serving) {
        out.push_back(static_cast<double>(b.duration_ns(i)));
      } else if (b.items(i) > 0) {
        out.push_back(static_cast<double>(b.duration_ns(i)) / b.items(i));
      }
    }
  }
  return out;
}

namespace {

// "run 2" of a job with repeats, else the task's id.
std::string DeviceRun(const v1::Task& t) { return t.run() > 0 ? absl::StrCat(t.id(), ", run ", t.run()) : t.id(); }

// The couples of runs that took turns on one machine (InterleavedRuns by their start times) whose runs
// `machine` kept, each with kMinRunSteps steps in `cut`, and the prior of a couple's difference learned from runs next
// to each other in other jobs (OtherJobsCoupleSpreads); no couples when fewer than 2 were kept or there is no such
// prior (3 couples alone know their differences' spread on 2 degrees of freedom: a wider interval than CompareRuns'
// pooled one on 4).
struct KeptCouples {
  std::vector<std::pair<size_t, size_t>> couples;
  RunSpreadPrior prior;
  std::string declined;  // no couples although the runs took turns: why
};
KeptCouples CouplesKept(const RunPair& pair, const MachineJudgement& machine, const CutRuns& cut, v1::Phase phase,
                        double quantile, const std::vector<const v1::Job*>& others,
                        const std::vector<std::string>& sides_jobs) {
  std::vector<double> starts[2];
  for (int side = 0; side < 2; ++side) {
    for (const v1::Task* t : side == 0 ? pair.a : pair.b) starts[side].push_back(t->started_unix_seconds());
  }
  KeptCouples out;
  for (const auto& [a, b] : InterleavedRuns(starts[0], starts[1])) {
    if (machine.Kept(false, a) && machine.Kept(true, b) && a < cut.steps[0].size() && b < cut.steps[1].size() &&
        cut.steps[0][a].size() >= kMinRunSteps && cut.steps[1][b].size() >= kMinRunSteps) {
      out.couples.emplace_back(a, b);
    }
  }
  if (out.couples.size() < 2) return {};
  const std::vector<SpreadSample> samples =
      OtherJobsCoupleSpreads(others, sides_jobs, *pair.a[0], pair.key, phase, quantile);
  out.prior = FitSpreadPrior(samples);
  out.prior.paired = true;
  if (!(out.prior.df > 0)) return {};
  // Adjacent runs that share none of the machine's drift: in the other pairs of jobs that took turns, a couple's
  // difference varies more than two independent runs' do (twice the same runs' own spread; both pooled, as the two
  // jobs of a pair share their drift, so the runs' variances are not independent samples for a prior's fit), and
  // pairing would only spend degrees of freedom. Without 8 such pairs (jobs each run alone, say) nothing says so:
  // paired.
  double couples_ss = 0, couples_df = 0, runs_ss = 0, runs_df = 0;
  int64_t pairs = 0, jobs = 0;
  for (const SpreadSample& s : samples) {
    if (!(s.runs_df > 0) || !std::isfinite(s.variance) || !std::isfinite(s.runs_variance)) continue;
    couples_ss += s.variance * s.df;
    couples_df += s.df;
    runs_ss += s.runs_variance * s.runs_df;
    runs_df += s.runs_df;
    ++pairs;
    jobs += s.jobs;
  }
  const double couples_variance = couples_ss / couples_df, runs_variance = runs_ss / runs_df;
  if (pairs >= kMinSpreadJobs && couples_variance > 2 * runs_variance) {
    KeptCouples none;
    none.declined = absl::StrFormat(
        "runs took turns but were compared unpaired: on this machine runs next to each other share none of its "
        "drift (their differences spread %.2f%% in %d other jobs that took turns, more than two independent "
        "runs' %.2f%%)",
        100 * std::sqrt(couples_variance), jobs, 100 * std::sqrt(2 * runs_variance));
    return none;
  }
  return out;
}

}  // namespace

StepComparison CompareRunPhase(const RunPair& pair, v1::Phase phase, const std::vector<std::vector<double>>& steps_a,
                               const std::vector<std::vector<double>>& steps_b, double threshold, bool compare_anyway,
                               const std::vector<const v1::Job*>& others) {
  const double quantile = ComparedQuantile(*pair.a[0], phase);
  const bool by_runs = steps_a.size() >= 2 && steps_b.size() >= 2;
  bool one_machine = true;
  std::vector<std::string> sides_jobs;  // not learned from by the prior below
  for (const auto* tasks : {&pair.a, &pair.b}) {
    for (const v1::Task* t : *tasks) {
      one_machine = one_machine && t->agent_id() == pair.a[0]->agent_id() && t->device_id() == pair.a[0]->device_id();
      sides_jobs.push_back(t->job_id());
    }
  }
  // The machine's run-to-run spread learned from the configuration's other jobs there (one machine only); known,
  // a side's one run in the comparison's machine state suffices.
  RunSpreadPrior prior;
  if (by_runs && one_machine) {
    prior = FitRunSpreadPrior(OtherJobsRunStats(others, sides_jobs, *pair.a[0], pair.key, phase, quantile));
  }
  // Runs whose machine flipped during them, cut to their steps in one state (the probe read during them).
  const CutRuns cut = by_runs ? CutToMachineState(pair.a, pair.b, phase, steps_a, steps_b) : CutRuns{};
  const MachineJudgement machine =
      by_runs ? JudgeMachine(cut.tasks[0], cut.tasks[1], /*leave_out=*/true, prior.df > 0 ? 1 : 2)
              : JudgeMachine(pair.a, pair.b, /*leave_out=*/false);
  auto name_run = [&](bool side_b, size_t run) {
    const std::vector<const v1::Task*>& tasks = side_b ? pair.b : pair.a;
    return absl::StrFormat("%s run %d (%s)", side_b ? "B" : "A", run + 1,
                           run < tasks.size() ? DeviceRun(*tasks[run]) : std::string("?"));
  };
  StepComparison c;
  if (by_runs) {
    // The runs JudgeMachine kept (taken in the comparison's machine state), and where each stands in its side;
    // runs that took turns on one machine, in couples.
    const KeptCouples couples = one_machine && machine.states[0].empty()
                                    ? CouplesKept(pair, machine, cut, phase, quantile, others, sides_jobs)
                                    : KeptCouples{};
    std::vector<std::vector<double>> kept[2];
    std::vector<size_t> index[2];
    for (int side = 0; side < 2; ++side) {
      const std::vector<std::vector<double>>& steps = cut.steps[side];
      for (size_t i = 0; i < steps.size(); ++i) {
        if (!couples.couples.empty() || !machine.Kept(side == 1, i)) continue;
        kept[side].push_back(steps[i]);
        index[side].push_back(i);
      }
      for (const auto& [a, b] : couples.couples) {
        kept[side].push_back(steps[side == 0 ? a : b]);
        index[side].push_back(side == 0 ? a : b);
      }
    }
    if (!couples.couples.empty()) {
      c = ComparePairedRuns(kept[0], kept[1], threshold, quantile, couples.prior);
      for (auto& [a, b] : c.paired_runs) a = index[0][a], b = index[1][b];  // as given
    } else if (!machine.states[0].empty()) {  // runs in two or more machine states: compared within them
      std::vector<int> states[2];
      for (int side = 0; side < 2; ++side) {
        for (size_t i : index[side]) states[side].push_back(machine.states[side][i]);
      }
      c = CompareRunsWithinStates(kept[0], states[0], kept[1], states[1], threshold, quantile, prior);
      c.states_a = machine.states[0];
      c.states_b = machine.states[1];
    } else {
      c = CompareRuns(kept[0], kept[1], threshold, quantile, one_machine, prior);
      c.unpaired_note = couples.declined;
    }
    std::vector<std::string> named;
    for (StepComparison::FarRun& s : c.far_runs) {
      s.run = index[s.side_b ? 1 : 0][s.run];  // as given, not among the kept
      named.push_back(absl::StrFormat("%s at %.2fx %s's median run", name_run(s.side_b, s.run), s.ratio_to_median,
                                      s.side_b ? "B" : "A"));
    }
    if (!named.empty()) {
      c.far_runs_note = absl::StrFormat(
          "runs beyond +/-%g%% of their side's median run (the machine in another state for a whole run?); they "
          "widen the interval: %s",
          kFarRunBeyond * 100, absl::StrJoin(named, "; "));
    }
    named.clear();
    for (const MachineJudgement::LeftOut& l : machine.left_out) {
      named.push_back(
          absl::StrFormat("%s: probe %.2fx the median reading", name_run(l.side_b, l.run), l.ratio_to_median));
    }
    if (!machine.states_note.empty()) {
      c.left_out_note = machine.states_note;
    } else if (!named.empty()) {
      c.left_out_note = absl::StrFormat(
          "runs left out, taken in another machine state (a probe reading beyond +/-%g%% of the comparison's "
          "median): %s",
          kProbeBeyond * 100, absl::StrJoin(named, "; "));
    }
    if (!cut.note.empty()) c.left_out_note = c.left_out_note.empty() ? cut.note : cut.note + "; " + c.left_out_note;
    c.left_out = machine.left_out;
    c.cut = cut.cut;
  } else {
    c = CompareSteps(steps_a.empty() ? std::vector<double>{} : steps_a[0],
                     steps_b.empty() ? std::vector<double>{} : steps_b[0], threshold, 2000, 20261122, quantile);
    auto with_steps = [](const std::vector<std::vector<double>>& runs) {
      return static_cast<int64_t>(std::count_if(runs.begin(), runs.end(), [](const auto& r) { return !r.empty(); }));
    };
    c.runs_a = with_steps(steps_a);  // the runs each side had; the first of each was compared
    c.runs_b = with_steps(steps_b);
    c.note =
        "a side of one run: the first runs' steps compared, so the verdict ignores run-to-run variance "
        "(repeats: N on both sides compares runs)";
  }
  c.probe_ratio = machine.probe_ratio;
  std::vector<std::string> sides;
  for (auto [tasks, run] : {std::pair{&pair.a, "A"}, std::pair{&pair.b, "B"}}) {
    for (size_t i = 0; i < tasks->size(); ++i) {
      if (!machine.Kept(tasks == &pair.b, i)) continue;  // not compared
      std::string why = InvalidSide(*(*tasks)[i], phase, run);
      if (why.empty()) continue;
      if (tasks->size() > 1) why.insert(why.find(' ', 4), absl::StrCat(" (", DeviceRun(*(*tasks)[i]), ")"));
      sides.push_back(why);
    }
  }
  if (!machine.differed.empty()) sides.push_back(machine.differed);
  return Withheld(std::move(c), sides, compare_anyway);
}

}  // namespace hetbench::report
