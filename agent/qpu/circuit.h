#pragma once
/// A gate list that runs on a StateVector, and gate fusion: adjacent gates
/// on the same qubits merged into one pass over the state.

#include <string>
#include <vector>

#include "agent/qpu/statevector.h"

namespace hetbench::agent::qpu {

struct Op {
  enum class Kind { kOne, kTwo, kCz, kCnot, kSwap };
  Kind kind = Kind::kOne;
  int q0 = 0;  // kOne: the qubit; kTwo: the high qubit of the 4x4; kCnot: control
  int q1 = 0;  // kTwo: the low qubit; kCnot: target
  Mat2<double> m1{};
  Mat4<double> m2{};
};

class Circuit {
 public:
  explicit Circuit(int qubits) : n_(qubits) {}
  int qubits() const { return n_; }
  const std::vector<Op>& ops() const { return ops_; }
  size_t size() const { return ops_.size(); }

  Circuit& Gate1(int q, const Mat2<double>& m);
  Circuit& Gate2(int hi, int lo, const Mat4<double>& m);
  Circuit& H(int q) { return Gate1(q, Hadamard<double>()); }
  Circuit& X(int q) { return Gate1(q, PauliX<double>()); }
  Circuit& Y(int q) { return Gate1(q, PauliY<double>()); }
  Circuit& Z(int q) { return Gate1(q, PauliZ<double>()); }
  Circuit& S(int q) { return Gate1(q, SGate<double>()); }
  Circuit& T(int q) { return Gate1(q, TGate<double>()); }
  Circuit& Rx(int q, double t) { return Gate1(q, qpu::Rx<double>(t)); }
  Circuit& Ry(int q, double t) { return Gate1(q, qpu::Ry<double>(t)); }
  Circuit& Rz(int q, double t) { return Gate1(q, qpu::Rz<double>(t)); }
  Circuit& Cnot(int control, int target);
  Circuit& Cz(int a, int b);
  Circuit& Swap(int a, int b);
  /// Controlled rotations: control c, target t.
  Circuit& Crx(int c, int t, double theta) { return Gate2(c, t, ControlledOnLow(qpu::Rx<double>(theta))); }
  Circuit& Cry(int c, int t, double theta) { return Gate2(c, t, ControlledOnLow(qpu::Ry<double>(theta))); }
  Circuit& Crz(int c, int t, double theta) { return Gate2(c, t, ControlledOnLow(qpu::Rz<double>(theta))); }
  /// The quantum Fourier transform on all qubits (with the final swaps).
  Circuit& Qft();

  /// The same unitary in fewer passes: runs of 1-qubit gates on a qubit
  /// become one 2x2; they and following 2-qubit gates on their qubits become
  /// one 4x4; consecutive 4x4s on the same pair multiply.
  Circuit Fused() const;

  /// Applies every op to every state of `s`.
  template <typename Real>
  void Run(StateVector<Real>& s) const {
    for (const Op& op : ops_) Apply(op, s);
  }

  template <typename Real>
  static void Apply(const Op& op, StateVector<Real>& s, int64_t b = -1) {
    switch (op.kind) {
      case Op::Kind::kOne:
        if (op.m1[1] == 0.0 && op.m1[2] == 0.0) {
          s.ApplyDiagonal1(op.q0, Complex<Real>(op.m1[0]), Complex<Real>(op.m1[3]), b);
        } else {
          s.Apply1(op.q0, Convert<Real>(op.m1), b);
        }
        break;
      case Op::Kind::kTwo:
        s.Apply2(op.q0, op.q1, Convert<Real>(op.m2), b);
        break;
      case Op::Kind::kCz:
        s.ApplyCz(op.q0, op.q1, b);
        break;
      case Op::Kind::kCnot:
        s.ApplyCnot(op.q0, op.q1, b);
        break;
      case Op::Kind::kSwap:
        s.ApplySwap(op.q0, op.q1, b);
        break;
    }
  }

 private:
  Circuit& Add(const Op& op) {
    ops_.push_back(op);
    return *this;
  }

  template <typename Real, size_t N>
  static std::array<Complex<Real>, N> Convert(const std::array<Complex<double>, N>& m) {
    std::array<Complex<Real>, N> out;
    for (size_t i = 0; i < N; ++i) out[i] = Complex<Real>(static_cast<Real>(m[i].real()), static_cast<Real>(m[i].imag()));
    return out;
  }

  int n_;
  std::vector<Op> ops_;
};

/// The benchmark family: depth x (RY(0.1 + 0.01 q) on every qubit, then CZ
/// on neighbour pairs (0,1),(2,3),... in even layers and (1,2),(3,4),... in odd ones).
Circuit LayeredCircuit(int qubits, int depth);

/// The 4x4 of a 2-qubit op (CZ, CNOT, SWAP or general) over |hi lo> with the given order.
Mat4<double> AsMatrix(const Op& op, int hi, int lo);

}  // namespace hetbench::agent::qpu
