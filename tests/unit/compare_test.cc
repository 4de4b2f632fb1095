// `hetbench compare`: the statistics (rank test, bootstrap interval,
// verdict at the threshold), the pairing of tasks, and the JSON it writes.
#include "report/compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_format.h"
#include "common/stats.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;

std::vector<double> Noisy(int n, double median, double spread, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> d(std::log(median), spread);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(d(rng));
  return out;
}

// Runs whose medians shift from run to run by `run_spread` (lognormal), each
// with `n` steps of `step_spread` around its own median.
std::vector<std::vector<double>> Runs(int runs, int n, double median, double run_spread, double step_spread,
                                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> shift(0, run_spread);
  std::vector<std::vector<double>> out;
  for (int r = 0; r < runs; ++r) out.push_back(Noisy(n, median * shift(rng), step_spread, seed * 100 + r));
  return out;
}

TEST(CompareTest, RunsComparedAsRunsSeeTheNoiseBetweenRunsThatStepsCannot) {
  // Whole runs shift by ~4% while each run's steps are tight (1%): one run
  // against one run is called different most of the time, three against
  // three by their medians almost never.
  int step_alarms = 0, run_alarms = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const auto a = Runs(3, 300, 25'000, 0.04, 0.01, seed), b = Runs(3, 300, 25'000, 0.04, 0.01, seed + 1000);
    step_alarms += CompareSteps(a[0], b[0], 0.02).verdict != "no change" ? 1 : 0;
    const StepComparison c = CompareRuns(a, b, 0.02);
    EXPECT_EQ(c.runs_a, 3);
    EXPECT_EQ(c.n_a, 900) << "every step of every run";
    EXPECT_LE(c.ci_low, c.ratio);
    EXPECT_GE(c.ci_high, c.ratio);
    run_alarms += c.verdict != "no change" ? 1 : 0;
  }
  EXPECT_GE(step_alarms, 15) << "one run each: the shift between runs looks like a change";
  EXPECT_LE(run_alarms, 2) << "3 runs each: the interval covers the shift between runs";
  // A real 20% slowdown with the same noise is still found.
  const auto a = Runs(3, 300, 25'000, 0.04, 0.01, 7), b = Runs(3, 300, 30'000, 0.04, 0.01, 8);
  EXPECT_EQ(CompareRuns(a, b, 0.02).verdict, "slower");
  EXPECT_EQ(CompareRuns({a[0]}, b, 0.02).verdict, "too few runs");
}

TEST(CompareTest, MannWhitneyMatchesTheTextbookValue) {
  // U = 0 for two separated samples of 5: z = (12.5 - 0.5) / sqrt(25 x 11 / 12).
  EXPECT_NEAR(MannWhitneyP({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 0.01219, 5e-5);
  EXPECT_NEAR(MannWhitneyP({1, 2, 3}, {1, 2, 3}), 1.0, 1e-12);
  // Ties are ranked by their mean rank and corrected for.
  EXPECT_GT(MannWhitneyP({1, 1, 1, 2}, {1, 1, 2, 2}), 0.3);
}

TEST(CompareTest, TheSameDistributionIsNoChangeAndATenPercentSlowdownIsSlower) {
  const std::vector<double> a = Noisy(400, 25'000, 0.05, 1);
  const StepComparison same = CompareSteps(a, Noisy(400, 25'000, 0.05, 2), 0.02);
  EXPECT_EQ(same.verdict, "no change");
  EXPECT_LT(same.ci_low, 1.0);
  EXPECT_GT(same.ci_high, 1.0);
  EXPECT_GT(same.p_value, 0.01);

  const StepComparison slow = CompareSteps(a, Noisy(400, 27'500, 0.05, 3), 0.02);
  EXPECT_EQ(slow.verdict, "slower");
  EXPECT_NEAR(slow.ratio, 1.10, 0.02);
  EXPECT_LT(slow.ci_low, 1.10);
  EXPECT_GT(slow.ci_high, 1.10);
  EXPECT_LT(slow.p_value, 1e-6);

  EXPECT_EQ(CompareSteps(a, Noisy(400, 22'000, 0.05, 4), 0.02).verdict, "faster");
  // 1% faster, clearly real (p tiny), but under the 2% threshold.
  const StepComparison small = CompareSteps(a, Noisy(4000, 24'750, 0.01, 5), 0.02);
  EXPECT_EQ(small.verdict, "no change");
  EXPECT_EQ(CompareSteps({1, 2, 3}, a, 0.02).verdict, "too few steps");
}

TEST(CompareTest, NoVerdictOnAnInvalidPhaseUnlessAskedAndThenItIsMarked) {
  v1::Task a, b;
  for (v1::Task* t : {&a, &b}) {
    v1::PhaseResult* p = t->mutable_result()->add_phases();
    p->set_phase(v1::PHASE_TRAIN);
    p->set_valid(true);
  }
  const std::vector<double> steps_a = Noisy(400, 25'000, 0.05, 1), steps_b = Noisy(400, 17'500, 0.05, 2);
  const StepComparison valid = ComparePhase(a, b, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false);
  EXPECT_EQ(valid.verdict, "faster");
  EXPECT_TRUE(valid.invalid.empty());
  EXPECT_TRUE(IsChange(valid));

  v1::PhaseResult* noisy = b.mutable_result()->mutable_phases(0);
  noisy->set_valid(false);
  noisy->add_invalid_reasons("too noisy: IQR/median = 0.564 > validity.max_iqr_over_median = 0.25");
  const StepComparison refused = ComparePhase(a, b, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false);
  EXPECT_EQ(refused.verdict, "not comparable: run B train INVALID (too noisy)");
  EXPECT_NEAR(refused.ratio, 0.7, 0.02) << "the figures are still shown";
  EXPECT_FALSE(IsChange(refused));
  const StepComparison anyway = ComparePhase(a, b, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, true);
  EXPECT_EQ(anyway.verdict, "faster (run B train INVALID (too noisy))");
  EXPECT_FALSE(IsChange(anyway));

  // Both sides invalid: both named. The other phase is judged on its own.
  a.mutable_result()->mutable_phases(0)->set_valid(false);
  a.mutable_result()->mutable_phases(0)->add_invalid_reasons("only 4 of 10 steps measured");
  EXPECT_EQ(ComparePhase(a, b, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false).verdict,
            "not comparable: run A train INVALID (only 4 of 10 steps measured), run B train INVALID (too noisy)");
  EXPECT_EQ(ComparePhase(a, b, v1::PHASE_INFER, steps_a, steps_b, 0.02, false).verdict, "faster");
}

TEST(CompareTest, AThresholdIsAPercentageOrAFraction) {
  EXPECT_DOUBLE_EQ(*ParseThreshold("2%"), 0.02);
  EXPECT_DOUBLE_EQ(*ParseThreshold("0.05"), 0.05);
  EXPECT_DOUBLE_EQ(*ParseThreshold(""), 0.02);
  for (const char* bad : {"100%", "1", "-1%", "two", "%", "nan", "NaN%", "inf", "-inf", "0", "0%", "1e-400"}) {
    auto t = ParseThreshold(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("expected a fraction in (0, 1) or a percentage"));
  }
  // Long input is quoted by a short prefix and its length, never whole.
  const std::string long_text(100'000, '7');
  auto t = ParseThreshold(long_text);
  ASSERT_FALSE(t.ok());
  EXPECT_LT(t.status().message().size(), 200u);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("...' (100000 characters)"));
}

TEST(CompareTest, TheIntervalIsReproducible) {
  const std::vector<double> a = Noisy(200, 1000, 0.1, 7), b = Noisy(200, 1030, 0.1, 8);
  const StepComparison x = CompareSteps(a, b, 0.02), y = CompareSteps(a, b, 0.02);
  EXPECT_EQ(x.ci_low, y.ci_low);
  EXPECT_EQ(x.ci_high, y.ci_high);
}

v1::Job JobOf(const std::string& id, const std::vector<int>& batches, const std::string& fingerprint) {
  v1::Job job;
  job.set_id(id);
  job.mutable_spec()->set_model("mlp");
  for (size_t i = 0; i < batches.size(); ++i) {
    v1::Task* t = job.add_tasks();
    t->set_id(id + "-t" + std::to_string(i));
    t->set_state(v1::TASK_STATE_SUCCEEDED);
    t->set_device_kind(v1::DEVICE_KIND_CPU);
    t->set_batch_size(batches[i]);
    t->mutable_result()->mutable_environment()->set_device_model("AMD EPYC");
    t->mutable_result()->mutable_environment()->set_executor("torch");
    t->mutable_result()->mutable_environment()->set_model_fingerprint(fingerprint);
  }
  return job;
}

// A job of 3 runs of one configuration on node-1/cpu0, run i with a
// machine probe of probes[i] (before, after) ns.
v1::Job ProbedRuns(const std::string& id, const std::vector<std::pair<int64_t, int64_t>>& probes) {
  v1::Job job = JobOf(id, {64, 64, 64}, "mlp/init=aa");
  for (int i = 0; i < 3; ++i) {
    v1::Task* t = job.mutable_tasks(i);
    t->set_run(i + 1);
    t->set_agent_id("node-1");
    t->set_device_id("node-1/cpu0");
    v1::MachineProbe* p = t->mutable_result()->mutable_machine_probe();
    p->set_kernel("sgemm 64x512x512 float32, LibTorch, 2 threads");
    p->set_before_ns(probes[i].first);
    p->set_after_ns(probes[i].second);
  }
  return job;
}

TEST(CompareTest, TasksPairByModelDeviceExecutorAndBatchAndFingerprintsMustMatch) {
  const v1::Job a = JobOf("job-1", {32, 64, 128}, "mlp/init=aa");
  const v1::Job b = JobOf("job-2", {64, 32, 256}, "mlp/init=aa");
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].a[0]->id(), "job-1-t0");
  EXPECT_EQ(pairs[0].b[0]->id(), "job-2-t1");  // batch 32 with batch 32
  EXPECT_THAT(pairs[0].key, HasSubstr("batch 32"));
  EXPECT_TRUE(pairs[0].refused.empty());
  ASSERT_EQ(unpaired.size(), 2u);  // 128 in a, 256 in b
  EXPECT_THAT(unpaired[0], HasSubstr("job-1-t2"));
  EXPECT_THAT(unpaired[1], HasSubstr("job-2-t2"));

  const v1::Job other = JobOf("job-3", {32}, "mlp/init=bb");
  unpaired.clear();
  const std::vector<RunPair> refused = PairRuns({&a}, {&other}, false, &unpaired);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0].refused, HasSubstr("model fingerprints differ"));
  EXPECT_THAT(refused[0].refused, HasSubstr("--compare-anyway"));
  unpaired.clear();
  EXPECT_TRUE(PairRuns({&a}, {&other}, true, &unpaired)[0].refused.empty());
}

TEST(CompareTest, ServingTasksPairByScenarioAndRate) {
  v1::Job a = JobOf("job-1", {8, 8}, "mlp/init=aa");
  v1::Job b = JobOf("job-2", {8, 8}, "mlp/init=aa");
  for (v1::Job* job : {&a, &b}) {
    for (int i = 0; i < 2; ++i) {
      v1::ServingRun* s = job->mutable_tasks(i)->mutable_result()->mutable_serving();
      s->set_scenario("server");
      s->set_target_qps(job == &a ? 100 * (i + 1) : 100 * (2 - i));  // b lists its rates the other way round
    }
  }
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].b[0]->id(), "job-2-t1") << "100 q/s with 100 q/s";
  EXPECT_THAT(pairs[0].key, HasSubstr("batch 8, serving server at 100 q/s"));
  EXPECT_TRUE(unpaired.empty());
  // A peak search pairs by scenario: its rate is what it found.
  a.mutable_tasks(0)->mutable_result()->mutable_serving()->set_scenario("peak");
  b.mutable_tasks(1)->mutable_result()->mutable_serving()->set_scenario("peak");
  b.mutable_tasks(1)->mutable_result()->mutable_serving()->set_target_qps(321);
  EXPECT_THAT(PairRuns({&a}, {&b}, false, &unpaired)[0].key, HasSubstr("serving peak"));
}

// Serving is judged on its tail: two latency distributions with the same
// median whose p99s differ by 1.5x are the same by the median and slower by
// the p99, which is what a serving phase is compared by.
TEST(CompareTest, AServingPhaseIsComparedByItsReportedPercentile) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> body(1e6, 2e4);
  std::vector<double> a, b;
  for (int i = 0; i < 4000; ++i) {
    const bool tail = i % 50 == 0;  // 2% of queries in the tail
    a.push_back(tail ? 2e6 : body(rng));
    b.push_back(tail ? 3e6 : body(rng));
  }
  const StepComparison by_median = CompareSteps(a, b, 0.02);
  EXPECT_EQ(by_median.verdict, "no change");
  EXPECT_EQ(StatisticName(by_median.quantile), "median");
  const StepComparison by_p99 = CompareSteps(a, b, 0.02, 2000, 20261122, 0.99);
  EXPECT_EQ(by_p99.verdict, "slower");
  EXPECT_EQ(StatisticName(by_p99.quantile), "p99");
  EXPECT_DOUBLE_EQ(by_p99.stat_a_ns, 2e6);  // nearest rank: within the 2% tail
  EXPECT_DOUBLE_EQ(by_p99.stat_b_ns, 3e6);
  EXPECT_NEAR(by_p99.ratio, 1.5, 1e-9);
  EXPECT_NEAR(by_p99.median_b_ns / by_p99.median_a_ns, 1, 0.01);  // the medians still reported

  v1::Task serving;
  serving.mutable_result()->mutable_serving()->set_scenario("server");
  serving.mutable_result()->mutable_serving()->set_percentile(99);
  EXPECT_DOUBLE_EQ(ComparedQuantile(serving, v1::PHASE_SERVE), 0.99);
  EXPECT_DOUBLE_EQ(ComparedQuantile(serving, v1::PHASE_TRAIN), 0.5);
  serving.mutable_result()->mutable_serving()->set_percentile(0);  // offline reports no percentile
  EXPECT_DOUBLE_EQ(ComparedQuantile(serving, v1::PHASE_SERVE), 0.5);
}

TEST(CompareTest, TheJsonNamesItsSchemaMethodAndEveryPair) {
  const v1::Job a = JobOf("job-1", {32}, "f"), b = JobOf("job-2", {32}, "f");
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  std::vector<PairResult> results = {{pairs[0], v1::PHASE_TRAIN,
                                      CompareRunPhase(pairs[0], v1::PHASE_TRAIN, {Noisy(50, 100, 0.05, 1)},
                                                      {Noisy(50, 120, 0.05, 2)}, 0.02, false)}};
  const auto doc = nlohmann::json::parse(RenderComparison("job-1", "job-2", results, unpaired, 0.02, "json"));
  EXPECT_EQ(doc["schema"], "hetbench.compare/v1");
  EXPECT_EQ(doc["pairs"].size(), 1u);
  EXPECT_EQ(doc["pairs"][0]["verdict"], "slower");
  EXPECT_EQ(doc["pairs"][0]["phase"], "train");
  EXPECT_EQ(doc["pairs"][0]["ci95"].size(), 2u);
  EXPECT_EQ(doc["pairs"][0]["runs_a"], 1);
  EXPECT_THAT(doc["pairs"][0]["note"].get<std::string>(), HasSubstr("ignores run-to-run variance"));
  const std::string table = RenderComparison("job-1", "job-2", results, unpaired, 0.02, "table");
  EXPECT_THAT(table, HasSubstr("slower *"));
  EXPECT_THAT(table, HasSubstr("Mann-Whitney"));
  EXPECT_THAT(table, HasSubstr("--repeats 3"));
  EXPECT_THAT(RenderComparison("job-1", "job-2", results, unpaired, 0.02, "csv"),
              HasSubstr("pair,phase,runs_a,runs_b,"));
}

// A job with `repeats` carries its runs: its tasks of one configuration are
// one side's runs, compared as runs (no note), and an INVALID run withholds
// the verdict, naming the run.
TEST(CompareTest, AJobWithRepeatsIsASideOfRuns) {
  auto repeated = [](const std::string& id, int runs) {
    v1::Job job = JobOf(id, std::vector<int>(static_cast<size_t>(runs), 64), "mlp/init=aa");
    for (int i = 0; i < runs; ++i) job.mutable_tasks(i)->set_run(i + 1);
    return job;
  };
  const v1::Job a = repeated("job-1", 3), b = repeated("job-2", 3), single = JobOf("job-3", {64}, "mlp/init=aa");
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_TRUE(unpaired.empty());
  ASSERT_EQ(pairs[0].a.size(), 3u);
  ASSERT_EQ(pairs[0].b.size(), 3u);
  EXPECT_EQ(pairs[0].b[2]->id(), "job-2-t2");
  const auto ra = Runs(3, 200, 25'000, 0.01, 0.02, 11), rb = Runs(3, 200, 30'000, 0.01, 0.02, 12);
  const StepComparison runs = CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_EQ(runs.runs_a, 3);
  EXPECT_EQ(runs.runs_b, 3);
  EXPECT_EQ(runs.verdict, "slower");
  EXPECT_TRUE(runs.note.empty());
  // Two tasks of one job that the key cannot tell apart are two configurations, not two runs.
  const v1::Job twins = JobOf("job-4", {64, 64}, "mlp/init=aa");
  const std::vector<RunPair> twin_pairs = PairRuns({&twins}, {&twins}, false, &unpaired);
  ASSERT_EQ(twin_pairs.size(), 2u);
  EXPECT_EQ(twin_pairs[1].a.size(), 1u);
  EXPECT_EQ(twin_pairs[1].b[0]->id(), "job-4-t1");
  // Against a job of one run: the first runs' steps, and the note says what that ignores.
  const std::vector<RunPair> mixed = PairRuns({&a}, {&single}, false, &unpaired);
  ASSERT_EQ(mixed.size(), 1u);
  const StepComparison one = CompareRunPhase(mixed[0], v1::PHASE_TRAIN, ra, {rb[0]}, 0.02, false);
  EXPECT_EQ(one.runs_b, 1);
  EXPECT_THAT(one.note, HasSubstr("ignores run-to-run variance"));
  // An INVALID second run of B: no verdict, and the run is named.
  v1::Job b_invalid = b;
  v1::PhaseResult* p = b_invalid.mutable_tasks(1)->mutable_result()->add_phases();
  p->set_phase(v1::PHASE_TRAIN);
  p->set_valid(false);
  p->add_invalid_reasons("too noisy: IQR/median = 0.6");
  const std::vector<RunPair> with_invalid = PairRuns({&a}, {&b_invalid}, false, &unpaired);
  const StepComparison withheld = CompareRunPhase(with_invalid[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_EQ(withheld.verdict, "not comparable: run B (job-2-t1, run 2) train INVALID (too noisy)");
  EXPECT_FALSE(IsChange(withheld));
}

// A run in another machine state (this VM's slow state moves a whole run by
// 20-30%) is named with its ratio to its side's median run, in the note, the
// JSON and the table; it stays in the comparison, whose interval it widens.
// Runs within 10% of their side's median run, or sides of 2 runs, name none.
TEST(CompareTest, ARunFarFromItsSidesMedianRunIsNamed) {
  auto repeated = [](const std::string& id) {
    v1::Job job = JobOf(id, {64, 64, 64}, "mlp/init=aa");
    for (int i = 0; i < 3; ++i) job.mutable_tasks(i)->set_run(i + 1);
    return job;
  };
  const v1::Job a = repeated("job-1"), b = repeated("job-2");
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  ASSERT_EQ(pairs.size(), 1u);
  const auto ra = Runs(3, 200, 25'000, 0.01, 0.02, 21);
  auto rb = Runs(3, 200, 25'000, 0.01, 0.02, 22);
  const StepComparison near = CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_TRUE(near.far_runs.empty());
  EXPECT_TRUE(near.far_runs_note.empty());
  for (double& v : rb[1]) v *= 1.25;  // B's second run in the slow state
  const StepComparison far = CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  ASSERT_EQ(far.far_runs.size(), 1u);
  EXPECT_TRUE(far.far_runs[0].side_b);
  EXPECT_EQ(far.far_runs[0].run, 1u);
  EXPECT_NEAR(far.far_runs[0].ratio_to_median, 1.25, 0.03);
  EXPECT_THAT(far.far_runs_note, HasSubstr("B run 2 (job-2-t1, run 2) at 1.2"));
  EXPECT_EQ(far.runs_b, 3) << "it stays in";
  EXPECT_GT(far.ci_high / far.ci_low, near.ci_high / near.ci_low) << "and widens the interval";
  EXPECT_EQ(far.verdict, "no change");
  const std::vector<PairResult> results = {{pairs[0], v1::PHASE_TRAIN, far}};
  const auto doc = nlohmann::json::parse(RenderComparison("job-1", "job-2", results, unpaired, 0.02, "json"));
  const auto& named = doc["pairs"][0]["far_runs"];
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0]["side"], "b");
  EXPECT_EQ(named[0]["run"], 2);
  EXPECT_EQ(named[0]["task"], "job-2-t1");
  EXPECT_THAT(RenderComparison("job-1", "job-2", results, unpaired, 0.02, "table"),
              HasSubstr("train: runs beyond +/-10% of their side's median run"));
  // Two runs a side make no median run to be far from.
  const StepComparison two = CompareRuns({ra[0], ra[1]}, {rb[0], rb[1]}, 0.02);
  EXPECT_TRUE(two.far_runs.empty());
}

// The machine probe, timed by the agent around each run, says whether the
// machine was in another state: when it differs by more than 5% between the
// sides on one device and thread count, a slowdown that is only the
// machine's gets no verdict; within 5%, or on another device, the rule says
// nothing.
TEST(CompareTest, AMachineProbeThatDiffersBetweenTheSidesWithholdsTheVerdict) {
  auto repeated = [](const std::string& id, int64_t ns) {
    return ProbedRuns(id, {{ns, ns}, {ns + 1000, ns - 1000}, {ns + 2000, ns - 2000}});
  };
  const auto ra = Runs(3, 200, 25'000, 0.005, 0.02, 31);
  const auto rb = Runs(3, 200, 25'000 * 1.25, 0.005, 0.02, 32);  // B 25% slower: the VM's slow state
  auto judge = [&](const v1::Job& a, const v1::Job& b, bool anyway) {
    std::vector<std::string> unpaired;
    const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
    EXPECT_EQ(pairs.size(), 1u);
    return CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, rb, 0.02, anyway);
  };
  const v1::Job fast = repeated("job-1", 150'000), slow = repeated("job-2", 180'000);
  const StepComparison withheld = judge(fast, slow, false);
  EXPECT_THAT(withheld.verdict,
              HasSubstr("not comparable: the machine differed: its probe took 1.20x as long around B's runs"));
  EXPECT_FALSE(IsChange(withheld));
  EXPECT_NEAR(withheld.ratio, 1.25, 0.02) << "the figures are still shown";
  const StepComparison marked = judge(fast, slow, true);
  EXPECT_THAT(marked.verdict, HasSubstr("slower (the machine differed"));
  EXPECT_FALSE(IsChange(marked));
  // One run a side: the same rule.
  EXPECT_THAT(ComparePhase(fast.tasks(0), slow.tasks(0), v1::PHASE_TRAIN, ra[0], rb[0], 0.02, false).verdict,
              HasSubstr("not comparable: the machine differed"));
  // Within 5%: the machine's usual drift, judged as before.
  EXPECT_EQ(judge(fast, repeated("job-3", 156'000), false).verdict, "slower");
  // Another agent, another thread count, or a run without a probe: the probes say nothing.
  v1::Job elsewhere = slow;
  elsewhere.mutable_tasks(1)->set_agent_id("node-2");
  EXPECT_EQ(judge(fast, elsewhere, false).verdict, "slower");
  v1::Job threads = slow;
  threads.mutable_tasks(0)->mutable_result()->mutable_machine_probe()->set_kernel(
      "sgemm 64x512x512 float32, LibTorch, 1 thread");
  EXPECT_EQ(judge(fast, threads, false).verdict, "slower");
  v1::Job unprobed = slow;
  unprobed.mutable_tasks(2)->mutable_result()->clear_machine_probe();
  EXPECT_EQ(judge(fast, unprobed, false).verdict, "slower");
  EXPECT_EQ(JudgeMachine({&fast.tasks(0)}, {&fast.tasks(1)}, false).differed, "");
  EXPECT_NEAR(withheld.probe_ratio, 1.2, 0.001);
}

// Runs taken in another machine state are left out, so the comparison is
// made within one state: B's second run met the slow state (its probe and
// its steps 25% slower); without it A and B are the same. A reading spoiled
// by something holding a core for a moment (8 ms a call) leaves its run out
// and moves nothing else. When a side would keep fewer than 2 runs, the
// verdict is withheld instead.
TEST(CompareTest, RunsTakenInAnotherMachineStateAreLeftOut) {
  const auto probed = ProbedRuns;
  auto ra = Runs(3, 200, 25'000, 0.005, 0.02, 41), rb = Runs(3, 200, 25'000, 0.005, 0.02, 42);
  for (double& v : rb[1]) v *= 1.25;  // B's second run in the slow state
  const v1::Job a = probed("job-1", {{150'000, 151'000}, {152'000, 150'000}, {149'000, 151'000}});
  const v1::Job b = probed("job-2", {{151'000, 150'000}, {180'000, 181'000}, {150'000, 152'000}});
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  ASSERT_EQ(pairs.size(), 1u);
  const StepComparison c = CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_EQ(c.verdict, "no change");
  EXPECT_EQ(c.runs_a, 3);
  EXPECT_EQ(c.runs_b, 2);
  ASSERT_EQ(c.left_out.size(), 1u);
  EXPECT_TRUE(c.left_out[0].side_b);
  EXPECT_EQ(c.left_out[0].run, 1u);
  EXPECT_NEAR(c.left_out[0].ratio_to_median, 1.2, 0.01);
  EXPECT_THAT(c.left_out_note, HasSubstr("runs left out, taken in another machine state"));
  EXPECT_THAT(c.left_out_note, HasSubstr("B run 2 (job-2-t1, run 2): probe 1.20x the median reading"));
  EXPECT_TRUE(c.pooled) << "every run on node-1/cpu0";
  EXPECT_NEAR(c.ratio, 1.0, 0.01);
  PairResult r{pairs[0], v1::PHASE_TRAIN, c};
  EXPECT_THAT(RunNotesLine(r), HasSubstr("train: runs left out"));
  const std::string json = RenderComparison("job-1", "job-2", {r}, {}, 0.02, "json");
  EXPECT_THAT(json, HasSubstr("\"ratio_b_over_a\""));
  EXPECT_THAT(json, HasSubstr("\"ratio_to_median_reading\""));
  EXPECT_THAT(json, HasSubstr("\"variance\": \"pooled\""));
  // Kept in, the slow run would have widened the interval: the same data judged without the probes.
  v1::Job bare_a = a, bare_b = b;
  for (v1::Job* j : {&bare_a, &bare_b}) {
    for (v1::Task& t : *j->mutable_tasks()) t.mutable_result()->clear_machine_probe();
  }
  const std::vector<RunPair> bare = PairRuns({&bare_a}, {&bare_b}, false, &unpaired);
  const StepComparison kept = CompareRunPhase(bare[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_EQ(kept.runs_b, 3);
  EXPECT_TRUE(kept.left_out.empty());
  EXPECT_GT(std::log(kept.ci_high / kept.ci_low), 3 * std::log(c.ci_high / c.ci_low));

  // One reading taken while something held the other core: 8 ms a call.
  const v1::Job spoiled = probed("job-3", {{8'000'000, 151'000}, {150'000, 152'000}, {151'000, 150'000}});
  auto rc = Runs(3, 200, 25'000 * 1.05, 0.005, 0.02, 43);
  const std::vector<RunPair> sp = PairRuns({&spoiled}, {&a}, false, &unpaired);
  const StepComparison s = CompareRunPhase(sp[0], v1::PHASE_TRAIN, rc, ra, 0.02, false);
  ASSERT_EQ(s.left_out.size(), 1u);
  EXPECT_FALSE(s.left_out[0].side_b);
  EXPECT_EQ(s.left_out[0].run, 0u);
  EXPECT_EQ(s.verdict, "faster") << "B is A's 5% faster runs, judged on A's other two";
  EXPECT_NEAR(s.probe_ratio, 1.0, 0.02);

  // Two of B's three runs in another state: no verdict, by the sides' medians.
  const v1::Job mostly = probed("job-4", {{180'000, 181'000}, {151'000, 150'000}, {182'000, 180'000}});
  const std::vector<RunPair> mp = PairRuns({&a}, {&mostly}, false, &unpaired);
  const StepComparison m = CompareRunPhase(mp[0], v1::PHASE_TRAIN, ra, ra, 0.02, false);
  EXPECT_THAT(m.verdict, HasSubstr("not comparable: the machine differed: its probe took 1.20x as long around B's"));
  EXPECT_TRUE(m.left_out.empty());
  EXPECT_EQ(m.runs_b, 3);
  // Each side half in one state, half in the other (2 runs a side): the medians agree, but no side keeps 2 runs.
  std::vector<std::vector<double>> two = {ra[0], ra[1]};
  v1::Job half_a = probed("job-5", {{150'000, 150'000}, {180'000, 180'000}, {0, 0}}),
          half_b = probed("job-6", {{150'000, 151'000}, {181'000, 180'000}, {0, 0}});
  for (v1::Job* j : {&half_a, &half_b}) j->mutable_tasks()->RemoveLast();
  const std::vector<RunPair> hp = PairRuns({&half_a}, {&half_b}, false, &unpaired);
  const StepComparison h = CompareRunPhase(hp[0], v1::PHASE_TRAIN, two, two, 0.02, false);
  EXPECT_THAT(h.verdict, HasSubstr("not comparable: the machine differed: 2 of A's 2 runs were taken in another "
                                   "state"));
}

// Runs taken in two machine states, both sides with runs in each (A fast,
// fast, slow; B fast, slow, slow): no state holds most readings, so the
// rules above would withhold the verdict; within states the state's effect
// (probe 1.2x, steps 1.3x) cancels and B's 5% slowdown is found.
TEST(CompareTest, RunsInTwoMachineStatesAreComparedWithinThem) {
  const auto probed = ProbedRuns;
  auto slow_state = [](std::vector<std::vector<double>> runs, std::vector<int> slow) {
    for (int r : slow) {
      for (double& v : runs[static_cast<size_t>(r)]) v *= 1.3;
    }
    return runs;
  };
  const auto ra = slow_state(Runs(3, 200, 25'000, 0.005, 0.02, 51), {2});
  const auto rb = slow_state(Runs(3, 200, 25'000 * 1.05, 0.005, 0.02, 52), {1, 2});
  const v1::Job a = probed("job-1", {{150'000, 151'000}, {151'000, 150'000}, {180'000, 181'000}});
  const v1::Job b = probed("job-2", {{150'000, 152'000}, {181'000, 180'000}, {180'000, 182'000}});
  EXPECT_THAT(
      JudgeMachine({&a.tasks(0), &a.tasks(1), &a.tasks(2)}, {&b.tasks(0), &b.tasks(1), &b.tasks(2)}, false).differed,
      HasSubstr("the machine differed"))
      << "by the sides' medians alone";
  std::vector<std::string> unpaired;
  const std::vector<RunPair> pairs = PairRuns({&a}, {&b}, false, &unpaired);
  ASSERT_EQ(pairs.size(), 1u);
  const StepComparison c = CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_EQ(c.verdict, "slower");
  EXPECT_TRUE(c.invalid.empty());
  EXPECT_NEAR(c.ratio, 1.05, 0.01);
  EXPECT_LT(c.ci_low, c.ratio);
  EXPECT_GT(c.ci_high, c.ratio);
  EXPECT_TRUE(c.pooled);
  EXPECT_EQ(c.runs_a, 3);
  EXPECT_EQ(c.runs_b, 3);
  EXPECT_THAT(c.states_a, ::testing::ElementsAre(0, 0, 1));
  EXPECT_THAT(c.states_b, ::testing::ElementsAre(0, 1, 1));
  EXPECT_NEAR(c.stat_a_ns, 25'000, 250) << "as if every run was in state 1, the state of most runs";
  EXPECT_NEAR(c.stat_b_ns, 25'000 * 1.05, 300);
  EXPECT_TRUE(c.left_out.empty());
  EXPECT_THAT(c.left_out_note, HasSubstr("compared within 2 machine states"));
  EXPECT_THAT(c.left_out_note, HasSubstr("state 1 (probe 1.00x state 1's first run): A runs 1, 2 and B run 1"));
  EXPECT_THAT(c.left_out_note, HasSubstr("state 2 (probe 1.20x state 1's first run): A run 3 and B runs 2, 3"));
  PairResult r{pairs[0], v1::PHASE_TRAIN, c};
  EXPECT_THAT(RunNotesLine(r), HasSubstr("compared within 2 machine states"));
  EXPECT_THAT(RenderComparison("job-1", "job-2", {r}, {}, 0.02, "json"), HasSubstr("\"within_states\""));

  // The same job on both sides, in the same states: no change.
  const auto ra2 = slow_state(Runs(3, 200, 25'000, 0.005, 0.02, 53), {1, 2});
  EXPECT_EQ(CompareRunPhase(pairs[0], v1::PHASE_TRAIN, ra, ra2, 0.02, false).verdict, "no change");

  // A run whose state changed during it (its readings 1.2x apart) is left out and named.
  const v1::Job changed = probed("job-3", {{150'000, 152'000}, {181'000, 180'000}, {180'000, 150'000}});
  const std::vector<RunPair> cp = PairRuns({&a}, {&changed}, false, &unpaired);
  const StepComparison ch = CompareRunPhase(cp[0], v1::PHASE_TRAIN, ra, rb, 0.02, false);
  EXPECT_TRUE(ch.invalid.empty()) << ch.verdict;
  EXPECT_EQ(ch.runs_b, 2);
  ASSERT_EQ(ch.left_out.size(), 1u);
  EXPECT_TRUE(ch.left_out[0].side_b);
  EXPECT_EQ(ch.left_out[0].run, 2u);
  EXPECT_THAT(ch.states_b, ::testing::ElementsAre(0, 1, -1));
  EXPECT_THAT(ch.left_out_note,
              HasSubstr("the state changed during the run: B run 3 (its probe 0.83x after as before)"));
  EXPECT_NEAR(ch.ratio, 1.05, 0.015);
}

// Within states the interval holds its level: A/A comparisons of 3 runs a
// side in two states (A fast, fast, slow; B fast, slow, slow; the slow state
// 20% slower), runs shifting by 2%, call "different" about 5% of the time;
// in one state it is the pooled two-sample t on the runs' log medians.
TEST(CompareTest, ComparisonsWithinStatesKeepTheirFalseAlarmRate) {
  constexpr int kTrials = 300;
  int alarms = 0;
  for (uint64_t seed = 1; seed <= kTrials; ++seed) {
    auto a = Runs(3, 60, 25'000, 0.02, 0.05, seed), b = Runs(3, 60, 25'000, 0.02, 0.05, seed + 100'000);
    for (double& v : a[2]) v *= 1.2;
    for (auto* run : {&b[1], &b[2]}) {
      for (double& v : *run) v *= 1.2;
    }
    const StepComparison c = CompareRunsWithinStates(a, {0, 0, 1}, b, {0, 1, 1}, 1e-9);
    ASSERT_NE(c.verdict, "too few runs");
    alarms += c.verdict != "no change" ? 1 : 0;
  }
  std::printf("A/A within two states over %d trials: %d alarms\n", kTrials, alarms);
  EXPECT_LE(alarms, kTrials * 8 / 100) << "at most the nominal 5% (plus sampling error)";
  EXPECT_GE(alarms, kTrials / 100) << "not so wide that it never sees anything";

  // One state: Student's two-sample t on the runs' log medians, by hand.
  const auto a = Runs(3, 60, 25'000, 0.02, 0.05, 7), b = Runs(3, 60, 26'000, 0.02, 0.05, 8);
  double la[3], lb[3], ma = 0, mb = 0;
  for (int i = 0; i < 3; ++i) {
    std::vector<double> x = a[i], y = b[i];
    la[i] = std::log(MedianInPlace(x));
    lb[i] = std::log(MedianInPlace(y));
    ma += la[i] / 3;
    mb += lb[i] / 3;
  }
  double ss = 0;
  for (int i = 0; i < 3; ++i) ss += (la[i] - ma) * (la[i] - ma) + (lb[i] - mb) * (lb[i] - mb);
  const double se = std::sqrt(ss / 4 * (1.0 / 3 + 1.0 / 3));
  const StepComparison one = CompareRunsWithinStates(a, {0, 0, 0}, b, {0, 0, 0}, 0.02);
  EXPECT_NEAR(one.ratio, std::exp(mb - ma), 1e-12);
  EXPECT_NEAR(std::log(one.ci_high), mb - ma + StudentTQuantile(0.975, 4) * se, 1e-9);
  EXPECT_NEAR(one.stat_a_ns, std::exp(ma), 1e-6);
  // Too few: a state holding one side only leaves nothing to compare there.
  EXPECT_EQ(CompareRunsWithinStates(a, {0, 0, 0}, b, {1, 1, 1}, 0.02).verdict, "too few runs");
}

// The hierarchical bootstrap's interval holds its level when whole runs
// shift: A/A comparisons of 3 runs a side, each run's median moved by a
// between-run shift (3%) much larger than its steps' own uncertainty, call
// "different" (the interval excludes 1, threshold ~0) about 5% of the time,
// as a 95% interval should; the steps of one run against one run, which
// cannot see the shift, call it most of the time.
TEST(CompareTest, TheHierarchicalBootstrapKeepsItsFalseAlarmRateWhenRunsShift) {
  constexpr int kTrials = 300;
  int run_alarms[2] = {0, 0}, covered[2] = {0, 0}, step_alarms = 0;  // [0] per side (Welch), [1] pooled
  for (uint64_t seed = 1; seed <= kTrials; ++seed) {
    const auto a = Runs(3, 60, 25'000, 0.03, 0.05, seed), b = Runs(3, 60, 25'000, 0.03, 0.05, seed + 100'000);
    for (int pooled = 0; pooled < 2; ++pooled) {
      const StepComparison c = CompareRuns(a, b, 1e-9, 0.5, pooled == 1, {}, 300, seed);
      EXPECT_EQ(c.pooled, pooled == 1);
      run_alarms[pooled] += c.verdict != "no change" ? 1 : 0;
      covered[pooled] += c.ci_low <= 1 && 1 <= c.ci_high ? 1 : 0;
    }
    step_alarms += CompareSteps(a[0], b[0], 1e-9, 300, seed).verdict != "no change" ? 1 : 0;
  }
  std::printf("A/A over %d trials: runs as the unit %d alarms per side, %d pooled; one run's steps %d\n", kTrials,
              run_alarms[0], run_alarms[1], step_alarms);
  for (int pooled = 0; pooled < 2; ++pooled) {
    const double rate = static_cast<double>(run_alarms[pooled]) / kTrials;
    EXPECT_LE(rate, 0.08) << "runs as the unit: at most the nominal 5% (plus sampling error); pooled " << pooled;
    EXPECT_GE(rate, 0.01) << "not so wide that it never sees anything; pooled " << pooled;
    EXPECT_EQ(covered[pooled], kTrials - run_alarms[pooled]);
  }
  // Welch's degrees of freedom, at most the pooled 4 with 3 runs a side, make its interval the wider.
  EXPECT_LE(run_alarms[0], run_alarms[1]);
  EXPECT_GE(step_alarms, kTrials / 2) << "one run against one: the shift between runs looks like a change";
  // A 10% shift with 5 runs a side is found.
  const auto a = Runs(5, 60, 25'000, 0.03, 0.05, 1), b = Runs(5, 60, 27'500, 0.03, 0.05, 2);
  EXPECT_EQ(CompareRuns(a, b, 0.02).verdict, "slower");
}

// A "no change" says how large a change the runs would have found: the
// detectable change is what it claims. Over A/A pairs of 3 runs a side
// (runs shifting by 3%), a slowdown of the pairs' typical (median)
// detectable change, put into B of fresh pairs, is found about four times in
// five; with 5 runs a side the detectable change is smaller; and the line
// under the table says it.
TEST(CompareTest, ANoChangeSaysHowLargeAChangeItsRunsWouldHaveFound) {
  constexpr int kTrials = 100;
  std::vector<double> three, five;
  for (uint64_t seed = 1; seed <= kTrials; ++seed) {
    const StepComparison c =
        CompareRuns(Runs(3, 60, 25'000, 0.03, 0.01, seed), Runs(3, 60, 25'000, 0.03, 0.01, seed + 100'000), 0.02);
    ASSERT_GT(c.detectable, 0);
    three.push_back(c.detectable);
    five.push_back(
        CompareRuns(Runs(5, 60, 25'000, 0.03, 0.01, seed), Runs(5, 60, 25'000, 0.03, 0.01, seed + 100'000), 0.02)
            .detectable);
  }
  const double typical = MedianInPlace(three);
  int found = 0;
  for (uint64_t seed = 1; seed <= kTrials; ++seed) {
    auto slowed = Runs(3, 60, 25'000, 0.03, 0.01, seed + 300'000);
    for (auto& run : slowed) {
      for (double& step : run) step *= 1 + typical;
    }
    found += CompareRuns(Runs(3, 60, 25'000, 0.03, 0.01, seed + 200'000), slowed, 0.02).verdict == "slower" ? 1 : 0;
  }
  std::printf("detectable change: 3 runs median %.4f, 5 runs %.4f; a slowdown of %.4f found %d of %d\n", typical,
              MedianInPlace(five), typical, found, kTrials);
  EXPECT_GE(found, 65) << "four times in five, give or take";
  EXPECT_LE(found, 95);
  EXPECT_LT(MedianInPlace(five), 0.8 * typical) << "more runs, a smaller change found";

  PairResult r;
  r.pair.key = "mlp, cpu, batch 64";
  r.phase = v1::PHASE_TRAIN;
  r.result = CompareRuns(Runs(3, 60, 25'000, 0.03, 0.01, 1), Runs(3, 60, 25'000, 0.03, 0.01, 100'001), 0.02);
  ASSERT_EQ(r.result.verdict, "no change");
  EXPECT_THAT(RunNotesLine(r), HasSubstr(absl::StrFormat("a change of about %.1f%% would be found four times in five",
                                                         100 * r.result.detectable)));
  r.result.verdict = "slower";
  EXPECT_EQ(RunNotesLine(r).find("four times in five"), std::string::npos) << "said only where nothing was found";
}

// Runs as the unit: a change is called when the interval excludes 1 (it is
// there) and the ratio lies beyond the threshold (it matters), so a 5%
// slowdown whose interval still reaches below 1.02 is "slower". With runs
// shifting by 1%, 3 runs a side: a 5% slowdown is found at least 85% of the
// time (the whole interval beyond 1.02, the one-run rule, far less often),
// A/A pairs are called different at most 5% of the time. The one-run comparison, whose
// interval cannot see the shift between runs, still needs its whole interval
// beyond the threshold.
TEST(CompareTest, RunsAsTheUnitCallAChangeThatIsThereAndBeyondTheThreshold) {
  constexpr int kTrials = 200;
  int found = 0, false_alarms = 0, found_below = 0, whole_interval = 0;
  for (uint64_t seed = 1; seed <= kTrials; ++seed) {
    const auto a = Runs(3, 100, 25'000, 0.01, 0.05, seed), a2 = Runs(3, 100, 25'000, 0.01, 0.05, seed + 100'000),
               b = Runs(3, 100, 26'250, 0.01, 0.05, seed + 200'000);
    const StepComparison slower = CompareRuns(a, b, 0.02, 0.5, false, {}, 300, seed);
    found += slower.verdict == "slower" ? 1 : 0;
    found_below += slower.verdict == "slower" && slower.ci_low < 1.02 ? 1 : 0;
    whole_interval += slower.ci_low > 1.02 ? 1 : 0;
    false_alarms += CompareRuns(a, a2, 0.02, 0.5, false, {}, 300, seed).verdict != "no change" ? 1 : 0;
  }
  std::printf(
      "3 runs a side, runs shifting 1%%: 5%% slowdown found %d of %d (%d with the interval below 1.02; the "
      "whole interval beyond it in %d), A/A called different %d\n",
      found, kTrials, found_below, whole_interval, false_alarms);
  EXPECT_GE(found, kTrials * 85 / 100);
  EXPECT_GT(found_below, 0) << "found where the whole interval does not clear the threshold";
  EXPECT_LT(whole_interval, found);
  EXPECT_LE(false_alarms, kTrials / 20);
  // Significant but smaller than the threshold: no change.
  const auto a = Runs(5, 300, 25'000, 0.002, 0.01, 3), b = Runs(5, 300, 25'250, 0.002, 0.01, 4);
  const StepComparison small = CompareRuns(a, b, 0.02);
  EXPECT_GT(small.ci_low, 1) << "the 1% is there";
  EXPECT_EQ(small.verdict, "no change") << "but below the 2% threshold";
  // One run a side: the whole interval must lie beyond the threshold.
  const std::vector<double> one_a = Noisy(300, 25'000, 0.05, 5), one_b = Noisy(300, 26'000, 0.05, 6);
  const StepComparison one = CompareSteps(one_a, one_b, 0.02);
  ASSERT_GT(one.ratio, 1.02);
  EXPECT_EQ(one.verdict, one.ci_low > 1.02 ? "slower" : "no change");
}

}  // namespace
}  // namespace hetbench::report
