// A serving task on the agent (agent/serving/serving_run.h) with the
// calibration computes: every answered query on the task's time axis (the
// executor stores each as a SERVE sample), the issuer's and batcher's
// figures, the window for energy.
// Bounds are what must hold however slow the machine is, never speed.
#include "agent/serving/serving_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>

#include "agent/serving/issuer.h"
#include "agent/serving/serving_model.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/serving_spec.h"
#include "common/serving_stats.h"

namespace hetbench::agent {
namespace {

v1::JobSpec Spec(const std::string& scenario, double qps, double min_seconds, int64_t min_queries) {
  v1::JobSpec spec;
  spec.add_models("null");
  spec.mutable_serving()->set_scenario(scenario);
  spec.mutable_serving()->set_target_qps(qps);
  spec.mutable_serving()->set_latency_bound_ms(scenario == "server" || scenario == "peak" ? 50 : 0);
  spec.mutable_serving()->set_min_duration_seconds(min_seconds);
  spec.mutable_serving()->set_min_queries(min_queries);
  spec.mutable_serving()->set_warmup_batches(2);
  spec = WithDefaults(spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

struct Ran {
  v1::TaskResult result;
  std::vector<ServedQuery> samples;
};

Ran Serve(const v1::JobSpec& spec, int max_batch, const BatchingServer::Compute& compute) {
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> issued{0}, total{0};
  const ServingControl control{&cancel, &issued, &total, SteadyNowNs() - 1'000'000'000};  // the task began 1 s ago
  Ran ran;
  EXPECT_TRUE(
      RunServing(spec, spec.serving().target_qps(), max_batch, compute, "test compute", control, &ran.result, &ran.samples)
          .ok());
  EXPECT_EQ(issued.load(), ran.result.serving().queries_scheduled());
  EXPECT_GE(total.load(), 1);
  return ran;
}

TEST(ServingRunTest, AServerRunStoresEveryQueryAtItsScheduledTime) {
  const v1::JobSpec spec = Spec("server", 2000, 0.2, 100);
  const Ran ran = Serve(spec, 4, NullCompute());
  const v1::ServingRun& s = ran.result.serving();
  EXPECT_EQ(s.scenario(), "server");
  EXPECT_EQ(s.compute(), "test compute");
  EXPECT_EQ(s.max_batch(), 4);
  ASSERT_GE(s.queries_scheduled(), 100);
  EXPECT_EQ(s.queries_answered(), s.queries_scheduled());
  ASSERT_EQ(static_cast<int64_t>(ran.samples.size()), s.queries_scheduled());
  // The schedule is the seeded one, cut where both minimums hold.
  const std::vector<int64_t> schedule = PoissonSchedule(spec.seed(), 2000, INT64_MAX / 4, s.queries_scheduled());
  EXPECT_GE(schedule.back() - schedule.front(), 200'000'000);
  const int64_t origin = ran.samples[0].scheduled_ns - schedule[0];
  EXPECT_GE(origin, 1'000'000'000) << "on the task's time axis, after its start";
  for (size_t i = 0; i < ran.samples.size(); ++i) {
    EXPECT_EQ(ran.samples[i].scheduled_ns - origin, schedule[i]) << i;
    EXPECT_GE(ran.samples[i].latency_ns, 0) << i;
  }
  EXPECT_GE(s.issue_delay_max_ns(), s.issue_delay_p99_ns());
  EXPECT_GE(s.issue_delay_p99_ns(), s.issue_delay_p50_ns());
  EXPECT_GE(s.batches(), 1);
  EXPECT_GE(s.mean_batch(), 1.0);
  EXPECT_LE(s.mean_batch(), 4.0);
  EXPECT_GT(s.achieved_qps(), 0);
  ASSERT_EQ(ran.result.windows_size(), 1);
  EXPECT_EQ(ran.result.windows(0).phase(), v1::PHASE_SERVE);
  EXPECT_EQ(ran.result.windows(0).start_ns(), ran.samples[0].scheduled_ns);
}

TEST(ServingRunTest, OfflineIssuesEveryQueryAtOnceAndTheBatcherFillsItsBatches) {
  const Ran ran = Serve(Spec("offline", 0, 0.01, 256), 16, FixedServiceCompute(absl::Microseconds(200)));
  const v1::ServingRun& s = ran.result.serving();
  EXPECT_EQ(s.queries_scheduled(), 256);
  ASSERT_EQ(ran.samples.size(), 256u);
  for (const ServedQuery& q : ran.samples) EXPECT_EQ(q.scheduled_ns, ran.samples[0].scheduled_ns);
  EXPECT_GE(s.batches(), 16) << "at most 16 per batch";
  EXPECT_EQ(s.queries_answered(), 256);
  EXPECT_DOUBLE_EQ(s.mean_batch() * static_cast<double>(s.batches()), 256.0);
  EXPECT_GT(s.mean_batch(), 1.0) << "queries waiting together are batched";
}

TEST(ServingRunTest, TheRunStatesTheIssuersAndTheBatchersCpuPerQuery) {
  // 200 us of busy-waiting per batch is the batcher's CPU; the issuer's is its own.
  const Ran ran = Serve(Spec("offline", 0, 0.01, 256), 16, FixedServiceCompute(absl::Microseconds(200)));
  const v1::ServingRun& s = ran.result.serving();
  EXPECT_GT(s.issuer_cpu_us_per_query(), 0);
  EXPECT_GT(s.batcher_cpu_us_per_query(), 0);
  EXPECT_EQ(s.issuer_ceiling_qps(), 0) << "measured for the null model only, by its executor";
  const IssuerCeiling ceiling = MeasureIssuerCeiling(20'000);
  EXPECT_GT(ceiling.qps, 0);
  EXPECT_GT(ceiling.cpu_us_per_query, 0);
}

TEST(ServingRunTest, SingleStreamTimesEachQueryFromItsIssue) {
  const Ran ran = Serve(Spec("single_stream", 0, 0.05, 20), 8, FixedServiceCompute(absl::Milliseconds(1)));
  const v1::ServingRun& s = ran.result.serving();
  ASSERT_GE(s.queries_scheduled(), 20);
  EXPECT_EQ(s.queries_answered(), s.queries_scheduled());
  EXPECT_DOUBLE_EQ(s.mean_batch(), 1.0) << "one query outstanding: batches of one";
  EXPECT_EQ(s.batches(), s.queries_answered()) << "every batch counted, the last one too";
  EXPECT_EQ(s.max_queue_delay_ms(), 0) << "no batch can fill: the batcher does not wait";
  for (size_t i = 0; i < ran.samples.size(); ++i) {
    EXPECT_GE(ran.samples[i].latency_ns, 1'000'000) << i;
    if (i > 0) {
      EXPECT_GE(ran.samples[i].scheduled_ns, ran.samples[i - 1].scheduled_ns + ran.samples[i - 1].latency_ns) << i;
    }
  }
}

TEST(ServingRunTest, MultiStreamIssuesEachQuerysSamplesTogetherAndAnswersItWithTheLast) {
  v1::JobSpec spec = Spec("single_stream", 0, 0.02, 16);
  spec.mutable_serving()->set_scenario("multi_stream");
  spec.mutable_serving()->set_samples_per_query(8);
  spec.mutable_serving()->set_percentile(99);
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  // A batch of at most 4 samples: each query of 8 takes two batches of 500 us.
  const Ran ran = Serve(spec, 4, FixedServiceCompute(absl::Microseconds(500)));
  const v1::ServingRun& s = ran.result.serving();
  EXPECT_EQ(s.samples_per_query(), 8);
  ASSERT_GE(s.queries_answered(), 16);
  EXPECT_EQ(s.queries_answered(), s.queries_scheduled());
  EXPECT_EQ(s.batches(), 2 * s.queries_answered()) << "8 samples, batches of 4";
  EXPECT_DOUBLE_EQ(s.mean_batch(), 4.0) << "the samples arrive together: full batches";
  EXPECT_EQ(s.max_queue_delay_ms(), 0);
  for (size_t i = 0; i < ran.samples.size(); ++i) {
    EXPECT_GE(ran.samples[i].latency_ns, 1'000'000) << i << ": answered with its last sample, after both batches";
    if (i > 0) {
      EXPECT_GE(ran.samples[i].scheduled_ns, ran.samples[i - 1].scheduled_ns + ran.samples[i - 1].latency_ns)
          << i << ": one query outstanding";
    }
  }
}

TEST(ServingRunTest, NoQueryBeatsTheIdealQueueOnItsOwnArrivals) {
  // Fixed service of 500 us, one instance, batches of one, Poisson at 50%
  // load: an M/D/1 queue. On the same arrivals an ideal server finishes
  // query i at max(arrival_i, finish_{i-1}) + S (Lindley); a real one can
  // only be later, so every measured latency is at least the ideal one.
  // (How close it comes is bench/serving's figure, not a test's.)
  v1::JobSpec spec = Spec("server", 1000, 0.3, 200);
  spec.mutable_serving()->set_max_queue_delay_ms(0);
  const Ran ran = Serve(spec, 1, FixedServiceCompute(absl::Microseconds(500)));
  ASSERT_EQ(ran.result.serving().queries_answered(), ran.result.serving().queries_scheduled());
  const int64_t service = 500'000;
  int64_t finish = INT64_MIN;
  for (size_t i = 0; i < ran.samples.size(); ++i) {
    const int64_t arrival = ran.samples[i].scheduled_ns;
    finish = std::max(arrival, finish) + service;
    EXPECT_GE(ran.samples[i].latency_ns, finish - arrival) << i;
  }
}

TEST(ServingRunTest, APeakSearchBracketsTheHighestValidRateAndRunsAtIt) {
  // A fixed 2 ms per query on one instance serves at most 500 queries/s; far
  // below that the p90 is 2 ms, within the 10 ms bound, and far above it the
  // queue grows without end. Judged by the coordinator's rules, the search
  // doubles from 100/s until a run is INVALID, then bisects.
  v1::JobSpec spec = Spec("peak", 100, 0.25, 64);
  spec.mutable_serving()->set_latency_bound_ms(10);
  spec.mutable_serving()->set_percentile(90);
  spec.mutable_serving()->set_max_queue_delay_ms(0);
  spec.mutable_serving()->set_peak_precision(0.25);
  spec.mutable_serving()->set_peak_max_runs(8);
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  const Ran ran = Serve(spec, 1, FixedServiceCompute(absl::Milliseconds(2)));
  const v1::ServingRun& s = ran.result.serving();
  ASSERT_GE(s.steps_size(), 2);
  EXPECT_EQ(s.steps(0).qps(), 100);
  double valid = 0, invalid = 1e18;
  for (int i = 0; i < s.steps_size(); ++i) {
    const v1::ServingStep& step = s.steps(i);
    EXPECT_EQ(step.valid(), step.invalid_reasons().empty()) << i;
    EXPECT_GT(step.queries(), 0) << i;
    if (i > 0) {
      const double before = s.steps(i - 1).qps();
      if (invalid == 1e18) EXPECT_EQ(step.qps(), 2 * before) << "doubling while every run was VALID, run " << i;
      if (valid == 0) EXPECT_EQ(step.qps(), before / 2) << "halving while none was, run " << i;
      if (valid > 0 && invalid < 1e18) EXPECT_EQ(step.qps(), (valid + invalid) / 2) << "bisecting, run " << i;
    }
    if (step.valid()) valid = std::max(valid, step.qps());
    if (!step.valid()) invalid = std::min(invalid, step.qps());
  }
  EXPECT_EQ(s.peak_qps(), valid);
  EXPECT_EQ(s.target_qps(), valid > 0 ? valid : s.steps(s.steps_size() - 1).qps()) << "the final run is at the peak";
  EXPECT_LE(valid, 500) << "no run above the service rate can keep a bounded queue";
  if (valid > 0 && invalid < 1e18 && s.steps_size() < 8) {
    EXPECT_LE(invalid - valid, 0.25 * valid) << "the search stopped at its precision";
  }
  EXPECT_EQ(static_cast<int64_t>(ran.samples.size()), s.queries_answered()) << "only the final run is returned";
}

}  // namespace
}  // namespace hetbench::agent
