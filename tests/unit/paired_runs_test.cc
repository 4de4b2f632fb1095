// compare's runs paired by time (report/compare.h: InterleavedRuns,
// ComparePairedRuns; report/run_spread.h: OtherJobsCoupleSpreads): which
// runs pair, what the prior is learned from, and on synthetic runs whose
// couples share the machine's drift, the false-alarm rate at its nominal
// level and more slowdowns found than by runs unpaired.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "report/compare.h"
#include "report/run_spread.h"
#include "tests/testing/stored_runs.h"

namespace hetbench::report {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Couples = std::vector<std::pair<size_t, size_t>>;
using testing::StoredJob;

TEST(PairedRunsTest, RunsThatTookTurnsPairAndOthersDoNot) {
  // A B A B, and B A A B: each couple in time holds one run of each side.
  EXPECT_EQ(InterleavedRuns({10, 30, 50}, {20, 40, 60}), (Couples{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(InterleavedRuns({20, 30}, {10, 40}), (Couples{{0, 0}, {1, 1}}));
  // Given out of time order: each couple names its runs as given.
  EXPECT_EQ(InterleavedRuns({50, 10, 30}, {60, 20, 40}), (Couples{{1, 1}, {2, 2}, {0, 0}}));
  // A A B B (the same job submitted again later), unequal counts, a start unknown: no couples.
  EXPECT_TRUE(InterleavedRuns({10, 20}, {30, 40}).empty());
  EXPECT_TRUE(InterleavedRuns({10, 30, 50}, {20, 40}).empty());
  EXPECT_TRUE(InterleavedRuns({10, 0}, {20, 40}).empty());
  EXPECT_TRUE(InterleavedRuns({}, {}).empty());
}

// Run `run` of job `job`, started at `start`, its train phase's median `p50`, on agent-1's cpu0.
v1::Task StoredRun(const std::string& job, int run, double start, double p50) {
  v1::Task t = testing::WithTrainMedian(testing::StoredTask(job, run), p50);
  t.set_started_unix_seconds(start);
  return t;
}

TEST(PairedRunsTest, ThePriorIsLearnedFromRunsNextToEachOtherInOtherJobs) {
  const std::vector<v1::Job> jobs = {
      // job-1 and job-2 took turns: couples (100, 110) and (120, 126).
      StoredJob("job-1", {StoredRun("job-1", 1, 1, 100), StoredRun("job-1", 2, 3, 120)}),
      StoredJob("job-2", {StoredRun("job-2", 1, 2, 110), StoredRun("job-2", 2, 4, 126)}),
      // job-3 ran alone: its runs two at a time, (100, 105) and (90, 99).
      StoredJob("job-3", {StoredRun("job-3", 1, 10, 100), StoredRun("job-3", 2, 11, 105), StoredRun("job-3", 3, 12, 90),
                          StoredRun("job-3", 4, 13, 99)}),
      // job-4 and job-5 took turns, B A A B.
      StoredJob("job-4", {StoredRun("job-4", 1, 21, 100), StoredRun("job-4", 2, 22, 200)}),
      StoredJob("job-5", {StoredRun("job-5", 1, 20, 90), StoredRun("job-5", 2, 23, 220)}),
      // Stored without its runs' starts: no order, not learned from.
      StoredJob("job-6", {StoredRun("job-6", 1, 0, 100), StoredRun("job-6", 2, 0, 130)}),
  };
  std::vector<const v1::Job*> pointers;
  for (const v1::Job& j : jobs) pointers.push_back(&j);
  const v1::Task reference = StoredRun("job-a", 1, 100, 100);
  const std::string key = PairKey(jobs[0], reference);
  const std::vector<SpreadSample> samples =
      OtherJobsCoupleSpreads(pointers, {"job-a"}, reference, key, v1::PHASE_TRAIN, 0.5);
  ASSERT_EQ(samples.size(), 3u);
  // A pair: its couples' differences around their mean (a change between the jobs is not spread), 1 df.
  const double d1 = std::log(110.0 / 100) - std::log(126.0 / 120);
  EXPECT_NEAR(samples[0].variance, d1 * d1 / 2, 1e-12);
  EXPECT_EQ(samples[0].df, 1);
  EXPECT_EQ(samples[0].jobs, 2);
  // Beside it, the same runs' own spread: each job's around its mean, pooled (1 + 1 df).
  const double s1 = std::pow(std::log(120.0 / 100), 2) / 2, s2 = std::pow(std::log(126.0 / 110), 2) / 2;
  EXPECT_NEAR(samples[0].runs_variance, (s1 + s2) / 2, 1e-12);
  EXPECT_EQ(samples[0].runs_df, 2);
  // Alone: the couples' squared differences, uncentred, a degree of freedom each.
  EXPECT_NEAR(samples[1].variance, (std::pow(std::log(1.05), 2) + std::pow(std::log(1.1), 2)) / 2, 1e-12);
  EXPECT_EQ(samples[1].df, 2);
  EXPECT_EQ(samples[1].jobs, 1);
  EXPECT_EQ(samples[1].runs_df, 0);  // nothing took turns with it
  // job-5 began first: job-4's runs minus job-5's.
  const double d3 = std::log(100.0 / 90) - std::log(200.0 / 220);
  EXPECT_NEAR(samples[2].variance, d3 * d3 / 2, 1e-12);
  // A side compared is never learned from: job-1 then runs alone.
  const std::vector<SpreadSample> without =
      OtherJobsCoupleSpreads(pointers, {"job-2"}, reference, key, v1::PHASE_TRAIN, 0.5);
  ASSERT_EQ(without.size(), 3u);
  EXPECT_NEAR(without[0].variance, std::pow(std::log(1.2), 2), 1e-12);
  EXPECT_EQ(without[0].jobs, 1);
  // Eight samples make a prior; it counts their jobs.
  std::vector<SpreadSample> eight(8, SpreadSample{1e-4, 1, 2});
  eight[0].variance = 4e-4;
  EXPECT_EQ(FitSpreadPrior(eight).jobs, 16);
  EXPECT_GT(FitSpreadPrior(eight).df, 0);
  eight.pop_back();
  EXPECT_EQ(FitSpreadPrior(eight).df, 0);
}

// `n` couples of runs of `steps` steps: couple i's runs share the machine's drift (lognormal, `drift`), each
// run adds its own (`own`), B's are `change` slower; steps spread 1% around their run's median.
void Couple(int n, double drift, double own, double change, std::mt19937_64& rng, std::vector<std::vector<double>>* a,
            std::vector<std::vector<double>>* b) {
  std::normal_distribution<double> shared(0, drift), alone(0, own);
  a->clear();
  b->clear();
  for (int i = 0; i < n; ++i) {
    const double level = shared(rng);
    for (auto* side : {a, b}) {
      const double median = 25'000 * std::exp(level + alone(rng)) * (side == b ? 1 + change : 1);
      std::lognormal_distribution<double> step(std::log(median), 0.01);
      std::vector<double>& steps = side->emplace_back();
      for (int s = 0; s < 60; ++s) steps.push_back(step(rng));
    }
  }
}

// The prior's differences: `pairs` earlier pairs of jobs of 3 couples each, drawn as Couple draws them.
RunSpreadPrior PairedPrior(int pairs, double drift, double own, std::mt19937_64& rng) {
  std::vector<std::vector<double>> differences;
  std::vector<std::vector<double>> a, b;
  for (int p = 0; p < pairs; ++p) {
    Couple(3, drift, own, 0, rng, &a, &b);
    std::vector<double>& d = differences.emplace_back();
    for (size_t i = 0; i < a.size(); ++i) {
      std::vector<double> x = a[i], y = b[i];
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      d.push_back(std::log(y[y.size() / 2] / x[x.size() / 2]));
    }
  }
  RunSpreadPrior prior = FitRunSpreadPrior(differences);
  prior.paired = true;
  return prior;
}

TEST(PairedRunsTest, PairedRunsKeepTheirFalseAlarmRateAndFindMoreWhereCouplesShareDrift) {
  // The machine drifts by 3% between couples, each run adds 1% of its own (as one LibTorch thread's runs
  // correlated on this project's VM, docs/compare-measured.md); 3 couples, 300 A/A and 300 A/B (5% slower) trials,
  // each with the prior from 30 earlier pairs of jobs. Pooled: CompareRuns on the same runs, its prior from
  // the same jobs taken one by one.
  std::mt19937_64 rng(20261201);
  constexpr int kTrials = 300;
  int alarms[2] = {0, 0}, found[2] = {0, 0};  // [0] pooled, [1] paired
  std::vector<std::vector<double>> a, a2, b, b2;
  for (int trial = 0; trial < kTrials; ++trial) {
    const RunSpreadPrior paired = PairedPrior(30, 0.03, 0.01, rng);
    ASSERT_GT(paired.df, 0);
    std::vector<std::vector<double>> jobs;
    for (int j = 0; j < 30; ++j) {
      Couple(3, 0.03, 0.01, 0, rng, &a, &b);
      for (const auto* side : {&a, &b}) {
        std::vector<double>& logs = jobs.emplace_back();
        for (const std::vector<double>& run : *side) {
          std::vector<double> v = run;
          std::sort(v.begin(), v.end());
          logs.push_back(std::log(v[v.size() / 2]));
        }
      }
    }
    const RunSpreadPrior pooled = FitRunSpreadPrior(jobs);
    Couple(3, 0.03, 0.01, 0, rng, &a, &a2);
    Couple(3, 0.03, 0.01, 0.05, rng, &b, &b2);
    const auto seed = static_cast<uint64_t>(trial);
    const StepComparison aa[2] = {CompareRuns(a, a2, 0.02, 0.5, true, pooled, 200, seed),
                                  ComparePairedRuns(a, a2, 0.02, 0.5, paired)};
    const StepComparison ab[2] = {CompareRuns(b, b2, 0.02, 0.5, true, pooled, 200, seed),
                                  ComparePairedRuns(b, b2, 0.02, 0.5, paired)};
    for (int k = 0; k < 2; ++k) {
      alarms[k] += aa[k].verdict != "no change" ? 1 : 0;
      found[k] += ab[k].verdict == "slower" ? 1 : 0;
    }
    EXPECT_EQ(ab[1].paired_runs, (Couples{{0, 0}, {1, 1}, {2, 2}}));
    EXPECT_NEAR(std::log(ab[1].ratio), std::log(ab[0].ratio), 1e-9) << "the same ratio of geometric means";
  }
  std::printf("pooled: %d A/A alarms, %d of %d found; paired: %d alarms, %d found\n", alarms[0], found[0], kTrials,
              alarms[1], found[1]);
  // 5% of 300 is 15; 27 lies 3 standard deviations above it.
  EXPECT_LE(alarms[1], 27);
  EXPECT_GE(found[1], found[0] + kTrials / 5);
}

TEST(PairedRunsTest, WithoutSharedDriftPairingKeepsItsFalseAlarmRate) {
  // Couples that share nothing (each run 2% on its own): pairing gains nothing, and must not cry wolf.
  std::mt19937_64 rng(7);
  constexpr int kTrials = 300;
  int alarms = 0;
  std::vector<std::vector<double>> a, a2;
  for (int trial = 0; trial < kTrials; ++trial) {
    const RunSpreadPrior prior = PairedPrior(30, 0, 0.02, rng);
    Couple(3, 0, 0.02, 0, rng, &a, &a2);
    alarms += ComparePairedRuns(a, a2, 0.02, 0.5, prior).verdict != "no change" ? 1 : 0;
  }
  std::printf("no shared drift: %d A/A alarms of %d\n", alarms, kTrials);
  EXPECT_LE(alarms, 27);
}

TEST(PairedRunsTest, ACoupleNeedsBothRunsAndTwoCouplesAreNeeded) {
  std::mt19937_64 rng(3);
  std::vector<std::vector<double>> a, b;
  Couple(3, 0.03, 0.01, 0, rng, &a, &b);
  b[1].resize(3);  // too few steps: couple 2 is skipped
  const StepComparison c = ComparePairedRuns(a, b, 0.02);
  EXPECT_EQ(c.paired_runs, (Couples{{0, 0}, {2, 2}}));
  EXPECT_EQ(c.runs_a, 2);
  EXPECT_EQ(c.df, 1);
  a.resize(2);
  b[0].resize(3);
  EXPECT_EQ(ComparePairedRuns(a, b, 0.02).verdict, "too few runs");
}

// Twenty earlier pairs of jobs ("old-<p>-a", "old-<p>-b") whose 3 runs took turns on agent-1's cpu0 at times 1 to
// 120, then the sides compared, "job-a" and "job-b", A B A B B A from time 121 (jobs 40 and 41). An earlier couple's
// runs share the machine's drift (lognormal, `drift`), B's as `b_follows` of A's (1: the same, -1: the opposite),
// each adds its own (`own`).
std::vector<v1::Job> TookTurns(double drift, double own, double b_follows, std::mt19937_64& rng) {
  std::normal_distribution<double> shared(0, drift), alone(0, own);
  std::vector<v1::Job> jobs;
  double t = 1;
  for (int p = 0; p < 20; ++p) {
    std::vector<v1::Task> x, y;
    const std::string ix = absl::StrCat("old-", p, "-a"), iy = absl::StrCat("old-", p, "-b");
    for (int r = 1; r <= 3; ++r) {
      const double level = shared(rng);
      x.push_back(StoredRun(ix, r, t++, 1e5 * std::exp(level + alone(rng))));
      y.push_back(StoredRun(iy, r, t++, 1e5 * std::exp(b_follows * level + alone(rng))));
    }
    jobs.push_back(StoredJob(ix, x));
    jobs.push_back(StoredJob(iy, y));
  }
  const double starts_a[] = {t, t + 2, t + 5}, starts_b[] = {t + 1, t + 3, t + 4};
  std::vector<v1::Task> ra, rb;
  for (int r = 0; r < 3; ++r) {
    ra.push_back(StoredRun("job-a", r + 1, starts_a[r], 1e5));
    rb.push_back(StoredRun("job-b", r + 1, starts_b[r], 1e5));
  }
  jobs.push_back(StoredJob("job-a", ra));
  jobs.push_back(StoredJob("job-b", rb));
  return jobs;
}

// TookTurns' sides compared on train, all its jobs as the others, on 3 couples of runs drawn as Couple draws them.
struct TurnsCompared {
  std::vector<const v1::Job*> others;
  RunPair pair;
  std::vector<std::vector<double>> steps_a, steps_b;
  StepComparison c;
};
TurnsCompared CompareTurns(const std::vector<v1::Job>& jobs, std::mt19937_64& rng) {
  TurnsCompared out;
  for (const v1::Job& j : jobs) out.others.push_back(&j);
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&jobs[40]}, {&jobs[41]}, false, &unpaired);
  EXPECT_EQ(pairs.size(), 1u);
  out.pair = pairs.at(0);
  Couple(3, 0.03, 0.007, 0, rng, &out.steps_a, &out.steps_b);
  out.c = CompareRunPhase(out.pair, v1::PHASE_TRAIN, out.steps_a, out.steps_b, 0.02, false, out.others);
  return out;
}

TEST(PairedRunsTest, CompareRunPhasePairsRunsThatTookTurnsAndSaysSo) {
  // Twenty earlier pairs of jobs whose 3 runs took turns, their couples' differences spread ~1%; then the
  // sides compared, A B A B B A in time, on one machine.
  std::mt19937_64 rng(11);
  std::normal_distribution<double> drift(0, 0.03), own(0, 0.007);
  const std::vector<v1::Job> jobs = TookTurns(0.03, 0.007, 1, rng);
  const double t = 121;
  const TurnsCompared turned = CompareTurns(jobs, rng);
  const StepComparison& c = turned.c;
  const std::vector<std::vector<double>>&steps_a = turned.steps_a, &steps_b = turned.steps_b;
  std::vector<std::string> unpaired;
  EXPECT_EQ(c.paired_runs, (Couples{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_TRUE(c.spread_prior.paired);
  EXPECT_EQ(c.spread_prior.jobs, 40);  // 20 pairs of jobs
  const PairResult result{turned.pair, v1::PHASE_TRAIN, c};
  EXPECT_THAT(RunNotesLine(result), HasSubstr("runs paired by time (they took turns on one machine: A1-B1, A2-B2, "
                                              "A3-B3)"));
  EXPECT_THAT(RunNotesLine(result), HasSubstr("the runs next to each other in 40 other jobs"));
  const auto doc = nlohmann::json::parse(RenderComparison("job-a", "job-b", {result}, {}, 0.02, "json"));
  EXPECT_EQ(doc["pairs"][0]["variance"], "paired");
  EXPECT_EQ(doc["pairs"][0]["paired_runs"][2]["run_b"], 3);
  EXPECT_EQ(doc["pairs"][0]["run_spread_prior"]["other_jobs"], 40);
  EXPECT_EQ(doc["pairs"][0]["run_spread_prior"]["of"], "paired differences");
  // Without the earlier pairs there is no prior for the couples: runs compared unpaired, as before.
  const StepComparison alone = CompareRunPhase(turned.pair, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false);
  EXPECT_TRUE(alone.paired_runs.empty());
  EXPECT_EQ(alone.df, 4);
  // Single-run jobs submitted in turns, compared as JOB,JOB,JOB sides; the prior from ten other jobs of 2
  // runs each, run alone: paired too.
  std::vector<v1::Job> turns;
  for (int j = 0; j < 10; ++j) {
    const std::string id = absl::StrCat("rep-", j);
    const double level = 1e5 * std::exp(drift(rng));
    turns.push_back(StoredJob(id, {StoredRun(id, 1, 2 * j + 1, level * std::exp(own(rng))),
                                   StoredRun(id, 2, 2 * j + 2, level * std::exp(own(rng)))}));
  }
  for (int r = 0; r < 6; ++r) {
    const std::string id = absl::StrCat("turn-", r);
    turns.push_back(StoredJob(id, {StoredRun(id, 0, 100 + r, 1e5)}));
  }
  std::vector<const v1::Job*> turn_jobs;
  for (const v1::Job& j : turns) turn_jobs.push_back(&j);
  const std::vector<RunPair> single =
      PairRuns({&turns[10], &turns[12], &turns[14]}, {&turns[11], &turns[13], &turns[15]}, false, &unpaired);
  ASSERT_EQ(single.size(), 1u);
  ASSERT_EQ(single[0].a.size(), 3u);
  const StepComparison in_turns = CompareRunPhase(single[0], v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false, turn_jobs);
  EXPECT_EQ(in_turns.paired_runs, (Couples{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(in_turns.spread_prior.jobs, 10);
  // Runs one side after the other (A A A B B B): not paired, whatever the earlier jobs.
  std::vector<v1::Job> apart = {jobs[40], jobs[41]};
  for (int r = 0; r < 3; ++r) apart[1].mutable_tasks(r)->set_started_unix_seconds(t + 10 + r);
  const std::vector<RunPair> later = PairRuns({&apart[0]}, {&apart[1]}, false, &unpaired);
  EXPECT_TRUE(
      CompareRunPhase(later[0], v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false, turned.others).paired_runs.empty());
}

TEST(PairedRunsTest, RunsAreNotPairedWhereAdjacentRunsShareNoDrift) {
  // The earlier pairs' adjacent runs drift apart (B's opposite to A's): a couple's difference varies more than two
  // independent runs' would, so pairing would only cost degrees of freedom: compared unpaired, on the machine's run
  // spread. Where they share it, paired.
  for (const double b_follows : {-1.0, 1.0}) {
    std::mt19937_64 rng(13);
    const std::vector<v1::Job> jobs = TookTurns(0.03, 0.007, b_follows, rng);
    const TurnsCompared turned = CompareTurns(jobs, rng);
    const StepComparison& c = turned.c;
    SCOPED_TRACE(b_follows);
    EXPECT_EQ(c.paired_runs.empty(), b_follows < 0);
    EXPECT_EQ(c.spread_prior.paired, b_follows > 0);
    EXPECT_EQ(c.spread_prior.jobs, 40);
    // Declined, the comparison says why, in the table's notes and the JSON.
    const PairResult result{turned.pair, v1::PHASE_TRAIN, c};
    const auto doc = nlohmann::json::parse(RenderComparison("job-a", "job-b", {result}, {}, 0.02, "json"));
    if (b_follows < 0) {
      EXPECT_THAT(c.unpaired_note, HasSubstr("runs next to each other share none of its drift"));
      EXPECT_THAT(c.unpaired_note, HasSubstr("in 40 other jobs that took turns, more than two independent runs'"));
      EXPECT_THAT(RunNotesLine(result), HasSubstr("runs took turns but were compared unpaired"));
      EXPECT_EQ(doc["pairs"][0]["unpaired_because"], c.unpaired_note);
      EXPECT_EQ(doc["pairs"][0]["variance"], "pooled");
    } else {
      EXPECT_TRUE(c.unpaired_note.empty());
      EXPECT_FALSE(doc["pairs"][0].contains("unpaired_because"));
    }
  }
}

}  // namespace
}  // namespace hetbench::report
