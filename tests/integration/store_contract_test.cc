// The job store contract, run against every backend: SQLite (a file) and
// PostgreSQL (a real server started for this test process).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "server/store/pg_job_store.h"
#include "server/store/pg_leader.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/postgres.h"
#include "tests/testing/store_rows.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::server {
namespace {

v1::PowerBatch Power(const std::string& task, uint64_t seq, int n) {
  v1::PowerBatch b;
  b.set_task_id(task);
  b.set_attempt(1);
  b.set_seq(seq);
  b.mutable_sensor()->set_name("rapl:package-0");
  for (int i = 0; i < n; ++i) {
    b.add_t_ns(i * 1000);
    b.add_watts(40 + i);
  }
  return b;
}

using testing::Batch;
using testing::MakeJob;

/// Opens stores of one backend, all on the same data.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual absl::StatusOr<std::unique_ptr<JobStore>> Open() = 0;
};

class SqliteBackend : public Backend {
 public:
  absl::StatusOr<std::unique_ptr<JobStore>> Open() override {
    auto s = SqliteJobStore::Open(dir_.path() + "/jobs.db");
    if (!s.ok()) return s.status();
    return std::unique_ptr<JobStore>(std::move(*s));
  }

 private:
  testing::TempDir dir_{"hetbench-contract"};
};

class PostgresBackend : public Backend {
 public:
  absl::StatusOr<std::unique_ptr<JobStore>> Open() override {
    if (url_.empty()) {
      auto url = testing::FreshTestDatabase();
      if (!url.ok()) return url.status();
      url_ = *url;
      // The stores write as the leader this lock made.
      PgLeaderOptions options;
      options.url = url_;
      options.holder = "contract-test";
      auto lock = PgLeaderLock::Connect(options);
      if (!lock.ok()) return lock.status();
      lock_ = std::move(*lock);
      if (auto e = lock_->Acquire(nullptr, nullptr); !e.ok()) return e.status();
    }
    PgStoreOptions options;
    options.url = url_;
    options.epoch = lock_->epoch();
    auto s = PgJobStore::Open(options);
    if (!s.ok()) return s.status();
    return std::unique_ptr<JobStore>(std::move(*s));
  }

 private:
  std::string url_;
  std::unique_ptr<PgLeaderLock> lock_;
};

class StoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      backend_ = std::make_unique<SqliteBackend>();
    } else {
      backend_ = std::make_unique<PostgresBackend>();
    }
    auto s = backend_->Open();
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void Reopen() {
    store_.reset();
    auto s = backend_->Open();
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<JobStore> store_;
};

TEST_P(StoreContractTest, SampleBatchIsStoredOncePerSequenceNumber) {
  ASSERT_TRUE(store_->Begin().ok());
  auto first = store_->PutSampleBatch(Batch("job-000001-t0", 1, 0, 5));
  auto again = store_->PutSampleBatch(Batch("job-000001-t0", 1, 0, 5));
  auto next = store_->PutSampleBatch(Batch("job-000001-t0", 1, 1, 3));
  auto other_attempt = store_->PutSampleBatch(Batch("job-000001-t0", 2, 0, 2));
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_TRUE(first.ok() && again.ok() && next.ok() && other_attempt.ok()) << first.status() << again.status();
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*again);
  EXPECT_TRUE(*next);
  EXPECT_TRUE(*other_attempt);
  auto batches = store_->LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 2u);  // attempts are kept apart
  EXPECT_EQ((*batches)[0].seq(), 0u);
  EXPECT_EQ((*batches)[0].duration_ns(4), 94);
  EXPECT_EQ((*batches)[1].duration_ns_size(), 3);
  auto page = store_->LoadSampleBatches("job-000001-t0", 1, 1, 5);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].seq(), 1u);
}

// Many batches at once (PostgreSQL sends them as multi-row INSERTs of 512): each
// stored once, a repeat inside the call or of an earlier one answered false,
// every result in order; and the lot still commits or rolls back as one.
TEST_P(StoreContractTest, ManyBatchesAtOnceAreStoredOnceEachInOrder) {
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(*store_->PutSampleBatch(Batch("job-000003-t0", 1, 5, 2)));
  std::vector<v1::SampleBatch> owned;
  for (int seq = 0; seq < 600; ++seq) owned.push_back(Batch("job-000003-t0", 1, seq, 2));
  owned.push_back(Batch("job-000003-t0", 1, 7, 2));  // again, inside the call
  // Keys that differ by task or attempt only are different batches.
  owned.push_back(Batch("job-000003-t0", 2, 7, 3));
  owned.push_back(Batch("job-000003-t1", 1, 7, 4));
  std::vector<const v1::SampleBatch*> batches;
  for (const v1::SampleBatch& b : owned) batches.push_back(&b);
  const std::vector<absl::StatusOr<bool>> results = store_->PutSampleBatches(batches);
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_EQ(results.size(), batches.size());
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    EXPECT_EQ(*results[i], i != 5 && i != 600) << i;  // seq 5 was stored before; seq 7 twice
  }
  auto stored = store_->LoadSampleBatches("job-000003-t0", 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 600u);
  EXPECT_EQ((*stored)[7].duration_ns_size(), 2);
  auto other_attempt = store_->LoadSampleBatches("job-000003-t0", 2);
  auto other_task = store_->LoadSampleBatches("job-000003-t1", 1);
  ASSERT_TRUE(other_attempt.ok() && other_task.ok());
  ASSERT_EQ(other_attempt->size(), 1u);
  EXPECT_EQ((*other_attempt)[0].duration_ns_size(), 3);
  ASSERT_EQ(other_task->size(), 1u);
  EXPECT_EQ((*other_task)[0].duration_ns_size(), 4);

  // Rolled back: none of them is kept.
  ASSERT_TRUE(store_->Begin().ok());
  std::vector<v1::SampleBatch> more;
  for (int seq = 0; seq < 300; ++seq) more.push_back(Batch("job-000004-t0", 1, seq, 2));
  std::vector<const v1::SampleBatch*> refs;
  for (const v1::SampleBatch& b : more) refs.push_back(&b);
  for (const auto& r : store_->PutSampleBatches(refs)) ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(store_->Rollback().ok());
  auto none = store_->LoadSampleBatches("job-000004-t0", 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(StoreContractTest, PowerBatchesAreStoredOnceAndPaged) {
  ASSERT_TRUE(store_->Begin().ok());
  for (uint64_t seq = 0; seq < 5; ++seq) ASSERT_TRUE(*store_->PutPowerBatch(Power("job-000001-t0", seq, 3)));
  EXPECT_FALSE(*store_->PutPowerBatch(Power("job-000001-t0", 2, 3)));
  ASSERT_TRUE(store_->Commit().ok());
  auto all = store_->LoadPowerBatches("job-000001-t0", 1);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[4].watts(2), 42);
  auto page = store_->LoadPowerBatches("job-000001-t0", 1, 2, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].seq(), 2u);
  EXPECT_EQ((*page)[1].seq(), 3u);
}

TEST_P(StoreContractTest, DeviceHealthIsARowPerDeviceAndAPassDeletesIt) {
  v1::DeviceHealth fail;
  fail.set_device_id("cpu1");
  fail.set_verdict(v1::VERDICT_FAIL);
  fail.set_quarantined(true);
  fail.set_job_id("job-000001");
  v1::DeviceHealth degraded = fail;
  degraded.set_device_id("gpu0");
  degraded.set_verdict(v1::VERDICT_DEGRADED);
  degraded.set_quarantined(false);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->PutDeviceHealth("a1", fail).ok());
  ASSERT_TRUE(store_->PutDeviceHealth("a1", degraded).ok());
  fail.set_job_id("job-000002");  // replaced, not added
  ASSERT_TRUE(store_->PutDeviceHealth("a1", fail).ok());
  ASSERT_TRUE(store_->Commit().ok());
  Reopen();
  auto rows = store_->LoadDeviceHealth();
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].second.device_id(), "cpu1");
  EXPECT_EQ((*rows)[0].second.job_id(), "job-000002");
  v1::DeviceHealth pass = fail;
  pass.set_verdict(v1::VERDICT_PASS);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->PutDeviceHealth("a1", pass).ok());
  ASSERT_TRUE(store_->Commit().ok());
  rows = store_->LoadDeviceHealth();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].second.device_id(), "gpu0");
}

TEST_P(StoreContractTest, BaselinesAreVersionedPerNameAndNeverRewritten) {
  EXPECT_EQ(*store_->LatestBaselineVersion("nightly"), 0);
  ASSERT_TRUE(store_->Begin().ok());
  for (int v = 1; v <= 3; ++v) {
    v1::Baseline b;
    b.set_schema("hetbench.baseline.v1");
    b.set_name("nightly");
    b.set_version(v);
    b.set_created_unix_seconds(1000 + v);
    b.set_source_job_id(absl::StrCat("job-00000", v));
    b.add_skus()->set_sku("cpu|x");
    ASSERT_TRUE(store_->PutBaseline(b).ok());
  }
  v1::Baseline other;
  other.set_name("weekly");
  other.set_version(1);
  other.set_created_unix_seconds(999);
  ASSERT_TRUE(store_->PutBaseline(other).ok());
  ASSERT_TRUE(store_->Commit().ok());
  Reopen();
  EXPECT_EQ(*store_->LatestBaselineVersion("nightly"), 3);
  auto latest = store_->GetBaseline("nightly", 0);
  ASSERT_TRUE(latest.ok() && latest->has_value()) << latest.status();
  EXPECT_EQ((*latest)->version(), 3);
  EXPECT_EQ((*latest)->skus_size(), 1);
  auto second = store_->GetBaseline("nightly", 2);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->source_job_id(), "job-000002");
  EXPECT_FALSE(store_->GetBaseline("nightly", 9)->has_value());
  auto list = store_->ListBaselines("nightly", 100);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].version(), 3);
  EXPECT_EQ((*list)[0].skus_size(), 0);  // headers only
  EXPECT_EQ(store_->ListBaselines("", 100)->size(), 4u);
}

TEST_P(StoreContractTest, CommittedJobsSurviveReopenAndRolledBackOnesDoNot) {
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(1, v1::JOB_STATE_QUEUED, 1), "").ok());
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(2, v1::JOB_STATE_QUEUED, 1), "").ok());
  ASSERT_TRUE(store_->PutSampleBatch(Batch("job-000002-t0", 1, 0, 2)).ok());
  ASSERT_TRUE(store_->Rollback().ok());
  Reopen();
  auto jobs = store_->LoadLiveJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "job-000001");
  EXPECT_EQ((*jobs)[0].tasks(0).id(), "job-000001-t0");
  EXPECT_TRUE(store_->LoadSampleBatches("job-000002-t0", 1)->empty());
  EXPECT_EQ(*store_->MaxJobNumber(), 1);
}

TEST_P(StoreContractTest, ATaskIsARowAndOnlyLiveJobsAreLoaded) {
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(1, v1::JOB_STATE_SUCCEEDED, 2), "").ok());
  v1::Job live = MakeJob(2, v1::JOB_STATE_QUEUED, 3);
  ASSERT_TRUE(store_->InsertJob(live, "").ok());
  // One task changes: only its row is written; the header keeps its state.
  live.mutable_tasks(1)->set_state(v1::TASK_STATE_RUNNING);
  live.mutable_tasks(1)->set_agent_id("a1");
  ASSERT_TRUE(store_->PutTask(live.tasks(1)).ok());
  ASSERT_TRUE(store_->Commit().ok());
  auto loaded = store_->LoadLiveJobs();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].id(), "job-000002");
  ASSERT_EQ((*loaded)[0].tasks_size(), 3);
  EXPECT_EQ((*loaded)[0].tasks(1).agent_id(), "a1");
  auto task = store_->GetTask("job-000002-t1");
  ASSERT_TRUE(task.ok() && task->has_value());
  EXPECT_EQ((*task)->state(), v1::TASK_STATE_RUNNING);
  EXPECT_FALSE(store_->GetTask("job-000002-t9")->has_value());
  EXPECT_FALSE(store_->GetTask("nonsense")->has_value());
  auto ended = store_->GetJob("job-000001");
  ASSERT_TRUE(ended.ok() && ended->has_value());
  EXPECT_EQ((*ended)->tasks(0).result().test_accuracy(), 0.5);  // a job read alone keeps its results
  EXPECT_FALSE(store_->GetJob("job-1")->has_value());
  // The header is rewritten alone.
  v1::Job header = MakeJob(2, v1::JOB_STATE_RUNNING, 0);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->PutJobHeader(header).ok());
  ASSERT_TRUE(store_->Commit().ok());
  auto reread = store_->GetJob("job-000002");
  ASSERT_TRUE(reread.ok() && reread->has_value());
  EXPECT_EQ((*reread)->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ((*reread)->tasks_size(), 3);
  auto counts = store_->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->jobs[v1::JOB_STATE_SUCCEEDED], 1);
  EXPECT_EQ(counts->jobs[v1::JOB_STATE_RUNNING], 1);
  EXPECT_EQ(counts->tasks[v1::TASK_STATE_QUEUED], 2);
  EXPECT_EQ(*store_->MaxJobNumber(), 2);
}

// A failed write fails the whole transaction: nothing of it is stored, and
// the commit says why (the coordinator then reloads).
TEST_P(StoreContractTest, ARequestIdNamesOneJobAndAFailedWriteFailsItsWholeTransaction) {
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(1, v1::JOB_STATE_QUEUED, 1), "req-a").ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(*store_->FindRequest("req-a"), "job-000001");
  EXPECT_EQ(*store_->FindRequest("req-b"), "");

  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(2, v1::JOB_STATE_QUEUED, 1), "req-c").ok());
  EXPECT_FALSE(store_->InsertJob(MakeJob(3, v1::JOB_STATE_QUEUED, 1), "req-a").ok());  // unique
  (void)store_->PutSampleBatch(Batch("job-000002-t0", 1, 0, 2));
  const absl::Status commit = store_->Commit();
  EXPECT_FALSE(commit.ok());
  EXPECT_THAT(std::string(commit.message()), ::testing::HasSubstr("job store"));
  (void)store_->Rollback();
  EXPECT_EQ(*store_->FindRequest("req-c"), "");
  EXPECT_FALSE(store_->GetJob("job-000002")->has_value());
  EXPECT_TRUE(store_->LoadSampleBatches("job-000002-t0", 1)->empty());
  // The store works on after it.
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(2, v1::JOB_STATE_QUEUED, 1), "req-c").ok());
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(*store_->FindRequest("req-c"), "job-000002");
}

TEST_P(StoreContractTest, ListingPagesNewestFirstWithFilters) {
  ASSERT_TRUE(store_->Begin().ok());
  for (int i = 1; i <= 7; ++i) {
    v1::Job job = MakeJob(i, i % 2 ? v1::JOB_STATE_SUCCEEDED : v1::JOB_STATE_FAILED, 2, i <= 3 ? "cnn" : "mlp");
    if (i == 5) job.mutable_spec()->mutable_targets(0)->set_device_kind(v1::DEVICE_KIND_GPU);
    ASSERT_TRUE(store_->InsertJob(job, "").ok());
  }
  ASSERT_TRUE(store_->Commit().ok());
  JobFilter filter;
  filter.page_size = 3;
  std::vector<std::string> seen;
  int pages = 0;
  do {
    auto page = store_->ListJobs(filter);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const v1::Job& j : page->jobs) {
      seen.push_back(j.id());
      EXPECT_EQ(j.tasks_size(), 2);
      EXPECT_FALSE(j.tasks(0).has_result());  // listings carry states, not results
    }
    filter.page_token = page->next_page_token;
    ++pages;
  } while (!filter.page_token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(seen, ::testing::ElementsAre("job-000007", "job-000006", "job-000005", "job-000004", "job-000003",
                                           "job-000002", "job-000001"));
  JobFilter failed_mlp;
  failed_mlp.state = v1::JOB_STATE_FAILED;
  failed_mlp.model = "mlp";
  auto page = store_->ListJobs(failed_mlp);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 2u);  // 6 and 4 (2 is a cnn job)
  EXPECT_EQ(page->jobs[0].id(), "job-000006");
  JobFilter gpu;
  gpu.device_kind = v1::DEVICE_KIND_GPU;
  ASSERT_EQ(store_->ListJobs(gpu)->jobs.size(), 1u);
  EXPECT_EQ(store_->ListJobs(gpu)->jobs[0].id(), "job-000005");
  JobFilter bad;
  bad.page_token = "x";
  EXPECT_EQ(store_->ListJobs(bad).status().code(), absl::StatusCode::kInvalidArgument);
  // The model filter matches literally: SQL pattern characters are plain characters.
  for (const char* pattern : {"m_p", "%", "ml%", "_lp", "%,mlp"}) {
    JobFilter literal;
    literal.model = pattern;
    auto none = store_->ListJobs(literal);
    ASSERT_TRUE(none.ok()) << pattern << ": " << none.status();
    EXPECT_TRUE(none->jobs.empty()) << pattern << " matched " << none->jobs.size() << " jobs";
  }
}

TEST_P(StoreContractTest, RawBatchesOfOldFinishedJobsArePrunedAndResultsStay) {
  ASSERT_TRUE(store_->Begin().ok());
  v1::Job old_job = MakeJob(1, v1::JOB_STATE_SUCCEEDED, 1);
  old_job.set_finished_unix_seconds(100);
  v1::Job recent = MakeJob(10, v1::JOB_STATE_SUCCEEDED, 1);
  recent.set_finished_unix_seconds(900);
  ASSERT_TRUE(store_->InsertJob(old_job, "").ok());
  ASSERT_TRUE(store_->InsertJob(recent, "").ok());
  ASSERT_TRUE(store_->PutSampleBatch(Batch("job-000001-t0", 1, 0, 4)).ok());
  ASSERT_TRUE(store_->PutPowerBatch(Power("job-000001-t0", 0, 4)).ok());
  ASSERT_TRUE(store_->PutSampleBatch(Batch("job-000010-t0", 1, 0, 4)).ok());
  auto pruned = store_->PruneRawBatches(500, 8);
  ASSERT_TRUE(store_->Commit().ok());
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);
  EXPECT_TRUE(store_->LoadSampleBatches("job-000001-t0", 1)->empty());
  EXPECT_TRUE(store_->LoadPowerBatches("job-000001-t0", 1)->empty());
  EXPECT_EQ(store_->LoadSampleBatches("job-000010-t0", 1)->size(), 1u);  // job-00001 is not a prefix of job-000010
  EXPECT_EQ((*store_->GetJob("job-000001"))->tasks(0).result().test_accuracy(), 0.5);
  ASSERT_TRUE(store_->Begin().ok());
  EXPECT_EQ(*store_->PruneRawBatches(500, 8), 0);  // done once
  ASSERT_TRUE(store_->Commit().ok());
}

// The batch writer's connection: its transactions and the loop's exclude
// each other, and each sees what the other committed.
TEST_P(StoreContractTest, ASecondConnectionWritesBesideTheFirst) {
  auto other = store_->Connect();
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(MakeJob(1, v1::JOB_STATE_RUNNING, 1), "").ok());
  ASSERT_TRUE(store_->Commit().ok());
  std::thread writer([&] {
    for (uint64_t seq = 0; seq < 50; ++seq) {
      ASSERT_TRUE((*other)->Begin().ok());
      ASSERT_TRUE(*(*other)->PutSampleBatch(Batch("job-000001-t0", 1, seq, 4)));
      ASSERT_TRUE((*other)->Commit().ok());
    }
  });
  for (int i = 0; i < 50; ++i) {
    v1::Task t = MakeJob(1, v1::JOB_STATE_RUNNING, 1).tasks(0);
    t.set_restarts(i);
    ASSERT_TRUE(store_->Begin().ok());
    ASSERT_TRUE(store_->PutTask(t).ok());
    ASSERT_TRUE(store_->Commit().ok());
  }
  writer.join();
  EXPECT_EQ(store_->LoadSampleBatches("job-000001-t0", 1)->size(), 50u);
  EXPECT_EQ((*(*other)->GetTask("job-000001-t0"))->restarts(), 49);
}

// Crash consistency: a writer process killed at a random moment, inside a
// transaction or between two, leaves each transaction all there or not at
// all: a job never without its tasks or its batches.
TEST_P(StoreContractTest, ATransactionCutAtAnyPointLeavesAllOrNone) {
  constexpr int kTasks = 4, kBatches = 6;
  std::mt19937 rng(7);
  int next_job = 1;
  for (int round = 0; round < 8; ++round) {
    const int first = next_job;
    store_.reset();  // the child opens its own connection
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = backend_->Open();
      if (!store.ok()) _exit(2);
      for (int n = first;; ++n) {
        (void)(*store)->Begin();
        (void)(*store)->InsertJob(MakeJob(n, v1::JOB_STATE_RUNNING, kTasks), absl::StrCat("req-", n));
        for (int t = 0; t < kTasks; ++t) {
          for (int b = 0; b < kBatches; ++b) {
            (void)(*store)->PutSampleBatch(Batch(absl::StrFormat("job-%06d-t%d", n, t), 1, b, 50));
          }
        }
        if (!(*store)->Commit().ok()) _exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20000 + rng() % 200000));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended by itself: " << WEXITSTATUS(status);
    Reopen();
    auto max = store_->MaxJobNumber();
    ASSERT_TRUE(max.ok()) << max.status();
    for (int n = first; n <= *max; ++n) {
      auto job = store_->GetJob(absl::StrFormat("job-%06d", n));
      ASSERT_TRUE(job.ok() && job->has_value()) << "job " << n << " of " << *max << " is missing";
      ASSERT_EQ((*job)->tasks_size(), kTasks) << "job " << n;
      for (int t = 0; t < kTasks; ++t) {
        // Every batch whole, as written (SQLite: its bytes in a segment file, written before the commit).
        const std::string task = absl::StrFormat("job-%06d-t%d", n, t);
        auto batches = store_->LoadSampleBatches(task, 1);
        ASSERT_TRUE(batches.ok()) << task << ": " << batches.status();
        ASSERT_EQ(batches->size(), size_t{kBatches}) << task;
        for (int b = 0; b < kBatches; ++b) {
          const v1::SampleBatch want = Batch(task, 1, b, 50);
          ASSERT_EQ(std::vector<int64_t>((*batches)[b].start_ns().begin(), (*batches)[b].start_ns().end()),
                    std::vector<int64_t>(want.start_ns().begin(), want.start_ns().end()))
              << task << " batch " << b;
        }
      }
    }
    // Nothing of the cut transaction: no batches of the job after the last.
    EXPECT_TRUE(store_->LoadSampleBatches(absl::StrFormat("job-%06d-t0", *max + 1), 1)->empty());
    next_job = static_cast<int>(*max) + 1;
  }
  EXPECT_GT(next_job, 8);  // the writers committed work between the cuts
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hetbench::server
