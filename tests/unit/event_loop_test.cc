// The coordinator's event loop alone, on a real SQLite file: group commit
// (nothing deferred runs before its batch is durable), the hooks' order,
// shedding past the queue bound, and the last batch at Stop.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

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
    ASSERT_TRUE(store_->InsertJob(MakeJob(1, v1::JOB_STATE_QUEUED, 1), "").ok());
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
