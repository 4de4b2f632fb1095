#include "agent/qpu/circuit.h"

#include <map>
#include <optional>

namespace hetbench::agent::qpu {

namespace {

// Permutation of |hi lo> <-> |lo hi>: the matrix of the same gate with its qubits named the other way round.
Mat4<double> SwapOrder(const Mat4<double>& m) {
  static constexpr int kPerm[4] = {0, 2, 1, 3};
  Mat4<double> out{};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) out[kPerm[r] * 4 + kPerm[c]] = m[r * 4 + c];
  }
  return out;
}

Mat2<double> Identity2() { return {Complex<double>(1), Complex<double>(0), Complex<double>(0), Complex<double>(1)}; }

}  // namespace

Circuit& Circuit::Gate1(int q, const Mat2<double>& m) { return Add({Op::Kind::kOne, q, 0, m, {}}); }
Circuit& Circuit::Gate2(int hi, int lo, const Mat4<double>& m) { return Add({Op::Kind::kTwo, hi, lo, {}, m}); }
Circuit& Circuit::Cnot(int control, int target) { return Add({Op::Kind::kCnot, control, target, {}, {}}); }
Circuit& Circuit::Cz(int a, int b) { return Add({Op::Kind::kCz, a, b, {}, {}}); }
Circuit& Circuit::Swap(int a, int b) { return Add({Op::Kind::kSwap, a, b, {}, {}}); }

Circuit& Circuit::Qft() {
  for (int j = n_ - 1; j >= 0; --j) {
    H(j);
    for (int k = j - 1; k >= 0; --k) {
      // controlled phase diag(1, 1, 1, e^{i pi / 2^(j-k)}) between j and k
      Mat4<double> cp{};
      cp[0] = cp[5] = cp[10] = Complex<double>(1);
      cp[15] = std::polar(1.0, M_PI / static_cast<double>(int64_t{1} << (j - k)));
      Gate2(j, k, cp);
    }
  }
  for (int q = 0; q < n_ / 2; ++q) Swap(q, n_ - 1 - q);
  return *this;
}

Mat4<double> AsMatrix(const Op& op, int hi, int lo) {
  Mat4<double> m{};
  switch (op.kind) {
    case Op::Kind::kTwo:
      m = op.m2;
      break;
    case Op::Kind::kCz:
      m[0] = m[5] = m[10] = Complex<double>(1);
      m[15] = Complex<double>(-1);
      break;
    case Op::Kind::kCnot:  // control q0 as the high qubit
      m = ControlledOnLow(PauliX<double>());
      break;
    case Op::Kind::kSwap:
      m[0] = m[6] = m[9] = m[15] = Complex<double>(1);
      break;
    case Op::Kind::kOne:
      break;
  }
  const bool natural = (op.q0 == hi && op.q1 == lo);
  return natural ? m : SwapOrder(m);
}

Circuit Circuit::Fused() const {
  Circuit out(n_);
  std::vector<std::optional<Mat2<double>>> pending(static_cast<size_t>(n_));
  auto flush = [&](int q) {
    if (pending[q]) {
      out.Gate1(q, *pending[q]);
      pending[q].reset();
    }
  };
  for (const Op& op : ops_) {
    if (op.kind == Op::Kind::kOne) {
      pending[op.q0] = pending[op.q0] ? Multiply(op.m1, *pending[op.q0]) : op.m1;
      continue;
    }
    const int hi = op.q0, lo = op.q1;
    const bool has_pending = pending[hi] || pending[lo];
    Op* last = out.ops_.empty() ? nullptr : &out.ops_.back();
    const bool same_pair = last && last->kind != Op::Kind::kOne &&
                           ((last->q0 == hi && last->q1 == lo) || (last->q0 == lo && last->q1 == hi));
    if (!has_pending && !same_pair) {
      out.Add(op);  // keeps the cheap specialised passes (CZ, CNOT, SWAP)
      continue;
    }
    Mat4<double> m = Multiply(AsMatrix(op, hi, lo),
                              Kron(pending[hi].value_or(Identity2()), pending[lo].value_or(Identity2())));
    pending[hi].reset();
    pending[lo].reset();
    if (same_pair) {
      *last = Op{Op::Kind::kTwo, hi, lo, {}, Multiply(m, AsMatrix(*last, hi, lo))};
    } else {
      out.Add({Op::Kind::kTwo, hi, lo, {}, m});
    }
  }
  for (int q = 0; q < n_; ++q) flush(q);
  return out;
}

Circuit LayeredCircuit(int qubits, int depth) {
  Circuit c(qubits);
  for (int d = 0; d < depth; ++d) {
    for (int q = 0; q < qubits; ++q) c.Ry(q, 0.1 + 0.01 * q);
    for (int q = d % 2; q + 1 < qubits; q += 2) c.Cz(q, q + 1);
  }
  return c;
}

}  // namespace hetbench::agent::qpu
