// `hetbench history`: rows of one model oldest first, one series per device
// model, executor, batch and fingerprint, each run compared with the previous
// of its series only.
#include "report/history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;

void AddRun(v1::Job* job, const std::string& model, int batch, double finished, double step_ms) {
  v1::Task* t = job->add_tasks();
  t->set_id(job->id() + "-t" + std::to_string(job->tasks_size() - 1));
  t->set_state(v1::TASK_STATE_SUCCEEDED);
  t->set_model(model);
  t->set_batch_size(batch);
  t->set_device_kind(v1::DEVICE_KIND_CPU);
  t->set_agent_id("n1");
  t->set_device_id("cpu0");
  t->set_finished_unix_seconds(finished);
  t->mutable_result()->mutable_environment()->set_device_model("EPYC");
  t->mutable_result()->mutable_environment()->set_model_fingerprint(model + "/init=1");
  v1::PhaseResult* p = t->mutable_result()->add_phases();
  p->set_phase(v1::PHASE_TRAIN);
  p->set_valid(true);
  p->mutable_stats()->set_count(10);
  p->mutable_stats()->set_items(10 * batch);
  p->mutable_stats()->set_p25_ns(step_ms * 0.9e6);
  p->mutable_stats()->set_p50_ns(step_ms * 1e6);
  p->mutable_stats()->set_p75_ns(step_ms * 1.1e6);
}

TEST(HistoryTest, RowsAreOldestFirstAndComparedWithinTheirSeries) {
  std::vector<v1::Job> jobs(3);
  jobs[0].set_id("job-3");  // newest first, as ListJobs gives them
  AddRun(&jobs[0], "mlp", 64, 300, 11.0);  // 10% slower than job-2's
  jobs[1].set_id("job-2");
  AddRun(&jobs[1], "mlp", 64, 200, 10.0);
  AddRun(&jobs[1], "cnn", 64, 201, 50.0);  // another model: left out
  jobs[2].set_id("job-1");
  AddRun(&jobs[2], "mlp", 64, 100, 10.0);
  AddRun(&jobs[2], "mlp", 128, 101, 15.0);  // its own series
  // Per-step times as the runs measured them: steady, at the median.
  std::map<std::string, double> per_sample;
  for (const v1::Job& j : jobs) {
    for (const v1::Task& t : j.tasks()) per_sample[t.id()] = t.result().phases(0).stats().p50_ns() / t.batch_size();
  }
  std::vector<std::string> fetched;
  auto steps_of = [&](const v1::Task& t) {
    fetched.push_back(t.id());
    std::vector<double> v;
    for (int i = 0; i < 50; ++i) v.push_back(per_sample[t.id()] * (1 + 0.001 * (i % 7)));
    return v;
  };
  const std::vector<HistoryRow> rows = BuildHistory(jobs, "mlp", v1::DEVICE_KIND_UNSPECIFIED, 0.02, steps_of);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].task->id(), "job-1-t0");
  EXPECT_EQ(rows[1].task->id(), "job-1-t1");
  EXPECT_EQ(rows[2].task->id(), "job-2-t0");
  EXPECT_EQ(rows[3].task->id(), "job-3-t0");
  EXPECT_FALSE(rows[0].has_change);
  EXPECT_FALSE(rows[1].has_change);  // batch 128: first of its series
  ASSERT_TRUE(rows[2].has_change);
  EXPECT_EQ(rows[2].change.verdict, "no change");
  ASSERT_TRUE(rows[3].has_change);
  EXPECT_EQ(rows[3].change.verdict, "slower");
  EXPECT_NEAR(rows[3].change.ratio, 1.1, 0.01);
  EXPECT_NEAR(rows[0].samples_per_second_p50, 64 / 0.010, 1e-6);
  EXPECT_EQ(fetched.size(), 3u);  // each task's steps fetched once; the lone batch-128 run never
  const std::string table = RenderHistory(rows, "mlp", 0.02, "table");
  EXPECT_THAT(table, HasSubstr("slower: time x1.100"));
  EXPECT_THAT(table, HasSubstr("first of its series"));
  const auto doc = nlohmann::json::parse(RenderHistory(rows, "mlp", 0.02, "json"));
  EXPECT_EQ(doc["schema"], "hetbench.history/v1");
  EXPECT_EQ(doc["rows"][3]["versus_previous"]["verdict"], "slower");
  EXPECT_FALSE(doc["rows"][0].contains("versus_previous"));
  EXPECT_TRUE(BuildHistory(jobs, "mlp", v1::DEVICE_KIND_GPU, 0.02, steps_of).empty());
}

TEST(HistoryTest, ARunWithAnInvalidTrainPhaseIsNotAChangePoint) {
  std::vector<v1::Job> jobs(2);
  jobs[0].set_id("job-2");
  AddRun(&jobs[0], "mlp", 64, 200, 7.0);  // 30% faster, but too noisy to say
  v1::PhaseResult* noisy = jobs[0].mutable_tasks(0)->mutable_result()->mutable_phases(0);
  noisy->set_valid(false);
  noisy->add_invalid_reasons("too noisy: IQR/median = 0.564 > validity.max_iqr_over_median = 0.25");
  jobs[1].set_id("job-1");
  AddRun(&jobs[1], "mlp", 64, 100, 10.0);
  auto steps_of = [&](const v1::Task& t) {
    const double ms = t.result().phases(0).stats().p50_ns() / t.batch_size();
    std::vector<double> v;
    for (int i = 0; i < 50; ++i) v.push_back(ms * (1 + 0.001 * (i % 7)));
    return v;
  };
  const std::vector<HistoryRow> rows = BuildHistory(jobs, "mlp", v1::DEVICE_KIND_UNSPECIFIED, 0.02, steps_of);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows[1].has_change);
  EXPECT_FALSE(IsChange(rows[1].change));
  EXPECT_EQ(ChangeText(rows[1]), "not comparable: run B train INVALID (too noisy)");
  const auto doc = nlohmann::json::parse(RenderHistory(rows, "mlp", 0.02, "json"));
  EXPECT_EQ(doc["rows"][1]["versus_previous"]["verdict"], "not comparable: run B train INVALID (too noisy)");
  EXPECT_THAT(RenderHistory(rows, "mlp", 0.02, "table"), HasSubstr("not comparable: run B train INVALID (too noisy)"));
}

}  // namespace
}  // namespace hetbench::report
