#include "agent/serving/issuer.h"

#include <sys/prctl.h>

#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"

namespace hetbench::agent {

OpenLoopRun RunOpenLoop(const std::vector<int64_t>& schedule, ServingTarget& target, absl::Duration drain,
                        absl::Duration spin) {
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
  const int64_t start = SteadyNowNs();
  run.run_start_ns = start;
  const int64_t spin_ns = absl::ToInt64Nanoseconds(spin);
  auto answered = [shared, start](int64_t index) {
    const int64_t now = SteadyNowNs() - start;
    absl::MutexLock l(&shared->mu);
    if (index < 0 || static_cast<size_t>(index) >= shared->answered_ns.size() || shared->answered_ns[index] >= 0) return;
    shared->answered_ns[index] = now;
    --shared->outstanding;
  };
  for (size_t i = 0; i < schedule.size(); ++i) {
    const int64_t due = schedule[i];
    int64_t now = SteadyNowNs() - start;
    if (due - now > spin_ns) absl::SleepFor(absl::Nanoseconds(due - now - spin_ns));
    while ((now = SteadyNowNs() - start) < due) {
    }
    run.queries[i].scheduled_ns = due;
    run.queries[i].issued_ns = now;
    target.Issue(static_cast<int64_t>(i), answered);
  }
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
  {
    absl::MutexLock l(&shared->mu);
    auto all_answered = [&shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) { return shared->outstanding == 0; };
    shared->mu.AwaitWithTimeout(absl::Condition(&all_answered), drain);
    for (size_t i = 0; i < schedule.size(); ++i) run.queries[i].answered_ns = shared->answered_ns[i];
    run.unanswered = shared->outstanding;
  }
  return run;
}

}  // namespace hetbench::agent
