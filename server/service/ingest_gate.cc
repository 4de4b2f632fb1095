#include "server/service/ingest_gate.h"

#include <algorithm>

#include "common/sample_codec.h"

namespace hetbench::server {

void IngestGate::Add(int64_t units) {
  absl::MutexLock l(&mu_);
  queued_ += units;
}

void IngestGate::Release(int64_t units) {
  std::vector<std::weak_ptr<GateWaiter>> wake;
  {
    absl::MutexLock l(&mu_);
    queued_ -= units;
    if (queued_ < max_units_) wake.swap(parked_);
  }
  // Outside the lock: a waiter takes its own lock and may park again.
  for (auto& w : wake) {
    if (auto waiter = w.lock()) waiter->Resume();
  }
}

bool IngestGate::RoomOrPark(std::weak_ptr<GateWaiter> waiter) {
  absl::MutexLock l(&mu_);
  if (queued_ < max_units_) return true;
  parked_.push_back(std::move(waiter));
  return false;
}

int64_t IngestGate::queued() {
  absl::MutexLock l(&mu_);
  return queued_;
}

int64_t GateUnits(int64_t samples) { return std::max<int64_t>(1, samples); }

int64_t GateUnits(const v1::AgentMessage& m) {
  if (m.has_samples()) return GateUnits(SampleCount(m.samples()));
  if (m.has_power()) return GateUnits(m.power().t_ns_size());
  return 1;
}

}  // namespace hetbench::server
