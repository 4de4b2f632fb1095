#pragma once
/// LibTorch's intra-op thread count is one process-wide setting (ATen keeps
/// it in a global that its autograd threads read, and OpenBLAS's own count is
/// process-wide), so two tasks of one agent running at once on two devices
/// (a GPU and the CPU, say) cannot each have their own. The rule the agent
/// enforces: the first running task sets it; a task that starts while
/// others hold it runs with the same count, and its result says so
/// (RunEnvironment.threads is what ran; threads_note says what was asked).

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hetbench::agent {

class TorchThreads {
 public:
  /// Holds the setting for the scope: sets `wanted` when no one else holds
  /// it, else keeps the holders' count.
  explicit TorchThreads(int wanted);
  ~TorchThreads();
  TorchThreads(const TorchThreads&) = delete;
  TorchThreads& operator=(const TorchThreads&) = delete;

  int threads() const { return threads_; }
  /// "" when the task got what it asked for, else why not.
  std::string note() const;

  /// Holders right now (tests).
  static int holders();

 private:
  int wanted_ = 1;
  int threads_ = 1;
};

}  // namespace hetbench::agent
