#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/stats.h"
#include "report/render.h"
#include "report/render/common.h"
#include "report/run_spread.h"

namespace hetbench::report {

namespace {

constexpr int kMinSteps = 5;

// One run a side (an interval over steps, blind to the noise between runs):
// "slower" when the whole interval lies above 1 + threshold, "faster" below
// 1 - threshold.
std::string StepVerdict(double ci_low, double ci_high, double threshold) {
  if (ci_low > 1 + threshold) return "slower";
  if (ci_high < 1 - threshold && ci_high > 0) return "faster";
  return "no change";
}

// Runs as the unit (an interval that holds the noise between runs): "slower"
// when the change is there (the interval lies above 1) and matters (the
// ratio above 1 + threshold); "faster" the same way below.
std::string RunVerdict(double ratio, double ci_low, double ci_high, double threshold) {
  if (ci_low > 1 && ratio > 1 + threshold) return "slower";
  if (ci_high < 1 && ci_high > 0 && ratio < 1 - threshold) return "faster";
  return "no change";
}

// Runs as the unit: the 95% interval of the log ratio `diff` (Student's t,
// standard error `se` on `df` degrees of freedom), its p-value and the verdict.
void TInterval(double diff, double se, double df, double threshold, StepComparison* c) {
  if (!(se > 0)) {
    c->ci_low = c->ci_high = c->ratio;
    c->p_value = diff == 0 ? 1 : 0;
  } else {
    const double t = StudentTQuantile(0.975, df);
    c->ci_low = std::exp(diff - t * se);
    c->ci_high = std::exp(diff + t * se);
    c->p_value = std::min(1.0, 2 * (1 - StudentTCdf(std::abs(diff) / se, df)));
    c->detectable = std::exp((t + StudentTQuantile(0.8, df)) * se) - 1;
  }
  c->verdict = RunVerdict(c->ratio, c->ci_low, c->ci_high, threshold);
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// The nearest-rank q-quantile of `v` (reordered): the value at rank ceil(q n).
double NearestRankInPlace(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  const size_t at = std::min(v.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
  return v[at];
}

// The validity rule: no verdict when a side's phase is INVALID or the
// machine differed (`invalid` lists them), unless `compare_anyway`, which
// marks it.
StepComparison Withheld(StepComparison c, const std::vector<std::string>& invalid, bool compare_anyway) {
  c.invalid = absl::StrJoin(invalid, ", ");
  if (c.invalid.empty() || c.verdict == "too few steps" || c.verdict == "too few runs") return c;
  c.verdict = compare_anyway ? absl::StrCat(c.verdict, " (", c.invalid, ")") : absl::StrCat("not comparable: ", c.invalid);
  return c;
}

}  // namespace

std::string StatisticName(double quantile) {
  if (quantile == 0.5) return "median";
  return absl::StrCat("p", absl::StrFormat("%g", quantile * 100));
}

absl::StatusOr<double> ParseThreshold(const std::string& text) {
  if (text.empty()) return 0.02;
  std::string t = text;
  const bool percent = t.back() == '%';
  if (percent) t.pop_back();
  double v = 0;
  if (!absl::SimpleAtod(t, &v) || !std::isfinite(v) || v <= 0 || (percent ? v >= 100 : v >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(QuotedInput(text), ": expected a fraction in (0, 1) or a percentage, e.g. 2%"));
  }
  return percent ? v / 100 : v;
}

double MannWhitneyP(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t na = a.size(), nb = b.size(), n = na + nb;
  if (na == 0 || nb == 0) return 1;
  std::vector<std::pair<double, int>> all;
  all.reserve(n);
  for (double v : a) all.emplace_back(v, 0);
  for (double v : b) all.emplace_back(v, 1);
  std::sort(all.begin(), all.end());
  double rank_sum_a = 0, ties = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double rank = (static_cast<double>(i) + static_cast<double>(j) + 1) / 2;  // mean of ranks i+1..j
    for (size_t k = i; k < j; ++k) {
      if (all[k].second == 0) rank_sum_a += rank;
    }
    const double t = static_cast<double>(j - i);
    ties += t * t * t - t;
    i = j;
  }
  const double dna = static_cast<double>(na), dnb = static_cast<double>(nb), dn = static_cast<double>(n);
  const double u = rank_sum_a - dna * (dna + 1) / 2;
  const double mean = dna * dnb / 2;
  const double var = dna * dnb / 12 * ((dn + 1) - ties / (dn * (dn - 1)));
  if (var <= 0) return 1;
  // Continuity correction towards the mean.
  const double z = std::max(0.0, std::abs(u - mean) - 0.5) / std::sqrt(var);
  return std::erfc(z / std::sqrt(2.0));
}

StepComparison CompareSteps(const std::vector<double>& a, const std::vector<double>& b, double threshold,
                            int resamples, uint64_t seed, double quantile) {
  StepComparison c;
  c.quantile = quantile;
  c.n_a = static_cast<int64_t>(a.size());
  c.n_b = static_cast<int64_t>(b.size());
  if (a.size() < kMinSteps || b.size() < kMinSteps) {
    c.verdict = "too few steps";
    return c;
  }
  std::vector<double> x = a, y = b;
  c.median_a_ns = MedianInPlace(x);
  c.median_b_ns = MedianInPlace(y);
  // The statistic compared: the median, or a tail percentile (nearest rank).
  const bool median = quantile == 0.5;
  const auto stat = [&](std::vector<double>& v) { return median ? MedianInPlace(v) : NearestRankInPlace(v, quantile); };
  c.stat_a_ns = median ? c.median_a_ns : stat(x);
  c.stat_b_ns = median ? c.median_b_ns : stat(y);
  c.ratio = c.stat_a_ns > 0 ? c.stat_b_ns / c.stat_a_ns : 0;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (double& v : x) v = a[pick_a(rng)];
    for (double& v : y) v = b[pick_b(rng)];
    const double sa = stat(x);
    if (sa > 0) ratios.push_back(stat(y) / sa);
  }
  if (!ratios.empty()) {
    c.ci_low = Quantile(ratios, 0.025);
    c.ci_high = Quantile(ratios, 0.975);
  }
  c.p_value = MannWhitneyP(a, b);
  c.verdict = StepVerdict(c.ci_low, c.ci_high, threshold);
  return c;
}

StepComparison CompareRuns(const std::vector<std::vector<double>>& runs_a,
                           const std::vector<std::vector<double>>& runs_b, double threshold, double quantile,
                           bool one_machine, const RunSpreadPrior& prior, int resamples, uint64_t seed) {
  StepComparison c;
  c.quantile = quantile;
  const bool median = quantile == 0.5;
  const auto stat = [&](std::vector<double>& v) { return median ? MedianInPlace(v) : NearestRankInPlace(v, quantile); };
  // The runs that count (5 steps or more, a positive statistic) and their log statistics.
  struct Side {
    std::vector<const std::vector<double>*> runs;
    std::vector<double> logs;
    double mean = 0, boot_var = 0;
  };
  auto side_of = [&](const std::vector<std::vector<double>>& runs, bool side_b, int64_t* steps_seen) {
    Side side;
    std::vector<size_t> index;  // each counted run's place in `runs`
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::vector<double>& steps = runs[i];
      *steps_seen += static_cast<int64_t>(steps.size());
      if (steps.size() < kMinSteps) continue;
      std::vector<double> v = steps;
      const double s = stat(v);
      if (!(s > 0)) continue;
      side.runs.push_back(&steps);
      side.logs.push_back(std::log(s));
      index.push_back(i);
    }
    // Runs far from their side's median run (the machine in another state
    // for a whole run), named when 3 or more runs make a median; they stay in.
    if (side.logs.size() >= 3) {
      std::vector<double> logs = side.logs;
      const double median_log = MedianInPlace(logs);
      for (size_t r = 0; r < side.logs.size(); ++r) {
        if (std::abs(side.logs[r] - median_log) > std::log1p(kFarRunBeyond)) {
          c.far_runs.push_back({side_b, index[r], std::exp(side.logs[r] - median_log)});
        }
      }
    }
    for (double l : side.logs) side.mean += l;
    if (!side.logs.empty()) side.mean /= static_cast<double>(side.logs.size());
    return side;
  };
  Side a = side_of(runs_a, false, &c.n_a), b = side_of(runs_b, true, &c.n_b);
  c.runs_a = static_cast<int64_t>(a.runs.size());
  c.runs_b = static_cast<int64_t>(b.runs.size());
  const size_t min_runs = one_machine && prior.df > 0 ? 1 : 2;  // one machine's spread known from its other jobs
  if (a.runs.size() < min_runs || b.runs.size() < min_runs || a.runs.size() + b.runs.size() < 3) {
    c.verdict = "too few runs";
    return c;
  }
  c.median_a_ns = c.stat_a_ns = std::exp(a.mean);
  c.median_b_ns = c.stat_b_ns = std::exp(b.mean);
  if (!median) {  // the median columns stay medians: the geometric mean of the runs' medians
    for (auto [side, out] : {std::pair{&a, &c.median_a_ns}, std::pair{&b, &c.median_b_ns}}) {
      double sum = 0;
      for (const std::vector<double>* run : side->runs) {
        std::vector<double> v = *run;
        sum += std::log(MedianInPlace(v));
      }
      *out = std::exp(sum / static_cast<double>(side->runs.size()));
    }
  }
  c.ratio = std::exp(b.mean - a.mean);
  // The hierarchical bootstrap of each side's mean log statistic: runs drawn
  // with replacement, then steps within each drawn run. Large runs (serving's
  // queries) get fewer resamples, at least 200: their within-run part is small.
  int64_t total = 0;
  for (const Side* side : {&a, &b}) {
    for (const std::vector<double>* run : side->runs) total += static_cast<int64_t>(run->size());
  }
  const int r_count = static_cast<int>(std::clamp<int64_t>(40'000'000 / std::max<int64_t>(total, 1), 200, resamples));
  std::mt19937_64 rng(seed);
  std::vector<double> scratch;
  for (Side* side : {&a, &b}) {
    const size_t k = side->runs.size();
    std::uniform_int_distribution<size_t> pick_run(0, k - 1);
    double sum = 0, sum2 = 0;
    for (int r = 0; r < r_count; ++r) {
      double mean = 0;
      for (size_t i = 0; i < k; ++i) {
        const std::vector<double>& run = *side->runs[pick_run(rng)];
        std::uniform_int_distribution<size_t> pick_step(0, run.size() - 1);
        scratch.resize(run.size());
        for (double& v : scratch) v = run[pick_step(rng)];
        mean += std::log(stat(scratch));
      }
      mean /= static_cast<double>(k);
      sum += mean;
      sum2 += mean * mean;
    }
    const double m = sum / r_count;
    const double var = std::max(0.0, sum2 / r_count - m * m);
    side->boot_var = k > 1 ? var * static_cast<double>(k) / static_cast<double>(k - 1) : 0;  // one run: no spread
  }
  const double ka = static_cast<double>(a.runs.size()), kb = static_cast<double>(b.runs.size());
  // One machine: one run-to-run variance, estimated from both sides' runs (a
  // side's variance of one run is k times its mean's). Else each side's own.
  c.pooled = one_machine;
  // One machine's variance may be moderated by its other jobs' (run_spread.h).
  const ModeratedVariance pooled =
      ModerateVariance(one_machine ? prior : RunSpreadPrior{},
                       ((ka - 1) * ka * a.boot_var + (kb - 1) * kb * b.boot_var) / (ka + kb - 2), ka + kb - 2);
  const double se2 = one_machine ? pooled.variance * (1 / ka + 1 / kb) : a.boot_var + b.boot_var;
  c.df = !(se2 > 0) || one_machine
             ? pooled.df
             : se2 * se2 / (a.boot_var * a.boot_var / (ka - 1) + b.boot_var * b.boot_var / (kb - 1));
  if (one_machine) {
    c.spread_prior = prior;
    c.spread = pooled;
  }
  TInterval(b.mean - a.mean, std::sqrt(std::max(se2, 0.0)), c.df, threshold, &c);
  return c;
}

StepComparison CompareRunsWithinStates(const std::vector<std::vector<double>>& runs_a, const std::vector<int>& states_a,
                                       const std::vector<std::vector<double>>& runs_b, const std::vector<int>& states_b,
                                       double threshold, double quantile, const RunSpreadPrior& prior) {
  StepComparison c;
  c.quantile = quantile;
  c.pooled = true;
  c.runs_a = c.runs_b = 0;
  // Each counted run: its side, state, log statistic and log median.
  struct Run {
    int side, state;
    double y, median;
  };
  std::vector<Run> runs;
  int states = 0;
  for (int side = 0; side < 2; ++side) {
    const auto& steps = side == 0 ? runs_a : runs_b;
    const auto& state = side == 0 ? states_a : states_b;
    for (size_t i = 0; i < steps.size(); ++i) {
      (side == 0 ? c.n_a : c.n_b) += static_cast<int64_t>(steps[i].size());
      if (i >= state.size() || state[i] < 0 || steps[i].size() < kMinSteps) continue;
      std::vector<double> v = steps[i];
      const double m = MedianInPlace(v);
      const double s = quantile == 0.5 ? m : NearestRankInPlace(v, quantile);
      if (!(s > 0) || !(m > 0)) continue;
      runs.push_back({side, state[i], std::log(s), std::log(m)});
      (side == 0 ? c.runs_a : c.runs_b) += 1;
      states = std::max(states, state[i] + 1);
    }
  }
  // y = mu_state + d [B] + e: d is the states' differences of the sides'
  // mean logs weighted by n_a n_b / n; var(d) = s^2 / the weights' sum.
  struct Cell {
    int n[2] = {0, 0};
    double sum[2] = {0, 0}, median_sum[2] = {0, 0};
  };
  std::vector<Cell> cells(static_cast<size_t>(states));
  for (const Run& r : runs) {
    Cell& cell = cells[static_cast<size_t>(r.state)];
    cell.n[r.side] += 1;
    cell.sum[r.side] += r.y;
    cell.median_sum[r.side] += r.median;
  }
  double weights = 0, d = 0, d_median = 0;
  int counted = 0, levels = 0;  // states with both sides' runs; states with runs (one level each)
  for (const Cell& cell : cells) {
    levels += cell.n[0] + cell.n[1] > 0 ? 1 : 0;
    if (cell.n[0] == 0 || cell.n[1] == 0) continue;
    const double w = static_cast<double>(cell.n[0]) * cell.n[1] / (cell.n[0] + cell.n[1]);
    weights += w;
    d += w * (cell.sum[1] / cell.n[1] - cell.sum[0] / cell.n[0]);
    d_median += w * (cell.median_sum[1] / cell.n[1] - cell.median_sum[0] / cell.n[0]);
    ++counted;
  }
  const int df = static_cast<int>(runs.size()) - levels - 1;
  const int need = prior.df > 0 ? 1 : 2;  // the spread known from other jobs: a run a side, 1 degree of freedom
  if (counted == 0 || c.runs_a < need || c.runs_b < need || df < need || cells[0].n[0] == 0 || cells[0].n[1] == 0) {
    c.verdict = "too few runs";
    return c;
  }
  d /= weights;
  d_median /= weights;
  // Each state's level: its runs' mean with B's share of d taken out; the residuals around them.
  auto level = [&](const Cell& cell, bool of_medians) {
    const double sum = of_medians ? cell.median_sum[0] + cell.median_sum[1] : cell.sum[0] + cell.sum[1];
    return (sum - (of_medians ? d_median : d) * cell.n[1]) / (cell.n[0] + cell.n[1]);
  };
  double rss = 0;
  for (const Run& r : runs) {
    const double e = r.y - level(cells[static_cast<size_t>(r.state)], false) - (r.side == 1 ? d : 0);
    rss += e * e;
  }
  // The sides as if every run had been taken in state 0.
  c.stat_a_ns = std::exp(level(cells[0], false));
  c.stat_b_ns = std::exp(level(cells[0], false) + d);
  c.median_a_ns = std::exp(level(cells[0], true));
  c.median_b_ns = std::exp(level(cells[0], true) + d_median);
  c.ratio = std::exp(d);
  c.spread = ModerateVariance(prior, rss / df, df);
  c.spread_prior = prior;
  c.df = c.spread.df;
  TInterval(d, std::sqrt(c.spread.variance / weights), c.df, threshold, &c);
  return c;
}

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
    // The runs JudgeMachine kept (taken in the comparison's machine state), and where each stands in its side.
    std::vector<std::vector<double>> kept[2];
    std::vector<size_t> index[2];
    for (int side = 0; side < 2; ++side) {
      const std::vector<std::vector<double>>& steps = cut.steps[side];
      for (size_t i = 0; i < steps.size(); ++i) {
        if (!machine.Kept(side == 1, i)) continue;
        kept[side].push_back(steps[i]);
        index[side].push_back(i);
      }
    }
    if (!machine.states[0].empty()) {  // runs in two or more machine states: compared within them
      std::vector<int> states[2];
      for (int side = 0; side < 2; ++side) {
        for (size_t i : index[side]) states[side].push_back(machine.states[side][i]);
      }
      c = CompareRunsWithinStates(kept[0], states[0], kept[1], states[1], threshold, quantile, prior);
      c.states_a = machine.states[0];
      c.states_b = machine.states[1];
    } else {
      c = CompareRuns(kept[0], kept[1], threshold, quantile, one_machine, prior);
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
    c.note = "a side of one run: the first runs' steps compared, so the verdict ignores run-to-run variance "
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
