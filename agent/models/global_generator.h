#pragma once
/// LibTorch's process-wide CPU random generator, which every task of an agent
/// shares: module constructors draw initial weights from it and dropout on a
/// CPU tensor draws its masks from it, with no way to pass a generator of
/// one's own. The gate keeps a task's seeded draws whole:
///
/// - SeededDraws: held by code that seeds the generator and then draws
///   (BuildModel, CycleGan's constructor, the validation fingerprint). Alone:
///   no other draw lands between the seed and the last draw.
/// - UnseededDraws: held by a CPU task's training step (dropout), shared with
///   other such steps. Taken before the step's timer starts, so a step that
///   waits for a build is not measured longer, and no build runs under it.
///
/// Code that needs random numbers without this constraint draws from a
/// generator of its own (at::make_generator<at::CPUGeneratorImpl>(seed)).
/// Dropout masks of two CPU tasks training at once on one agent still
/// interleave (both hold UnseededDraws): each task's weights are its seed's,
/// its masks are its seed's only while it trains alone.

#include "absl/synchronization/mutex.h"

namespace hetbench::agent {

absl::Mutex& GlobalGeneratorMutex();

class SeededDraws {
 public:
  SeededDraws() : lock_(&GlobalGeneratorMutex()) {}

 private:
  absl::WriterMutexLock lock_;
};

class UnseededDraws {
 public:
  /// `cpu`: the step's tensors are on the CPU. Steps on a GPU draw from that
  /// device's own generator and take nothing.
  explicit UnseededDraws(bool cpu) : mu_(cpu ? &GlobalGeneratorMutex() : nullptr) {
    if (mu_ != nullptr) mu_->ReaderLock();
  }
  ~UnseededDraws() {
    if (mu_ != nullptr) mu_->ReaderUnlock();
  }
  UnseededDraws(const UnseededDraws&) = delete;
  UnseededDraws& operator=(const UnseededDraws&) = delete;

 private:
  absl::Mutex* mu_;
};

}  // namespace hetbench::agent
