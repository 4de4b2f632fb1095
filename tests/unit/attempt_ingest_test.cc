// The Ingest part alone, with a fake loop and a real SQLite store: batches of
// both kinds stored by the writer, counted only for the current attempt, the
// power metrics' deltas, and what waits for an attempt's writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "server/ingest/ingest.h"
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

v1::PowerBatch Power(const std::string& task, int attempt, uint64_t seq, std::vector<std::pair<int64_t, double>> w) {
  v1::PowerBatch b;
  b.set_task_id(task);
  b.set_attempt(attempt);
  b.set_seq(seq);
  b.mutable_sensor()->set_name("rapl");
  for (auto [t, watts] : w) {
    b.add_t_ns(t);
    b.add_watts(watts);
    b.add_joules(NAN);
  }
  return b;
}

BatchSummary Summary(const v1::SampleBatch& b) {
  return SummarizeBatch(b.start_ns().data(), b.duration_ns().data(), b.items().data(), b.duration_ns_size());
}

class AttemptIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = StoreWithRunningJob(dir_.path() + "/jobs.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto connection = store_->Connect();
    ASSERT_TRUE(connection.ok()) << connection.status();
    ingest_.Start(*std::move(connection), loop_.Poster());
  }
  void TearDown() override { ingest_.Stop(); }
  // Runs the loop's closures until `done`.
  bool Drain(const std::function<bool()>& done) {
    return WaitFor([&] { return (loop_.RunPosted(), done()); }, absl::Seconds(10));
  }
  void WriteSamples(const v1::SampleBatch& b, std::vector<std::pair<bool, bool>>* outcomes) {
    ingest_.Write(std::make_shared<const v1::SampleBatch>(b), Summary(b),
                  [outcomes](const absl::StatusOr<bool>& stored, bool counted) {
                    ASSERT_TRUE(stored.ok()) << stored.status();
                    outcomes->emplace_back(*stored, counted);
                  });
  }

  const std::string task_ = "job-000001-t0";
  hetbench::testing::TempDir dir_{"hetbench-ingest"};
  std::unique_ptr<JobStore> store_;
  FakeLoop loop_;
  Ingest ingest_;
};

TEST_F(AttemptIngestTest, CountsNewBatchesOfTheCurrentAttemptOnly) {
  ingest_.Begin(task_, 1);
  std::vector<std::pair<bool, bool>> out;  // (stored, counted)
  WriteSamples(Batch(task_, 1, 0, 5), &out);
  WriteSamples(Batch(task_, 1, 1, 3), &out);
  ASSERT_TRUE(Drain([&] { return out.size() == 2; }));
  WriteSamples(Batch(task_, 1, 0, 5), &out);  // sent again
  ASSERT_TRUE(Drain([&] { return out.size() == 3; }));
  EXPECT_EQ(out[0], std::make_pair(true, true));
  EXPECT_EQ(out[2], std::make_pair(false, false)) << "a duplicate is stored once and counted once";
  // A batch of attempt 1 arriving after attempt 2 began keeps its row, not a count.
  ingest_.Begin(task_, 2);
  WriteSamples(Batch(task_, 1, 2, 4), &out);
  ASSERT_TRUE(Drain([&] { return out.size() == 4; }));
  EXPECT_EQ(out[3], std::make_pair(true, false));
  EXPECT_EQ(ingest_.Take(task_, 2).samples.samples_stored, 0);
  EXPECT_EQ(ingest_.Take(task_, 1).samples.samples_stored, 0) << "attempt 1 is not current";
  auto rows = store_->LoadSampleBatches(task_, 1);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 3u);
}

TEST_F(AttemptIngestTest, TakeReturnsTheAttemptsAggregateAndPowerAndEndForgetsIt) {
  ingest_.Begin(task_, 1);
  std::vector<std::pair<bool, bool>> out;
  WriteSamples(Batch(task_, 1, 0, 5), &out);
  std::vector<PowerDelta> deltas;
  auto power = [&](const v1::PowerBatch& b) {
    ingest_.Write(std::make_shared<const v1::PowerBatch>(b),
                  [&](const absl::StatusOr<bool>& stored, bool counted, PowerDelta d) {
                    ASSERT_TRUE(stored.ok() && *stored && counted);
                    deltas.push_back(d);
                  });
  };
  // 100 W then 200 W one second apart: 150 J by the trapezoid, across batches.
  power(Power(task_, 1, 0, {{1'000'000'000, 100}}));
  power(Power(task_, 1, 1, {{2'000'000'000, 200}}));
  ASSERT_TRUE(Drain([&] { return out.size() == 1 && deltas.size() == 2; }));
  EXPECT_EQ(deltas[0].joules, 0);  // no earlier reading
  EXPECT_DOUBLE_EQ(deltas[1].joules, 150);
  EXPECT_DOUBLE_EQ(deltas[1].watts, 200);
  Ingest::Collected c = ingest_.Take(task_, 1);
  EXPECT_EQ(c.samples.batches_stored, 1);
  EXPECT_EQ(c.samples.samples_stored, 5);
  ASSERT_EQ(c.power.size(), 2u);
  EXPECT_EQ(c.power[1].seq(), 1u);
  EXPECT_EQ(ingest_.attempts(), 1u);
  ingest_.End(task_);
  EXPECT_EQ(ingest_.attempts(), 0u);
}

TEST_F(AttemptIngestTest, WhatWaitsForAnAttemptsWritesRunsAfterTheLastOne) {
  ingest_.Begin(task_, 1);
  EXPECT_FALSE(ingest_.AfterWrites(task_, 1, [] { FAIL() << "nothing was pending"; }));
  std::vector<std::pair<bool, bool>> out;
  WriteSamples(Batch(task_, 1, 0, 5), &out);
  WriteSamples(Batch(task_, 1, 1, 5), &out);
  size_t seen_when_run = 99;
  ASSERT_TRUE(ingest_.AfterWrites(task_, 1, [&] { seen_when_run = out.size(); }));
  EXPECT_FALSE(ingest_.settled());
  ASSERT_TRUE(Drain([&] { return seen_when_run != 99; }));
  EXPECT_EQ(seen_when_run, 2u) << "runs after both batches' continuations";
  EXPECT_TRUE(ingest_.settled());
}

TEST_F(AttemptIngestTest, RestoreRebuildsARunningAttemptFromItsStoredBatches) {
  std::vector<v1::SampleBatch> samples{Batch(task_, 3, 0, 4), Batch(task_, 3, 1, 4)};
  std::vector<v1::PowerBatch> power{Power(task_, 3, 0, {{1'000'000'000, 50}})};
  ingest_.Restore(task_, 3, samples, power);
  // A reading after the restored one continues from it.
  PowerDelta d;
  ingest_.Write(std::make_shared<const v1::PowerBatch>(Power(task_, 3, 1, {{3'000'000'000, 50}})),
                [&](const absl::StatusOr<bool>&, bool, PowerDelta delta) { d = delta; });
  ASSERT_TRUE(Drain([&] { return ingest_.settled(); }));
  EXPECT_DOUBLE_EQ(d.joules, 100);
  Ingest::Collected c = ingest_.Take(task_, 3);
  EXPECT_EQ(c.samples.samples_stored, 8);
  EXPECT_EQ(c.power.size(), 2u);
}

}  // namespace
}  // namespace hetbench::server
