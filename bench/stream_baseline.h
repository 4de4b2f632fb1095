#pragma once
#include <cstdint>

namespace hetbench::bench {

/// x[i] = x[i] * a + b for i < count, in place: explicit SIMD at the CPU's
/// best instruction set, over LibTorch's intra-op threads.
void StreamRmw(float* x, int64_t count, float a, float b);

/// Float lanes of the vectors StreamRmw uses (16 with AVX-512).
int64_t StreamFloatLanes();

}  // namespace hetbench::bench
