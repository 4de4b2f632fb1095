#pragma once
// A stand-in for the coordinator's event loop in tests of the parts it feeds
// (the batch writer, Ingest): keeps posted closures until the test runs them.

#include <functional>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace hetbench::testing {

class FakeLoop {
 public:
  std::function<bool(std::function<void()>)> Poster() {
    return [this](std::function<void()> fn) {
      absl::MutexLock l(&mu_);
      if (stopping_) return false;
      posted_.push_back(std::move(fn));
      return true;
    };
  }
  /// Runs what was posted so far, as the loop would; returns how many.
  size_t RunPosted() {
    std::vector<std::function<void()>> fns;
    {
      absl::MutexLock l(&mu_);
      fns.swap(posted_);
    }
    for (auto& fn : fns) fn();
    return fns.size();
  }
  size_t posted() {
    absl::MutexLock l(&mu_);
    return posted_.size();
  }
  void SetStopping() {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::function<void()>> posted_;
  bool stopping_ = false;
};

}  // namespace hetbench::testing
