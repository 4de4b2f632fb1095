#pragma once
/// Time sources. Code that measures or expires things takes a Clock so tests
/// can drive time instead of sleeping.

#include <atomic>
#include <cstdint>

namespace hetbench {

/// std::chrono::steady_clock in nanoseconds. The one time base of everything
/// the agent timestamps (step samples, phase windows, power readings), so
/// they line up. Thread-safe.
int64_t SteadyNowNs();

/// The CPU time the calling thread has used, in seconds (its run time, not
/// the wall's). Thread-safe.
double ThreadCpuSeconds();

/// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Wall-clock time for what users see (Unix seconds).
  virtual double SystemNowSeconds() const = 0;
  /// Monotonic time for intervals, nanoseconds from an arbitrary origin.
  virtual int64_t MonotonicNowNs() const = 0;
};

/// std::chrono::system_clock and steady_clock.
class RealClock final : public Clock {
 public:
  double SystemNowSeconds() const override;
  int64_t MonotonicNowNs() const override;
};

/// A clock that moves only when told to. Thread-safe.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(double start_unix_seconds = 1.7e9)
      : unix_ns_(static_cast<int64_t>(start_unix_seconds * 1e9)) {}
  double SystemNowSeconds() const override { return static_cast<double>(unix_ns_.load()) * 1e-9; }
  int64_t MonotonicNowNs() const override { return mono_ns_.load(); }
  void AdvanceNs(int64_t ns) {
    mono_ns_ += ns;
    unix_ns_ += ns;
  }

 private:
  std::atomic<int64_t> unix_ns_;
  std::atomic<int64_t> mono_ns_{0};
};

}  // namespace hetbench
