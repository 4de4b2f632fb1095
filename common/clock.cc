#include "clock.h"

#include <chrono>

namespace hetbench {

double RealClock::SystemNowSeconds() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t RealClock::MonotonicNowNs() const { return SteadyNowNs(); }

}  // namespace hetbench
