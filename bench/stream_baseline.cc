// The bandwidth baseline the simulator is judged against: an in-place
// streaming read-modify-write x = x * a + b over floats, vectorised
// explicitly with Highway at the CPU's best instruction set (the same
// dispatch as the simulator's kernels, so no compiler auto-vectorisation is
// assumed), split over LibTorch's threads like the simulator's passes.

#ifndef HETBENCH_BENCH_STREAM_ONCE
#define HETBENCH_BENCH_STREAM_ONCE
#include "bench/stream_baseline.h"
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/stream_baseline.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hetbench::bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Rmw(float* HWY_RESTRICT x, int64_t count, float a, float b) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto va = hn::Set(d, a), vb = hn::Set(d, b);
  int64_t i = 0;
  for (; i + 4 * N <= count; i += 4 * N) {  // four independent vectors in flight
    hn::StoreU(hn::MulAdd(hn::LoadU(d, x + i), va, vb), d, x + i);
    hn::StoreU(hn::MulAdd(hn::LoadU(d, x + i + N), va, vb), d, x + i + N);
    hn::StoreU(hn::MulAdd(hn::LoadU(d, x + i + 2 * N), va, vb), d, x + i + 2 * N);
    hn::StoreU(hn::MulAdd(hn::LoadU(d, x + i + 3 * N), va, vb), d, x + i + 3 * N);
  }
  for (; i < count; ++i) x[i] = x[i] * a + b;
}

int64_t FloatLanes() { return static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>())); }

}  // namespace hetbench::bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <ATen/Parallel.h>

namespace hetbench::bench {

HWY_EXPORT(Rmw);
HWY_EXPORT(FloatLanes);

void StreamRmw(float* x, int64_t count, float a, float b) {
  constexpr int64_t kChunk = int64_t{1} << 16;  // 256 KiB per task, as the simulator's passes
  at::parallel_for(0, count, kChunk,
                   [&](int64_t begin, int64_t end) { HWY_DYNAMIC_DISPATCH(Rmw)(x + begin, end - begin, a, b); });
}

int64_t StreamFloatLanes() { return HWY_DYNAMIC_DISPATCH(FloatLanes)(); }

}  // namespace hetbench::bench
#endif  // HWY_ONCE
