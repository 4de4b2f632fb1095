#pragma once
/// The one way a test waits: on a condition, with a deadline. Never a fixed
/// sleep as synchronisation: a sleep long enough on a loaded CI machine is
/// wasted time everywhere else, and one too short is a flaky test.

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hetbench::testing {

/// Checks `condition` until it holds or `timeout` has passed, sleeping
/// `poll` between checks; returns whether it held. The last check happens
/// at or after the deadline, so a condition that became true just in time
/// is seen.
template <typename Condition>
bool WaitFor(Condition&& condition, absl::Duration timeout, absl::Duration poll = absl::Milliseconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(poll);
  }
}

}  // namespace hetbench::testing
