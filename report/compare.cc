#include "report/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/render.h"
#include "report/render/common.h"
#include "common/names.h"
#include "common/stats.h"

namespace hetbench::report {

namespace {

constexpr int kMinSteps = 5;

// "slower" when the whole interval lies above 1 + threshold, "faster" below 1 - threshold.
std::string VerdictOf(double ci_low, double ci_high, double threshold) {
  if (ci_low > 1 + threshold) return "slower";
  if (ci_high < 1 - threshold && ci_high > 0) return "faster";
  return "no change";
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
  c.verdict = VerdictOf(c.ci_low, c.ci_high, threshold);
  return c;
}

StepComparison CompareRuns(const std::vector<std::vector<double>>& runs_a,
                           const std::vector<std::vector<double>>& runs_b, double threshold) {
  StepComparison c;
  // Each run's log median; a run with too few steps does not count.
  auto log_medians = [](const std::vector<std::vector<double>>& runs, int64_t* steps_seen) {
    std::vector<double> out;
    for (std::vector<double> steps : runs) {
      *steps_seen += static_cast<int64_t>(steps.size());
      if (steps.size() < kMinSteps) continue;
      const double m = MedianInPlace(steps);
      if (m > 0) out.push_back(std::log(m));
    }
    return out;
  };
  const std::vector<double> a = log_medians(runs_a, &c.n_a), b = log_medians(runs_b, &c.n_b);
  c.runs_a = static_cast<int64_t>(a.size());
  c.runs_b = static_cast<int64_t>(b.size());
  if (a.size() < 2 || b.size() < 2) {
    c.verdict = "too few runs";
    return c;
  }
  auto mean_var = [](const std::vector<double>& v) {
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    return std::pair{mean, var / static_cast<double>(v.size() - 1)};
  };
  const auto [ma, va] = mean_var(a);
  const auto [mb, vb] = mean_var(b);
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  c.median_a_ns = c.stat_a_ns = std::exp(ma);
  c.median_b_ns = c.stat_b_ns = std::exp(mb);
  c.ratio = std::exp(mb - ma);
  const double se2 = va / na + vb / nb;
  if (se2 <= 0) {
    c.ci_low = c.ci_high = c.ratio;
    c.p_value = c.ratio == 1 ? 1 : 0;
  } else {
    const double df = se2 * se2 / ((va / na) * (va / na) / (na - 1) + (vb / nb) * (vb / nb) / (nb - 1));
    const double se = std::sqrt(se2);
    const double t = StudentTQuantile(0.975, df);
    c.ci_low = std::exp(mb - ma - t * se);
    c.ci_high = std::exp(mb - ma + t * se);
    c.p_value = 2 * (1 - StudentTCdf(std::abs(mb - ma) / se, df));
  }
  c.verdict = VerdictOf(c.ci_low, c.ci_high, threshold);
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
  std::vector<std::string> sides;
  for (const std::string& side : {InvalidSide(a, phase, "A"), InvalidSide(b, phase, "B")}) {
    if (!side.empty()) sides.push_back(side);
  }
  c.invalid = absl::StrJoin(sides, ", ");
  if (c.invalid.empty() || c.verdict == "too few steps") return c;
  c.verdict = compare_anyway ? absl::StrCat(c.verdict, " (", c.invalid, ")") : absl::StrCat("not comparable: ", c.invalid);
  return c;
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

std::string PairKey(const v1::Job& job, const v1::Task& t) {
  const v1::RunEnvironment& e = t.result().environment();
  // A serving task pairs with one of the same scenario and rate (a peak search's rate is its result).
  const v1::ServingRun& sv = t.result().serving();
  const std::string serving = sv.scenario().empty() ? ""
                              : sv.scenario() == "server"
                                  ? absl::StrFormat(", serving server at %g q/s", sv.target_qps())
                                  : absl::StrCat(", serving ", sv.scenario());
  return absl::StrCat(render::TaskModel(job, t), ", ", DeviceKindName(t.device_kind()), " (",
                      e.device_model().empty() ? "unknown model" : e.device_model(), "), ",
                      e.executor().empty() ? "torch" : e.executor(), ", batch ", t.batch_size(), serving,
                      e.simulated() ? ", SIMULATED" : "");
}

}  // namespace

std::vector<TaskPair> PairTasks(const v1::Job& a, const v1::Job& b, bool compare_anyway,
                                std::vector<std::string>* unpaired) {
  std::map<std::string, std::vector<const v1::Task*>> waiting;  // b's tasks by key, in task order
  for (const v1::Task& t : b.tasks()) {
    if (t.state() == v1::TASK_STATE_SUCCEEDED) waiting[PairKey(b, t)].push_back(&t);
  }
  std::vector<TaskPair> out;
  for (const v1::Task& t : a.tasks()) {
    if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
    const std::string key = PairKey(a, t);
    auto it = waiting.find(key);
    if (it == waiting.end() || it->second.empty()) {
      unpaired->push_back(absl::StrCat(t.id(), " (", key, "): no such task in ", b.id()));
      continue;
    }
    TaskPair p{&t, it->second.front(), key, ""};
    it->second.erase(it->second.begin());
    if (!render::SameFingerprint(t, *p.b) && !compare_anyway) {
      p.refused = absl::StrCat("model fingerprints differ (", t.result().environment().model_fingerprint(), " vs ",
                               p.b->result().environment().model_fingerprint(),
                               "): not the same model, weights or data; --compare-anyway compares them");
    }
    out.push_back(p);
  }
  for (const auto& [key, tasks] : waiting) {
    for (const v1::Task* t : tasks) unpaired->push_back(absl::StrCat(t->id(), " (", key, "): no such task in ", a.id()));
  }
  return out;
}

std::string RenderComparison(const v1::Job& a, const v1::Job& b, const std::vector<PairResult>& results,
                             const std::vector<std::string>& unpaired, double threshold, const std::string& format,
                             int runs, const std::string& label_a, const std::string& label_b) {
  const std::string name_a = label_a.empty() ? a.id() : label_a, name_b = label_b.empty() ? b.id() : label_b;
  const bool by_runs = runs > 1;
  const std::string method =
      by_runs ? absl::StrFormat(
                    "ratio = geometric mean of the runs' median time per sample, B over A (> 1: B is slower); 95%% "
                    "CI: Welch's t interval on the runs' log medians, so the noise between runs counts; p: Welch's "
                    "t test; verdict: slower/faster when the whole CI lies beyond 1 +/- %.3g; none when a run's phase "
                    "is INVALID",
                    threshold)
              : absl::StrFormat(
                    "ratio = median time per sample of %s over %s (> 1: %s is slower); 95%% CI: percentile bootstrap "
                    "of the ratio over the steps of both runs; p: two-sided Mann-Whitney U; verdict: slower/faster "
                    "when the whole CI lies beyond 1 +/- %.3g; none on a phase judged INVALID on either side",
                    b.id(), a.id(), b.id(), threshold);
  if (format == "json") {
    nlohmann::ordered_json doc;
    doc["schema"] = "hetbench.compare/v1";
    doc["a"] = name_a;
    doc["b"] = name_b;
    doc["threshold"] = threshold;
    if (by_runs) {
      doc["method"] = {{"ratio", "geometric mean of the runs' median time per sample, b over a"},
                       {"interval", "95% Welch t interval on the runs' log medians"},
                       {"test", "Welch's t test on the runs' log medians"},
                       {"verdict", "slower/faster when the whole interval lies beyond 1 +/- threshold; \"not "
                                   "comparable\" when a run's phase is INVALID (marked instead with --compare-anyway)"}};
    } else {
      doc["method"] = {{"ratio", "the statistic of the time per sample, b over a: the median; for a serving phase "
                                 "the run's reported latency percentile (nearest rank)"},
                       {"interval", "95% percentile bootstrap over the steps (queries) of both runs"},
                       {"test", "two-sided Mann-Whitney U, normal approximation, tie-corrected"},
                       {"verdict", "slower/faster when the whole interval lies beyond 1 +/- threshold; \"not "
                                   "comparable\" when either side's phase is INVALID (marked instead with "
                                   "--compare-anyway)"}};
    }
    doc["pairs"] = nlohmann::ordered_json::array();
    for (const PairResult& r : results) {
      nlohmann::ordered_json p;
      p["key"] = r.pair.key;
      p["task_a"] = r.pair.a->id();
      p["task_b"] = r.pair.b->id();
      p["simulated"] = r.pair.a->result().environment().simulated() || r.pair.b->result().environment().simulated();
      if (!r.pair.refused.empty()) {
        p["refused"] = r.pair.refused;
      } else {
        p["phase"] = PhaseName(r.phase);
        p["steps_a"] = r.result.n_a;
        p["steps_b"] = r.result.n_b;
        if (by_runs) {
          p["runs_a"] = r.result.runs_a;
          p["runs_b"] = r.result.runs_b;
        }
        p["median_ns_per_sample_a"] = r.result.median_a_ns;
        p["median_ns_per_sample_b"] = r.result.median_b_ns;
        p["statistic"] = StatisticName(r.result.quantile);
        p["statistic_ns_a"] = r.result.stat_a_ns;
        p["statistic_ns_b"] = r.result.stat_b_ns;
        p["ratio"] = r.result.ratio;
        p["ci95"] = {r.result.ci_low, r.result.ci_high};
        p["p_value"] = r.result.p_value;
        p["verdict"] = r.result.verdict;
        if (!r.result.invalid.empty()) p["invalid"] = r.result.invalid;
      }
      doc["pairs"].push_back(p);
    }
    doc["unpaired"] = unpaired;
    return doc.dump(2) + "\n";
  }
  std::vector<std::vector<std::string>> rows;
  if (format == "csv") {  // one value per cell, numbers unrounded
    for (const PairResult& r : results) {
      if (!r.pair.refused.empty()) {
        rows.push_back({r.pair.key, "", "", "", "", "", "", "", "", absl::StrCat("refused: ", r.pair.refused)});
        continue;
      }
      const StepComparison& c = r.result;
      rows.push_back({r.pair.key, PhaseName(r.phase), StatisticName(c.quantile), render::CsvNumber(c.stat_a_ns / 1e6),
                      render::CsvNumber(c.stat_b_ns / 1e6), render::CsvNumber(c.ratio), render::CsvNumber(c.ci_low),
                      render::CsvNumber(c.ci_high), render::CsvNumber(c.p_value), c.verdict});
    }
    return render::CsvLines(
        "pair,phase,statistic,a_ms_per_sample,b_ms_per_sample,ratio,ci95_low,ci95_high,p_value,verdict", rows);
  }
  for (const PairResult& r : results) {
    if (!r.pair.refused.empty()) {
      rows.push_back({r.pair.key, "-", "-", "-", "-", "-", "-", "-", absl::StrCat("refused: ", r.pair.refused)});
      continue;
    }
    const StepComparison& c = r.result;
    rows.push_back({r.pair.key, PhaseName(r.phase), StatisticName(c.quantile), absl::StrFormat("%.4f", c.stat_a_ns / 1e6),
                    absl::StrFormat("%.4f", c.stat_b_ns / 1e6), absl::StrFormat("%.3f", c.ratio),
                    absl::StrFormat("%.3f-%.3f", c.ci_low, c.ci_high), absl::StrFormat("%.2g", c.p_value), c.verdict});
  }
  std::string out = absl::StrCat(
      "compare ", name_a, " (A) with ", name_b, " (B)", by_runs ? absl::StrCat(", ", runs, " runs a side") : "", "\n",
      FormatTable({"PAIR", "PHASE", "STATISTIC", "A_MS/SAMPLE", "B_MS/SAMPLE", "B/A", "95% CI", "P", "VERDICT"}, rows),
      method,
      "\n");
  for (const std::string& u : unpaired) absl::StrAppend(&out, "unpaired: ", u, "\n");
  return out;
}

}  // namespace hetbench::report
