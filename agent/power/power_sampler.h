#pragma once
/// One sampler thread per agent reads every power sensor at a fixed rate (and
/// on demand at task boundaries) and hands the readings to the taps of the
/// running tasks. Readings carry the same steady clock as timing samples.

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/power/power_sensor.h"

namespace hetbench::agent {

struct TimedReading {
  int64_t t_ns = 0;  // steady clock (absolute)
  double watts = NAN;
  double joules = NAN;
};

/// The readings one task receives. Thread-safe.
class PowerTap {
 public:
  explicit PowerTap(size_t sensors) : readings_(sensors), errors_(sensors, 0) {}
  void Append(size_t sensor, const TimedReading& r) {
    absl::MutexLock l(&mu_);
    readings_[sensor].push_back(r);
  }
  void AddError(size_t sensor) {
    absl::MutexLock l(&mu_);
    ++errors_[sensor];
  }
  /// Moves out what was appended since the last Take; `errors` gets the failed reads.
  std::vector<TimedReading> Take(size_t sensor, int* errors) {
    absl::MutexLock l(&mu_);
    std::vector<TimedReading> out;
    out.swap(readings_[sensor]);
    *errors = errors_[sensor];
    errors_[sensor] = 0;
    return out;
  }
  size_t sensors() const { return errors_.size(); }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<TimedReading>> readings_ ABSL_GUARDED_BY(mu_);
  std::vector<int> errors_ ABSL_GUARDED_BY(mu_);
};

class PowerSampler {
 public:
  /// `rate_hz` > 0. A sensor is read at most once per its update period.
  PowerSampler(std::vector<std::unique_ptr<PowerSensor>> sensors, double rate_hz);
  ~PowerSampler();

  void Start();
  void Stop();

  /// Sensor i of every tap is sensors()[i]. Immutable after construction.
  const std::vector<std::unique_ptr<PowerSensor>>& sensors() const { return sensors_; }
  std::shared_ptr<PowerTap> Subscribe();
  void Unsubscribe(const std::shared_ptr<PowerTap>& tap);
  /// Reads every sensor now, on the calling thread (task start and end).
  void ReadNow();
  /// CPU time the sampler thread has used, seconds.
  double thread_cpu_seconds() const { return cpu_seconds_.load(); }
  int64_t ticks() const { return ticks_.load(); }

 private:
  void ReadLocked(bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  const std::vector<std::unique_ptr<PowerSensor>> sensors_;
  const double period_s_;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<PowerTap>> taps_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> last_read_ns_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<double> cpu_seconds_{0};
  std::atomic<int64_t> ticks_{0};
};

}  // namespace hetbench::agent
