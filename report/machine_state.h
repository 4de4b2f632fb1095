#pragma once
/// Was the machine the same on both sides of a comparison? The agent times a
/// fixed kernel around each CPU run (v1::MachineProbe; agent/executors/
/// machine_probe.h); compare and history ask here before giving a verdict.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

/// The machine probe (v1::MachineProbe, timed by the agent around each CPU
/// run) beyond +/-5% of another reading: the machine was in another state.
/// On this project's VM (2 threads) its median call took 148-161 us over 20
/// minutes of one state (+/-4% of its middle) and 175-187 us in the slow
/// state, in which mlp's training steps took 31% longer (docs/compare-measured.md,
/// "Jobs taken minutes apart, and the machine probe").
inline constexpr double kProbeBeyond = 0.05;

/// How a withholding reason of JudgeMachine begins (readers of `invalid` match on it).
inline constexpr char kMachineDiffered[] = "the machine differed";

/// What the probes around a comparison's runs say (JudgeMachine).
struct MachineJudgement {
  /// A run taken in another machine state than the comparison's: a probe
  /// reading of it (before or after) beyond kProbeBeyond of the median of
  /// all readings of both sides' runs. `run` indexes its side as given.
  struct LeftOut {
    bool side_b = false;
    size_t run = 0;
    double ratio_to_median = 1;  // its reading farthest from the median, over the median
  };
  std::vector<LeftOut> left_out;
  /// Non-empty: no verdict ("the machine differed: ..."), as for an INVALID phase.
  std::string differed;
  /// B's median probe reading over A's (the runs kept); 0 when the probes cannot be compared.
  double probe_ratio = 0;
  /// Set when the comparison is made within machine states (the rule
  /// below): each side's runs' state, 0 for the state of most kept runs,
  /// -1 for a run left out; `states_note` says which runs were in which
  /// state and why any was left out. Empty otherwise.
  std::vector<int> states[2];
  std::string states_note;
  bool Kept(bool side_b, size_t run) const;
};

/// Judges the machine around runs `a` and `b` (tasks with a machine probe).
/// The probes are compared only when every run has one, of one kernel (and
/// thread count), on the agent and device of A's first run; otherwise the
/// judgement is empty: nothing left out, nothing withheld.
///  - `leave_out` (both sides with 2 runs or more): the runs whose reading
///    lies beyond kProbeBeyond of the median of all readings are left out of
///    the comparison, so that it is made within one machine state; when that
///    would leave a side fewer than `min_runs` runs (or fewer than 3 in
///    all), none is left out and the verdict is withheld: by the rule below
///    if it applies, else `differed` says how many of that side's runs were
///    in another state. When runs are left out and the grouping into states
///    below would weigh more (the sum over states of n_a n_b / (n_a + n_b),
///    what the estimate's variance is divided by), the comparison is made
///    within states instead: the runs left out, taken in a state of their
///    own on both sides, still count there;
///  - then each side's median reading over its kept runs: beyond
///    kProbeBeyond apart, `differed` is "the machine differed: its probe took
///    1.17x as long around B's runs as around A's";
///  - when those rules would withhold the verdict (`leave_out` only), the
///    runs are grouped into machine states by their readings instead: a
///    run whose before and after readings lie beyond kProbeBeyond apart
///    changed state during the run and is left out; the others, in order of
///    their mean reading, start a new state beyond kProbeBeyond above the
///    current state's first run. A state counts when both sides have runs
///    in it (the other runs are left out); with `min_runs` runs or more a
///    side in the states that count and 2 or more degrees of freedom left
///    (runs - states - 1; 1 with `min_runs` 1), the
///    comparison is made within those states and nothing is withheld: in
///    one state as above, the other runs left out; in more, by
///    CompareRunsWithinStates (compare.h).
/// `min_runs` is 2 when the runs' own spread decides the interval; 1 when
/// the machine's run-to-run spread is known from its other jobs
/// (run_spread.h): a side's one run in a state then suffices.
/// The median, not the mean: one reading taken while something else held a
/// core (8 ms a call against 0.15 ms: 4 of 1,152 readings in one bench run
/// on this VM) barely moves a median of six readings.
MachineJudgement JudgeMachine(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b,
                              bool leave_out, size_t min_runs = 2);

/// A run's steps of one phase cut to those taken in one machine state,
/// told by the probe read during the run (v1::MachineProbe.during).
struct CutRun {
  bool side_b = false;
  size_t run = 0;    // indexes its side as given
  size_t kept = 0;   // steps kept
  size_t steps = 0;  // of the run's steps
  double ratio = 1;  // the kept steps' median reading over the comparison's median reading
};

/// The runs of a comparison as JudgeMachine and CompareRuns see them once
/// cut by CutToMachineState: `tasks[side][i]` is the run given, or a copy
/// whose probe reads the kept steps' state; `steps[side][i]` its steps.
struct CutRuns {
  std::vector<const v1::Task*> tasks[2];
  std::vector<std::vector<double>> steps[2];
  std::vector<CutRun> cut;
  std::string note;  // "runs cut to ...: A run 2 812 of 938 steps (probe 1.01x); ..."; "" when none was
  std::vector<std::unique_ptr<v1::Task>> copies;  // what the cut runs' tasks point to
};

/// Cuts each run whose probe was read during `phase` (TRAIN and INFER:
/// v1::MachineProbe.during) to its steps taken in one machine state. Each
/// stretch of steps between two consecutive readings (the reading before
/// the phase, those during it, the one after; a reading of `phase` sits
/// before its `step`) is in a state when both readings lie within
/// kProbeBeyond of it; a stretch between readings farther apart held a flip
/// and belongs to no state; a reading beyond kProbeBeyond of both its
/// neighbours while they agree is a moment's stall, not a state, and is set
/// aside. The comparison's state is the median of every
/// reading of both sides' runs. A run with a stretch outside that state
/// keeps the steps of its stretches inside it when they are a quarter of
/// its steps (5 at least); else those of its own median reading's state, on
/// the same terms; else it stays whole (and JudgeMachine may leave it out).
/// A cut run's probe then reads, before and after, the median of the
/// readings around its kept steps, so JudgeMachine places it in that state;
/// so does a run whose stretches of `phase` all lie in one state, by its
/// phase's readings rather than those around the whole run (a flip during
/// training no longer leaves its inference out, nor one during inference
/// its training). Only runs cut are named in `cut` and `note`.
/// The steps never decide: the probe is a kernel the model cannot change,
/// so a slowdown of the model, bimodal or not, is never cut away as the
/// machine's. Runs whose probe was read around them only stay as given.
CutRuns CutToMachineState(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b, v1::Phase phase,
                          const std::vector<std::vector<double>>& steps_a,
                          const std::vector<std::vector<double>>& steps_b);

}  // namespace hetbench::report
