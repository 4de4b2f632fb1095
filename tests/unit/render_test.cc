#include "client/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::client {
namespace {

using ::testing::HasSubstr;

v1::Job TwoTaskJob() {
  v1::Job job;
  job.set_id("job-000007");
  job.mutable_spec()->set_name("sweep");
  job.mutable_spec()->set_model("mlp");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  for (int i = 0; i < 2; ++i) {
    v1::Task* t = job.add_tasks();
    t->set_id("job-000007-t" + std::to_string(i));
    t->set_state(v1::TASK_STATE_SUCCEEDED);
    t->set_agent_id("n1");
    t->set_device_id("cpu0");
    t->set_device_kind(v1::DEVICE_KIND_CPU);
    t->set_batch_size(64 << i);
    v1::PhaseResult* p = t->mutable_result()->add_phases();
    p->set_phase(v1::PHASE_TRAIN);
    p->mutable_stats()->set_count(100);
    p->mutable_stats()->set_p50_ns(2e6 * (i + 1));
    p->mutable_stats()->set_samples_per_second(1000.0 * (i + 1) * 1.5);
    t->mutable_result()->set_test_accuracy(0.84);
  }
  return job;
}

TEST(RenderTest, TableShowsPercentilesInMsAndSpeedupAgainstTheBaseline) {
  const std::string table = RenderReport(TwoTaskJob(), OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("P50_MS"));
  EXPECT_THAT(table, HasSubstr("4.000"));  // 4e6 ns
  EXPECT_THAT(table, HasSubstr("2.00x"));  // 3000 / 1500 samples/s
  EXPECT_THAT(table, HasSubstr("relative to job-000007-t0"));
}

TEST(RenderTest, SpeedupIsRefusedAcrossDifferentFingerprintsUnlessAsked) {
  v1::Job job = TwoTaskJob();
  job.mutable_tasks(0)->mutable_result()->mutable_environment()->set_model_fingerprint("mlp/init=aa");
  job.mutable_tasks(1)->mutable_result()->mutable_environment()->set_model_fingerprint("mlp/init=bb");
  const std::string refused = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(refused, HasSubstr("n/a"));
  EXPECT_THAT(refused, HasSubstr("model fingerprints differ"));
  EXPECT_THAT(refused, ::testing::Not(HasSubstr("2.00x")));
  EXPECT_THAT(RenderReport(job, OutputFormat::kTable, /*compare_mismatched=*/true), HasSubstr("2.00x"));
}

TEST(RenderTest, InvalidPhasesAreMarkedWithTheirReasons) {
  v1::Job job = TwoTaskJob();
  v1::PhaseResult* p = job.mutable_tasks(1)->mutable_result()->mutable_phases(0);
  p->set_valid(false);
  p->add_invalid_reasons("only 3 of 459 steps measured");
  job.mutable_tasks(0)->mutable_result()->mutable_phases(0)->set_valid(true);
  const std::string table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("INVALID job-000007-t1 train: only 3 of 459 steps measured"));
  // Every row carries its verdict in the VALID column.
  EXPECT_THAT(table, ::testing::ContainsRegex("job-000007-t0 .* yes\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("job-000007-t1 .* NO\n"));
  EXPECT_THAT(RenderReport(job, OutputFormat::kCsv), HasSubstr(",false,only 3 of 459 steps measured,"));
}

TEST(RenderTest, CsvHasOneRowPerTaskAndPhaseWithAHeader) {
  const std::string csv = RenderReport(TwoTaskJob(), OutputFormat::kCsv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("job_id,task_id,agent_id", 0), 0u);
  EXPECT_THAT(csv, HasSubstr("job-000007,job-000007-t1,n1,cpu0,cpu,128,succeeded,train,100,"));
}

TEST(RenderTest, SweepsShowTimePerSampleSoBatchSizesCompare) {
  v1::Job job = TwoTaskJob();
  for (int i = 0; i < 2; ++i) {  // 100 steps of 64 and 128 samples
    v1::TimingStats* s = job.mutable_tasks(i)->mutable_result()->mutable_phases(0)->mutable_stats();
    s->set_items(100 * (64 << i));
    s->set_p25_ns(1e6 * (i + 1));
  }
  const std::string table = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("P50_US_PER_SAMPLE"));
  EXPECT_THAT(table, HasSubstr("31.25"));  // 2 ms / 64 samples
  const std::string csv = RenderReport(job, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("p25_ns_per_sample,p50_ns_per_sample,p75_ns_per_sample"));
  EXPECT_THAT(csv, HasSubstr(",15625,31250,0,"));  // task 0: 1 ms and 2 ms per 64-sample step
}

TEST(RenderTest, JsonIsTheFullJob) {
  const std::string json = RenderReport(TwoTaskJob(), OutputFormat::kJson);
  EXPECT_THAT(json, HasSubstr("\"samples_per_second\": 3000"));
  EXPECT_THAT(json, HasSubstr("\"state\": \"JOB_STATE_SUCCEEDED\""));
}

TEST(RenderTest, ProgressBarFillsWithSteps) {
  v1::Job job;
  v1::Task* t = job.add_tasks();
  t->set_id("j-t0");
  t->set_state(v1::TASK_STATE_RUNNING);
  t->set_phase(v1::PHASE_TRAIN);
  t->set_step(50);
  t->set_total_steps(100);
  auto lines = ProgressLines(job, 10);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("[#####.....]  50% train 50/100"));
}

TEST(RenderTest, UnknownFormatIsAUsageError) {
  EXPECT_FALSE(ParseOutputFormat("xml").ok());
  EXPECT_TRUE(ParseOutputFormat("csv").ok());
}

}  // namespace
}  // namespace hetbench::client
