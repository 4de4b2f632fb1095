// The serving run's open-loop issuer (agent/serving/issuer.h): latency from
// the scheduled time, so a stall shows in every query scheduled during it.
// Bounds here are what must hold however slow the machine is (lower bounds,
// orders), never speed.
#include "agent/serving/issuer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "agent/serving/batching_server.h"
#include "agent/serving/serving_model.h"
#include "common/clock.h"
#include "common/serving_stats.h"

namespace hetbench::agent {
namespace {

// Answers at once; stalls the issuer once, inside Issue of query `stall_at`.
class StallingTarget final : public ServingTarget {
 public:
  StallingTarget(int64_t stall_at, absl::Duration stall) : stall_at_(stall_at), stall_(stall) {}
  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override {
    if (index == stall_at_) {
      absl::SleepFor(stall_);
      stall_end_steady_ns_ = SteadyNowNs();
    }
    answered(index);
  }
  int64_t stall_end_steady_ns_ = 0;

 private:
  const int64_t stall_at_;
  const absl::Duration stall_;
};

TEST(IssuerTest, AStallShowsInTheLatencyOfEveryQueryScheduledDuringIt) {
  const std::vector<int64_t> schedule = PoissonSchedule(3, 1000, 1'000'000'000, 100'000);
  ASSERT_GT(schedule.size(), 800u);
  StallingTarget target(100, absl::Milliseconds(200));
  const OpenLoopRun run = RunOpenLoop(schedule, target, absl::Seconds(5));
  ASSERT_EQ(run.unanswered, 0);
  const int64_t stall_start = run.queries[100].issued_ns;
  const int64_t stall_end = target.stall_end_steady_ns_ - run.run_start_ns;
  ASSERT_GE(stall_end - stall_start, 200'000'000);
  int during = 0;
  for (size_t i = 101; i < run.queries.size(); ++i) {
    const QueryTimes& q = run.queries[i];
    if (q.scheduled_ns >= stall_end) break;
    ++during;
    // Issued only after the stall; its latency counts the wait from its scheduled time.
    EXPECT_GE(q.issued_ns, stall_end) << i;
    EXPECT_GE(q.latency_ns(), stall_end - q.scheduled_ns) << i;
    EXPECT_EQ(q.issue_delay_ns(), q.issued_ns - q.scheduled_ns);
    // Timed from its issue instead (coordinated omission), it would look instant.
    EXPECT_LT(q.answered_ns - q.issued_ns, q.latency_ns()) << i;
  }
  EXPECT_GT(during, 100) << "about 200 queries fall in 200 ms at 1000/s";
  // The percentiles see the stall: more than 10% of queries waited over 50 ms.
  std::vector<int64_t> latencies;
  for (const QueryTimes& q : run.queries) latencies.push_back(q.latency_ns());
  std::sort(latencies.begin(), latencies.end());
  EXPECT_GT(NearestRank(latencies, 90), 50'000'000);
}

TEST(IssuerTest, AnOpenLoopNeverWaitsForAnswersAndEveryLatencyIncludesTheService) {
  const std::vector<int64_t> schedule = PoissonSchedule(5, 200, 1'000'000'000, 300);
  // One instance, one query at a time, 2 ms each: a FIFO fixed-service server.
  BatchingServer target({1, absl::ZeroDuration(), 1}, FixedServiceCompute(absl::Milliseconds(2)));
  const OpenLoopRun run = RunOpenLoop(schedule, target, absl::Seconds(10));
  ASSERT_EQ(run.unanswered, 0);
  for (size_t i = 0; i < run.queries.size(); ++i) {
    const QueryTimes& q = run.queries[i];
    EXPECT_GE(q.issued_ns, q.scheduled_ns) << "never early";
    EXPECT_GE(q.latency_ns(), 2'000'000) << i;
    if (i > 0) EXPECT_GT(q.answered_ns, run.queries[i - 1].answered_ns) << "FIFO, one instance";
  }
}

class SilentTarget final : public ServingTarget {
 public:
  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override {
    if (index == 2) {
      late_ = answered;  // answered only after the run gave up on it
      return;
    }
    answered(index);
  }
  std::function<void(int64_t)> late_;
};

TEST(IssuerTest, AQueryNeverAnsweredIsCountedAndALateAnswerIsHarmless) {
  SilentTarget target;
  const OpenLoopRun run = RunOpenLoop({0, 1000, 2000, 3000}, target, absl::Milliseconds(50));
  EXPECT_EQ(run.unanswered, 1);
  EXPECT_EQ(run.queries[2].answered_ns, -1);
  EXPECT_EQ(run.queries[2].latency_ns(), -1);
  EXPECT_GE(run.queries[3].latency_ns(), 0);
  ASSERT_TRUE(target.late_);
  target.late_(2);  // after RunOpenLoop returned: lands in state the callback owns
}

// Holds every answer until Release.
class HoldingTarget final : public ServingTarget {
 public:
  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override {
    held_.push_back({index, answered});
  }
  void Release(size_t i) { held_[i].second(held_[i].first); }
  std::vector<std::pair<int64_t, std::function<void(int64_t)>>> held_;
};

TEST(IssuerTest, AFanOutQueryIsAnsweredOnlyWithItsLastSample) {
  HoldingTarget samples;
  FanOutTarget queries(samples, 3);
  std::vector<int64_t> answered;
  queries.Issue(5, [&answered](int64_t q) { answered.push_back(q); });
  ASSERT_EQ(samples.held_.size(), 3u);
  EXPECT_EQ(samples.held_[0].first, 15);
  EXPECT_EQ(samples.held_[2].first, 17);
  samples.Release(2);
  samples.Release(0);
  EXPECT_TRUE(answered.empty());
  samples.Release(1);
  EXPECT_EQ(answered, std::vector<int64_t>{5});
}

// Counts what it was given at once; cancels the run at query `cancel_at`.
class CancellingTarget final : public ServingTarget {
 public:
  CancellingTarget(std::atomic<bool>* cancel, int64_t cancel_at) : cancel_(cancel), cancel_at_(cancel_at) {}
  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override {
    ++issued_;
    if (index == cancel_at_) cancel_->store(true);
    answered(index);
  }
  int64_t issued_ = 0;

 private:
  std::atomic<bool>* const cancel_;
  const int64_t cancel_at_;
};

TEST(IssuerTest, ACancelStopsTheIssuingAndTheRunHoldsWhatWasIssued) {
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> progress{0};
  CancellingTarget target(&cancel, 9);
  std::vector<int64_t> schedule(1000);
  for (size_t i = 0; i < schedule.size(); ++i) schedule[i] = static_cast<int64_t>(i) * 10'000;  // 10 ms of queries
  const OpenLoopRun run = RunOpenLoop(schedule, target, absl::Seconds(5), absl::Microseconds(50), &cancel, &progress);
  EXPECT_EQ(target.issued_, 10);
  EXPECT_EQ(run.queries.size(), 10u);
  EXPECT_EQ(run.unanswered, 0) << "queries never issued are not waited for";
  EXPECT_EQ(progress.load(), 10);
}

// Never answers; cancels the run at query `cancel_at`.
class SilentCancellingTarget final : public ServingTarget {
 public:
  SilentCancellingTarget(std::atomic<bool>* cancel, int64_t cancel_at) : cancel_(cancel), cancel_at_(cancel_at) {}
  void Issue(int64_t index, const std::function<void(int64_t)>&) override {
    if (index == cancel_at_) cancel_->store(true);
  }

 private:
  std::atomic<bool>* const cancel_;
  const int64_t cancel_at_;
};

// Queries issued and never answered: a cancelled run returns with them
// unanswered instead of waiting out its drain (an hour here; ctest's timeout
// would end the test first).
TEST(IssuerTest, ACancelledRunDoesNotWaitOutTheDrainForQueriesInFlight) {
  std::atomic<bool> cancel{false};
  SilentCancellingTarget target(&cancel, 5);
  const std::vector<int64_t> schedule(100, 0);  // offline: every query due at once
  const OpenLoopRun run = RunOpenLoop(schedule, target, absl::Hours(1), absl::Microseconds(50), &cancel, nullptr);
  EXPECT_EQ(run.queries.size(), 6u);
  EXPECT_EQ(run.unanswered, 6);
}

// Answers from another thread after `service`; remembers how many queries it held at once.
class ThreadedTarget final : public ServingTarget {
 public:
  explicit ThreadedTarget(absl::Duration service) : service_(service) {}
  ~ThreadedTarget() override {
    for (std::thread& t : threads_) t.join();
  }
  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override {
    const int now = ++outstanding_;
    max_outstanding_ = std::max(max_outstanding_.load(), now);
    threads_.emplace_back([this, index, answered] {
      absl::SleepFor(service_);
      --outstanding_;
      answered(index);
    });
  }
  std::atomic<int> outstanding_{0}, max_outstanding_{0};

 private:
  const absl::Duration service_;
  std::vector<std::thread> threads_;
};

TEST(IssuerTest, SingleStreamHasOneQueryOutstandingAndRunsToBothMinimums) {
  ThreadedTarget target(absl::Milliseconds(1));
  ClosedLoopLimits limits;
  limits.min_queries = 20;
  limits.min_duration = absl::Milliseconds(100);
  const absl::Time before = absl::Now();
  const OpenLoopRun run = RunClosedLoop(target, limits);
  const absl::Duration took = absl::Now() - before;
  EXPECT_EQ(target.max_outstanding_.load(), 1);
  EXPECT_EQ(run.unanswered, 0);
  ASSERT_GE(run.queries.size(), 20u);
  // Lower bounds only (a loaded machine makes the run longer, never shorter): the run lasts the minimum duration,
  // and it stops at the first query boundary after it, so the query before the last was answered inside it.
  EXPECT_GE(took, absl::Milliseconds(100));
  if (run.queries.size() > 20u) {
    EXPECT_LT(run.queries[run.queries.size() - 2].answered_ns, 100'000'000) << "no query issued past the boundary";
  }
  for (size_t i = 0; i < run.queries.size(); ++i) {
    const QueryTimes& q = run.queries[i];
    EXPECT_EQ(q.scheduled_ns, q.issued_ns) << "scheduled when issued";
    EXPECT_GE(q.latency_ns(), 1'000'000) << i;
    if (i > 0) EXPECT_GE(q.issued_ns, run.queries[i - 1].answered_ns) << "issued after the last answer";
  }
}

TEST(IssuerTest, SingleStreamEndsAtAQueryNotAnsweredInItsTimeout) {
  SilentTarget target;  // never answers query 2
  ClosedLoopLimits limits;
  limits.min_queries = 10;
  limits.timeout = absl::Milliseconds(30);
  const OpenLoopRun run = RunClosedLoop(target, limits);
  ASSERT_EQ(run.queries.size(), 3u);
  EXPECT_EQ(run.unanswered, 1);
  EXPECT_EQ(run.queries[2].answered_ns, -1);
  target.late_(2);  // lands nowhere
}

}  // namespace
}  // namespace hetbench::agent
