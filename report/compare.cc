// compare's statistics: steps of one run a side (CompareSteps), runs as the
// unit (CompareRuns, CompareRunsWithinStates, ComparePairedRuns), the
// threshold and the rank test (report/compare.h); applied to tasks in
// report/compare_phase.cc.
#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "common/stats.h"
#include "report/run_spread.h"

namespace hetbench::report {

namespace {

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

// A side's runs far from its median run, when 3 or more make a median (the
// machine in another state for a whole run): `logs` their log statistics,
// `index` their places as given. They stay in the comparison.
void AddFarRuns(const std::vector<double>& logs, bool side_b, const std::vector<size_t>& index,
                std::vector<StepComparison::FarRun>* out) {
  if (logs.size() < 3) return;
  std::vector<double> sorted = logs;
  const double median_log = MedianInPlace(sorted);
  for (size_t r = 0; r < logs.size(); ++r) {
    if (std::abs(logs[r] - median_log) > std::log1p(kFarRunBeyond)) {
      out->push_back({side_b, index[r], std::exp(logs[r] - median_log)});
    }
  }
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
  if (a.size() < kMinRunSteps || b.size() < kMinRunSteps) {
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
      if (steps.size() < kMinRunSteps) continue;
      std::vector<double> v = steps;
      const double s = stat(v);
      if (!(s > 0)) continue;
      side.runs.push_back(&steps);
      side.logs.push_back(std::log(s));
      index.push_back(i);
    }
    AddFarRuns(side.logs, side_b, index, &c.far_runs);
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
      if (i >= state.size() || state[i] < 0 || steps[i].size() < kMinRunSteps) continue;
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

StepComparison ComparePairedRuns(const std::vector<std::vector<double>>& runs_a,
                                 const std::vector<std::vector<double>>& runs_b, double threshold, double quantile,
                                 const RunSpreadPrior& prior) {
  StepComparison c;
  c.quantile = quantile;
  c.pooled = true;
  c.runs_a = c.runs_b = 0;
  // Each counted couple's log statistics and log medians, per side, and its place as given.
  std::vector<double> logs[2], medians[2];
  std::vector<size_t> index;
  for (size_t i = 0; i < runs_a.size() && i < runs_b.size(); ++i) {
    c.n_a += static_cast<int64_t>(runs_a[i].size());
    c.n_b += static_cast<int64_t>(runs_b[i].size());
    double y[2], m[2];
    bool counted = true;
    for (int side = 0; side < 2; ++side) {
      std::vector<double> v = side == 0 ? runs_a[i] : runs_b[i];
      if (v.size() < kMinRunSteps) {
        counted = false;
        break;
      }
      m[side] = MedianInPlace(v);
      y[side] = quantile == 0.5 ? m[side] : NearestRankInPlace(v, quantile);
      counted = counted && y[side] > 0 && m[side] > 0;
    }
    if (!counted) continue;
    for (int side = 0; side < 2; ++side) {
      logs[side].push_back(std::log(y[side]));
      medians[side].push_back(std::log(m[side]));
    }
    index.push_back(i);
    c.paired_runs.emplace_back(i, i);
  }
  const size_t n = index.size();
  c.runs_a = c.runs_b = static_cast<int64_t>(n);
  if (n < 2) {
    c.verdict = "too few runs";
    return c;
  }
  for (int side = 0; side < 2; ++side) AddFarRuns(logs[side], side == 1, index, &c.far_runs);
  // Each couple's difference B - A: the drift its two runs shared cancels; what is left varies on n - 1
  // degrees of freedom, moderated by the differences of other jobs whose runs took turns.
  const auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = logs[1][i] - logs[0][i];
  const double d_mean = mean(d);
  double ss = 0;
  for (double x : d) ss += (x - d_mean) * (x - d_mean);
  c.stat_a_ns = std::exp(mean(logs[0]));
  c.stat_b_ns = std::exp(mean(logs[1]));
  c.median_a_ns = std::exp(mean(medians[0]));
  c.median_b_ns = std::exp(mean(medians[1]));
  c.ratio = std::exp(d_mean);
  c.spread = ModerateVariance(prior, ss / static_cast<double>(n - 1), static_cast<double>(n - 1));
  c.spread_prior = prior;
  c.df = c.spread.df;
  TInterval(d_mean, std::sqrt(c.spread.variance / static_cast<double>(n)), c.df, threshold, &c);
  return c;
}

}  // namespace hetbench::report
