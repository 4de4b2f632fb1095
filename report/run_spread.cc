#include "report/run_spread.h"

#include <algorithm>
#include <boost/math/distributions/fisher_f.hpp>
#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/polygamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"
#include "report/compare.h"
#include "report/render/common.h"

namespace hetbench::report {

namespace {

// The y with trigamma(y) = x (x > 0), by Newton's method on 1 / trigamma,
// which is nearly linear in y (Smyth 2004's iteration).
double TrigammaInverse(double x) {
  if (x > 1e7) return 1 / std::sqrt(x);
  if (x < 1e-6) return 1 / x;
  double y = 0.5 + 1 / x;
  for (int i = 0; i < 50; ++i) {
    const double tri = boost::math::trigamma(y);
    const double step = tri * (1 - tri / x) / boost::math::polygamma(2, y);
    y += step;
    if (-step / y < 1e-8) break;
  }
  return y;
}

}  // namespace

RunSpreadPrior FitRunSpreadPrior(const std::vector<std::vector<double>>& log_stats) {
  std::vector<SpreadSample> samples;
  for (const std::vector<double>& runs : log_stats) {
    if (runs.size() < 2) continue;
    double mean = 0;
    for (double l : runs) mean += l;
    mean /= static_cast<double>(runs.size());
    double ss = 0;
    for (double l : runs) ss += (l - mean) * (l - mean);
    const double df = static_cast<double>(runs.size() - 1);
    samples.push_back({ss / df, df, 1});
  }
  return FitSpreadPrior(samples);
}

RunSpreadPrior FitSpreadPrior(const std::vector<SpreadSample>& samples) {
  // Each sample's log variance, centred by what chi^2 on its degrees of freedom adds to it.
  std::vector<double> e, d;
  int64_t jobs = 0;
  for (const SpreadSample& sample : samples) {
    if (!(sample.variance > 0) || !std::isfinite(sample.variance) || !(sample.df > 0)) continue;
    e.push_back(std::log(sample.variance) - boost::math::digamma(sample.df / 2) + std::log(sample.df / 2));
    d.push_back(sample.df);
    jobs += sample.jobs;
  }
  RunSpreadPrior prior;
  prior.jobs = jobs;
  if (static_cast<int64_t>(e.size()) < kMinSpreadJobs) return prior;
  const double n = static_cast<double>(e.size());
  double e_mean = 0, df_sum = 0, tri_mean = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    e_mean += e[i] / n;
    df_sum += d[i];
    tri_mean += boost::math::trigamma(d[i] / 2) / n;
  }
  double e_var = 0;
  for (double x : e) e_var += (x - e_mean) * (x - e_mean) / (n - 1);
  // What the log variances scatter beyond their own chi^2 is the spread's own variation.
  const double excess = e_var - tri_mean;
  prior.df = excess > 0 ? std::min(2 * TrigammaInverse(excess), df_sum) : df_sum;
  prior.variance = std::exp(e_mean + boost::math::digamma(prior.df / 2) - std::log(prior.df / 2));
  return prior;
}

ModeratedVariance ModerateVariance(const RunSpreadPrior& prior, double variance, double df) {
  ModeratedVariance out{variance, df, false};
  if (!(prior.df > 0) || !(prior.variance > 0) || !(df > 0)) return out;
  const boost::math::fisher_f_distribution<double> f(df, prior.df);
  if (variance / prior.variance > boost::math::quantile(f, 0.99)) {
    out.beyond_prior = true;
    return out;
  }
  out.variance = (prior.df * prior.variance + df * variance) / (prior.df + df);
  out.df = prior.df + df;
  return out;
}

namespace {

// A run of another job: when it started and its log statistic.
struct TimedLog {
  double start = 0, log = 0;
};

// OtherJobsRunStats' runs, each with its start, per job.
std::vector<std::vector<TimedLog>> OtherJobsRuns(const std::vector<const v1::Job*>& jobs,
                                                 const std::vector<std::string>& exclude, const v1::Task& reference,
                                                 const std::string& key, v1::Phase phase, double quantile) {
  const auto stat = [quantile](const v1::TimingStats& s) {
    return quantile == 0.5 ? s.p50_ns() : quantile == 0.9 ? s.p90_ns() : quantile == 0.99 ? s.p99_ns() : 0.0;
  };
  // The reference's key in its own job when `jobs` holds it (history's pairs are keyed by series).
  std::string reference_key = key;
  for (const v1::Job* job : jobs) {
    if (job->id() == reference.job_id()) reference_key = PairKey(*job, reference);
  }
  std::vector<std::vector<TimedLog>> out;
  for (const v1::Job* job : jobs) {
    if (std::find(exclude.begin(), exclude.end(), job->id()) != exclude.end()) continue;
    std::map<int, int> per_run;  // a run with two tasks of this key is two configurations: the job is skipped
    std::vector<TimedLog> runs;
    for (const v1::Task& t : job->tasks()) {
      if (t.state() != v1::TASK_STATE_SUCCEEDED || t.agent_id() != reference.agent_id() ||
          t.device_id() != reference.device_id() ||
          t.result().environment().threads() != reference.result().environment().threads() ||
          !render::SameFingerprint(reference, t) || PairKey(*job, t) != reference_key) {
        continue;
      }
      ++per_run[t.run()];
      for (const v1::PhaseResult& p : t.result().phases()) {
        if (p.phase() == phase && p.valid() && stat(p.stats()) > 0) {
          runs.push_back({t.started_unix_seconds(), std::log(stat(p.stats()))});
        }
      }
    }
    const bool ambiguous = std::any_of(per_run.begin(), per_run.end(), [](const auto& r) { return r.second > 1; });
    if (!ambiguous && runs.size() >= 2) out.push_back(std::move(runs));
  }
  return out;
}

}  // namespace

std::vector<std::vector<double>> OtherJobsRunStats(const std::vector<const v1::Job*>& jobs,
                                                   const std::vector<std::string>& exclude, const v1::Task& reference,
                                                   const std::string& key, v1::Phase phase, double quantile) {
  std::vector<std::vector<double>> out;
  for (const std::vector<TimedLog>& runs : OtherJobsRuns(jobs, exclude, reference, key, phase, quantile)) {
    std::vector<double>& logs = out.emplace_back();
    for (const TimedLog& r : runs) logs.push_back(r.log);
  }
  return out;
}

std::vector<SpreadSample> OtherJobsCoupleSpreads(const std::vector<const v1::Job*>& jobs,
                                                 const std::vector<std::string>& exclude, const v1::Task& reference,
                                                 const std::string& key, v1::Phase phase, double quantile) {
  std::vector<std::vector<TimedLog>> runs = OtherJobsRuns(jobs, exclude, reference, key, phase, quantile);
  for (std::vector<TimedLog>& job : runs) {
    std::sort(job.begin(), job.end(), [](const TimedLog& x, const TimedLog& y) { return x.start < y.start; });
  }
  // Jobs in the order their first runs started (a start unknown, 0, first: such jobs pair with none).
  std::sort(runs.begin(), runs.end(), [](const auto& x, const auto& y) { return x[0].start < y[0].start; });
  std::vector<SpreadSample> out;
  for (size_t j = 0; j < runs.size();) {
    // With the next job, when their runs took turns: the couples' differences around their own mean.
    if (j + 1 < runs.size()) {
      std::vector<double> starts[2];
      for (int side = 0; side < 2; ++side) {
        for (const TimedLog& r : runs[j + side]) starts[side].push_back(r.start);
      }
      const std::vector<std::pair<size_t, size_t>> couples = InterleavedRuns(starts[0], starts[1]);
      if (couples.size() >= 2) {
        std::vector<double> d;
        for (const auto& [a, b] : couples) d.push_back(runs[j + 1][b].log - runs[j][a].log);
        double mean = 0, ss = 0;
        for (double x : d) mean += x / static_cast<double>(d.size());
        for (double x : d) ss += (x - mean) * (x - mean);
        double runs_ss = 0, runs_df = 0;
        for (int side = 0; side < 2; ++side) {
          double m = 0;
          for (const TimedLog& r : runs[j + side]) m += r.log / static_cast<double>(runs[j + side].size());
          for (const TimedLog& r : runs[j + side]) runs_ss += (r.log - m) * (r.log - m);
          runs_df += static_cast<double>(runs[j + side].size() - 1);
        }
        out.push_back(
            {ss / static_cast<double>(d.size() - 1), static_cast<double>(d.size() - 1), 2, runs_ss / runs_df, runs_df});
        j += 2;
        continue;
      }
    }
    // Alone, its runs in time order two at a time (1 and 2, 3 and 4, ...): one configuration, no change
    // between them, so each couple's squared difference, uncentred, on 1 degree of freedom.
    const std::vector<TimedLog>& job = runs[j++];
    if (!(job[0].start > 0)) continue;  // sorted: a start unknown comes first, and the runs have no order
    double ss = 0;
    size_t n = 0;
    for (size_t r = 0; r + 1 < job.size(); r += 2, ++n) {
      ss += (job[r + 1].log - job[r].log) * (job[r + 1].log - job[r].log);
    }
    out.push_back({ss / static_cast<double>(n), static_cast<double>(n), 1});
  }
  return out;
}

std::string SpreadNote(const RunSpreadPrior& prior, const ModeratedVariance& used) {
  if (!(prior.df > 0)) return "";
  const std::string of =
      prior.paired
          ? absl::StrFormat(
                "the runs next to each other in %d other jobs of this configuration on this agent and device "
                "(their differences spread %.2f%%, worth %.1f degrees of freedom)",
                prior.jobs, 100 * std::sqrt(prior.variance), prior.df)
          : absl::StrFormat(
                "%d other jobs' of this configuration on this agent and device (their spread %.2f%%, worth %.1f "
                "degrees of freedom)",
                prior.jobs, 100 * std::sqrt(prior.variance), prior.df);
  if (used.beyond_prior) {
    return absl::StrFormat("%s %.2f%%, beyond what %s allow (F test, 1%%): their own spread alone",
                           prior.paired ? "the paired runs' differences spread" : "the runs spread",
                           100 * std::sqrt(used.variance), of);
  }
  return absl::StrFormat("%s moderated by %s: %.1f degrees of freedom in all",
                         prior.paired ? "the spread of paired runs' differences" : "run-to-run spread", of, used.df);
}

}  // namespace hetbench::report
