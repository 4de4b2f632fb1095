#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "server/store/sqlite_job_store.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::server {
namespace {

v1::SampleBatch Batch(const std::string& task, int attempt, uint64_t seq, int n) {
  v1::SampleBatch b;
  b.set_task_id(task);
  b.set_attempt(attempt);
  b.set_seq(seq);
  b.set_phase(v1::PHASE_TRAIN);
  for (int i = 0; i < n; ++i) {
    b.add_start_ns(i * 100);
    b.add_duration_ns(90 + i);
    b.add_items(8);
  }
  return b;
}

TEST(SqliteJobStoreTest, SampleBatchIsStoredOncePerSequenceNumber) {
  auto store = SqliteJobStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status();
  auto first = (*store)->PutSampleBatch(Batch("t0", 1, 0, 5));
  auto again = (*store)->PutSampleBatch(Batch("t0", 1, 0, 5));
  auto next = (*store)->PutSampleBatch(Batch("t0", 1, 1, 3));
  auto other_attempt = (*store)->PutSampleBatch(Batch("t0", 2, 0, 2));
  ASSERT_TRUE(first.ok() && again.ok() && next.ok() && other_attempt.ok());
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*again);
  EXPECT_TRUE(*next);
  EXPECT_TRUE(*other_attempt);
  auto batches = (*store)->LoadSampleBatches("t0", 1);
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 2u);  // attempts are kept apart
  EXPECT_EQ((*batches)[0].seq(), 0u);
  EXPECT_EQ((*batches)[1].duration_ns_size(), 3);
}

TEST(SqliteJobStoreTest, CommittedJobsSurviveReopenAndRolledBackOnesDoNot) {
  testing::TempDir dir("hetbench-store");
  const std::string path = dir.path() + "/jobs.db";
  {
    auto store = SqliteJobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    v1::Job job;
    job.set_id("job-000001");
    job.set_state(v1::JOB_STATE_QUEUED);
    job.add_tasks()->set_id("job-000001-t0");
    ASSERT_TRUE((*store)->Begin().ok());
    ASSERT_TRUE((*store)->PutJob(job).ok());
    ASSERT_TRUE((*store)->Commit().ok());
    job.set_id("job-000002");
    ASSERT_TRUE((*store)->Begin().ok());
    ASSERT_TRUE((*store)->PutJob(job).ok());
    ASSERT_TRUE((*store)->Rollback().ok());
  }
  auto store = SqliteJobStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "job-000001");
  EXPECT_EQ((*jobs)[0].tasks(0).id(), "job-000001-t0");
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
}

TEST(SqliteJobStoreTest, UnopenablePathIsAClearError) {
  auto store = SqliteJobStore::Open("/nonexistent-dir/for/sure/jobs.db");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr("cannot open"));
}

}  // namespace
}  // namespace hetbench::server
