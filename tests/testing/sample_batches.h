#pragma once
// The one SampleBatch builder of the tests, fuzz seeds and benches: a batch
// of `n` steps of one task attempt, its columns laid out by a BatchShape.

#include <cstdint>
#include <limits>
#include <string>

#include "hetbench/v1/agent.pb.h"

namespace hetbench::testing {

/// Step i of batch `seq` starts at first_start_ns + seq * seq_stride_ns +
/// i * step_ns, lasts duration_ns + i % duration_cycle and processes `items`
/// samples; every step is of `phase`.
struct BatchShape {
  int64_t first_start_ns = 0;
  int64_t seq_stride_ns = 0;
  int64_t step_ns = 100;
  int64_t duration_ns = 90;
  int64_t duration_cycle = std::numeric_limits<int32_t>::max();  // durations 90, 91, ... by default
  int32_t items = 8;
  v1::Phase phase = v1::PHASE_TRAIN;
};

inline v1::SampleBatch SampleBatchOf(const std::string& task, int attempt, uint64_t seq, int n,
                                     const BatchShape& shape = {}) {
  v1::SampleBatch b;
  b.set_task_id(task);
  b.set_attempt(attempt);
  b.set_seq(seq);
  b.set_phase(shape.phase);
  b.mutable_start_ns()->Reserve(n);
  b.mutable_duration_ns()->Reserve(n);
  b.mutable_items()->Reserve(n);
  for (int i = 0; i < n; ++i) {
    b.add_start_ns(shape.first_start_ns + static_cast<int64_t>(seq) * shape.seq_stride_ns + i * shape.step_ns);
    b.add_duration_ns(shape.duration_ns + i % shape.duration_cycle);
    b.add_items(shape.items);
  }
  return b;
}

}  // namespace hetbench::testing
