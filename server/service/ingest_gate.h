#pragma once
/// A budget on what all agent streams together have handed the event loop
/// and the loop has not handled yet, counted in samples (a message without
/// samples counts 1). A stream reads its next message only while the total
/// is under the budget; otherwise it parks here and is resumed when the loop
/// has worked the total back under. The loop's queue thus holds a bounded
/// amount of work however many agents stream, so loop latency stays bounded
/// while ingest runs at full speed; agents beyond it wait in HTTP/2 flow
/// control, not in memory.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::server {

class GateWaiter {
 public:
  virtual ~GateWaiter() = default;
  /// The gate has room again: try to read on (thread-safe; may park again).
  virtual void Resume() = 0;
};

class IngestGate {
 public:
  explicit IngestGate(int64_t max_units) : max_units_(max_units) {}

  /// `units` were handed to the loop.
  void Add(int64_t units);
  /// `units` were handled; wakes the parked streams once under budget.
  void Release(int64_t units);
  /// True when under budget; otherwise parks `waiter` (resumed once, later).
  bool RoomOrPark(std::weak_ptr<GateWaiter> waiter);

  int64_t queued();
  int64_t max_units() const { return max_units_; }

 private:
  const int64_t max_units_;
  absl::Mutex mu_;
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::weak_ptr<GateWaiter>> parked_ ABSL_GUARDED_BY(mu_);
};

/// What a message costs the gate: its samples or readings, at least 1.
int64_t GateUnits(int64_t samples);
/// The same for an agent's message: a sample batch's steps (those its
/// columns' header declares when it came as columns), a power batch's
/// readings, 1 for anything else.
int64_t GateUnits(const v1::AgentMessage& m);

}  // namespace hetbench::server
