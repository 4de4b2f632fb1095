// The coordinator's event loop alone, on a real SQLite file: group commit on
// the writer thread (nothing deferred runs before its batch is durable; the
// loop runs the next batch meanwhile), a failed commit failing the batches
// built on it, the hooks' order, shedding past the queue bound, and the last
// batch at Stop.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/loop/event_loop.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/store_rows.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::server {
namespace {

using ::hetbench::testing::MakeJob;

class EventLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteJobStore::Open(dir_.path() + "/jobs.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  hetbench::testing::TempDir dir_{"hetbench-loop"};
  Metrics metrics_;
  std::unique_ptr<JobStore> store_;
};

// A closure's write is visible to another connection by the time the
// actions it deferred run: acks and replies follow the commit.
TEST_F(EventLoopTest, DeferredActionsRunAfterTheBatchIsCommitted) {
  auto observer = store_->Connect();
  ASSERT_TRUE(observer.ok()) << observer.status();
  EventLoop loop(store_.get(), &metrics_, EventLoopOptions{});
  loop.Start({});
  absl::Notification checked;
  bool visible_at_defer = false;
  absl::Status commit;
  ASSERT_TRUE(loop.Post([&] {
    loop.Write([job = MakeJob(1, v1::JOB_STATE_QUEUED, 1)](JobStore& store) { return store.InsertJob(job, ""); });
    loop.Defer([&](const absl::Status& s) {
      commit = s;
      auto job = (*observer)->GetJob("job-000001");
      visible_at_defer = job.ok() && job->has_value();
      checked.Notify();
    });
  }));
  ASSERT_TRUE(checked.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(commit.ok()) << commit;
  EXPECT_TRUE(visible_at_defer) << "a deferred action ran before its batch's commit";
  loop.Stop();
}

// While a batch commits on the writer thread, the loop runs the next one;
// their deferred actions still run in batch order, each after its commit.
TEST_F(EventLoopTest, TheLoopRunsTheNextBatchWhileOneCommits) {
  EventLoop loop(store_.get(), &metrics_, EventLoopOptions{});
  loop.Start({});
  absl::Notification second_ran, release;
  absl::Mutex mu;
  std::vector<std::string> order;
  auto note = [&](const std::string& what) {
    absl::MutexLock l(&mu);
    order.push_back(what);
  };
  ASSERT_TRUE(loop.Post([&] {
    loop.Write([&](JobStore& store) {
      // Held until the loop has run the next batch: the loop does not wait for this.
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
      return store.InsertJob(MakeJob(1, v1::JOB_STATE_QUEUED, 1), "");
    });
    loop.Defer([&](const absl::Status& s) { note(s.ok() ? "first committed" : "first failed"); });
  }));
  ASSERT_TRUE(loop.Post([&] {
    note("second ran");
    second_ran.Notify();
    loop.Defer([&](const absl::Status& s) { note(s.ok() ? "second committed" : "second failed"); });
  }));
  EXPECT_TRUE(second_ran.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the loop waited for a commit before running the next batch";
  release.Notify();
  loop.RunSync([] {});
  loop.Stop();
  absl::MutexLock l(&mu);
  EXPECT_THAT(order, ::testing::ElementsAre("second ran", "first committed", "second committed"));
}

// A failed commit fails the batches already handed off after it (their state
// built on the lost one) without writing them; commit_failed runs once; a
// batch after the reload commits again.
TEST_F(EventLoopTest, AFailedCommitFailsTheBatchesBuiltOnItAndReloadsOnce) {
  auto observer = store_->Connect();
  ASSERT_TRUE(observer.ok()) << observer.status();
  EventLoop loop(store_.get(), &metrics_, EventLoopOptions{});
  absl::Notification first_handed_off, second_handed_off;
  bool first_ran = false, second_ran = false;  // loop thread
  int reloads = 0;                             // loop thread
  loop.Start(EventLoop::Hooks{nullptr, [&](const absl::Status&) { ++reloads; },
                              [&] {  // after each hand-off
                                if (first_ran && !first_handed_off.HasBeenNotified()) first_handed_off.Notify();
                                if (second_ran && !second_handed_off.HasBeenNotified()) second_handed_off.Notify();
                              }});
  absl::Mutex mu;
  std::vector<std::string> statuses;
  auto note = [&](const std::string& what, const absl::Status& s) {
    absl::MutexLock l(&mu);
    statuses.push_back(absl::StrCat(what, ": ", absl::StatusCodeToString(s.code())));
  };
  ASSERT_TRUE(loop.Post([&] {
    loop.Write([&](JobStore&) {
      second_handed_off.WaitForNotificationWithTimeout(absl::Seconds(10));
      return absl::UnavailableError("disk full");
    });
    loop.Defer([&](const absl::Status& s) { note("first", s); });
    first_ran = true;
  }));
  ASSERT_TRUE(first_handed_off.WaitForNotificationWithTimeout(absl::Seconds(10)));  // a batch of its own
  ASSERT_TRUE(loop.Post([&] {
    second_ran = true;
    loop.Write([job = MakeJob(2, v1::JOB_STATE_QUEUED, 1)](JobStore& store) { return store.InsertJob(job, ""); });
    loop.Defer([&](const absl::Status& s) { note("second", s); });
  }));
  ASSERT_TRUE(second_handed_off.WaitForNotificationWithTimeout(absl::Seconds(10)));
  {
    absl::MutexLock l(&mu);  // both came back (and the reload ran) before the third batch
    auto both = [&]() { return statuses.size() >= 2; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(10)));
  }
  loop.RunSync([&] {
    loop.Write([job = MakeJob(3, v1::JOB_STATE_QUEUED, 1)](JobStore& store) { return store.InsertJob(job, ""); });
    loop.Defer([&](const absl::Status& s) { note("third", s); });
  });
  int reloads_seen = -1;
  loop.RunSync([&] { reloads_seen = reloads; });
  loop.Stop();
  EXPECT_EQ(reloads_seen, 1);
  {
    absl::MutexLock l(&mu);
    EXPECT_THAT(statuses, ::testing::ElementsAre("first: UNAVAILABLE", "second: ABORTED", "third: OK"));
  }
  auto second = (*observer)->GetJob("job-000002");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->has_value()) << "a batch built on a failed one was written";
  auto third = (*observer)->GetJob("job-000003");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->has_value());
}

// Per batch: the closures, end_of_batch (inside the transaction), the
// deferred actions, then after_commit.
TEST_F(EventLoopTest, HooksRunInOrderAroundEachBatch) {
  EventLoop loop(store_.get(), &metrics_, EventLoopOptions{});
  std::vector<std::string> order;  // loop thread only, read after RunSync
  loop.Start(EventLoop::Hooks{[&] { order.push_back("end_of_batch"); }, nullptr,
                              [&] { order.push_back("after_commit"); }});
  loop.RunSync([&] {
    order.clear();  // earlier (idle) batches' hooks are not this test's
    order.push_back("closure");
    loop.Defer([&](const absl::Status&) { order.push_back("deferred"); });
  });
  loop.RunSync([] {});  // after_commit of the batch above has run by now
  ASSERT_GE(order.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(order.begin(), order.begin() + 4),
              ::testing::ElementsAre("closure", "end_of_batch", "deferred", "after_commit"));
  loop.Stop();
}

// Sheddable closures (client requests) past max_queue are refused so the
// caller can answer RESOURCE_EXHAUSTED; agent messages are not shed here.
TEST_F(EventLoopTest, RefusesSheddableClosuresPastTheBoundButNotOthers) {
  EventLoop loop(store_.get(), &metrics_, EventLoopOptions{/*max_queue=*/2, 0.1});
  // Not started: nothing drains the queue while the test fills it.
  std::atomic<int> ran{0};
  EXPECT_TRUE(loop.Post([&] { ++ran; }, /*sheddable=*/true));
  EXPECT_TRUE(loop.Post([&] { ++ran; }, /*sheddable=*/true));
  EXPECT_FALSE(loop.Post([&] { ++ran; }, /*sheddable=*/true));
  EXPECT_TRUE(loop.Post([&] { ++ran; }));
  EXPECT_EQ(loop.depth(), 3u);
  loop.Start({});
  loop.RunSync([] {});
  EXPECT_EQ(ran.load(), 3);
  // The bound is of what waits now: once drained, requests are taken again.
  EXPECT_TRUE(loop.Post([&] { ++ran; }, /*sheddable=*/true));
  loop.Stop();
  EXPECT_EQ(ran.load(), 4) << "Stop runs the last batch";
  EXPECT_FALSE(loop.Post([&] { ++ran; })) << "a stopped loop takes nothing";
}

}  // namespace
}  // namespace hetbench::server
