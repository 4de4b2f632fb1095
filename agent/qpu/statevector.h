#pragma once
/// An n-qubit state-vector simulator: a batch of states, complex64 or
/// complex128, gates applied in one streaming pass each by the SIMD kernels
/// of kernels.h, threads from LibTorch's pool (torch::set_num_threads).
/// Qubit 0 is the least significant bit of an amplitude's index. States of
/// 512 MiB and more are stored padded (kernels::Padding::ForLargeStates)
/// unless the pads would pass the memory limit: read amplitudes through
/// amplitude() or ForEach(), not storage()[i].

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "agent/qpu/huge_pages.h"
#include "agent/qpu/kernels.h"

namespace hetbench::agent::qpu {

template <typename Real>
using Complex = std::complex<Real>;
template <typename Real>
using Mat2 = std::array<Complex<Real>, 4>;  // row-major [[a, b], [c, d]]
template <typename Real>
using Mat4 = std::array<Complex<Real>, 16>;  // row-major, basis |q_hi q_lo> = 00, 01, 10, 11

/// Largest state the simulator will allocate unless told otherwise (8 GiB).
inline constexpr int64_t kDefaultMemoryLimitBytes = int64_t{8} << 30;

/// States below this many amplitudes are too small to split: a batch of
/// them is spread over threads state by state instead.
inline constexpr int64_t kGrain = int64_t{1} << 14;

// ---- gate matrices

template <typename Real>
Mat2<Real> Hadamard() {
  const Real r = static_cast<Real>(M_SQRT1_2);
  return {Complex<Real>(r), Complex<Real>(r), Complex<Real>(r), Complex<Real>(-r)};
}
template <typename Real>
Mat2<Real> PauliX() {
  return {Complex<Real>(0), Complex<Real>(1), Complex<Real>(1), Complex<Real>(0)};
}
template <typename Real>
Mat2<Real> PauliY() {
  return {Complex<Real>(0), Complex<Real>(0, -1), Complex<Real>(0, 1), Complex<Real>(0)};
}
template <typename Real>
Mat2<Real> PauliZ() {
  return {Complex<Real>(1), Complex<Real>(0), Complex<Real>(0), Complex<Real>(-1)};
}
template <typename Real>
Mat2<Real> SGate() {
  return {Complex<Real>(1), Complex<Real>(0), Complex<Real>(0), Complex<Real>(0, 1)};
}
template <typename Real>
Mat2<Real> TGate() {
  const Real r = static_cast<Real>(M_SQRT1_2);
  return {Complex<Real>(1), Complex<Real>(0), Complex<Real>(0), Complex<Real>(r, r)};
}
/// RX(t) = exp(-i t X / 2), RY, RZ likewise.
template <typename Real>
Mat2<Real> Rx(double t) {
  const Real c = static_cast<Real>(std::cos(t / 2)), s = static_cast<Real>(std::sin(t / 2));
  return {Complex<Real>(c), Complex<Real>(0, -s), Complex<Real>(0, -s), Complex<Real>(c)};
}
template <typename Real>
Mat2<Real> Ry(double t) {
  const Real c = static_cast<Real>(std::cos(t / 2)), s = static_cast<Real>(std::sin(t / 2));
  return {Complex<Real>(c), Complex<Real>(-s), Complex<Real>(s), Complex<Real>(c)};
}
template <typename Real>
Mat2<Real> Rz(double t) {
  const Real c = static_cast<Real>(std::cos(t / 2)), s = static_cast<Real>(std::sin(t / 2));
  return {Complex<Real>(c, -s), Complex<Real>(0), Complex<Real>(0), Complex<Real>(c, s)};
}

/// Controlled-U as a 4x4 over |hi lo>: control `hi`, target `lo`.
template <typename Real>
Mat4<Real> ControlledOnLow(const Mat2<Real>& u) {
  Mat4<Real> m{};
  m[0] = m[5] = Complex<Real>(1);
  m[10] = u[0], m[11] = u[1], m[14] = u[2], m[15] = u[3];
  return m;
}

/// The same 4x4 gate with its two qubits named the other way round:
/// |hi lo> <-> |lo hi>.
template <typename Real>
Mat4<Real> SwapQubitOrder(const Mat4<Real>& m) {
  static constexpr int kPerm[4] = {0, 2, 1, 3};
  Mat4<Real> out{};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) out[kPerm[r] * 4 + kPerm[c]] = m[r * 4 + c];
  }
  return out;
}

/// SWAP as a 4x4 (symmetric in its qubits).
template <typename Real>
Mat4<Real> SwapMatrix() {
  Mat4<Real> m{};
  m[0] = m[6] = m[9] = m[15] = Complex<Real>(1);
  return m;
}

/// a x b (2x2 product).
template <typename Real>
Mat2<Real> Multiply(const Mat2<Real>& a, const Mat2<Real>& b) {
  return {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
}

/// a x b (4x4 product).
template <typename Real>
Mat4<Real> Multiply(const Mat4<Real>& a, const Mat4<Real>& b) {
  Mat4<Real> m{};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      Complex<Real> acc(0);
      for (int k = 0; k < 4; ++k) acc += a[r * 4 + k] * b[k * 4 + c];
      m[r * 4 + c] = acc;
    }
  }
  return m;
}

/// hi (x) lo: the 4x4 of 1-qubit gates on the high and the low qubit.
template <typename Real>
Mat4<Real> Kron(const Mat2<Real>& hi, const Mat2<Real>& lo) {
  Mat4<Real> m{};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) m[r * 4 + c] = hi[(r >> 1) * 2 + (c >> 1)] * lo[(r & 1) * 2 + (c & 1)];
  }
  return m;
}

template <typename Real>
class StateVector {
 public:
  /// `batch` states of `qubits` qubits, each |0...0>. RESOURCE_EXHAUSTED when
  /// they would exceed `memory_limit_bytes`, naming the sizes. `layout`:
  /// the storage's padding, ForLargeStates unless given (benches and tests
  /// give one to compare layouts).
  static absl::StatusOr<StateVector> Create(int qubits, int64_t batch = 1,
                                            int64_t memory_limit_bytes = kDefaultMemoryLimitBytes,
                                            std::optional<kernels::Padding> layout = std::nullopt) {
    if (qubits < 1 || qubits > 40) {
      return absl::InvalidArgumentError(absl::StrCat("qubits = ", qubits, ": must be in [1, 40]"));
    }
    if (batch < 1) return absl::InvalidArgumentError(absl::StrCat("batch = ", batch, ": must be >= 1"));
    if (layout && (layout->every_log2 < 0 || layout->every_log2 > 62 || layout->pad < 0)) {
      return absl::InvalidArgumentError(absl::StrCat("layout: every_log2 = ", layout->every_log2, ", pad = ",
                                                     layout->pad, ": need every_log2 in [0, 62] and pad >= 0"));
    }
    const auto bytes_of = [&](const kernels::Padding& p) {
      return static_cast<long double>(batch) * static_cast<long double>(p.Storage(qubits)) * sizeof(Complex<Real>);
    };
    kernels::Padding padding =
        layout.value_or(kernels::Padding::ForLargeStates(qubits, static_cast<int>(sizeof(Complex<Real>))));
    // The default's pads (under 1 %) never cost a state that fits flat: past
    // the limit, it is stored flat.
    if (!layout && bytes_of(padding) > static_cast<long double>(memory_limit_bytes)) padding = {};
    const long double bytes = bytes_of(padding);
    if (bytes > static_cast<long double>(memory_limit_bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(batch, " state(s) of ", qubits, " qubits need ", static_cast<double>(bytes / (1 << 20)),
                       " MiB, over the simulator's memory limit of ", memory_limit_bytes >> 20,
                       " MiB; use fewer qubits or a smaller batch"));
    }
    return StateVector(qubits, batch, padding);
  }

  int qubits() const { return n_; }
  int64_t batch() const { return batch_; }
  int64_t dim() const { return dim_; }
  /// Amplitude i of state b.
  Complex<Real>& amplitude(int64_t i, int64_t b = 0) { return amps_[b * stride_ + padding_.Index(i)]; }
  const Complex<Real>& amplitude(int64_t i, int64_t b = 0) const { return amps_[b * stride_ + padding_.Index(i)]; }
  /// f(i, amplitude i) for every amplitude of state b, in index order.
  template <typename F>
  void ForEach(int64_t b, const F& f) const {
    const Complex<Real>* s = amps_.data() + b * stride_;
    const int64_t chunk = std::min(dim_, int64_t{1} << padding_.every_log2);
    for (int64_t c0 = 0; c0 < dim_; c0 += chunk) {
      const Complex<Real>* p = s + padding_.Index(c0);
      for (int64_t i = 0; i < chunk; ++i) f(c0 + i, p[i]);
    }
  }
  /// State b's storage as the kernels take it: layout().Storage(qubits())
  /// amplitudes, amplitude i at layout().Index(i).
  Complex<Real>* storage(int64_t b = 0) { return amps_.data() + b * stride_; }
  const kernels::Padding& layout() const { return padding_; }
  /// The amplitudes' bytes (what one pass reads and writes), pads not counted.
  size_t bytes() const { return static_cast<size_t>(batch_ * dim_) * sizeof(Complex<Real>); }
  /// The storage's bytes, pads counted.
  size_t storage_bytes() const { return amps_.size() * sizeof(Complex<Real>); }

  /// Every state back to |0...0>.
  void Reset() {
    std::fill(amps_.begin(), amps_.end(), Complex<Real>(0));
    for (int64_t b = 0; b < batch_; ++b) amps_[b * stride_] = 1;
  }

  /// A block (a gate or a fused group of gates, kernels.h) on every state
  /// (or only state b >= 0): one SIMD pass, threads split a large state, or
  /// the states of a batch of small ones.
  void Apply(const kernels::Block& block, int64_t b = -1) {
    const int64_t first = b < 0 ? 0 : b, last = b < 0 ? batch_ : b + 1;
    if (last - first > 1 && dim_ < kGrain) {
      at::parallel_for(first, last, 1, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) kernels::ApplySerial(block, storage(s), n_, padding_);
      });
      return;
    }
    for (int64_t s = first; s < last; ++s) kernels::Apply(block, storage(s), n_, padding_);
  }

  /// A 2x2 unitary on qubit q.
  void Apply1(int q, const Mat2<Real>& m, int64_t b = -1) { Apply(Dense({q}, m.data(), 4), b); }

  /// A diagonal 2x2 (phase) gate diag(d0, d1) on qubit q.
  void ApplyDiagonal1(int q, Complex<Real> d0, Complex<Real> d1, int64_t b = -1) {
    kernels::Block k{{q}, {std::complex<double>(d0), std::complex<double>(d1)}, true};
    Apply(k, b);
  }

  /// A 4x4 unitary on qubits (hi, lo), hi != lo; rows/columns ordered |hi lo>.
  void Apply2(int hi, int lo, const Mat4<Real>& m, int64_t b = -1) {
    // The block's bit 0 is its lower qubit: |hi lo> as given when hi > lo.
    const Mat4<Real> ordered = hi > lo ? m : SwapQubitOrder(m);
    Apply(Dense({std::min(hi, lo), std::max(hi, lo)}, ordered.data(), 16), b);
  }

  /// Controlled-Z: a diagonal pass that reads only where both qubits are 1
  /// when they lie across SIMD vectors.
  void ApplyCz(int q1, int q2, int64_t b = -1) {
    Apply(kernels::Block{{std::min(q1, q2), std::max(q1, q2)}, {1.0, 1.0, 1.0, -1.0}, true}, b);
  }

  /// CNOT: swaps the target's amplitudes where the control is 1.
  void ApplyCnot(int control, int target, int64_t b = -1) {
    Apply2(control, target, ControlledOnLow(PauliX<Real>()), b);
  }

  void ApplySwap(int q1, int q2, int64_t b = -1) { Apply2(q1, q2, SwapMatrix<Real>(), b); }

  /// <Z_q> of state b: P(bit q = 0) - P(bit q = 1).
  double ExpectationZ(int q, int64_t b = 0) const {
    const int64_t bit = int64_t{1} << q;
    double e = 0;
    ForEach(b, [&](int64_t i, const Complex<Real>& a) { e += ((i & bit) ? -1.0 : 1.0) * std::norm(a); });
    return e;
  }

  /// <Z_q> for every qubit of state b in one pass.
  std::vector<double> ExpectationsZ(int64_t b = 0) const {
    std::vector<double> e(n_, 0.0);
    ForEach(b, [&](int64_t i, const Complex<Real>& a) {
      const double p = std::norm(a);
      for (int q = 0; q < n_; ++q) e[q] += ((i >> q) & 1) ? -p : p;
    });
    return e;
  }

  double Norm(int64_t b = 0) const {
    double sum = 0;
    ForEach(b, [&](int64_t, const Complex<Real>& a) { sum += std::norm(a); });
    return std::sqrt(sum);
  }

  /// `shots` basis-state indices drawn from |amplitude|^2 of state b with a seeded generator.
  std::vector<int64_t> Sample(int shots, uint64_t seed, int64_t b = 0) const {
    std::vector<double> cumulative(dim_);
    double acc = 0;
    ForEach(b, [&](int64_t i, const Complex<Real>& a) { cumulative[i] = acc += std::norm(a); });
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> u(0.0, acc);
    std::vector<int64_t> out(static_cast<size_t>(std::max(shots, 0)));
    for (int64_t& x : out) {
      const auto it = std::lower_bound(cumulative.begin(), cumulative.end(), u(gen));
      x = std::min<int64_t>(it - cumulative.begin(), dim_ - 1);
    }
    return out;
  }

 private:
  StateVector(int qubits, int64_t batch, const kernels::Padding& padding)
      : n_(qubits),
        batch_(batch),
        dim_(int64_t{1} << qubits),
        padding_(padding),
        stride_(padding.Storage(qubits)),
        amps_(static_cast<size_t>(batch * stride_)) {
    Reset();
  }

  static kernels::Block Dense(std::vector<int> qubits, const Complex<Real>* m, int entries) {
    kernels::Block k;
    k.qubits = std::move(qubits);
    for (int e = 0; e < entries; ++e) k.matrix.emplace_back(m[e]);
    return k;
  }

  int n_;
  int64_t batch_;
  int64_t dim_;
  kernels::Padding padding_;
  int64_t stride_;                                                     // storage amplitudes a state
  std::vector<Complex<Real>, HugePageAllocator<Complex<Real>>> amps_;  // swept whole by every pass
};

}  // namespace hetbench::agent::qpu
