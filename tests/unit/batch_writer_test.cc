// The batch writer alone: each (task, attempt, seq) stored once over its own
// connection, continuations posted to the loop after the commit with whether
// the batch was new, and what was handed in before Stop stored.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "server/ingest/batch_writer.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/fake_loop.h"
#include "tests/testing/sqlite_store.h"
#include "tests/testing/store_rows.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace hetbench::server {
namespace {

using ::hetbench::testing::Batch;
using ::hetbench::testing::FakeLoop;
using ::hetbench::testing::StoreWithRunningJob;
using ::hetbench::testing::WaitFor;

class BatchWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = StoreWithRunningJob(dir_.path() + "/jobs.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    task_ = "job-000001-t0";
  }
  std::unique_ptr<BatchWriter> MakeWriter() {
    auto connection = store_->Connect();
    EXPECT_TRUE(connection.ok()) << connection.status();
    return std::make_unique<BatchWriter>(*std::move(connection), loop_.Poster());
  }
  static std::shared_ptr<const v1::SampleBatch> Shared(v1::SampleBatch b) {
    return std::make_shared<const v1::SampleBatch>(std::move(b));
  }

  hetbench::testing::TempDir dir_{"hetbench-writer"};
  std::unique_ptr<JobStore> store_;
  FakeLoop loop_;
  std::string task_;
};

TEST_F(BatchWriterTest, StoresEachBatchOnceAndTellsTheLoopWhetherItWasNew) {
  auto writer = MakeWriter();
  std::vector<absl::StatusOr<bool>> outcomes;  // "loop" thread: this one
  auto record = [&](absl::StatusOr<bool> stored) { outcomes.push_back(stored); };
  writer->Write(Shared(Batch(task_, 1, 0, 5)), record);
  writer->Write(Shared(Batch(task_, 1, 1, 5)), record);
  ASSERT_TRUE(WaitFor([&] { return loop_.posted() > 0 && (loop_.RunPosted(), outcomes.size() == 2); },
                      absl::Seconds(10)));
  writer->Write(Shared(Batch(task_, 1, 0, 5)), record);  // sent again: a duplicate
  ASSERT_TRUE(WaitFor([&] { return (loop_.RunPosted(), outcomes.size() == 3); }, absl::Seconds(10)));
  ASSERT_TRUE(outcomes[0].ok() && outcomes[1].ok() && outcomes[2].ok());
  EXPECT_TRUE(*outcomes[0]);
  EXPECT_TRUE(*outcomes[1]);
  EXPECT_FALSE(*outcomes[2]) << "the same (task, attempt, seq) is stored once";
  auto stored = store_->LoadSampleBatches(task_, 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].duration_ns_size(), 5);
  writer->Stop();
}

// Sample and power batches handed in together (one group, the samples
// stored with PutSampleBatches): each continuation gets its own batch's result.
TEST_F(BatchWriterTest, MixedSampleAndPowerBatchesEachGetTheirOwnResult) {
  auto writer = MakeWriter();
  std::vector<std::pair<std::string, bool>> outcomes;
  auto record = [&](std::string what) {
    return [&outcomes, what](absl::StatusOr<bool> stored) { outcomes.push_back({what, stored.ok() && *stored}); };
  };
  auto power = [&](uint64_t seq) {
    v1::PowerBatch p;
    p.set_task_id(task_);
    p.set_attempt(1);
    p.set_seq(seq);
    p.mutable_sensor()->set_name("rapl:package-0");
    p.add_t_ns(1);
    p.add_watts(10);
    return std::make_shared<const v1::PowerBatch>(std::move(p));
  };
  writer->Write(Shared(Batch(task_, 1, 0, 5)), record("s0"));
  ASSERT_TRUE(WaitFor([&] { return (loop_.RunPosted(), outcomes.size() == 1); }, absl::Seconds(10)));
  writer->Write(power(0), record("p0"));
  writer->Write(Shared(Batch(task_, 1, 0, 5)), record("s0 again"));
  writer->Write(power(0), record("p0 again"));
  writer->Write(Shared(Batch(task_, 1, 1, 5)), record("s1"));
  ASSERT_TRUE(WaitFor([&] { return (loop_.RunPosted(), outcomes.size() == 5); }, absl::Seconds(10)));
  EXPECT_THAT(outcomes, ::testing::ElementsAre(std::pair<std::string, bool>{"s0", true},
                                               std::pair<std::string, bool>{"p0", true},
                                               std::pair<std::string, bool>{"s0 again", false},
                                               std::pair<std::string, bool>{"p0 again", false},
                                               std::pair<std::string, bool>{"s1", true}));
  writer->Stop();
}

// A continuation runs only once its batch is committed: when the loop runs
// it, another connection already reads the batch.
TEST_F(BatchWriterTest, ContinuationsFollowTheCommit) {
  auto writer = MakeWriter();
  size_t seen_at_continuation = 0;
  writer->Write(Shared(Batch(task_, 1, 7, 3)), [&](absl::StatusOr<bool> stored) {
    ASSERT_TRUE(stored.ok());
    auto batches = store_->LoadSampleBatches(task_, 1);
    ASSERT_TRUE(batches.ok());
    seen_at_continuation = batches->size();
  });
  ASSERT_TRUE(WaitFor([&] { return loop_.RunPosted() > 0; }, absl::Seconds(10)));
  EXPECT_EQ(seen_at_continuation, 1u);
  writer->Stop();
}

// Stop stores what was handed in before it; a loop that is stopping takes
// no continuation, and nothing crashes for it.
TEST_F(BatchWriterTest, StopStoresWhatWasHandedInEvenWhenTheLoopIsGone) {
  auto writer = MakeWriter();
  loop_.SetStopping();
  int continuations = 0;
  for (uint64_t seq = 0; seq < 20; ++seq) {
    writer->Write(Shared(Batch(task_, 1, seq, 2)), [&](absl::StatusOr<bool>) { ++continuations; });
  }
  writer->Stop();
  writer->Stop();  // idempotent
  auto stored = store_->LoadSampleBatches(task_, 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->size(), 20u);
  EXPECT_EQ(loop_.RunPosted(), 0u);
  EXPECT_EQ(continuations, 0);
}

}  // namespace
}  // namespace hetbench::server
