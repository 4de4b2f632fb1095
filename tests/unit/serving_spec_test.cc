// The serving section of a job spec (common/serving_spec.h): its defaults,
// the errors that name the field and the fix, and the verdict on a run.
#include "common/serving_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/serving_stats.h"
#include "common/spec_yaml.h"

namespace hetbench {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::JobSpec Server(double qps = 100, double bound_ms = 50) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_serving()->set_scenario("server");
  spec.mutable_serving()->set_target_qps(qps);
  spec.mutable_serving()->set_latency_bound_ms(bound_ms);
  return WithDefaults(spec);
}

std::string Problems(const v1::JobSpec& spec) { return std::string(ValidateJobSpec(spec).message()); }

TEST(ServingSpecTest, DefaultsAreFilledInAndStatedInTheEffectiveSpec) {
  const v1::JobSpec spec = Server();
  const v1::ServingSpec& s = spec.serving();
  EXPECT_EQ(s.percentile(), 99);
  EXPECT_EQ(s.min_duration_seconds(), 2);
  EXPECT_EQ(s.min_queries(), 1024);
  EXPECT_EQ(s.max_queue_delay_ms(), 1);
  EXPECT_EQ(s.instances(), 1);
  EXPECT_EQ(s.max_issue_delay_share(), 0.1);
  EXPECT_EQ(s.warmup_batches(), 8);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  const std::string yaml = JobSpecToYaml(spec);
  EXPECT_THAT(yaml, AllOf(HasSubstr("scenario: server"), HasSubstr("target_qps: 100"), HasSubstr("percentile: 99"),
                          HasSubstr("min_queries: 1024")));
  auto again = ParseJobSpecYaml(yaml);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->serving().SerializeAsString(), s.SerializeAsString());

  v1::JobSpec single;
  single.mutable_serving()->set_scenario("single_stream");
  EXPECT_EQ(WithDefaults(single).serving().percentile(), 90);
  v1::JobSpec training;  // no scenario: nothing is added
  EXPECT_FALSE(WithDefaults(training).has_serving());
}

TEST(ServingSpecTest, BadInputIsRefusedNamingTheFieldAndTheFix) {
  EXPECT_THAT(Problems(Server(0)), HasSubstr("serving.target_qps = 0: must be a finite number in (0, 1000000]"));
  EXPECT_THAT(Problems(Server(-5)), HasSubstr("serving.target_qps = -5"));
  EXPECT_THAT(Problems(Server(std::nan(""))), HasSubstr("serving.target_qps = nan"));
  EXPECT_THAT(Problems(Server(std::numeric_limits<double>::infinity())), HasSubstr("serving.target_qps = inf"));
  EXPECT_THAT(Problems(Server(100, 0)), HasSubstr("serving.latency_bound_ms = 0: must be in (0, 3600000] for scenario "
                                                  "server: the bound the reported percentile must meet, e.g. 50"));
  for (double p : {0.0, 100.0, -1.0, 150.0}) {
    v1::JobSpec spec = Server();
    spec.mutable_serving()->set_percentile(p);
    EXPECT_THAT(Problems(spec), HasSubstr("serving.percentile = ")) << p;
    EXPECT_THAT(Problems(spec), HasSubstr(": must be in (0, 100), e.g. 99")) << p;
  }
  v1::JobSpec spec = Server();
  spec.mutable_serving()->set_min_queries(0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.min_queries = 0: must be in [1, 1000000]"));
  spec = Server();
  spec.mutable_serving()->set_instances(0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.instances = 0: must be in [1, 64]"));
  spec = Server(600'000, 50);
  spec.mutable_serving()->set_min_duration_seconds(10);
  EXPECT_THAT(Problems(spec),
              HasSubstr("serving: target_qps x min_duration_seconds = 6000000 queries: at most 1000000"));
  spec = Server();
  spec.mutable_serving()->set_scenario("burst");
  EXPECT_THAT(Problems(spec),
              HasSubstr("serving.scenario = 'burst': unknown; use server, single_stream, multi_stream, offline or peak"));
  v1::JobSpec offline;
  offline.mutable_serving()->set_scenario("offline");
  offline.mutable_serving()->set_target_qps(10);
  EXPECT_THAT(Problems(WithDefaults(offline)), HasSubstr("serving.target_qps = 10: not used by scenario offline"));
}

TEST(ServingSpecTest, CombinationsAServingRunCannotTakeAreRefused) {
  v1::JobSpec spec = Server();
  spec.mutable_parallel()->add_devices(2);
  EXPECT_THAT(Problems(WithDefaults(spec)), HasSubstr("serving: cannot be combined with parallel"));
  spec = Server();
  spec.mutable_targets(0)->set_executor("python");
  EXPECT_THAT(Problems(spec), HasSubstr("targets[0].executor = \"python\": serving runs on the torch executor"));
  spec = Server();
  spec.set_models(0, "qsim");
  EXPECT_THAT(Problems(WithDefaults(spec)), HasSubstr("models[0] = \"qsim\": a circuit benchmark"));
  // The calibration models only serve.
  v1::JobSpec null_training;
  null_training.add_models("null");
  EXPECT_THAT(Problems(WithDefaults(null_training)),
              HasSubstr("models[0] = \"null\": a serving calibration model; it needs serving.scenario"));
  spec = Server();
  spec.set_models(0, "fixed-service");
  EXPECT_THAT(Problems(spec),
              HasSubstr("serving.fixed_service_us = 0: the model \"fixed-service\" needs its service time"));
  spec.mutable_serving()->set_fixed_service_us(500);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  spec = Server();
  spec.mutable_serving()->set_fixed_service_us(500);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.fixed_service_us: set, but models does not list \"fixed-service\""));
}

TEST(ServingSpecTest, TheYamlSectionIsReadAndItsUnknownFieldsNamed) {
  auto unquoted = ParseJobSpecYaml("model: null\n");
  ASSERT_FALSE(unquoted.ok());
  EXPECT_THAT(unquoted.status().message(), HasSubstr("model (line 1): no model name (YAML reads null as no value); for "
                                                     "the serving calibration model write \"null\" in quotes"));
  auto spec =
      ParseJobSpecYaml("model: \"null\"\nserving:\n  scenario: server\n  target_qps: 2000\n  latency_bound_ms: 5\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->serving().target_qps(), 2000);
  auto round_trip = ParseJobSpecYaml(JobSpecToYaml(WithDefaults(*spec)));  // get job -o yaml, then submit -f
  ASSERT_TRUE(round_trip.ok()) << round_trip.status() << "\n" << JobSpecToYaml(WithDefaults(*spec));
  EXPECT_EQ(round_trip->models(0), "null");
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(*spec)).ok());
  auto bad = ParseJobSpecYaml("serving:\n  scenario: server\n  qps: 5\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("serving.qps"), HasSubstr("unknown field"), HasSubstr("target_qps")));
  auto sweep = ParseJobSpecYaml("serving:\n  scenario: server\n  qps_sweep: [10, 20.5]\n  latency_bound_ms: 5\n");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_THAT(sweep->serving().qps_sweep(), ElementsAre(10.0, 20.5));
  auto again = ParseJobSpecYaml(JobSpecToYaml(WithDefaults(*sweep)));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->serving().qps_sweep(), ElementsAre(10.0, 20.5));
  auto text = ParseJobSpecYaml("serving:\n  scenario: server\n  target_qps: fast\n");
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("serving.target_qps"));
}

TEST(ServingSpecTest, TheServerScheduleHasRoomForBothMinimumsAndTheDrawsSpread) {
  v1::JobSpec spec = Server(100, 50);  // 2 s at 100/s = 200 < 1024 queries
  EXPECT_EQ(ServingQueryCapacity(spec, 100), 1024 * 5 / 4 + 64);
  EXPECT_EQ(ServingQueryCapacity(spec, 10'000), 20'000 * 5 / 4 + 64);  // 20,000 queries in 2 s
  EXPECT_LE(ServingQueryCapacity(spec, ServingMaxQps(spec)), ServingLimits::kMaxQueries);
  spec.mutable_serving()->set_scenario("offline");
  EXPECT_EQ(ServingQueryCapacity(spec, 0), 1024);
}

TEST(ServingSpecTest, ARateSweepIsATaskPerRateAndItsRatesAreChecked) {
  v1::JobSpec spec = Server();
  spec.mutable_serving()->clear_target_qps();
  for (double q : {50.0, 100.0, 200.0}) spec.mutable_serving()->add_qps_sweep(q);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  EXPECT_THAT(ServingRates(spec), ElementsAre(50.0, 100.0, 200.0));
  spec.mutable_serving()->set_qps_sweep(1, 0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.qps_sweep[1] = 0: must be a finite number in (0, 1000000]"));
  spec.mutable_serving()->set_qps_sweep(1, 100);
  spec.mutable_serving()->set_target_qps(10);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.target_qps = 10 and serving.qps_sweep: both set"));
  spec.mutable_serving()->set_target_qps(0);
  spec.mutable_serving()->set_scenario("offline");
  spec.mutable_serving()->set_latency_bound_ms(0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.qps_sweep: only for scenario server"));
  // The sweep multiplies the tasks, and the limit on them counts it.
  spec = Server();
  spec.mutable_serving()->clear_target_qps();
  for (int i = 1; i <= 40; ++i) spec.mutable_serving()->add_qps_sweep(i * 10);
  for (int b = 1; b <= 30; ++b) spec.add_batch_sizes(b);
  EXPECT_THAT(Problems(spec),
              HasSubstr("models x targets x batch_sizes x serving.qps_sweep = 1240 tasks: at most 1024"));
  EXPECT_THAT(ServingRates(Server(75)), ElementsAre(75.0));
}

TEST(ServingSpecTest, APeakSearchNeedsItsFirstRateAndABound) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_serving()->set_scenario("peak");
  spec = WithDefaults(spec);
  EXPECT_EQ(spec.serving().percentile(), 99);
  EXPECT_EQ(spec.serving().peak_precision(), 0.1);
  EXPECT_EQ(spec.serving().peak_max_runs(), 12);
  EXPECT_THAT(Problems(spec),
              AllOf(HasSubstr("serving.target_qps = 0: must be a finite number in (0, 1000000] for "
                              "scenario peak (the search's first rate), e.g. 100"),
                    HasSubstr("serving.latency_bound_ms = 0: must be in (0, 3600000] for scenario peak")));
  spec.mutable_serving()->set_target_qps(100);
  spec.mutable_serving()->set_latency_bound_ms(20);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  spec.mutable_serving()->set_peak_precision(0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.peak_precision = 0: must be in (0, 1], e.g. 0.1"));
  v1::JobSpec server = Server();
  server.mutable_serving()->set_peak_max_runs(3);
  EXPECT_THAT(Problems(server), HasSubstr("serving.peak_precision and peak_max_runs: only for scenario peak"));
}

// A run's verdict from its latencies (ascending), as the coordinator judges it.
struct Judged {
  v1::ServingRun run;
  v1::PhaseResult phase;
};
Judged Judge(const v1::JobSpec& spec, const std::vector<int64_t>& sorted, double window_seconds,
             int64_t issue_delay_p99_ns = 1000, int64_t unanswered = 0) {
  Judged j;
  j.run.set_queries_scheduled(static_cast<int64_t>(sorted.size()) + unanswered);
  j.run.set_queries_answered(static_cast<int64_t>(sorted.size()));
  j.run.set_issue_delay_p99_ns(issue_delay_p99_ns);
  j.phase.set_phase(v1::PHASE_SERVE);
  j.phase.mutable_stats()->set_count(static_cast<int64_t>(sorted.size()));
  j.phase.mutable_stats()->set_items(static_cast<int64_t>(sorted.size()));
  j.phase.mutable_stats()->set_window_seconds(window_seconds);
  JudgeServing(spec, sorted, &j.run, &j.phase);
  return j;
}

std::vector<int64_t> Latencies(int n, int64_t ms, int over = 0, int64_t over_ms = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n - over), ms * 1'000'000);
  for (int i = 0; i < over; ++i) v.push_back(over_ms * 1'000'000);
  return v;
}

TEST(ServingSpecTest, ARunWithinItsBoundAndMinimumsIsValid) {
  const Judged j = Judge(Server(), Latencies(1024, 5), 10.5);
  EXPECT_TRUE(j.phase.valid()) << j.phase.DebugString();
  EXPECT_THAT(j.phase.invalid_reasons(), IsEmpty());
  EXPECT_EQ(j.run.latency_p99_ns(), 5'000'000);
  EXPECT_EQ(j.run.latency_at_percentile_ns(), 5'000'000);
  EXPECT_EQ(j.run.over_bound(), 0);
  EXPECT_TRUE(j.run.exact());
  EXPECT_GT(j.run.early_stopping_ns(), 0);
  EXPECT_NEAR(j.run.samples_per_second(), 1024 / 10.5, 1e-9);
}

TEST(ServingSpecTest, TooFewQueriesForThePercentileSayHowManyMore) {
  // 10 of 1,100 over the bound: p99 (rank 1,089) is within it, but at 99%
  // confidence the binomial test needs more queries (early stopping).
  v1::JobSpec spec = Server();
  spec.mutable_serving()->set_min_queries(1000);
  const Judged j = Judge(spec, Latencies(1100, 5, 10, 80), 11);
  EXPECT_FALSE(j.phase.valid());
  EXPECT_EQ(j.run.over_bound(), 10);
  ASSERT_EQ(j.phase.invalid_reasons_size(), 1) << j.phase.DebugString();
  EXPECT_THAT(j.phase.invalid_reasons(0),
              AllOf(HasSubstr("needs at least "),
                    HasSubstr(" more queries for p99 within "
                              "the bound at 99% confidence (10 of 1100 over it; early stopping)")));
  const EarlyStopping es = EarlyStop(1100, 10, 99);
  EXPECT_THAT(j.phase.invalid_reasons(0), HasSubstr(absl::StrCat("needs at least ", es.min_queries - 1100, " more")));
}

TEST(ServingSpecTest, APercentileOverTheBoundIsSaid) {
  const Judged j = Judge(Server(), Latencies(2000, 5, 100, 80), 20);
  EXPECT_FALSE(j.phase.valid());
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(HasSubstr("p99 latency 80.000 ms is over the bound serving.latency_bound_ms = 50 (100 of "
                                    "2000 queries over it)")));
}

TEST(ServingSpecTest, TheIssuerFallingBehindMinimumsAndLostQueriesAreEachAReason) {
  Judged j = Judge(Server(), Latencies(1024, 5), 10, /*issue_delay_p99_ns=*/6'000'000);
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(HasSubstr("the load generator could not keep up: issue delay p99 6000.0 us > "
                                    "serving.max_issue_delay_share = 0.1 of the bound")));
  j = Judge(Server(), Latencies(1000, 5), 1.5, 1000, /*unanswered=*/3);
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(HasSubstr("only 1000 queries measured: needs at least 24 more (serving.min_queries = 1024)"),
                          HasSubstr("measured 1.500 s, below serving.min_duration_seconds = 2"),
                          HasSubstr("3 of 1003 queries unanswered within the drain time")));
  j = Judge(Server(), {}, 0);
  EXPECT_THAT(j.phase.invalid_reasons(), ElementsAre(HasSubstr("no query answered")));
}

TEST(ServingSpecTest, OfflineTooShortSaysHowManyQueriesWouldFillTheDuration) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_serving()->set_scenario("offline");
  spec = WithDefaults(spec);
  const Judged j = Judge(spec, Latencies(1024, 5), 0.5);  // 2,048 samples/s
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(HasSubstr("measured 0.500 s, below serving.min_duration_seconds = 2; raise "
                                    "serving.min_queries to about 4096")));
}

TEST(ServingSpecTest, SingleStreamWithoutABoundNeedsEnoughQueriesForAnEstimate) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_serving()->set_scenario("single_stream");
  spec.mutable_serving()->set_min_queries(10);
  spec = WithDefaults(spec);
  Judged j = Judge(spec, Latencies(50, 5), 3);
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(HasSubstr("needs at least 14 more queries for an early-stopping estimate of p90")));
  j = Judge(spec, Latencies(64, 5), 3);
  EXPECT_TRUE(j.phase.valid()) << j.phase.DebugString();
}

TEST(ServingSpecTest, ReplicasAreAServerRunsAndTheirTimeoutIsStated) {
  v1::JobSpec spec = Server();
  EXPECT_EQ(spec.serving().replicas(), 1);
  EXPECT_FALSE(spec.serving().has_replica_timeout_seconds());
  spec.mutable_serving()->set_replicas(3);
  spec = WithDefaults(spec);
  EXPECT_EQ(spec.serving().replica_timeout_seconds(), 600);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  EXPECT_THAT(JobSpecToYaml(spec), AllOf(HasSubstr("replicas: 3"), HasSubstr("replica_timeout_seconds: 600")));
  spec.mutable_serving()->set_replicas(0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.replicas = 0: must be in [1, 64]"));
  v1::JobSpec offline;
  offline.add_models("mlp");
  offline.mutable_serving()->set_scenario("offline");
  offline.mutable_serving()->set_replicas(2);
  EXPECT_THAT(Problems(WithDefaults(offline)), HasSubstr("serving.replicas = 2: only for scenario server"));
  v1::JobSpec one = Server();
  one.mutable_serving()->set_replica_timeout_seconds(5);
  EXPECT_THAT(Problems(one), HasSubstr("serving.replica_timeout_seconds = 5: only with serving.replicas > 1"));
}

}  // namespace
}  // namespace hetbench
