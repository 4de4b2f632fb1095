#pragma once
/// `hetbench compare JOB_A JOB_B`: did this get slower, and is that real or
/// noise? Tasks of two jobs are paired by model, device model, executor and
/// batch size (their model fingerprints must match unless --compare-anyway),
/// and each pair's per-step times per sample are compared phase by phase:
///  - ratio: median time per sample of B over A (> 1: B is slower); a
///    serving phase: its reported latency percentile, p99 for `server`;
///  - 95% interval of that ratio: percentile bootstrap, both runs' steps
///    resampled with replacement (2,000 resamples, fixed seed: the same data
///    gives the same interval);
///  - p-value: two-sided Mann-Whitney U test, normal approximation with the
///    tie correction;
///  - verdict at a threshold t: "slower" when the whole interval lies above
///    1 + t, "faster" when it lies below 1 - t, else "no change" (one run a
///    side; with runs, CompareRuns' rule below);
///  - no verdict on noise: a phase judged INVALID on either side gets
///    "not comparable: run B train INVALID (too noisy)" instead (the figures
///    are still shown); with --compare-anyway the verdict is given, marked
///    "(run B train INVALID)". History applies the same rule to each change.
///    So does a machine that was in another state: the agent's probe
///    differing between the sides on one device (JudgeMachine, which also
///    leaves out the runs taken in another state than the comparison's);
/// Runs are the unit when each side has two or more (a job with `repeats`,
/// or a side given as JOB,JOB,...): CompareRuns below, whose interval counts
/// the noise between runs. With one run a side the steps are treated as
/// independent draws of one run, and the verdict says it ignores run-to-run
/// variance (bench_compare measures how often that calls two runs of one job
/// different on this machine).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "report/machine_state.h"
#include "report/run_spread.h"

namespace hetbench::report {

struct StepComparison {
  int64_t n_a = 0, n_b = 0;        // steps measured on each side (all runs)
  // Runs on each side: CompareRuns' those with 5 steps or more; else those with steps (the first compared).
  int64_t runs_a = 1, runs_b = 1;
  double median_a_ns = 0, median_b_ns = 0;  // per sample
  double quantile = 0.5;                    // the statistic compared: 0.5 the median, 0.99 p99 (nearest rank)
  double stat_a_ns = 0, stat_b_ns = 0;      // that statistic on each side; the ratio is of these
  double ratio = 0, ci_low = 0, ci_high = 0;
  double p_value = 1;
  std::string verdict;  // "faster", "slower", "no change", "too few steps", "too few runs", or "not comparable: ..."
  std::string invalid;  // "run B train INVALID (too noisy)"; empty when both sides' phase is valid
  // Set when a side had a single run: "... the verdict ignores run-to-run variance ...".
  std::string note;
  // CompareRuns: the runs whose statistic lies more than kFarRunBeyond from
  // their side's median run (3 runs or more a side); they stay in the ratio
  // and the interval. `run` indexes the side's runs as given.
  struct FarRun {
    bool side_b = false;
    size_t run = 0;
    double ratio_to_median = 1;  // its statistic over the side's median run's
  };
  std::vector<FarRun> far_runs;
  // CompareRunPhase: those runs named, "B run 2 (job-2-t1, run 2) at 1.24x B's median run".
  std::string far_runs_note;
  // CompareRunPhase: runs that took turns compared unpaired because the machine's adjacent runs share none of its
  // drift (in other jobs that took turns, their differences spread more than two independent runs'), and the two
  // spreads that say so; else empty.
  std::string unpaired_note;
  // CompareRuns: the runs' variance pooled over both sides (one machine), not Welch's per side.
  bool pooled = false;
  // Runs as the unit: the t's degrees of freedom. Pooled: the prior learned from the configuration's other
  // jobs on that machine (its df > 0 when there was one) and the variance used, moderated by it unless the
  // runs spread beyond it (run_spread.h; RunNotesLine says which).
  double df = 0;
  // Runs as the unit: the smallest change (a fraction, B/A - 1) this comparison's interval would find four
  // times in five, (t(0.975, df) + t(0.8, df)) x its standard error; 0 when not computed. A "no change"
  // with this at 6% says more runs are needed to see 5%, not that nothing changed.
  double detectable = 0;
  RunSpreadPrior spread_prior;
  ModeratedVariance spread;
  // CompareRunPhase, ComparePhase: what the machine probe said (JudgeMachine): B's median reading over A's
  // (0: no probes to compare), and the runs left out as taken in another machine state, named in
  // left_out_note ("B run 2 (job-2-t1, run 2): probe 1.19x the median reading").
  double probe_ratio = 0;
  std::vector<MachineJudgement::LeftOut> left_out;
  std::string left_out_note;
  // CompareRunPhase, when the runs were compared within machine states (CompareRunsWithinStates): each side's
  // runs' state as given (0 the state of most runs, -1 left out); left_out_note then says which was where.
  std::vector<int> states_a, states_b;
  // ComparePairedRuns: the couples of runs compared, (A run, B run) as given; empty when the runs were not
  // paired.
  std::vector<std::pair<size_t, size_t>> paired_runs;
  // CompareRunPhase: the runs cut to their steps in one machine state by the probe read during them
  // (CutToMachineState), also named first in left_out_note.
  std::vector<CutRun> cut;
};

/// Steps a run needs to be compared (a side of one run: its steps; runs as
/// the unit: each run's).
inline constexpr size_t kMinRunSteps = 5;

/// A run far from its side's median run: beyond +/-10%. On this project's VM
/// 90% of the runs lay within -2.4% and +2.4-3.5% of their side's median
/// run; a run in the slow state lay 16-37% off (docs/compare-measured.md).
inline constexpr double kFarRunBeyond = 0.10;

/// A threshold as users type it: "2%" or "0.02" (empty: 2%). Errors say the
/// form (the caller names its flag or field).
absl::StatusOr<double> ParseThreshold(const std::string& text);

/// `a`, `b`: time per sample of each step (ns). Needs 5 steps on each side.
/// `quantile` other than 0.5: the ratio, its bootstrap interval and the
/// verdict are of that nearest-rank percentile instead of the median (the
/// Mann-Whitney p-value stays the distributions').
StepComparison CompareSteps(const std::vector<double>& a, const std::vector<double>& b, double threshold,
                            int resamples = 2000, uint64_t seed = 20261122, double quantile = 0.5);

/// "median" for 0.5, else "p99", "p90", ...
std::string StatisticName(double quantile);

/// Several runs per side (`repeats`, or the same job run again): `runs_a[i]`
/// is run i's per-step time per sample. Runs are the unit, so the noise
/// between runs, which no test over one run's steps can see, widens the
/// interval:
///  - ratio: of the geometric means of the runs' statistics (the median, or
///    the nearest-rank `quantile`), B over A;
///  - interval: a hierarchical bootstrap (each resample draws runs with
///    replacement, then steps within each drawn run) gives each side's
///    standard error of its mean log statistic, scaled by k/(k-1) for its k
///    runs (a bootstrap over k runs sees (k-1)/k of their variance); the 95%
///    interval is Student's t, not the normal's, since 3 runs a side know
///    their spread poorly: with `one_machine` (both sides' runs on one agent
///    and device, so one machine's run-to-run variance) the sides' variances
///    pooled, on k_a + k_b - 2 degrees of freedom (Student's two-sample t);
///    else on the Welch-Satterthwaite degrees of freedom of the runs (k_a - 1
///    and k_b - 1); the p-value is that t test's;
///  - the verdict at `threshold`: "slower" when the change is there (the
///    interval lies above 1) and matters (the ratio above 1 + threshold),
///    "faster" likewise below, else "no change". This interval holds the
///    noise between runs, so it need not clear the threshold as a whole (as
///    CompareSteps' must, whose interval does not): a 5% slowdown whose
///    interval reaches down to 1.01 is "slower".
///  - `prior` (one_machine only): the machine's run-to-run spread learned
///    from other jobs of this configuration (run_spread.h); the pooled
///    variance is moderated by it, on its degrees of freedom more;
///  - a run whose statistic lies more than kFarRunBeyond from its side's
///    median run, on a side of 3 runs or more, is listed in `far_runs` (it
///    stays in everything above): one run in another machine state widens
///    the interval past most changes, and says why.
/// Needs 2 runs per side with 5 steps each ("too few runs" otherwise); with
/// `one_machine` and a `prior`, 1 run a side and 3 in all: the machine's
/// spread is then known from its other jobs, and a side's single run adds
/// none of its own (JudgeMachine leaves such sides when the other runs were
/// taken in another machine state). The same data and seed give the same
/// interval.
StepComparison CompareRuns(const std::vector<std::vector<double>>& runs_a,
                           const std::vector<std::vector<double>>& runs_b, double threshold, double quantile = 0.5,
                           bool one_machine = false, const RunSpreadPrior& prior = {}, int resamples = 2000,
                           uint64_t seed = 20261126);

/// Runs taken in two or more machine states (JudgeMachine grouped them by
/// their probe readings: `states_a[i]` is run i's state, -1 for a run left
/// out): the change is estimated within states, so a state's effect, the
/// same on both sides, cancels. Each run's log statistic (as CompareRuns')
/// is y = mu_state + d [a run of B] + e, e one machine's run-to-run noise:
///  - d: the states' differences of the sides' mean logs, weighted by
///    n_a n_b / n of each state (least squares);
///  - its variance: s^2 over the weights' sum, s^2 the residuals' variance
///    on runs - states - 1 degrees of freedom; the interval and p-value
///    Student's t on those; the verdict as CompareRuns';
///  - stat_a, stat_b (and the median columns): the sides as if every run
///    had been taken in state 0, exp(mu_0) and exp(mu_0 + d).
/// s^2 is moderated by `prior` as CompareRuns' pooled variance is.
/// With one state this is the pooled two-sample t on the runs. Needs 2 runs
/// a side with 5 steps each, both sides in state 0 and 2 degrees of freedom
/// ("too few runs" otherwise); with a `prior`, 1 run a side and 1 degree
/// of freedom (one run a side in each of two states: the prior's variance
/// moderated by that one). `pooled` is set, `far_runs` empty.
StepComparison CompareRunsWithinStates(const std::vector<std::vector<double>>& runs_a, const std::vector<int>& states_a,
                                       const std::vector<std::vector<double>>& runs_b, const std::vector<int>& states_b,
                                       double threshold, double quantile = 0.5, const RunSpreadPrior& prior = {});

/// Runs that took turns on one machine (InterleavedRuns): `runs_a[i]` and
/// `runs_b[i]` are a couple, taken one after the other, so the machine's
/// drift between couples, which CompareRuns counts as noise between runs,
/// is the same for both and cancels in their difference:
///  - each couple's d_i = log stat(B_i) - log stat(A_i) (the statistic as
///    CompareRuns'; a couple with a run of fewer than 5 steps is skipped);
///  - ratio: exp(mean d_i), which is CompareRuns' ratio of geometric means;
///  - the d_i's variance on n - 1 degrees of freedom, moderated by `prior`
///    (runs next to each other in other jobs, OtherJobsCoupleSpreads); the
///    interval Student's t with standard error sqrt(variance / n); the
///    p-value and verdict as CompareRuns';
///  - far_runs as CompareRuns'; `paired_runs` the couples counted.
/// Needs 2 couples ("too few runs" otherwise). `pooled` is set.
StepComparison ComparePairedRuns(const std::vector<std::vector<double>>& runs_a,
                                 const std::vector<std::vector<double>>& runs_b, double threshold,
                                 double quantile = 0.5, const RunSpreadPrior& prior = {});

/// What a phase is compared by: the median; a serving phase (serve, ttft,
/// tpot) by its run's reported latency percentile (p99 for `server`, p90 for
/// `single_stream`), the figure serving is judged on; offline by the median.
double ComparedQuantile(const v1::Task& a, v1::Phase phase);

/// The comparison of `phase` between tasks `a` (run A) and `b` (run B):
/// CompareSteps at ComparedQuantile, then the validity rule above (`compare_anyway`: give the
/// verdict on invalid phases, marked).
StepComparison ComparePhase(const v1::Task& a, const v1::Task& b, v1::Phase phase, const std::vector<double>& steps_a,
                            const std::vector<double>& steps_b, double threshold, bool compare_anyway);

/// "run B train INVALID (too noisy)" when task `t`'s `phase` is INVALID (its
/// first reason, up to the colon); "" when it is valid or absent.
std::string InvalidSide(const v1::Task& t, v1::Phase phase, const char* run);

/// Whether `c`'s verdict is a change (slower or faster) that counts: both
/// sides valid (a verdict given anyway on an invalid phase is not one).
bool IsChange(const StepComparison& c);

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b`.
double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b);

/// Per-step time per sample (duration / items) of one phase's batches; a
/// serving phase's are its samples' durations whatever their items: each
/// query's latency (a multi_stream query's, a request's end to end), each
/// request's TTFT or TPOT.
std::vector<double> TimesPerSample(const std::vector<v1::SampleBatch>& batches, v1::Phase phase);

/// The phases compare pairs, in order (serve: latency per query).
inline constexpr v1::Phase kComparedPhases[] = {v1::PHASE_TRAIN, v1::PHASE_INFER, v1::PHASE_SERVE, v1::PHASE_TTFT,
                                                v1::PHASE_TPOT};

/// The runs of one configuration on each side of a comparison: every
/// succeeded task with that key in the side's jobs (the runs of a job with
/// `repeats`, and every job of a side given as JOB,JOB,...), in job and
/// task order.
struct RunPair {
  std::vector<const v1::Task*> a, b;  // a[0], b[0]: the first run of each side
  std::string key;                    // "mlp, cpu (AMD EPYC), torch, batch 64"
  std::string refused;                // non-empty: not compared, and why
};
/// A task's configuration, which pairs it: "mlp, cpu (AMD EPYC), torch, batch 64".
std::string PairKey(const v1::Job& job, const v1::Task& t);
/// Pairs the configurations of side A's jobs with side B's: equal model,
/// device model, executor, batch size (and serving scenario and rate), in
/// the order of A's first runs; a configuration on one side only is listed
/// in `unpaired`. Runs whose model fingerprints differ from A's first run
/// refuse the pair unless `compare_anyway`.
/// The jobs must outlive the pairs (they point into them).
std::vector<RunPair> PairRuns(const std::vector<const v1::Job*>& side_a, const std::vector<const v1::Job*>& side_b,
                              bool compare_anyway, std::vector<std::string>* unpaired);

/// Runs of the two sides taken in turns on one machine (A B A B, B A A B, ...):
/// `starts_a[i]`, `starts_b[j]` are the runs' start times. Taken in time
/// order two at a time, every couple must hold one run of each side; then
/// each couple's (A run, B run) in time order, else none (the sides' counts
/// differ, a start is unknown (0), or two runs of a side follow each other).
/// A couple's runs share the machine's drift, which their difference cancels
/// (ComparePairedRuns).
std::vector<std::pair<size_t, size_t>> InterleavedRuns(const std::vector<double>& starts_a,
                                                       const std::vector<double>& starts_b);

/// The comparison of `phase` for `pair`, given each run's per-step times per
/// sample (`steps_a[i]` of `pair.a[i]`): CompareRuns at ComparedQuantile
/// when both sides have 2 runs or more, over the runs JudgeMachine keeps
/// (those taken in another machine state named in left_out_note, its far
/// runs in far_runs_note; pooled when every run was on A's first run's agent
/// and device), else CompareSteps of the first run of each side, noted as
/// ignoring run-to-run variance; then the validity rule over every run
/// compared. `others`: other jobs (the store's recent ones) from which a
/// pooled comparison learns its machine's run-to-run spread
/// (OtherJobsRunStats, FitRunSpreadPrior); none, the runs' own spread only.
/// With that spread learned, JudgeMachine keeps a side of 1 run (min_runs):
/// a verdict where the runs' own spread would have needed 2 a side.
StepComparison CompareRunPhase(const RunPair& pair, v1::Phase phase, const std::vector<std::vector<double>>& steps_a,
                               const std::vector<std::vector<double>>& steps_b, double threshold, bool compare_anyway,
                               const std::vector<const v1::Job*>& others = {});

struct PairResult {
  RunPair pair;
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  StepComparison result;
};
/// "mlp, cpu (...), batch 64, train: runs left out ...; runs beyond ...": the
/// line under the table (and on the web page) naming `r`'s runs left out and
/// far runs; "" when it has neither.
std::string RunNotesLine(const PairResult& r);
/// The comparison as a table, CSV or JSON (schema hetbench.compare/v1,
/// report/schemas/compare.v1.json); `name_a`, `name_b`: the sides as given
/// ("job-000001" or "job-000001,job-000002").
std::string RenderComparison(const std::string& name_a, const std::string& name_b,
                             const std::vector<PairResult>& results, const std::vector<std::string>& unpaired,
                             double threshold, const std::string& format);

}  // namespace hetbench::report
