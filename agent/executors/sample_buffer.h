#pragma once
/// A single-producer single-consumer record buffer for the measuring loop.
/// The producer (the loop) only writes into preallocated chunks and publishes
/// a count; the consumer (the sender thread) reads what is published. No
/// locks, no allocation on the hot path once Reserve() has run.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace hetbench::agent {

struct SampleRecord {
  int64_t start_ns = 0;  // steady clock, relative to the task start
  int64_t duration_ns = 0;
  int32_t items = 0;  // samples the step processed
  int32_t phase = 0;  // v1::Phase
};

class SampleBuffer {
 public:
  static constexpr size_t kChunk = 8192;

  /// Holds at most `capacity` records over its life.
  explicit SampleBuffer(size_t capacity) : capacity_(capacity), chunks_((capacity + kChunk - 1) / kChunk) {}

  /// Producer only: allocates chunks up front so the next `n` pushes do not.
  void Reserve(size_t n) {
    const size_t first = count_.load(std::memory_order_relaxed);
    for (size_t i = first / kChunk; i < chunks_.size() && i * kChunk < first + n; ++i) Allocate(i);
  }

  /// Producer only. False when the buffer is full (the record is dropped).
  bool Push(const SampleRecord& r) {
    const size_t i = count_.load(std::memory_order_relaxed);
    if (i >= capacity_) return false;
    const size_t c = i / kChunk;
    if (!chunks_[c]) Allocate(c);
    chunks_[c][i % kChunk] = r;
    count_.store(i + 1, std::memory_order_release);
    return true;
  }

  /// Consumer: how many records are readable.
  size_t published() const { return count_.load(std::memory_order_acquire); }
  /// Consumer: record i, for i < published().
  const SampleRecord& at(size_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  size_t capacity() const { return capacity_; }

 private:
  void Allocate(size_t c) {
    if (!chunks_[c]) chunks_[c] = std::make_unique<SampleRecord[]>(kChunk);
  }

  const size_t capacity_;
  std::vector<std::unique_ptr<SampleRecord[]>> chunks_;  // table sized once; never reallocated
  std::atomic<size_t> count_{0};
};

}  // namespace hetbench::agent
