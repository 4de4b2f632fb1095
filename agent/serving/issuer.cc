#include "agent/serving/issuer.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"

namespace hetbench::agent {

namespace {

// Waits on `mu` (held) for `cond` at most `timeout`, checking `cancel` every
// 50 ms: a cancelled run does not wait out its drain time.
void WaitUnlessCancelled(absl::Mutex& mu, const absl::Condition& cond, absl::Duration timeout,
                         const std::atomic<bool>* cancel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return;
    if (mu.AwaitWithTimeout(cond, std::min(left, absl::Milliseconds(50)))) return;
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return;
  }
}

}  // namespace

struct FanOutTarget::Outstanding {
  std::atomic<int> left;
  std::function<void(int64_t)> answered;
};

FanOutTarget::FanOutTarget(ServingTarget& inner, int samples) : inner_(inner), samples_(samples < 1 ? 1 : samples) {}

void FanOutTarget::Issue(int64_t index, const std::function<void(int64_t)>& answered) {
  auto query = std::make_shared<Outstanding>();
  query->left.store(samples_);
  query->answered = answered;
  auto sample_answered = [query, index](int64_t) {
    if (query->left.fetch_sub(1) == 1) query->answered(index);
  };
  inner_.IssueMany(index * samples_, samples_, sample_answered);
}

OpenLoopRun RunOpenLoop(const std::vector<int64_t>& schedule, ServingTarget& target, absl::Duration drain,
                        absl::Duration spin, const std::atomic<bool>* cancel, std::atomic<int64_t>* issued,
                        int64_t start_ns) {
  OpenLoopRun run;
  run.queries.resize(schedule.size());
  // Answers may come after this function returns (a target past the drain
  // time): they land in state shared with their callbacks, never in `run`.
  struct Shared {
    absl::Mutex mu;
    std::vector<int64_t> answered_ns;
    int64_t outstanding = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->answered_ns.assign(schedule.size(), -1);
  shared->outstanding = static_cast<int64_t>(schedule.size());
  // The kernel's default timer slack (50 us) would make every sleep end up
  // to 50 us late; this thread asks for 1 ns while it issues.
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const int64_t start = start_ns > 0 ? start_ns : SteadyNowNs();
  run.run_start_ns = start;
  const int64_t spin_ns = absl::ToInt64Nanoseconds(spin);
  auto answered = [shared, start](int64_t index) {
    const int64_t now = SteadyNowNs() - start;
    absl::MutexLock l(&shared->mu);
    if (index < 0 || static_cast<size_t>(index) >= shared->answered_ns.size() || shared->answered_ns[index] >= 0) return;
    shared->answered_ns[index] = now;
    --shared->outstanding;
  };
  size_t count = schedule.size();
  for (size_t i = 0; i < schedule.size(); ++i) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      count = i;
      break;
    }
    const int64_t due = schedule[i];
    int64_t now = SteadyNowNs() - start;
    if (due - now > spin_ns) absl::SleepFor(absl::Nanoseconds(due - now - spin_ns));
    while ((now = SteadyNowNs() - start) < due) {
    }
    run.queries[i].scheduled_ns = due;
    run.queries[i].issued_ns = now;
    target.Issue(static_cast<int64_t>(i), answered);
    if (issued != nullptr) issued->store(static_cast<int64_t>(i + 1), std::memory_order_relaxed);
  }
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
  {
    absl::MutexLock l(&shared->mu);
    // Queries never issued (a cancel) are not waited for.
    shared->outstanding -= static_cast<int64_t>(schedule.size() - count);
    auto all_answered = [&shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) { return shared->outstanding <= 0; };
    WaitUnlessCancelled(shared->mu, absl::Condition(&all_answered), drain, cancel);
    run.queries.resize(count);
    for (size_t i = 0; i < count; ++i) run.queries[i].answered_ns = shared->answered_ns[i];
    run.unanswered = 0;
    for (size_t i = 0; i < count; ++i) run.unanswered += run.queries[i].answered_ns < 0 ? 1 : 0;
  }
  return run;
}

OpenLoopRun RunClosedLoop(ServingTarget& target, const ClosedLoopLimits& limits, const std::atomic<bool>* cancel,
                          std::atomic<int64_t>* issued) {
  OpenLoopRun run;
  struct Shared {
    absl::Mutex mu;
    int64_t waiting_for = -1;  // the outstanding query's index
    int64_t answered_ns = -1;
  };
  auto shared = std::make_shared<Shared>();
  const int64_t start = SteadyNowNs();
  run.run_start_ns = start;
  auto answered = [shared, start](int64_t index) {
    const int64_t now = SteadyNowNs() - start;
    absl::MutexLock l(&shared->mu);
    if (index == shared->waiting_for && shared->answered_ns < 0) shared->answered_ns = now;
  };
  const int64_t min_ns = absl::ToInt64Nanoseconds(limits.min_duration);
  for (int64_t i = 0; i < limits.max_queries; ++i) {
    const int64_t now = SteadyNowNs() - start;
    if (i >= limits.min_queries && now >= min_ns) break;
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) break;
    {
      absl::MutexLock l(&shared->mu);
      shared->waiting_for = i;
      shared->answered_ns = -1;
    }
    QueryTimes q;
    q.scheduled_ns = q.issued_ns = SteadyNowNs() - start;
    target.Issue(i, answered);
    if (issued != nullptr) issued->store(i + 1, std::memory_order_relaxed);
    {
      absl::MutexLock l(&shared->mu);
      auto done = [&shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) { return shared->answered_ns >= 0; };
      WaitUnlessCancelled(shared->mu, absl::Condition(&done), limits.timeout, cancel);
      q.answered_ns = shared->answered_ns;
      shared->waiting_for = -1;  // a late answer to it lands nowhere
    }
    run.queries.push_back(q);
    if (q.answered_ns < 0) {
      run.unanswered = 1;
      break;
    }
  }
  return run;
}

IssuerCeiling MeasureIssuerCeiling(int64_t queries) {
  InlineNullTarget target;
  const std::vector<int64_t> schedule(static_cast<size_t>(std::max<int64_t>(1, queries)), 0);
  const double cpu0 = ThreadCpuSeconds();
  const int64_t start = SteadyNowNs();
  const OpenLoopRun run = RunOpenLoop(schedule, target, absl::Seconds(5));
  const double wall = static_cast<double>(SteadyNowNs() - start) * 1e-9;
  const double cpu = ThreadCpuSeconds() - cpu0;
  const auto n = static_cast<double>(run.queries.size());
  return {n / std::max(wall, 1e-9), cpu / n * 1e6};
}

}  // namespace hetbench::agent
