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
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hetbench::agent::qpu::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Reads a run's vectors in address order before a kernel updates them.
// A kernel walks its 2^nh streams (a group's vectors) in step, one vector of
// each at a time; where the lowest high qubit's run is 512 B to a few KiB,
// the streams are short and adjacent, and on this VM's AMD EPYC (Zen 4, 32 KiB
// L1D) that pattern ran at 0.41-0.58 of the read-modify-write for a
// one-qubit gate on qubits 6-10 (0.95-1.0 on qubits 3-5 and 14-23). Read
// first, in address order, the same run's stores hit the L1 and the hardware
// sees one sequential stream: 0.90-1.0 (docs/devices.md, "Runs in step").
//  - kPipelined: each run is read while the one before it is updated (one
//    load of the next run per vector updated), so the reads overlap the
//    arithmetic; both runs must fit in half the L1: streams x run <= 8 KiB.
//  - kWhole: the run is read just before it is updated; <= 16 KiB.
//  - kNone: longer runs (reading ahead measured slower there, the L1
//    overflows) and runs under 512 B (already one sequential stream).
template <typename Real>
class RunReader {
 public:
  enum class Mode { kNone, kWhole, kPipelined };
  static constexpr int64_t kMinRunBytes = 512, kPipelinedBytes = 8 << 10, kWholeBytes = 16 << 10;

  // `offset`: the `count` streams' offsets (Real units) from a run's start;
  // `run`: vectors a stream in a whole run, `lanes` Real lanes a vector.
  RunReader(int64_t run, int64_t lanes, const int64_t* offset, int count)
      : lanes_(lanes), offset_(offset), count_(count) {
    const int64_t run_bytes = run * lanes * static_cast<int64_t>(sizeof(Real));
    const int64_t block = run_bytes * count;
    if (run_bytes >= kMinRunBytes && block <= kPipelinedBytes) {
      mode_ = Mode::kPipelined;
    } else if (run_bytes >= kMinRunBytes && block <= kWholeBytes) {
      mode_ = Mode::kWhole;
    }
  }
  ~RunReader() {
    if (mode_ == Mode::kNone) return;
    volatile Real sink = hn::GetLane(hn::BitCast(d_, read_));  // the reads stay
    (void)sink;
  }
  // At the start of a run of `len` vectors a stream from `p`; the next run
  // (`next`, nullptr for none) is read during this one when pipelined.
  void Start(const Real* p, int64_t len, const Real* next, int64_t next_len) {
    if (mode_ == Mode::kNone) return;
    if (mode_ == Mode::kWhole || first_) {
      Plan(p, len);
      Step(remaining_);
      first_ = false;
      if (mode_ == Mode::kWhole) return;
    }
    Step(remaining_);  // what is left of this run's read
    if (next) Plan(next, next_len);
  }
  // Reads `vectors` more of the planned run: vector t of every segment, then
  // t + 1, so that each segment is one sequential stream.
  void Step(int64_t vectors) {
    for (vectors = std::min(vectors, remaining_); vectors > 0; --vectors, --remaining_) {
      read_ = hn::Or(read_, hn::BitCast(du_, hn::LoadU(d_, segment_[i_] + t_ * lanes_)));
      if (++i_ == segments_) i_ = 0, ++t_;
    }
  }
  bool pipelined() const { return mode_ == Mode::kPipelined; }

 private:
  // The run's streams as segments: streams that follow each other in memory
  // (a qubit just above the run's) are one segment.
  void Plan(const Real* p, int64_t len) {
    segments_ = 0;
    int64_t per = len;  // vectors a segment: len x the streams merged into it
    for (int h = 0; h < count_; ++h) {
      if (h > 0 && offset_[h] == offset_[h - 1] + len * lanes_) {
        if (segments_ == 1) per += len;
        continue;
      }
      segment_[segments_++] = p + offset_[h];
    }
    // Every segment merges the same number of streams (the offsets' bits repeat).
    seg_len_ = per;
    remaining_ = seg_len_ * segments_;
    i_ = 0;
    t_ = 0;
  }
  hn::ScalableTag<Real> d_;
  hn::RebindToUnsigned<hn::ScalableTag<Real>> du_;
  hn::Vec<hn::RebindToUnsigned<hn::ScalableTag<Real>>> read_ = hn::Zero(du_);
  int64_t lanes_;
  const int64_t* offset_;
  int count_;
  Mode mode_ = Mode::kNone;
  bool first_ = true;
  const Real* segment_[1 << kMaxDenseQubits];
  int segments_ = 0, i_ = 0;
  int64_t seg_len_ = 0, t_ = 0, remaining_ = 0;
};

}  // namespace hetbench::agent::qpu::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HETBENCH_QPU_RUN_READER_INL_H_
