#pragma once
/// An n-qubit state-vector simulator: a batch of states, complex64 or
/// complex128, gates applied in one streaming pass each, threads from
/// LibTorch's pool (torch::set_num_threads). Qubit 0 is the least
/// significant bit of an amplitude's index.

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace hetbench::agent::qpu {

template <typename Real>
using Complex = std::complex<Real>;
template <typename Real>
using Mat2 = std::array<Complex<Real>, 4>;  // row-major [[a, b], [c, d]]
template <typename Real>
using Mat4 = std::array<Complex<Real>, 16>;  // row-major, basis |q_hi q_lo> = 00, 01, 10, 11

/// Largest state the simulator will allocate unless told otherwise (8 GiB).
inline constexpr int64_t kDefaultMemoryLimitBytes = int64_t{8} << 30;

/// Amplitude pairs and quartets per parallel chunk: large enough that a
/// chunk streams, small enough to split 2^20 pairs over a few threads.
inline constexpr int64_t kGrain = int64_t{1} << 14;

template <typename Real>
class StateVector {
 public:
  /// `batch` states of `qubits` qubits, each |0...0>. RESOURCE_EXHAUSTED when
  /// they would exceed `memory_limit_bytes`, naming the sizes.
  static absl::StatusOr<StateVector> Create(int qubits, int64_t batch = 1,
                                            int64_t memory_limit_bytes = kDefaultMemoryLimitBytes) {
    if (qubits < 1 || qubits > 40) {
      return absl::InvalidArgumentError(absl::StrCat("qubits = ", qubits, ": must be in [1, 40]"));
    }
    if (batch < 1) return absl::InvalidArgumentError(absl::StrCat("batch = ", batch, ": must be >= 1"));
    const long double bytes = static_cast<long double>(batch) * std::ldexp(1.0L, qubits) * sizeof(Complex<Real>);
    if (bytes > static_cast<long double>(memory_limit_bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(batch, " state(s) of ", qubits, " qubits need ", static_cast<double>(bytes / (1 << 20)),
                       " MiB, over the simulator's memory limit of ", memory_limit_bytes >> 20,
                       " MiB; use fewer qubits or a smaller batch"));
    }
    return StateVector(qubits, batch);
  }

  int qubits() const { return n_; }
  int64_t batch() const { return batch_; }
  int64_t dim() const { return dim_; }
  Complex<Real>* data(int64_t b = 0) { return amps_.data() + b * dim_; }
  const Complex<Real>* data(int64_t b = 0) const { return amps_.data() + b * dim_; }
  size_t bytes() const { return amps_.size() * sizeof(Complex<Real>); }

  /// Every state back to |0...0>.
  void Reset() {
    std::fill(amps_.begin(), amps_.end(), Complex<Real>(0));
    for (int64_t b = 0; b < batch_; ++b) amps_[b * dim_] = 1;
  }

  /// A 2x2 unitary on qubit q of every state (or only of state b >= 0).
  void Apply1(int q, const Mat2<Real>& m, int64_t b = -1) {
    const int64_t stride = int64_t{1} << q, low = stride - 1;
    const Real ar = m[0].real(), ai = m[0].imag(), br = m[1].real(), bi = m[1].imag();
    const Real cr = m[2].real(), ci = m[2].imag(), dr = m[3].real(), di = m[3].imag();
    // Pairs k..k+run share a block, so the inner loop walks two contiguous
    // runs x[r] = s[i + r], y[r] = s[i + stride + r] on raw, non-aliasing
    // pointers with the coefficients in registers (vectorisable).
    ForStates(b, dim_ / 2, [=](Complex<Real>* s, int64_t begin, int64_t end) {
      auto rotate = [ar, ai, br, bi, cr, ci, dr, di](Real* __restrict__ x, Real* __restrict__ y, int64_t run,
                                                       int64_t step) {
        for (int64_t r = 0; r < run; ++r) {
          const int64_t o = r * step;
          const Real xr = x[o], xi = x[o + 1], yr = y[o], yi = y[o + 1];
          x[o] = ar * xr - ai * xi + br * yr - bi * yi;
          x[o + 1] = ar * xi + ai * xr + br * yi + bi * yr;
          y[o] = cr * xr - ci * xi + dr * yr - di * yi;
          y[o + 1] = cr * xi + ci * xr + dr * yi + di * yr;
        }
      };
      Real* base = reinterpret_cast<Real*>(s);
      if (q == 0) {  // adjacent pairs: x and y interleave, step over both
        rotate(base + 4 * begin, base + 4 * begin + 2, end - begin, 4);
        return;
      }
      for (int64_t k = begin; k < end;) {
        const int64_t off = k & low, run = std::min(end - k, stride - off);
        Real* x = base + 2 * (((k & ~low) << 1) | off);
        rotate(x, x + 2 * stride, run, 2);
        k += run;
      }
    });
  }

  /// A diagonal 2x2 (phase) gate diag(d0, d1) on qubit q: one pass, no pairing.
  void ApplyDiagonal1(int q, Complex<Real> d0, Complex<Real> d1, int64_t b = -1) {
    const int64_t stride = int64_t{1} << q;
    ForStates(b, dim_, [&](Complex<Real>* s, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) s[i] = Mul(s[i], (i & stride) ? d1 : d0);
    });
  }

  /// A 4x4 unitary on qubits (hi, lo), hi != lo; rows/columns ordered |hi lo>.
  void Apply2(int hi, int lo, const Mat4<Real>& m, int64_t b = -1) {
    const int a = std::min(hi, lo), c = std::max(hi, lo);
    const int64_t sh = int64_t{1} << hi, sl = int64_t{1} << lo;
    Real mr[16], mi[16];  // the matrix split into real and imaginary parts, copied into the pass
    for (int e = 0; e < 16; ++e) mr[e] = m[e].real(), mi[e] = m[e].imag();
    ForStates(b, dim_ / 4, [=](Complex<Real>* s, int64_t begin, int64_t end) {
      Real* __restrict__ p = reinterpret_cast<Real*>(s);
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i0 = InsertZero(InsertZero(k, a), c);
        const int64_t idx[4] = {2 * i0, 2 * (i0 | sl), 2 * (i0 | sh), 2 * (i0 | sh | sl)};
        const Real vr[4] = {p[idx[0]], p[idx[1]], p[idx[2]], p[idx[3]]};
        const Real vi[4] = {p[idx[0] + 1], p[idx[1] + 1], p[idx[2] + 1], p[idx[3] + 1]};
        for (int r = 0; r < 4; ++r) {
          Real re = 0, im = 0;
          for (int col = 0; col < 4; ++col) {
            re += mr[r * 4 + col] * vr[col] - mi[r * 4 + col] * vi[col];
            im += mr[r * 4 + col] * vi[col] + mi[r * 4 + col] * vr[col];
          }
          p[idx[r]] = re;
          p[idx[r] + 1] = im;
        }
      }
    });
  }

  /// Controlled-Z: a sign flip where both qubits are 1 (diagonal, one pass over a quarter).
  void ApplyCz(int q1, int q2, int64_t b = -1) {
    const int a = std::min(q1, q2), c = std::max(q1, q2);
    const int64_t both = (int64_t{1} << q1) | (int64_t{1} << q2);
    ForStates(b, dim_ / 4, [&](Complex<Real>* s, int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = InsertZero(InsertZero(k, a), c) | both;
        s[i] = -s[i];
      }
    });
  }

  /// CNOT: swaps the target's amplitudes where the control is 1.
  void ApplyCnot(int control, int target, int64_t b = -1) {
    const int a = std::min(control, target), c = std::max(control, target);
    const int64_t cbit = int64_t{1} << control, tbit = int64_t{1} << target;
    ForStates(b, dim_ / 4, [&](Complex<Real>* s, int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = InsertZero(InsertZero(k, a), c) | cbit;
        std::swap(s[i], s[i | tbit]);
      }
    });
  }

  void ApplySwap(int q1, int q2, int64_t b = -1) {
    const int a = std::min(q1, q2), c = std::max(q1, q2);
    const int64_t b1 = int64_t{1} << q1, b2 = int64_t{1} << q2;
    ForStates(b, dim_ / 4, [&](Complex<Real>* s, int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const int64_t i = InsertZero(InsertZero(k, a), c);
        std::swap(s[i | b1], s[i | b2]);
      }
    });
  }

  /// <Z_q> of state b: P(bit q = 0) - P(bit q = 1).
  double ExpectationZ(int q, int64_t b = 0) const {
    const int64_t stride = int64_t{1} << q;
    const Complex<Real>* s = data(b);
    double e = 0;
    for (int64_t i = 0; i < dim_; ++i) e += ((i & stride) ? -1.0 : 1.0) * std::norm(s[i]);
    return e;
  }

  /// <Z_q> for every qubit of state b in one pass.
  std::vector<double> ExpectationsZ(int64_t b = 0) const {
    std::vector<double> e(n_, 0.0);
    const Complex<Real>* s = data(b);
    for (int64_t i = 0; i < dim_; ++i) {
      const double p = std::norm(s[i]);
      for (int q = 0; q < n_; ++q) e[q] += ((i >> q) & 1) ? -p : p;
    }
    return e;
  }

  double Norm(int64_t b = 0) const {
    double sum = 0;
    const Complex<Real>* s = data(b);
    for (int64_t i = 0; i < dim_; ++i) sum += std::norm(s[i]);
    return std::sqrt(sum);
  }

  /// `shots` basis-state indices drawn from |amplitude|^2 of state b with a seeded generator.
  std::vector<int64_t> Sample(int shots, uint64_t seed, int64_t b = 0) const {
    std::vector<double> cumulative(dim_);
    double acc = 0;
    const Complex<Real>* s = data(b);
    for (int64_t i = 0; i < dim_; ++i) cumulative[i] = acc += std::norm(s[i]);
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
  StateVector(int qubits, int64_t batch)
      : n_(qubits), batch_(batch), dim_(int64_t{1} << qubits), amps_(static_cast<size_t>(batch * dim_)) {
    Reset();
  }

  static int64_t InsertZero(int64_t k, int bit) {
    const int64_t low = (int64_t{1} << bit) - 1;
    return ((k & ~low) << 1) | (k & low);
  }

  static Complex<Real> Mul(Complex<Real> x, Complex<Real> y) {  // without the C99 Annex G NaN checks
    return {x.real() * y.real() - x.imag() * y.imag(), x.real() * y.imag() + x.imag() * y.real()};
  }

  // Runs f(state, begin, end) over [0, work) of every selected state, in parallel chunks.
  template <typename F>
  void ForStates(int64_t b, int64_t work, const F& f) {
    const int64_t first = b < 0 ? 0 : b, last = b < 0 ? batch_ : b + 1;
    if (last - first > 1 && work < kGrain) {  // many small states: split the batch
      at::parallel_for(first, last, 1, [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) f(data(s), 0, work);
      });
      return;
    }
    for (int64_t s = first; s < last; ++s) {
      Complex<Real>* st = data(s);
      at::parallel_for(0, work, kGrain, [&](int64_t begin, int64_t end) { f(st, begin, end); });
    }
  }

  int n_;
  int64_t batch_;
  int64_t dim_;
  std::vector<Complex<Real>> amps_;
};

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

}  // namespace hetbench::agent::qpu
