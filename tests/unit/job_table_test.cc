// The JobTable part alone: tasks expanded from a spec, lookups, job state
// from task states, the rows a batch writes, eviction and the counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/service/job_table.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/store_rows.h"

namespace hetbench::server {
namespace {

v1::JobSpec Spec(std::vector<std::string> models, std::vector<int> batches, int targets = 1) {
  v1::JobSpec spec;
  for (auto& m : models) spec.add_models(m);
  for (int b : batches) spec.add_batch_sizes(b);
  for (int i = 0; i < targets; ++i) spec.add_targets()->set_device_kind(i == 0 ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_GPU);
  return spec;
}

TEST(JobTableTest, CreateMakesATaskPerModelTargetAndBatchSize) {
  JobTable table;
  const v1::Job& job = table.Create(Spec({"mlp", "cnn"}, {32, 64}, 2), "req-1", 1000).job;
  EXPECT_EQ(job.id(), "job-000001");
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  ASSERT_EQ(job.tasks_size(), 8);
  EXPECT_EQ(job.tasks(0).model(), "mlp");
  EXPECT_EQ(job.tasks(0).target().device_kind(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(job.tasks(1).batch_size(), 64);
  EXPECT_EQ(job.tasks(2).target().device_kind(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(job.tasks(7).id(), "job-000001-t7");
  EXPECT_EQ(job.tasks(7).model(), "cnn");
  EXPECT_DOUBLE_EQ(job.tasks(3).queued_unix_seconds(), 1000);
  EXPECT_EQ(table.JobForRequest("req-1"), "job-000001");
  EXPECT_EQ(table.JobForRequest("req-2"), std::nullopt);
  LiveJob* owner = nullptr;
  ASSERT_NE(table.FindTask("job-000001-t5", &owner), nullptr);
  EXPECT_EQ(owner, table.Find("job-000001"));
  EXPECT_EQ(table.FindTask("job-000001-t8"), nullptr);
  EXPECT_EQ(table.Create(Spec({"mlp"}, {8}), "", 1001).job.id(), "job-000002");
}

TEST(JobTableTest, AGangPerDeviceCountWithConsecutiveRanks) {
  JobTable table;
  v1::JobSpec spec = Spec({"mlp"}, {64});
  spec.mutable_parallel()->add_devices(1);
  spec.mutable_parallel()->add_devices(2);
  const v1::Job& job = table.Create(spec, "", 1000).job;
  ASSERT_EQ(job.tasks_size(), 3);
  EXPECT_EQ(job.tasks(0).gang().world_size(), 1);
  EXPECT_EQ(job.tasks(1).gang().id(), job.tasks(2).gang().id());
  EXPECT_NE(job.tasks(0).gang().id(), job.tasks(1).gang().id());
  EXPECT_EQ(job.tasks(1).gang().rank(), 0);
  EXPECT_EQ(job.tasks(2).gang().rank(), 1);
  EXPECT_EQ(job.tasks(2).gang().world_size(), 2);
}

TEST(JobTableTest, RepeatsRunEveryConfigurationOnceBeforeAnyTwice) {
  JobTable table;
  v1::JobSpec spec = Spec({"mlp"}, {32}, 2);  // targets A (cpu) and B (gpu)
  spec.set_repeats(3);
  const v1::Job& job = table.Create(spec, "", 1000).job;
  ASSERT_EQ(job.tasks_size(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(job.tasks(i).run(), i / 2 + 1) << i;
    EXPECT_EQ(job.tasks(i).target().device_kind(), i % 2 == 0 ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_GPU)
        << "A B A B, not A A B B: " << i;
  }
  // Gangs are per run: each run's gang its own.
  spec.set_repeats(2);
  spec.mutable_parallel()->add_devices(2);
  const v1::Job& gangs = table.Create(spec, "", 1001).job;
  ASSERT_EQ(gangs.tasks_size(), 8);
  EXPECT_NE(gangs.tasks(0).gang().id(), gangs.tasks(4).gang().id());
  EXPECT_EQ(gangs.tasks(4).run(), 2);
  // One run: the field stays unset, as before repeats existed.
  EXPECT_EQ(table.Create(Spec({"mlp"}, {32}), "", 1002).job.tasks(0).run(), 0);
}

TEST(JobTableTest, JobStateFollowsItsTasksAndAnEndedJobIsEvictedAfterTheCommit) {
  JobTable table;
  LiveJob& live = table.Create(Spec({"mlp"}, {32, 64}), "req", 1000);
  const std::string id = live.job.id();
  live.job.mutable_tasks(0)->set_state(v1::TASK_STATE_RUNNING);
  table.Recompute(live, 1001);
  EXPECT_EQ(live.job.state(), v1::JOB_STATE_RUNNING);
  live.job.mutable_tasks(0)->set_state(v1::TASK_STATE_FAILED);
  live.job.mutable_tasks(0)->set_error("boom");
  live.job.mutable_tasks(1)->set_state(v1::TASK_STATE_SUCCEEDED);
  table.Recompute(live, 1002);
  EXPECT_EQ(live.job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(live.job.error(), "job-000001-t0: boom");
  EXPECT_DOUBLE_EQ(live.job.finished_unix_seconds(), 1002);
  EXPECT_TRUE(table.EndedNow(id));

  std::vector<std::string> evicted;
  const std::vector<int64_t> ended = table.TakeEnded();
  EXPECT_FALSE(table.EndedNow(id)) << "taken: the next batch starts afresh";
  EXPECT_NE(table.Find(id), nullptr) << "still in memory until its batch commits";
  table.Evict(ended, /*count=*/true, [&](const v1::Job& j) { evicted.push_back(j.id()); });
  EXPECT_THAT(evicted, ::testing::ElementsAre(id));
  EXPECT_EQ(table.Find(id), nullptr);
  EXPECT_EQ(table.FindTask("job-000001-t0"), nullptr);
  EXPECT_EQ(table.JobForRequest("req"), std::nullopt);
  EXPECT_FALSE(table.EndedNow(id));
  std::map<v1::JobState, int64_t> jobs;
  std::map<v1::TaskState, int64_t> tasks;
  table.Count(&jobs, &tasks);
  EXPECT_EQ(jobs[v1::JOB_STATE_FAILED], 1);
  EXPECT_EQ(tasks[v1::TASK_STATE_FAILED], 1);
  EXPECT_EQ(tasks[v1::TASK_STATE_SUCCEEDED], 1);
}

TEST(JobTableTest, ACancelledJobStaysCancelledAndEndsWhenItsTasksHave) {
  JobTable table;
  LiveJob& live = table.Create(Spec({"mlp"}, {32}), "", 1000);
  live.job.set_state(v1::JOB_STATE_CANCELLED);
  live.job.mutable_tasks(0)->set_state(v1::TASK_STATE_RUNNING);
  table.Recompute(live, 1001);
  EXPECT_EQ(live.job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(table.EndedNow(live.job.id()));
  live.job.mutable_tasks(0)->set_state(v1::TASK_STATE_CANCELLED);
  table.Recompute(live, 1002);
  EXPECT_TRUE(table.EndedNow(live.job.id()));
}

// Only the rows a batch changed are written, as copies taken at the end of
// the batch: a later change of the live job is not what they write.
TEST(JobTableTest, TakeWritesCopiesTheMarkedRowsOnce) {
  auto store = SqliteJobStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  JobTable table;
  LiveJob& live = table.Create(Spec({"mlp"}, {32, 64}), "", 1000);
  ASSERT_TRUE((*store)->InsertJob(live.job, "").ok());
  live.job.mutable_tasks(1)->set_state(v1::TASK_STATE_RUNNING);
  live.job.mutable_tasks(1)->set_agent_id("a1");
  live.job.mutable_tasks(0)->set_agent_id("not marked");
  table.MarkTask(live, live.job.tasks(1));
  table.Recompute(live, 1001);  // RUNNING: marks the header
  std::vector<StoreWrite> writes = table.TakeWrites();
  EXPECT_EQ(writes.size(), 2u) << "the header and task 1";
  EXPECT_TRUE(table.TakeWrites().empty()) << "taken once";
  live.job.mutable_tasks(1)->set_agent_id("a later batch's");
  live.job.set_state(v1::JOB_STATE_CANCELLED);
  for (const StoreWrite& write : writes) ASSERT_TRUE(write(**store).ok());
  EXPECT_EQ(live.job.tasks_size(), 2) << "the header's copy left the tasks in place";
  auto stored = (*store)->GetJob(live.job.id());
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((**stored).state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ((**stored).tasks(1).agent_id(), "a1");
  EXPECT_EQ((**stored).tasks(0).agent_id(), "") << "an unmarked row is not written";
  EXPECT_TRUE(live.dirty_tasks.empty());
  EXPECT_FALSE(live.header_dirty);
}

// Reset from the store: live jobs' tasks are counted live, not as ended, and
// numbering goes on after the store's highest.
TEST(JobTableTest, ResetCountsLiveTasksApartAndNumbersOnFromTheStore) {
  JobTable table;
  StateCounts counts;
  counts.jobs = {{v1::JOB_STATE_SUCCEEDED, 5}, {v1::JOB_STATE_RUNNING, 1}};
  counts.tasks = {{v1::TASK_STATE_SUCCEEDED, 9}, {v1::TASK_STATE_QUEUED, 2}};
  table.Reset({hetbench::testing::MakeJob(6, v1::JOB_STATE_RUNNING, 2)}, counts, 6);
  std::map<v1::JobState, int64_t> jobs;
  std::map<v1::TaskState, int64_t> tasks;
  table.Count(&jobs, &tasks);
  EXPECT_EQ(jobs[v1::JOB_STATE_SUCCEEDED], 5);
  EXPECT_EQ(jobs[v1::JOB_STATE_RUNNING], 1);
  EXPECT_EQ(tasks[v1::TASK_STATE_QUEUED], 2) << "the live job's two queued tasks, counted once";
  EXPECT_EQ(tasks[v1::TASK_STATE_SUCCEEDED], 9);
  EXPECT_NE(table.FindTask("job-000006-t1"), nullptr);
  EXPECT_EQ(table.Create(Spec({"mlp"}, {8}), "", 1).job.id(), "job-000007");
}

}  // namespace
}  // namespace hetbench::server
