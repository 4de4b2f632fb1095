// The simulator's kernels, compiled once per instruction set by Highway's
// foreach_target (this file includes itself once per target) and chosen at
// run time. See kernels.h for the layout and the contract.

#ifndef HETBENCH_QPU_KERNELS_ONCE
#define HETBENCH_QPU_KERNELS_ONCE
#include <functional>

#include "agent/qpu/kernels.h"

namespace hetbench::agent::qpu::kernels::detail {
// Runs f over [0, groups) in chunks of `grain`, on LibTorch's intra-op
// threads when `parallel` (defined below, outside the per-target code).
void ForGroups(int64_t groups, int64_t grain, bool parallel, const std::function<void(int64_t, int64_t)>& f);
}  // namespace hetbench::agent::qpu::kernels::detail

// Every target Highway can compile for, so that the portable fallback is
// real (and tested here) beside SSSE3/SSE4/AVX2/AVX-512. The fallback is
// HWY_SCALAR (one lane: the plain loop, ApplyScalar) with GCC < 12.3, whose
// EMU128 Highway marks broken, and EMU128 otherwise. Scalable vectors (SVE,
// RVV) are left out: the kernels keep arrays of vectors.
#define HWY_COMPILE_ALL_ATTAINABLE
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif  // HETBENCH_QPU_KERNELS_ONCE

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "agent/qpu/kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
// Per target as this file (Highway's -inl.h convention).
#include "agent/qpu/run_reader-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hetbench::agent::qpu::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Bytes one parallel chunk streams at least: large enough to amortise a
// task, small enough to split a 2^20-amplitude state over a few threads.
constexpr int64_t kChunkBytes = int64_t{1} << 18;

inline int64_t InsertZeros(int64_t g, const int* bits, int count) {  // bits ascending
  for (int t = 0; t < count; ++t) {
    const int64_t low = (int64_t{1} << bits[t]) - 1;
    g = ((g & ~low) << 1) | (g & low);
  }
  return g;
}

template <typename Real>
struct Geometry {
  int n = 0, k = 0;
  int nl = 0, nh = 0;          // qubits inside a vector (low) and across vectors (high)
  int hq[kMaxDiagonalQubits];  // high qubits as bits of the vector index
  int64_t lanes = 0;           // Real lanes per vector
  int64_t complex_lanes = 0;
  int64_t groups = 0;
  std::vector<int64_t> offset;  // vector offset of high combination h
  bool vectorised = false;
  // The padding (kernels.h) in Real units: a pad of pad_reals after every
  // 2^shift Reals, chunk_vectors vectors. Runs never cross a chunk's end.
  int shift = 63;
  int64_t pad_reals = 0, chunk_vectors = int64_t{1} << 62;
  // Where Real index r of the unpadded state lies (linear over disjoint bits).
  int64_t Addr(int64_t r) const { return r + (r >> shift) * pad_reals; }
};

template <typename Real>
Geometry<Real> Layout(const Block& b, int n, const Padding& padding) {
  const hn::ScalableTag<Real> d;
  Geometry<Real> g;
  g.n = n;
  g.k = static_cast<int>(b.qubits.size());
  g.lanes = static_cast<int64_t>(hn::Lanes(d));
  g.complex_lanes = g.lanes / 2;
  if (g.k > kMaxDiagonalQubits) return g;  // past the kernels' tables: the scalar loop
  int log_c = 0;
  while ((int64_t{1} << log_c) < g.complex_lanes) ++log_c;
  for (int q : b.qubits) {
    if (q < log_c) {
      ++g.nl;
    } else {
      g.hq[g.nh++] = q - log_c;
    }
  }
  // Vectors need whole complex numbers, a state of at least 2^nh vectors and
  // chunks of whole vectors.
  g.vectorised = g.complex_lanes >= 1 && g.lanes % 2 == 0 && n >= log_c + g.nh &&
                 (!padding.padded() || padding.every_log2 >= log_c);
  if (!g.vectorised) return g;
  if (padding.padded() && padding.every_log2 < n) {
    g.shift = padding.every_log2 + 1;  // two Reals an amplitude
    g.pad_reals = 2 * padding.pad;
    g.chunk_vectors = int64_t{1} << (padding.every_log2 - log_c);
  }
  g.groups = (int64_t{1} << (n - log_c)) >> g.nh;
  g.offset.resize(size_t{1} << g.nh);
  for (size_t h = 0; h < g.offset.size(); ++h) {
    int64_t o = 0;
    for (int t = 0; t < g.nh; ++t) {
      if ((h >> t) & 1) o |= int64_t{1} << g.hq[t];
    }
    g.offset[h] = o;
  }
  return g;
}

template <typename Real>
int64_t Grain(const Geometry<Real>& g) {
  const int64_t bytes_per_group = (g.lanes * static_cast<int64_t>(sizeof(Real))) << g.nh;
  return std::max<int64_t>(1, kChunkBytes / bytes_per_group);
}

// The runs a kernel walks over groups [g0, g1): groups below the lowest high
// qubit are consecutive vectors, up to a padded chunk's end. Start() hands
// each run, and the next, to a RunReader.
template <typename Real, int NH>
struct Runs {
  const Geometry<Real>& g;
  Real* s;
  int64_t run, g1;
  // `lowest`: vectors below the lowest high qubit (a power of two).
  Runs(const Geometry<Real>& geometry, Real* state, int64_t lowest, int64_t end)
      : g(geometry), s(state), run(std::min(lowest, geometry.chunk_vectors)), g1(end) {}
  int64_t Len(int64_t grp) const { return std::min(run - (grp & (run - 1)), g1 - grp); }
  Real* At(int64_t grp) const { return s + g.Addr(InsertZeros(grp, g.hq, NH) * g.lanes); }
  void Start(RunReader<Real>& reader, int64_t grp, int64_t len, const Real* p) const {
    if (!reader.on()) return;
    const int64_t next = grp + len;
    reader.Start(p, len, next < g1 ? At(next) : nullptr, next < g1 ? Len(next) : 0);
  }
};

// Mask, in complex-lane units, of low-qubit combination p (bit t of p is the
// block's qubit t, t < nl).
inline int LowMask(const Block& b, int p, int nl) {
  int m = 0;
  for (int t = 0; t < nl; ++t) {
    if ((p >> t) & 1) m |= 1 << b.qubits[t];
  }
  return m;
}
// The block-local low bits of complex lane j.
inline int LowBits(const Block& b, int64_t j, int nl) {
  int l = 0;
  for (int t = 0; t < nl; ++t) l |= static_cast<int>((j >> b.qubits[t]) & 1) << t;
  return l;
}

// Scalar loop for states smaller than one vector group: gathers the 2^k
// amplitudes of each group, multiplies, scatters.
template <typename Real>
void ApplyScalar(const Block& b, std::complex<Real>* state, int n, const Padding& padding) {
  const auto s = [&](int64_t i) -> std::complex<Real>& { return state[padding.Index(i)]; };
  const int k = static_cast<int>(b.qubits.size());
  const int64_t dim = int64_t{1} << k;
  std::vector<std::complex<Real>> in(static_cast<size_t>(dim));
  std::vector<std::complex<Real>> m(b.matrix.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::complex<Real>(b.matrix[i]);
  std::vector<int64_t> offset(static_cast<size_t>(dim), 0);
  for (int64_t c = 0; c < dim; ++c) {
    for (int t = 0; t < k; ++t) {
      if ((c >> t) & 1) offset[c] |= int64_t{1} << b.qubits[t];
    }
  }
  for (int64_t g = 0; g < (int64_t{1} << n) >> k; ++g) {
    const int64_t base = InsertZeros(g, b.qubits.data(), k);
    if (b.diagonal) {
      for (int64_t r = 0; r < dim; ++r) s(base + offset[r]) *= m[r];
      continue;
    }
    for (int64_t c = 0; c < dim; ++c) in[c] = s(base + offset[c]);
    for (int64_t r = 0; r < dim; ++r) {
      std::complex<Real> acc(0);
      for (int64_t c = 0; c < dim; ++c) acc += m[r * dim + c] * in[c];
      s(base + offset[r]) = acc;
    }
  }
}

#if HWY_TARGET != HWY_SCALAR
// Dense block, every qubit across vectors: each output vector is a sum over
// the 2^NH input vectors of broadcast coefficients times the vector and its
// (-im, re) twin. NH is a template argument so the loops unroll; for NH <= 2
// the coefficients stay in registers. Consecutive groups below the lowest
// high qubit are consecutive vectors: they are walked as runs, two at a time.
// kReal: every coefficient is real (RY, H, CNOT, CZ, SWAP and their
// products), so the twins and their half of the multiply-adds are skipped.
template <typename Real, int NH, bool kReal>
void DenseHigh(const Geometry<Real>& g, const Real* cr, const Real* ci, Real* HWY_RESTRICT s, int64_t g0, int64_t g1) {
  const hn::ScalableTag<Real> d;
  constexpr int H = 1 << NH;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = g.lanes;
  constexpr bool kHoist = NH <= 2;
  V hr[kHoist ? H * H : 1], hi[kHoist ? H * H : 1];
  if constexpr (kHoist) {
    for (int e = 0; e < H * H; ++e) hr[e] = hn::Set(d, cr[e]), hi[e] = hn::Set(d, ci[e]);
  }
  auto coef_r = [&](int e) { return kHoist ? hr[e] : hn::Set(d, cr[e]); };
  auto coef_i = [&](int e) { return kHoist ? hi[e] : hn::Set(d, ci[e]); };
  // One output vector from the inputs x and twins xs.
  auto row = [&](int h, const V* x, const V* xs) {
    V acc = hn::Mul(coef_r(h * H), x[0]);
    if constexpr (!kReal) acc = hn::MulAdd(coef_i(h * H), xs[0], acc);
    for (int c = 1; c < H; ++c) {
      acc = hn::MulAdd(coef_r(h * H + c), x[c], acc);
      if constexpr (!kReal) acc = hn::MulAdd(coef_i(h * H + c), xs[c], acc);
    }
    return acc;
  };
  auto load = [&](const Real* p, V* x, V* xs) {
    *x = hn::LoadU(d, p);
    if constexpr (!kReal) {
      const V sw = hn::Reverse2(d, *x);
      *xs = hn::OddEven(sw, hn::Neg(sw));  // (-im, re)
    }
  };
  int64_t offset[H];
  for (int h = 0; h < H; ++h) offset[h] = g.Addr(g.offset[h] * N);
  const Runs<Real, NH> runs(g, s, int64_t{1} << g.hq[0], g1);
  RunReader<Real> reader(runs.run, N, offset, H);
  for (int64_t grp = g0; grp < g1;) {
    const int64_t len = runs.Len(grp);
    Real* p = runs.At(grp);
    runs.Start(reader, grp, len, p);
    int64_t j = 0;
    for (; j + 2 <= len; j += 2, p += 2 * N) {
      reader.Step(2 * H);
      V x0[H], xs0[H], x1[H], xs1[H];
      for (int h = 0; h < H; ++h) {
        load(p + offset[h], &x0[h], &xs0[h]);
        load(p + offset[h] + N, &x1[h], &xs1[h]);
      }
      for (int h = 0; h < H; ++h) {
        hn::StoreU(row(h, x0, xs0), d, p + offset[h]);
        hn::StoreU(row(h, x1, xs1), d, p + offset[h] + N);
      }
    }
    for (; j < len; ++j, p += N) {
      reader.Step(H);
      V x0[H], xs0[H];
      for (int h = 0; h < H; ++h) load(p + offset[h], &x0[h], &xs0[h]);
      for (int h = 0; h < H; ++h) hn::StoreU(row(h, x0, xs0), d, p + offset[h]);
    }
    grp += len;
  }
}

// Dense block with NL >= 1 qubits inside a vector: for each low pattern p the
// input vector's lanes are permuted (lane j takes lane j ^ mask(p)) and
// multiplied by per-lane coefficients; the (-im, re) twin comes from a
// second permutation with the sign in the coefficient. NL is a template
// argument so that the 2^k permuted inputs have a fixed count: for k <= 4
// they stay in registers (with a run-time count they lived on the stack).
// kReal as DenseHigh's: no twin permutation, no imaginary coefficients.
template <typename Real, int NH, int NL, bool kReal>
void DenseMixed(const Geometry<Real>& g, const Real* coef,
                const hwy::AlignedFreeUniquePtr<hwy::MakeSigned<Real>[]>& idx, Real* HWY_RESTRICT s, int64_t g0,
                int64_t g1) {
  const hn::ScalableTag<Real> d;
  const hn::RebindToSigned<decltype(d)> di;
  constexpr int H = 1 << NH, P = 1 << NL;
  const int64_t N = g.lanes;
  using V = hn::Vec<decltype(d)>;
  using I = decltype(hn::IndicesFromVec(d, hn::Zero(di)));
  I perm[P], perm_swap[P];
  for (int p = 0; p < P; ++p) {
    perm[p] = hn::IndicesFromVec(d, hn::LoadU(di, idx.get() + (2 * p) * N));
    perm_swap[p] = hn::IndicesFromVec(d, hn::LoadU(di, idx.get() + (2 * p + 1) * N));
  }
  int64_t offset[H];
  for (int h = 0; h < H; ++h) offset[h] = g.Addr(g.offset[h] * N);
  // G consecutive groups at a time, each coefficient vector loaded once for
  // all G: two where both groups' inputs fit in registers (2^k of them real,
  // 2^(k+1) complex; k <= 3 real). Four measured no faster than two.
  constexpr int kG = (kReal ? H * P : 2 * H * P) <= 8 ? 2 : 1;
  auto groups = [&](auto g_count, Real* const* at) {
    constexpr int G = decltype(g_count)::value;
    V x[G][H * P], xs[G][kReal ? 1 : H * P];
    for (int h = 0; h < H; ++h) {
      for (int q = 0; q < G; ++q) {
        const V v = hn::LoadU(d, at[q] + offset[h]);
        for (int p = 0; p < P; ++p) {
          x[q][h * P + p] = p == 0 ? v : hn::TableLookupLanes(v, perm[p]);  // pattern 0: no lane moves
          if constexpr (!kReal) xs[q][h * P + p] = hn::TableLookupLanes(v, perm_swap[p]);
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const Real* c = coef + static_cast<int64_t>(h) * H * P * 2 * N;
      V acc[G];
      for (int q = 0; q < G; ++q) acc[q] = hn::Zero(d);
      for (int e = 0; e < H * P; ++e) {
        const V cr = hn::LoadU(d, c + (2 * e) * N);
        for (int q = 0; q < G; ++q) acc[q] = hn::MulAdd(cr, x[q][e], acc[q]);
        if constexpr (!kReal) {
          const V ci = hn::LoadU(d, c + (2 * e + 1) * N);
          for (int q = 0; q < G; ++q) acc[q] = hn::MulAdd(ci, xs[q][e], acc[q]);
        }
      }
      for (int q = 0; q < G; ++q) hn::StoreU(acc[q], d, at[q] + offset[h]);
    }
  };
  // Groups below the lowest high qubit are consecutive vectors (runs), as in
  // DenseHigh; with no high qubit, up to a padded chunk's end.
  const Runs<Real, NH> runs(g, s, NH > 0 ? int64_t{1} << g.hq[0] : int64_t{1} << 62, g1);
  RunReader<Real> reader(NH > 0 ? runs.run : 1, N, offset, H);
  if (runs.run == 1) {  // runs of one vector: each group is paired with the next anyway (apart in memory)
    int64_t grp = g0;
    for (; grp + kG <= g1; grp += kG) {
      Real* at[kG];
      for (int q = 0; q < kG; ++q) at[q] = runs.At(grp + q);
      groups(std::integral_constant<int, kG>(), at);
    }
    for (; grp < g1; ++grp) {
      Real* const at = runs.At(grp);
      groups(std::integral_constant<int, 1>(), &at);
    }
    return;
  }
  for (int64_t grp = g0; grp < g1;) {
    const int64_t len = runs.Len(grp);
    Real* const start = runs.At(grp);
    runs.Start(reader, grp, len, start);
    int64_t j = 0;
    if constexpr (kG > 1) {
      for (; j + kG <= len; j += kG) {
        reader.Step(kG * H);
        Real* at[kG];
        for (int q = 0; q < kG; ++q) at[q] = start + (j + q) * N;
        groups(std::integral_constant<int, kG>(), at);
      }
    }
    for (; j < len; ++j) {
      reader.Step(H);
      Real* const at = start + j * N;
      groups(std::integral_constant<int, 1>(), &at);
    }
    grp += len;
  }
}

// Diagonal block: vector h of each group times per-lane coefficients (the
// low qubits pick the lane's entry); combinations whose entries are all 1
// are not read at all (CZ on two high qubits touches a quarter of the state).
template <typename Real>
void Diagonal(const Geometry<Real>& g, const Real* coef, const std::vector<int>& touched, Real* HWY_RESTRICT s,
              int64_t g0, int64_t g1) {
  const hn::ScalableTag<Real> d;
  const int64_t N = g.lanes;
  using V = hn::Vec<decltype(d)>;
  // Groups below the lowest high qubit are consecutive vectors (up to a
  // padded chunk's end): per run, each touched combination's coefficients are
  // loaded once and streamed over.
  const int64_t run = std::min(g.nh > 0 ? int64_t{1} << g.hq[0] : int64_t{1} << 62, g.chunk_vectors);
  for (int64_t grp = g0; grp < g1;) {
    const int64_t len = std::min(run - (grp & (run - 1)), g1 - grp);
    const int64_t base = InsertZeros(grp, g.hq, g.nh);
    for (int h : touched) {
      const V cr = hn::LoadU(d, coef + 2 * h * N), ci = hn::LoadU(d, coef + (2 * h + 1) * N);
      Real* p = s + g.Addr((base + g.offset[h]) * N);
      for (int64_t j = 0; j < len; ++j, p += N) {
        const V v = hn::LoadU(d, p);
        hn::StoreU(hn::MulAdd(ci, hn::Reverse2(d, v), hn::Mul(cr, v)), d, p);
      }
    }
    grp += len;
  }
}

// Calls f(std::integral_constant<int, count>) for the run-time count in
// [C, Max], so the kernels get their qubit counts (across and inside
// vectors) as template arguments; false when count is out of that range.
template <int C, int Max, typename F>
bool WithQubitCount(int count, const F& f) {
  if constexpr (C > Max) {
    return false;
  } else {
    if (count == C) {
      f(std::integral_constant<int, C>());
      return true;
    }
    return WithQubitCount<C + 1, Max>(count, f);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

template <typename Real>
void ApplyTyped(const Block& b, std::complex<Real>* state, int n, bool parallel, const Padding& padding) {
#if HWY_TARGET == HWY_SCALAR
  (void)parallel;
  ApplyScalar(b, state, n, padding);
}
#else
  const Geometry<Real> g = Layout<Real>(b, n, padding);
  const int k = g.k;
  if (!g.vectorised || (!b.diagonal && k > kMaxDenseQubits)) {
    ApplyScalar(b, state, n, padding);
    return;
  }
  Real* s = reinterpret_cast<Real*>(state);
  const int64_t N = g.lanes;
  const int H = 1 << g.nh, P = 1 << g.nl;
  auto row_of = [&](int h, int l) { return (static_cast<int64_t>(h) << g.nl) | l; };  // block-local index

  if (b.diagonal) {
    // Per high combination h: a (re, re) and a (-im, im) coefficient vector.
    auto coef = hwy::AllocateAligned<Real>(static_cast<size_t>(2 * H * N));
    std::vector<int> touched;
    for (int h = 0; h < H; ++h) {
      bool identity = true;
      for (int64_t j = 0; j < g.complex_lanes; ++j) {
        const std::complex<double> e = b.matrix[row_of(h, LowBits(b, j, g.nl))];
        identity = identity && e == std::complex<double>(1.0);
        coef[2 * h * N + 2 * j] = coef[2 * h * N + 2 * j + 1] = static_cast<Real>(e.real());
        coef[(2 * h + 1) * N + 2 * j] = static_cast<Real>(-e.imag());
        coef[(2 * h + 1) * N + 2 * j + 1] = static_cast<Real>(e.imag());
      }
      if (!identity) touched.push_back(h);
    }
    if (touched.empty()) return;
    detail::ForGroups(g.groups, Grain(g), parallel,
                      [&](int64_t g0, int64_t g1) { Diagonal<Real>(g, coef.get(), touched, s, g0, g1); });
    return;
  }

  bool real = true;
  for (const std::complex<double>& e : b.matrix) real = real && e.imag() == 0.0;
  if (g.nl == 0) {
    auto cr = hwy::AllocateAligned<Real>(static_cast<size_t>(H * H));
    auto ci = hwy::AllocateAligned<Real>(static_cast<size_t>(H * H));
    for (int i = 0; i < H * H; ++i) {
      cr[i] = static_cast<Real>(b.matrix[i].real());
      ci[i] = static_cast<Real>(b.matrix[i].imag());
    }
    const bool ran = WithQubitCount<1, kMaxDenseQubits>(g.nh, [&](auto nh) {
      detail::ForGroups(g.groups, Grain(g), parallel, [&](int64_t g0, int64_t g1) {
        if (real) {
          DenseHigh<Real, decltype(nh)::value, true>(g, cr.get(), ci.get(), s, g0, g1);
        } else {
          DenseHigh<Real, decltype(nh)::value, false>(g, cr.get(), ci.get(), s, g0, g1);
        }
      });
    });
    if (!ran) ApplyScalar(b, state, n, padding);
    return;
  }

  // Mixed: coefficient vectors per (h, h', p), and the permutation indices.
  using TI = hwy::MakeSigned<Real>;
  auto idx = hwy::AllocateAligned<TI>(static_cast<size_t>(2 * P * N));
  for (int p = 0; p < P; ++p) {
    const int mask = LowMask(b, p, g.nl);
    for (int64_t lane = 0; lane < N; ++lane) {
      idx[2 * p * N + lane] = static_cast<TI>(lane ^ (2 * mask));
      idx[(2 * p + 1) * N + lane] = static_cast<TI>(lane ^ (2 * mask) ^ 1);
    }
  }
  const int64_t dim = int64_t{1} << k;
  auto coef = hwy::AllocateAligned<Real>(static_cast<size_t>(H * H * P * 2 * N));
  for (int h = 0; h < H; ++h) {
    for (int hc = 0; hc < H; ++hc) {
      for (int p = 0; p < P; ++p) {
        Real* cr = coef.get() + ((static_cast<int64_t>(h) * H + hc) * P + p) * 2 * N;
        Real* ci = cr + N;
        for (int64_t j = 0; j < g.complex_lanes; ++j) {
          const int l = LowBits(b, j, g.nl);
          const std::complex<double> e = b.matrix[row_of(h, l) * dim + row_of(hc, l ^ p)];
          cr[2 * j] = cr[2 * j + 1] = static_cast<Real>(e.real());
          // times the swapped input (im, re): -im * x.im into re, +im * x.re into im
          ci[2 * j] = static_cast<Real>(-e.imag());
          ci[2 * j + 1] = static_cast<Real>(e.imag());
        }
      }
    }
  }
  // nh + nl <= k <= kMaxDenseQubits with 1 <= nl <= 3 (complex lanes <= 8).
  bool ran = false;
  WithQubitCount<1, 3>(g.nl, [&](auto nl) {
    WithQubitCount<0, kMaxDenseQubits - 1>(g.nh, [&](auto nh) {
      constexpr int NH = decltype(nh)::value, NL = decltype(nl)::value;
      if constexpr (NH + NL <= kMaxDenseQubits) {
        detail::ForGroups(g.groups, Grain(g), parallel, [&](int64_t g0, int64_t g1) {
          if (real) {
            DenseMixed<Real, NH, NL, true>(g, coef.get(), idx, s, g0, g1);
          } else {
            DenseMixed<Real, NH, NL, false>(g, coef.get(), idx, s, g0, g1);
          }
        });
        ran = true;
      }
    });
  });
  if (!ran) ApplyScalar(b, state, n, padding);
}
#endif  // HWY_TARGET == HWY_SCALAR

void ApplyF32(const Block& b, std::complex<float>* s, int n, bool parallel, const Padding& padding) {
  ApplyTyped<float>(b, s, n, parallel, padding);
}
void ApplyF64(const Block& b, std::complex<double>* s, int n, bool parallel, const Padding& padding) {
  ApplyTyped<double>(b, s, n, parallel, padding);
}
int ComplexLanesF32() { return static_cast<int>(hn::Lanes(hn::ScalableTag<float>()) / 2); }
int ComplexLanesF64() { return static_cast<int>(hn::Lanes(hn::ScalableTag<double>()) / 2); }

}  // namespace hetbench::agent::qpu::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <ATen/Parallel.h>

namespace hetbench::agent::qpu::kernels {

HWY_EXPORT(ApplyF32);
HWY_EXPORT(ApplyF64);
HWY_EXPORT(ComplexLanesF32);
HWY_EXPORT(ComplexLanesF64);

namespace detail {
void ForGroups(int64_t groups, int64_t grain, bool parallel, const std::function<void(int64_t, int64_t)>& f) {
  if (!parallel || groups <= grain) {
    f(0, groups);
    return;
  }
  at::parallel_for(0, groups, grain, [&](int64_t b, int64_t e) { f(b, e); });
}
}  // namespace detail

void Apply(const Block& block, std::complex<float>* state, int n, const Padding& layout) {
  HWY_DYNAMIC_DISPATCH(ApplyF32)(block, state, n, true, layout);
}
void Apply(const Block& block, std::complex<double>* state, int n, const Padding& layout) {
  HWY_DYNAMIC_DISPATCH(ApplyF64)(block, state, n, true, layout);
}
void ApplySerial(const Block& block, std::complex<float>* state, int n, const Padding& layout) {
  HWY_DYNAMIC_DISPATCH(ApplyF32)(block, state, n, false, layout);
}
void ApplySerial(const Block& block, std::complex<double>* state, int n, const Padding& layout) {
  HWY_DYNAMIC_DISPATCH(ApplyF64)(block, state, n, false, layout);
}
int ComplexLanes(bool is_double) {
  return is_double ? HWY_DYNAMIC_DISPATCH(ComplexLanesF64)() : HWY_DYNAMIC_DISPATCH(ComplexLanesF32)();
}
bool HasQubitInsideVector(const Block& block, bool is_double) {
  return !block.qubits.empty() && (int64_t{1} << block.qubits.front()) < ComplexLanes(is_double);
}

std::vector<std::string> AvailableTargets() {
  std::vector<std::string> names;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) names.emplace_back(hwy::TargetName(t));
  return names;
}

std::string ActiveTarget() {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

bool ForceTarget(const std::string& name) {
  hwy::SetSupportedTargetsForTest(0);
  if (name.empty()) return true;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (name == hwy::TargetName(t)) {
      hwy::SetSupportedTargetsForTest(t);
      return true;
    }
  }
  return false;
}

void ApplyReference(const Block& block, std::complex<double>* state, int n) {
  const int k = static_cast<int>(block.qubits.size());
  const int64_t dim = int64_t{1} << n, bdim = int64_t{1} << k;
  int64_t mask = 0;
  for (int q : block.qubits) mask |= int64_t{1} << q;
  const std::vector<std::complex<double>> in(state, state + dim);
  for (int64_t i = 0; i < dim; ++i) {
    int64_t row = 0;
    for (int t = 0; t < k; ++t) row |= ((i >> block.qubits[t]) & 1) << t;
    if (block.diagonal) {
      state[i] = block.matrix[row] * in[i];
      continue;
    }
    std::complex<double> acc(0);
    for (int64_t col = 0; col < bdim; ++col) {
      int64_t j = i & ~mask;
      for (int t = 0; t < k; ++t) j |= ((col >> t) & 1) << block.qubits[t];
      acc += block.matrix[row * bdim + col] * in[j];
    }
    state[i] = acc;
  }
}

}  // namespace hetbench::agent::qpu::kernels
#endif  // HWY_ONCE
