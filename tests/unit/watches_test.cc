// The Watches part alone, with a driven clock and fake sinks: pacing (one
// event per interval, the latest state), views, a job's end sent at once and
// its watches closed, and shutdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "server/service/watches.h"
#include "tests/testing/store_rows.h"
#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server {
namespace {

using coordinator_testing::FakeSink;
using WatchFake = FakeSink<v1::JobEvent>;

class WatchesTest : public ::testing::Test {
 protected:
  WatchesTest() : watches_(&clock_, /*interval_seconds=*/0.1) {
    jobs_["job-000001"] = hetbench::testing::MakeJob(1, v1::JOB_STATE_RUNNING, 2);
  }
  Watches::JobView View() {
    return {[this](const std::string& id) -> const v1::Job* {
              auto it = jobs_.find(id);
              return it == jobs_.end() ? nullptr : &it->second;
            },
            [this](const std::string& id) { return ended_.count(id) > 0; }};
  }
  // One batch: the flush, then its commit with `commit`'s status.
  void Flush(const absl::Status& commit = absl::OkStatus()) {
    std::vector<std::function<void(const absl::Status&)>> deferred;
    watches_.Flush(View(), [&](std::function<void(const absl::Status&)> fn) { deferred.push_back(std::move(fn)); });
    for (auto& fn : deferred) fn(commit);
  }
  SimulatedClock clock_;
  Watches watches_;
  std::map<std::string, v1::Job> jobs_;
  std::set<std::string> ended_;
};

TEST_F(WatchesTest, OneEventPerIntervalCarryingTheLatestChange) {
  auto sink = std::make_shared<WatchFake>();
  watches_.Add("job-000001", /*summary=*/false, sink);
  watches_.Changed("job-000001", "first");
  Flush();
  ASSERT_EQ(sink->messages().size(), 1u) << "the first change goes out at once";
  EXPECT_EQ(sink->messages()[0].message(), "first");

  watches_.Changed("job-000001", "second");
  watches_.Changed("job-000001", "third");
  Flush();
  EXPECT_EQ(sink->messages().size(), 1u) << "within the interval nothing more is sent";
  clock_.AdvanceNs(100'000'000);
  Flush();
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[1].message(), "third") << "changes coalesce into the latest";
  Flush();
  EXPECT_EQ(sink->messages().size(), 2u) << "nothing changed, nothing sent";
  EXPECT_FALSE(sink->closed());
}

TEST_F(WatchesTest, SummaryWatchersGetTasksWithoutResults) {
  auto full = std::make_shared<WatchFake>(), summary = std::make_shared<WatchFake>();
  watches_.Add("job-000001", false, full);
  watches_.Add("job-000001", true, summary);
  watches_.Changed("job-000001", "x");
  Flush();
  ASSERT_EQ(full->messages().size(), 1u);
  ASSERT_EQ(summary->messages().size(), 1u);
  EXPECT_TRUE(full->messages()[0].job().tasks(0).has_result());
  EXPECT_FALSE(summary->messages()[0].job().tasks(0).has_result());
  EXPECT_EQ(summary->messages()[0].job().tasks_size(), 2);
}

TEST_F(WatchesTest, AnEndedJobIsSentAtOnceAndItsWatchesClose) {
  auto sink = std::make_shared<WatchFake>();
  watches_.Add("job-000001", false, sink);
  watches_.Changed("job-000001", "running");
  Flush();
  jobs_["job-000001"].set_state(v1::JOB_STATE_SUCCEEDED);
  ended_.insert("job-000001");
  watches_.Changed("job-000001", "task job-000001-t1 SUCCEEDED");
  Flush();  // within the interval, but the end is not paced
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[1].job().state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(sink->closed());
  EXPECT_TRUE(sink->status().ok());
  EXPECT_EQ(watches_.watchers("job-000001"), 0u);
}

// Events are built at the flush (the state the batch commits) and sent after
// the commit; a failed commit sends nothing and keeps the job pending, an
// ended job's watches open, so the reloaded state goes out next.
TEST_F(WatchesTest, EventsWaitForTheCommitAndAFailedOneSendsTheStateAfterTheReload) {
  auto sink = std::make_shared<WatchFake>();
  watches_.Add("job-000001", false, sink);
  jobs_["job-000001"].set_state(v1::JOB_STATE_SUCCEEDED);
  ended_.insert("job-000001");
  watches_.Changed("job-000001", "ended");
  std::vector<std::function<void(const absl::Status&)>> deferred;
  watches_.Flush(View(), [&](std::function<void(const absl::Status&)> fn) { deferred.push_back(std::move(fn)); });
  jobs_["job-000001"].set_error("a later batch's change");  // the live job moves on before the commit
  EXPECT_TRUE(sink->messages().empty()) << "nothing is sent before the commit";
  ASSERT_EQ(deferred.size(), 1u);
  deferred[0](absl::UnavailableError("disk full"));
  EXPECT_TRUE(sink->messages().empty()) << "a rolled-back state is never sent";
  EXPECT_FALSE(sink->closed());
  EXPECT_EQ(watches_.watchers("job-000001"), 1u) << "the watch stays for the reloaded state";

  jobs_["job-000001"].set_state(v1::JOB_STATE_RUNNING);  // the reload: the end was not stored
  jobs_["job-000001"].clear_error();
  ended_.clear();
  clock_.AdvanceNs(100'000'000);
  Flush();
  ASSERT_EQ(sink->messages().size(), 1u) << "the job was marked changed again";
  EXPECT_EQ(sink->messages()[0].job().state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(sink->messages()[0].message(), "ended");
  EXPECT_FALSE(sink->closed());

  jobs_["job-000001"].set_state(v1::JOB_STATE_SUCCEEDED);
  ended_.insert("job-000001");
  watches_.Changed("job-000001", "ended again");
  deferred.clear();
  watches_.Flush(View(), [&](std::function<void(const absl::Status&)> fn) { deferred.push_back(std::move(fn)); });
  jobs_["job-000001"].set_error("a later batch's change");
  ASSERT_EQ(deferred.size(), 1u);
  deferred[0](absl::OkStatus());
  ASSERT_EQ(sink->messages().size(), 2u);
  EXPECT_EQ(sink->messages()[1].job().error(), "") << "the event holds the state of its batch, not a later one";
  EXPECT_TRUE(sink->closed());
}

TEST_F(WatchesTest, ChangesOfJobsNobodyWatchesOrThatLeftMemoryAreDropped) {
  watches_.Changed("job-000001", "unwatched");
  watches_.Changed("job-000009", "not live");
  Flush();
  auto sink = std::make_shared<WatchFake>();
  watches_.Add("job-000001", false, sink);
  Flush();
  EXPECT_TRUE(sink->messages().empty()) << "a change before the watch began is the snapshot's, not an event";
}

TEST_F(WatchesTest, CloseAllEndsEveryWatchWithTheStatus) {
  auto a = std::make_shared<WatchFake>(), b = std::make_shared<WatchFake>();
  watches_.Add("job-000001", false, a);
  watches_.Add("job-000002", true, b);
  watches_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
  EXPECT_TRUE(a->closed() && b->closed());
  EXPECT_EQ(b->status().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(watches_.watchers(), 0u);
}

}  // namespace
}  // namespace hetbench::server
