#pragma once
/// One machine's run-to-run spread, learned from the other jobs of a
/// configuration. Three runs a side know their own spread poorly (4 degrees
/// of freedom pooled), so Student's t on them needs a wide interval; the
/// same job run on the same agent and device before has shown that spread
/// many times. compare moderates the runs' own variance with what those
/// jobs showed, as limma does for genes (Smyth 2004, "Linear models and
/// empirical Bayes methods for assessing differential expression"):
///  - each other job with k >= 2 runs gives s_i^2, the variance of its
///    runs' log statistics, on d_i = k - 1 degrees of freedom;
///  - the s_i^2 are taken as draws of s0^2 chi^2(d0)/d0 scaled by chi^2:
///    d0 and s0^2 by the moments of log s_i^2 (digamma and trigamma from
///    Boost.Math, libboost-dev). When the jobs' variances scatter no more
///    than their own degrees of freedom explain, d0 is unbounded; it is
///    capped at the jobs' degrees of freedom together, what they can carry;
///    when they scatter much more (the machine's spread changed between
///    jobs), d0 is small and the prior counts little;
///  - the comparison's variance s^2 on d degrees of freedom becomes
///    (d0 s0^2 + d s^2) / (d0 + d) on d0 + d degrees of freedom;
///  - unless the runs spread more than the prior allows: under it s^2 / s0^2
///    follows F(d, d0), and beyond its 99th percentile the machine is not
///    what its other jobs showed (a noisier stretch), so the runs' own
///    variance is used alone, and the note says so. Quieter runs than the
///    prior only widen the interval.
/// With fewer than kMinSpreadJobs other jobs there is no prior.

#include <cstdint>
#include <string>
#include <vector>

#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

/// Earlier jobs needed before their spread counts: below this, the moments
/// of log s^2 are too rough to say how much the spread varies.
inline constexpr int kMinSpreadJobs = 8;

struct RunSpreadPrior {
  int64_t jobs = 0;     // other jobs (2 runs or more) it was learned from
  double variance = 0;  // s0^2: the variance of one run's log statistic
  double df = 0;        // d0: what it is worth; 0 when there is no prior
  // Learned from runs next to each other in time (OtherJobsCoupleSpreads): `variance` is then a couple's
  // difference's (B_i - A_i).
  bool paired = false;
};

/// The prior from other jobs: `log_stats[i]` is job i's runs' log
/// statistics (jobs with fewer than 2 runs, or runs all equal, are skipped).
RunSpreadPrior FitRunSpreadPrior(const std::vector<std::vector<double>>& log_stats);

/// One variance seen elsewhere: `variance` on `df` degrees of freedom, from `jobs` jobs.
struct SpreadSample {
  double variance = 0, df = 0;
  int64_t jobs = 1;
  // From two jobs whose runs took turns (OtherJobsCoupleSpreads): the same runs' spread, each around its own job's
  // mean, pooled (a run's variance, not a couple's); 0 degrees of freedom otherwise.
  double runs_variance = 0, runs_df = 0;
};
/// The prior from variances seen elsewhere (FitRunSpreadPrior's, each job's
/// variance given): those not positive and finite are skipped; kMinSpreadJobs
/// samples are needed; `jobs` sums theirs.
RunSpreadPrior FitSpreadPrior(const std::vector<SpreadSample>& samples);

/// The variance a comparison uses, and on how many degrees of freedom.
struct ModeratedVariance {
  double variance = 0, df = 0;
  bool beyond_prior = false;  // the runs spread beyond the prior's 99th percentile: their own variance alone
};
/// `variance` on `df` degrees of freedom, moderated by `prior` (unchanged
/// when it has none, or when the runs spread beyond it).
ModeratedVariance ModerateVariance(const RunSpreadPrior& prior, double variance, double df);

/// The runs of one configuration in other jobs: from `jobs`, the tasks compare
/// would pair with `reference` (its PairKey: computed in its own job when
/// `jobs` holds it, else `key`; the same model
/// fingerprint), run on its agent and device with its thread count, skipping
/// the jobs in `exclude` (the sides compared); per job, the log of each run's stored
/// statistic (TimingStats p50, or p90/p99 for `quantile` 0.9/0.99) whose
/// `phase` is VALID. Jobs with fewer than 2 such runs are left out.
std::vector<std::vector<double>> OtherJobsRunStats(const std::vector<const v1::Job*>& jobs,
                                                   const std::vector<std::string>& exclude, const v1::Task& reference,
                                                   const std::string& key, v1::Phase phase, double quantile);

/// How two runs next to each other in time differ, from other jobs (as
/// OtherJobsRunStats finds them; a run's start is its task's
/// started_unix_seconds), for ComparePairedRuns' prior. The jobs in the
/// order their first runs started:
///  - a job whose runs took turns with the next job's (InterleavedRuns, 2
///    couples or more): each couple's difference of log statistics, their
///    variance around their own mean (a change between the two jobs is not
///    spread) on couples - 1 degrees of freedom, and beside it those runs'
///    own spread (runs_variance: each job's runs around its mean, pooled);
///    both jobs used up;
///  - else the job alone: its runs in time order two at a time (1 and 2, 3
///    and 4, ...), one configuration with no change between them, the mean
///    squared difference on as many degrees of freedom as couples.
/// Runs of other configurations between two runs of a job are not seen, so
/// such a couple spans more drift than a comparison's: it widens the
/// interval, never narrows it.
std::vector<SpreadSample> OtherJobsCoupleSpreads(const std::vector<const v1::Job*>& jobs,
                                                 const std::vector<std::string>& exclude, const v1::Task& reference,
                                                 const std::string& key, v1::Phase phase, double quantile);

/// "run-to-run spread moderated by 23 other jobs' of this configuration on
/// this agent and device (their spread 1.02%, worth 4.6 degrees of
/// freedom): 8.6 in all", or that the runs spread beyond them; "" when
/// `prior` has none.
std::string SpreadNote(const RunSpreadPrior& prior, const ModeratedVariance& used);

}  // namespace hetbench::report
