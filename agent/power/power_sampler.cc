#include "agent/power/power_sampler.h"

#include <time.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"

namespace hetbench::agent {

PowerSampler::PowerSampler(std::vector<std::unique_ptr<PowerSensor>> sensors, double rate_hz)
    : sensors_(std::move(sensors)), period_s_(1.0 / rate_hz), last_read_ns_(sensors_.size(), 0) {}

PowerSampler::~PowerSampler() { Stop(); }

void PowerSampler::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void PowerSampler::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<PowerTap> PowerSampler::Subscribe() {
  auto tap = std::make_shared<PowerTap>(sensors_.size());
  absl::MutexLock l(&mu_);
  taps_.push_back(tap);
  return tap;
}

void PowerSampler::Unsubscribe(const std::shared_ptr<PowerTap>& tap) {
  absl::MutexLock l(&mu_);
  taps_.erase(std::remove(taps_.begin(), taps_.end(), tap), taps_.end());
}

void PowerSampler::ReadNow() {
  absl::MutexLock l(&mu_);
  ReadLocked(/*all=*/true);
}

void PowerSampler::ReadLocked(bool all) {
  for (size_t i = 0; i < sensors_.size(); ++i) {
    const int64_t now = SteadyNowNs();
    const auto min_gap_ns = static_cast<int64_t>(sensors_[i]->info().update_period_seconds() * 1e9 * 0.9);
    if (!all && now - last_read_ns_[i] < min_gap_ns) continue;  // the value cannot have changed yet
    auto r = sensors_[i]->Read();
    // Timestamp at the middle of the read (slow sensors such as IPMI take a
    // while); the same for every tap.
    const int64_t t = (now + SteadyNowNs()) / 2;
    last_read_ns_[i] = now;
    for (auto& tap : taps_) {
      if (r.ok()) {
        tap->Append(i, TimedReading{t, r->watts, r->joules});
      } else {
        tap->AddError(i);
      }
    }
  }
}

void PowerSampler::Loop() {
  const auto period = absl::Seconds(period_s_);
  absl::Time next = absl::Now();
  for (;;) {
    next += period;
    {
      absl::MutexLock l(&mu_);
      auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithDeadline(absl::Condition(&stopped), next)) return;
      // With no task running there is nobody to read for.
      if (!taps_.empty()) ReadLocked(/*all=*/false);
    }
    ++ticks_;
    cpu_seconds_ = ThreadCpuSeconds();
    if (absl::Now() > next + period) next = absl::Now();  // fell behind: do not burst to catch up
  }
}

}  // namespace hetbench::agent
