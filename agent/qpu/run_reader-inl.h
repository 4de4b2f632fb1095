// RunReader: a kernel's read-ahead of its runs, compiled per Highway target
// (included from kernels.cc inside foreach_target; the guard toggles per
// target, Highway's -inl.h convention). See the class comment.

#if defined(HETBENCH_QPU_RUN_READER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HETBENCH_QPU_RUN_READER_INL_H_
#undef HETBENCH_QPU_RUN_READER_INL_H_
#else
#define HETBENCH_QPU_RUN_READER_INL_H_
#endif

#include <algorithm>
#include <cstdint>

#include "agent/qpu/kernels.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hetbench::agent::qpu::kernels::HWY_NAMESPACE {

// Fetches a kernel's next run, in address order, while it updates this one.
// A kernel walks its 2^nh streams (a group's vectors) in step, one vector of
// each at a time; where the lowest high qubit's run is 512 B to a few KiB,
// the streams are short and adjacent, and on this VM's AMD EPYC (AVX-512,
// 32 KiB L1D) that pattern ran at 0.41-0.65 of the read-modify-write for a
// one-qubit gate on qubits 6-10 (0.95-1.0 on qubits 3-5 and 14-23). Fetched
// ahead in address order, the hardware sees sequential streams and the
// kernel's loads hit the L1: 0.80-0.99 on qubits 6-10 (docs/devices.md,
// "Runs in step").
// Streams that follow each other in memory are fetched as one segment, the
// segments a line of each in turn. One prefetch per vector updated, so the
// next run is in flight while this one's arithmetic runs; prefetches retire
// at once where loads would hold the reorder buffer. Only where both runs
// fit in the L1 (streams x run <= 32 KiB), and not under 512 B a stream
// (already one sequential stream): elsewhere it measured slower.
template <typename Real>
class RunReader {
 public:
  static constexpr int64_t kMinRunBytes = 512, kMaxBlockBytes = 32 << 10;

  // `offset`: the `count` streams' offsets (Real units) from a run's start;
  // `run`: vectors a stream in a whole run, `lanes` Real lanes a vector.
  RunReader(int64_t run, int64_t lanes, const int64_t* offset, int count)
      : lanes_(lanes), offset_(offset), count_(count) {
    const int64_t run_bytes = run * lanes * static_cast<int64_t>(sizeof(Real));
    on_ = run_bytes >= kMinRunBytes && run_bytes * count <= kMaxBlockBytes;
  }
  bool on() const { return on_; }
  // At the start of the run of `len` vectors a stream from `p` (fetched now
  // if it is the first); `next` (nullptr for none) is fetched during it.
  void Start(const Real* p, int64_t len, const Real* next, int64_t next_len) {
    if (!on_) return;
    if (first_) {
      Plan(p, len);
      first_ = false;
    }
    Step(remaining_);  // what is left of this run's
    if (next) Plan(next, next_len);
  }
  // Fetches `vectors` more of the planned run: a vector of every segment,
  // then the next of each, so that each segment is one sequential stream.
  void Step(int64_t vectors) {
    for (vectors = std::min(vectors, remaining_); vectors > 0; --vectors, --remaining_) {
      hwy::Prefetch(segment_[i_] + t_ * lanes_);
      if (++i_ == segments_) i_ = 0, ++t_;
    }
  }

 private:
  // The run's streams as segments: streams that follow each other in memory
  // (a qubit just above the run's) are one segment. Every segment merges
  // the same number of streams (the offsets' bits repeat).
  void Plan(const Real* p, int64_t len) {
    segments_ = 0;
    int64_t per = len;
    for (int h = 0; h < count_; ++h) {
      if (h > 0 && offset_[h] == offset_[h - 1] + len * lanes_) {
        if (segments_ == 1) per += len;
        continue;
      }
      segment_[segments_++] = p + offset_[h];
    }
    remaining_ = per * segments_;
    i_ = 0;
    t_ = 0;
  }

  int64_t lanes_;
  const int64_t* offset_;
  int count_;
  bool on_ = false, first_ = true;
  const Real* segment_[1 << kMaxDenseQubits];
  int segments_ = 0, i_ = 0;
  int64_t t_ = 0, remaining_ = 0;
};

}  // namespace hetbench::agent::qpu::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HETBENCH_QPU_RUN_READER_INL_H_
