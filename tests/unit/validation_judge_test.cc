// The coordinator's verdicts on validation results (server/validation):
// the robust spread and its floor, the median's interval, DEGRADED against a
// fleet or a saved baseline, silent data corruption by plurality (and no
// verdict on a tie), determinism, and the health a verdict gives a device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "common/job_spec.h"
#include "common/validate_spec.h"
#include "server/validation/expand.h"
#include "server/validation/health.h"
#include "server/validation/judge.h"

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;

constexpr char kSku[] = "cpu|Test CPU|-|2|all|0.0.0";

// A measured test with `values`.
v1::ValidationTest Measured(const std::string& name, std::vector<double> values) {
  v1::ValidationTest t;
  t.set_name(name);
  t.set_unit("GFLOP/s");
  t.set_outcome(v1::TEST_OUTCOME_MEASURED);
  t.set_higher_is_better(true);
  for (double v : values) t.add_values(v);
  return t;
}

// Eight repetitions around `center`, with a fixed small wobble.
std::vector<double> Reps(double center) {
  const double wobble[] = {-0.004, 0.002, 0.0, 0.003, -0.002, 0.001, -0.001, 0.004};
  std::vector<double> out;
  for (double w : wobble) out.push_back(center * (1 + w));
  return out;
}

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.mutable_validate()->set_level("quick");
  return WithDefaults(spec);
}

v1::Task* AddDevice(v1::Job* job, const std::string& agent, const std::string& device, const std::string& sku) {
  v1::Task* t = job->add_tasks();
  t->set_id(absl::StrCat(job->id(), "-t", job->tasks_size() - 1));
  t->set_agent_id(agent);
  t->set_device_id(device);
  t->set_device_kind(v1::DEVICE_KIND_CPU);
  t->set_state(v1::TASK_STATE_SUCCEEDED);
  t->mutable_result()->mutable_validation()->set_sku(sku);
  t->mutable_result()->mutable_validation()->set_level("quick");
  return t;
}

void AddTest(v1::Task* t, v1::ValidationTest test) { *t->mutable_result()->mutable_validation()->add_tests() = test; }

const v1::DeviceVerdict& Device(const v1::ValidationReport& r, const std::string& agent) {
  for (const v1::DeviceVerdict& d : r.devices()) {
    if (d.agent_id() == agent) return d;
  }
  static const v1::DeviceVerdict none;
  ADD_FAILURE() << "no verdict for " << agent;
  return none;
}

// A fleet of `n` identical devices, the one at `slow_index` at `slow_ratio`
// on `slow_tests` of its two tests (matmul, then infer_mlp).
v1::Job Fleet(int n, int slow_index = -1, double slow_ratio = 1.0, int slow_tests = 2) {
  v1::Job job;
  job.set_id("job-000001");
  *job.mutable_spec() = Spec();
  for (int i = 0; i < n; ++i) {
    v1::Task* t = AddDevice(&job, absl::StrCat("a", i), "cpu0", kSku);
    for (int k = 0; k < 2; ++k) {
      const bool slow = i == slow_index && k < slow_tests;
      const double center = (slow ? slow_ratio : 1.0) * 100.0 * (1 + 0.001 * (i % 3));
      AddTest(t, Measured(k == 0 ? "matmul" : "infer_mlp", Reps(center)));
    }
  }
  return job;
}

TEST(RobustSpreadTest, IdenticalDevicesGetTheFloorNotZero) {
  EXPECT_DOUBLE_EQ(RobustSpread({10, 10, 10}, 10, 0.01), 0.1);
  EXPECT_DOUBLE_EQ(RobustSpread({9, 10, 11, 10, 10}, 10, 0.01), 0.1);  // MAD 0: the floor
  EXPECT_NEAR(RobustSpread({8, 9, 10, 11, 12}, 10, 0.01), 1.4826, 1e-12);
  EXPECT_DOUBLE_EQ(RobustSpread({10, 10, 10}, 10, 0), 0);
}

TEST(MedianCiTest, OrderStatisticsWithTheirBinomialCoverage) {
  std::vector<double> eight = {1, 2, 3, 4, 5, 6, 7, 8};
  MedianInterval ci = MedianCi(eight, 0.99);
  EXPECT_EQ(ci.low, 1);
  EXPECT_EQ(ci.high, 8);
  EXPECT_NEAR(ci.coverage, 1 - 2.0 / 256, 1e-12);
  std::vector<double> fifteen;
  for (int i = 1; i <= 15; ++i) fifteen.push_back(i);
  ci = MedianCi(fifteen, 0.99);  // j = 3: 1 - 2 (1 + 15 + 105) / 2^15
  EXPECT_EQ(ci.low, 3);
  EXPECT_EQ(ci.high, 13);
  EXPECT_NEAR(ci.coverage, 1 - 242.0 / 32768, 1e-12);
  ci = MedianCi({1, 2, 3}, 0.99);  // too few for 99%: the extremes, with the coverage they have
  EXPECT_EQ(ci.low, 1);
  EXPECT_EQ(ci.high, 3);
  EXPECT_NEAR(ci.coverage, 0.75, 1e-12);
}

TEST(JudgeTest, ADeviceTenPercentSlowIsDegradedWithItsRatioAndInterval) {
  const v1::ValidationReport r = JudgeValidation(Fleet(6, /*slow_index=*/4, /*slow_ratio=*/0.90));
  const v1::DeviceVerdict& slow = Device(r, "a4");
  EXPECT_EQ(slow.verdict(), v1::VERDICT_DEGRADED) << slow.reason();
  EXPECT_THAT(slow.reason(), HasSubstr("2 tests DEGRADED (matmul 0.90"));
  ASSERT_EQ(slow.tests_size(), 2);
  const v1::TestVerdict& t = slow.tests(0);
  EXPECT_NEAR(t.ratio(), 0.90, 0.01);
  EXPECT_LT(t.ratio_low(), t.ratio());
  EXPECT_GT(t.ratio_high(), t.ratio());
  EXPECT_LT(t.ratio_high(), 1.0);
  EXPECT_NEAR(t.threshold(), 0.97, 1e-9);  // 3 x the 1% floor beats min_effect 2.5%
  EXPECT_THAT(t.reason(), HasSubstr("DEGRADED below 0.970"));
  EXPECT_THAT(t.baseline_source(), HasSubstr("this job: 6 devices"));
  for (const std::string agent : {"a0", "a1", "a2", "a3", "a5"}) {
    EXPECT_EQ(Device(r, agent).verdict(), v1::VERDICT_PASS) << agent << ": " << Device(r, agent).reason();
  }
  ASSERT_EQ(r.nodes_size(), 6);
  for (const v1::NodeVerdict& n : r.nodes()) {
    EXPECT_EQ(n.verdict(), n.agent_id() == "a4" ? v1::VERDICT_DEGRADED : v1::VERDICT_PASS) << n.agent_id();
  }
  // The job's own baseline, for `baseline save`.
  ASSERT_EQ(r.baselines_size(), 1);
  EXPECT_EQ(r.baselines(0).sku(), kSku);
  EXPECT_EQ(r.baselines(0).metrics(0).devices(), 6);
}

TEST(JudgeTest, OneTestBelowItsThresholdIsReportedButTheDeviceIsNotDegraded) {
  const v1::ValidationReport r = JudgeValidation(Fleet(6, 4, 0.90, /*slow_tests=*/1));
  const v1::DeviceVerdict& d = Device(r, "a4");
  EXPECT_EQ(d.verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(d.tests(0).verdict(), v1::VERDICT_DEGRADED);  // the test itself says so
  EXPECT_THAT(d.reason(), HasSubstr("1 test DEGRADED (matmul 0.90"));
  EXPECT_THAT(d.reason(), HasSubstr("a device needs 2 (validate.min_degraded_tests)"));
  v1::Job strict = Fleet(6, 4, 0.90, 1);
  strict.mutable_spec()->mutable_validate()->set_min_degraded_tests(1);
  EXPECT_EQ(Device(JudgeValidation(strict), "a4").verdict(), v1::VERDICT_DEGRADED);
}

TEST(JudgeTest, ADeviceWhoseRepetitionsWobbleFarMoreThanItsSiblingsIsUnstable) {
  v1::Job job = Fleet(6);
  for (int k = 0; k < 2; ++k) {  // a4's repetitions spread ~8% around the same median
    v1::ValidationTest* t = job.mutable_tasks(4)->mutable_result()->mutable_validation()->mutable_tests(k);
    t->clear_values();
    for (double v : {92.0, 108.0, 95.0, 105.0, 100.0, 90.0, 110.0, 100.0}) t->add_values(v);
  }
  const v1::ValidationReport r = JudgeValidation(job);
  EXPECT_EQ(Device(r, "a4").verdict(), v1::VERDICT_DEGRADED) << Device(r, "a4").reason();
  EXPECT_THAT(Device(r, "a4").tests(0).reason(), HasSubstr("unstable: its repetitions spread"));
  EXPECT_EQ(Device(r, "a3").verdict(), v1::VERDICT_PASS);
}

TEST(JudgeTest, ThePowerSensorsReadingRateIsReportedNotJudged) {
  v1::Job job = Fleet(6);
  for (int i = 0; i < 6; ++i) {
    v1::ValidationTest t = Measured("power_sensor", Reps(i == 2 ? 7 : 10));
    t.set_unit("readings/s");
    AddTest(job.mutable_tasks(i), t);
  }
  const v1::ValidationReport r = JudgeValidation(job);
  EXPECT_EQ(Device(r, "a2").verdict(), v1::VERDICT_PASS) << Device(r, "a2").reason();
  EXPECT_THAT(Device(r, "a2").tests(2).reason(), HasSubstr("reported, not judged"));
}

TEST(JudgeTest, TheSameResultsGiveTheSameVerdictsInAnyOrder) {
  v1::Job job = Fleet(9, 2, 0.95);
  const std::string first = JudgeValidation(job).SerializeAsString();
  EXPECT_EQ(JudgeValidation(job).SerializeAsString(), first);
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(job.mutable_tasks()->begin(), job.mutable_tasks()->end(), rng);
    EXPECT_EQ(JudgeValidation(job).SerializeAsString(), first) << "round " << round;
  }
}

TEST(JudgeTest, TooFewDevicesAreMeasuredButNotCompared) {
  const v1::ValidationReport r = JudgeValidation(Fleet(2, 1, 0.5));
  for (const v1::DeviceVerdict& d : r.devices()) {
    EXPECT_EQ(d.verdict(), v1::VERDICT_PASS);
    EXPECT_THAT(d.tests(0).reason(), HasSubstr("not compared: 2 devices of this SKU"));
    EXPECT_THAT(d.reason(), HasSubstr("2 tests passed"));
    EXPECT_EQ(d.tests(0).baseline_median(), 0);
  }
}

TEST(JudgeTest, ASavedBaselineJudgesALoneDevice) {
  v1::Job job = Fleet(1, 0, 0.88);
  v1::Baseline* b = job.mutable_spec()->mutable_validate()->mutable_baseline();
  b->set_schema(kBaselineSchema);
  b->set_name("nightly");
  b->set_version(3);
  v1::SkuBaseline* s = b->add_skus();
  s->set_sku(kSku);
  for (const char* test : {"matmul", "infer_mlp"}) {
    v1::MetricBaseline* m = s->add_metrics();
    m->set_test(test);
    m->set_median(100);
    m->set_spread(0.5);
    m->set_devices(1);
  }
  const v1::ValidationReport r = JudgeValidation(job);
  const v1::DeviceVerdict& d = Device(r, "a0");
  EXPECT_EQ(d.verdict(), v1::VERDICT_DEGRADED) << d.reason();
  EXPECT_THAT(d.tests(0).baseline_source(), HasSubstr("baseline nightly v3"));
  EXPECT_NEAR(d.tests(0).ratio(), 0.88, 0.01);
  // The same device at the baseline's speed passes.
  const v1::ValidationReport ok = JudgeValidation([&] {
    v1::Job j = Fleet(1);
    *j.mutable_spec()->mutable_validate()->mutable_baseline() = *b;
    return j;
  }());
  EXPECT_EQ(Device(ok, "a0").verdict(), v1::VERDICT_PASS) << Device(ok, "a0").reason();
}

v1::ValidationTest Fingerprinted(const std::vector<uint32_t>& bits) {
  v1::ValidationTest t = Measured("train_mlp", Reps(1000));
  t.set_unit("samples/s");
  for (uint32_t b : bits) t.add_loss_bits(b);
  return t;
}

TEST(JudgeTest, TheFingerprintPluralityWinsAndTheOddDeviceFails) {
  v1::Job job;
  job.set_id("job-000002");
  *job.mutable_spec() = Spec();
  for (int i = 0; i < 4; ++i) {
    v1::Task* t = AddDevice(&job, absl::StrCat("a", i), "cpu0", kSku);
    std::vector<uint32_t> bits = {0x3f800000, 0x3f700000, 0x3f600000};
    if (i == 2) bits[1] = 0x3f700001;  // one bit off at step 1
    AddTest(t, Fingerprinted(bits));
  }
  const v1::ValidationReport r = JudgeValidation(job);
  EXPECT_EQ(Device(r, "a2").verdict(), v1::VERDICT_FAIL);
  EXPECT_THAT(Device(r, "a2").reason(), HasSubstr("wrong result"));
  EXPECT_THAT(Device(r, "a2").reason(), HasSubstr("3 of 4 devices) from step 1"));
  for (const std::string agent : {"a0", "a1", "a3"}) EXPECT_EQ(Device(r, agent).verdict(), v1::VERDICT_PASS);
  EXPECT_TRUE(r.notes().empty());
}

TEST(JudgeTest, AFingerprintTieGivesNoVerdictAndSaysSo) {
  v1::Job job;
  job.set_id("job-000003");
  *job.mutable_spec() = Spec();
  for (int i = 0; i < 4; ++i) {
    v1::Task* t = AddDevice(&job, absl::StrCat("a", i), "cpu0", kSku);
    AddTest(t, Fingerprinted({0x3f800000, i < 2 ? 0x3f700000u : 0x3f700001u}));
  }
  const v1::ValidationReport r = JudgeValidation(job);
  for (const v1::DeviceVerdict& d : r.devices()) EXPECT_NE(d.verdict(), v1::VERDICT_FAIL) << d.reason();
  ASSERT_EQ(r.notes_size(), 1);
  EXPECT_THAT(r.notes(0), HasSubstr("no plurality (2 vs 2): no verdict"));
}

// Three SKUs (say a CPU, a GPU and a DPU): their pluralities agree within
// cross_kind_tolerance unless one is off; with only two SKUs that disagree,
// nobody can tell which is wrong, and a note says so.
v1::Job ThreeSkus(float off_by, int skus = 3) {
  v1::Job job;
  job.set_id("job-000005");
  *job.mutable_spec() = Spec();
  for (int k = 0; k < skus; ++k) {
    for (int i = 0; i < 2; ++i) {
      v1::Task* t = AddDevice(&job, absl::StrCat("k", k, "-", i), "dev0", absl::StrCat("kind", k, "|x"));
      std::vector<uint32_t> bits;
      for (int s = 0; s < 4; ++s) {
        float loss = 2.0f - 0.1f * s + (k == 0 ? 0.0f : 1e-5f * k);  // within 1% of each other ...
        if (k == skus - 1) loss *= 1 + off_by;                        // ... unless the last one is off
        uint32_t b;
        std::memcpy(&b, &loss, sizeof b);
        bits.push_back(b);
      }
      AddTest(t, Fingerprinted(bits));
    }
  }
  return job;
}

TEST(JudgeTest, AcrossSkusTheOneThatDisagreesWithTheOthersFails) {
  const v1::ValidationReport agree = JudgeValidation(ThreeSkus(0));
  for (const v1::DeviceVerdict& d : agree.devices()) EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << d.reason();
  EXPECT_TRUE(agree.notes().empty());
  const v1::ValidationReport off = JudgeValidation(ThreeSkus(0.05f));
  for (const v1::DeviceVerdict& d : off.devices()) {
    if (d.sku() == "kind2|x") {
      EXPECT_EQ(d.verdict(), v1::VERDICT_FAIL);
      EXPECT_THAT(d.reason(), HasSubstr("differs from every other SKU's by more than cross_kind_tolerance"));
    } else {
      EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << d.sku() << ": " << d.reason();
    }
  }
  const v1::ValidationReport two = JudgeValidation(ThreeSkus(0.05f, /*skus=*/2));
  for (const v1::DeviceVerdict& d : two.devices()) EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << d.reason();
  ASSERT_FALSE(two.notes().empty());
  EXPECT_THAT(two.notes(0), HasSubstr("no verdict on which is wrong"));
}

TEST(JudgeTest, ATpuSkusFingerprintIsComparedWithinItsSkuOnly) {
  // The Python runner draws its own data: a TPU SKU's loss is not LibTorch's, and is not held against the others.
  v1::Job job = ThreeSkus(0.05f, /*skus=*/4);
  for (v1::Task& t : *job.mutable_tasks()) {
    v1::ValidationRun* run = t.mutable_result()->mutable_validation();
    if (run->sku() == "kind3|x") run->set_sku("tpu|v5e|-|1|all|0.0.0");
  }
  const v1::ValidationReport r = JudgeValidation(job);
  for (const v1::DeviceVerdict& d : r.devices()) EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << d.sku() << ": " << d.reason();
  EXPECT_TRUE(r.notes().empty()) << r.notes(0);
}

TEST(JudgeTest, OutcomesTheAgentReportedBecomeVerdicts) {
  v1::Job job;
  job.set_id("job-000004");
  *job.mutable_spec() = Spec();
  v1::Task* t = AddDevice(&job, "a1", "cpu0", kSku);
  v1::ValidationTest hung = Measured("memory_bandwidth", {});
  hung.set_outcome(v1::TEST_OUTCOME_TIMED_OUT);
  hung.set_time_box_seconds(8);
  hung.set_reason("did not return: its thread was abandoned");
  AddTest(t, hung);
  v1::ValidationTest skipped = Measured("power_sensor", {});
  skipped.set_outcome(v1::TEST_OUTCOME_SKIPPED);
  skipped.set_reason("only a modeled sensor");
  AddTest(t, skipped);
  AddTest(t, Measured("matmul", Reps(50)));
  v1::Task* gone = AddDevice(&job, "a2", "cpu0", kSku);
  gone->set_state(v1::TASK_STATE_FAILED);
  gone->set_error("agent lost");
  gone->clear_result();
  v1::Task* only_skips = AddDevice(&job, "a3", "tpu0", "tpu|x");
  AddTest(only_skips, skipped);
  const v1::ValidationReport r = JudgeValidation(job);
  const v1::DeviceVerdict& d = Device(r, "a1");
  EXPECT_EQ(d.verdict(), v1::VERDICT_FAIL);
  EXPECT_THAT(d.reason(), HasSubstr("memory_bandwidth: still running at its time box (8 s)"));
  EXPECT_EQ(d.tests(1).verdict(), v1::VERDICT_SKIPPED);
  EXPECT_EQ(d.tests(2).verdict(), v1::VERDICT_PASS);  // the device's other tests still count
  EXPECT_EQ(Device(r, "a2").verdict(), v1::VERDICT_FAIL);
  EXPECT_THAT(Device(r, "a2").reason(), HasSubstr("the task failed: agent lost"));
  EXPECT_EQ(Device(r, "a3").verdict(), v1::VERDICT_SKIPPED);
}

TEST(JudgeTest, UntrustedResultsAreCheckedAtTheEdge) {
  v1::ValidationRun run;
  EXPECT_EQ(CheckValidationRun(run), "");
  *run.add_tests() = Measured("matmul", {1, NAN});
  EXPECT_THAT(CheckValidationRun(run), HasSubstr("validation.tests[0].values: finite"));
  run.clear_tests();
  v1::ValidationTest t = Measured("matmul", {1});
  for (int i = 0; i < 5000; ++i) t.add_loss_bits(1);
  *run.add_tests() = t;
  EXPECT_THAT(CheckValidationRun(run), HasSubstr("loss_bits: at most 4096"));
}

TEST(HealthTest, FailQuarantinesPassReleasesDegradedOnlyWhenAsked) {
  v1::Job job = Fleet(6, 4, 0.90);
  v1::ValidationTest wrong = Measured("matmul", {});
  wrong.set_outcome(v1::TEST_OUTCOME_FAILED);
  wrong.set_reason("wrong result: off by 0.3");
  *job.mutable_tasks(5)->mutable_result()->mutable_validation()->mutable_tests(0) = wrong;
  *job.mutable_validation() = JudgeValidation(job);
  auto changes = HealthChanges(job, 1000);
  ASSERT_EQ(changes.size(), 6u);
  std::map<std::string, v1::DeviceHealth> by_agent(changes.begin(), changes.end());
  EXPECT_TRUE(by_agent["a5"].quarantined());
  EXPECT_EQ(by_agent["a5"].verdict(), v1::VERDICT_FAIL);
  EXPECT_FALSE(by_agent["a4"].quarantined());  // DEGRADED, not asked to quarantine it
  EXPECT_EQ(by_agent["a4"].verdict(), v1::VERDICT_DEGRADED);
  EXPECT_EQ(by_agent["a0"].verdict(), v1::VERDICT_PASS);
  job.mutable_spec()->mutable_validate()->set_quarantine_degraded(true);
  by_agent.clear();
  for (auto& [a, h] : HealthChanges(job, 1000)) by_agent[a] = h;
  EXPECT_TRUE(by_agent["a4"].quarantined());
}

TEST(ExpandTest, ATaskPerMatchingDeviceAndAbsentKindsSkippedWithTheAgentsReasons) {
  v1::Hello a;
  a.set_agent_id("a1");
  for (const char* id : {"cpu0", "qpu0"}) {
    v1::Device* d = a.add_devices();
    d->set_id(id);
    d->set_kind(std::string(id) == "cpu0" ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_QPU_SIM);
  }
  v1::AbsentDevice* gpu = a.add_absent();
  gpu->set_kind(v1::DEVICE_KIND_GPU);
  gpu->set_reason("no NVIDIA driver (libnvidia-ml.so.1 not found)");
  v1::JobSpec spec = Spec();
  spec.clear_targets();
  spec.add_targets();  // any device
  spec.add_targets()->set_device_kind(v1::DEVICE_KIND_GPU);
  spec.add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);  // again: not twice
  const ExpandedValidation x = ExpandValidation(spec, {&a});
  ASSERT_EQ(x.targets.size(), 2u);
  EXPECT_EQ(x.targets[0].device_id(), "cpu0");
  EXPECT_EQ(x.targets[0].agent_id(), "a1");
  EXPECT_EQ(x.targets[1].device_id(), "qpu0");
  ASSERT_EQ(x.skipped.size(), 1u);
  EXPECT_EQ(x.skipped[0].verdict(), v1::VERDICT_SKIPPED);
  EXPECT_THAT(x.skipped[0].reason(), HasSubstr("no gpu device: no NVIDIA driver"));
}

}  // namespace
}  // namespace hetbench::server
