#pragma once
/// A gate list that runs on a StateVector, and gate fusion: gates merged
/// into k-qubit blocks, each applied in one pass over the state, with k
/// chosen by the measured cost of a pass.

#include <string>
#include <vector>

#include "agent/platform/sysfs_reader.h"
#include "agent/qpu/kernels.h"
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

/// One op as a kernel block: its qubits sorted, its matrix reordered to
/// match; 1-qubit phases and CZ as diagonal blocks.
kernels::Block ToBlock(const Op& op);

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

  /// Applies every op to every state of `s`, one pass per gate.
  template <typename Real>
  void Run(StateVector<Real>& s) const {
    for (const Op& op : ops_) s.Apply(ToBlock(op));
  }

 private:
  Circuit& Add(const Op& op) {
    ops_.push_back(op);
    return *this;
  }

  int n_;
  std::vector<Op> ops_;
};

/// A circuit compiled to passes: each block is one pass over the state.
struct Program {
  int qubits = 0;
  int max_block_qubits = 0;  // the k fusion was allowed (0: one pass per gate)
  size_t gates = 0;          // gates of the source circuit
  int largest_block = 0;     // qubits of the largest block formed
  std::vector<kernels::Block> blocks;
  size_t size() const { return blocks.size(); }
  template <typename Real>
  void Run(StateVector<Real>& s) const {
    for (const kernels::Block& b : blocks) s.Apply(b);
  }
};

/// One pass per gate.
Program Unfused(const Circuit& c);

/// Gates merged greedily, in order, into blocks of at most `k` qubits
/// (1 <= k <= kernels::kMaxDenseQubits): a gate joins the open blocks on its
/// qubits when their union stays within k, else those blocks are closed. A
/// block of only diagonal gates stays a (cheaper) diagonal pass.
Program FuseUpTo(const Circuit& c, int k);

/// The machine's cost of a pass in one regime, seconds per amplitude of a
/// dense k-qubit block and of a diagonal one: on a state in cache (the
/// arithmetic alone), or on one past the last-level cache (arithmetic and
/// memory traffic as they combine in each kernel: a pass is memory-bound for
/// small k, arithmetic-bound for large k).
struct PassCosts {
  // [low][real][k]: low = the block has a qubit inside one SIMD vector (lane
  // permutations) rather than all across; real = its entries are all real
  // (the kernels' cheaper path).
  double dense_s_per_amp[2][2][kernels::kMaxDenseQubits + 1] = {};
  double diagonal_s_per_amp = 0;
};

/// The size of the highest-level data or unified cache a sysfs cache
/// directory lists (index0/, index1/, ... with level, type and size such as
/// "32768K"); 0 when it lists none.
int64_t LargestCacheBytes(const SysfsReader& sysfs, const std::string& cache_dir);

/// The last-level cache's size in bytes: LargestCacheBytes of cpu0's sysfs
/// directory, else glibc's sysconf, else 32 MiB.
int64_t LastLevelCacheBytes();

/// Whether a state of `qubits` qubits is past the last-level cache (its
/// passes stream from memory).
bool StreamsFromMemory(int qubits, bool is_double);

/// The costs of one regime, measured once per process, precision and regime,
/// on first use: in cache on a 1 MiB state (best of 5); past the caches on a
/// state of at least 4x the last-level cache (128 MiB with a 32 MiB L3; best
/// of 2), so none of it is served from that cache (measured on a 32 MiB
/// state beside a 32 MiB L3, the model picked k = 1 for the layered circuit
/// at n = 24, 1.55x the fastest k's time). There, kernels whose
/// arithmetic (in cache) takes over 6x the memory's time an amplitude cost
/// that arithmetic plus the memory's time, not timed again (circuit.cc).
const PassCosts& MeasuredPassCosts(bool is_double, bool streamed);

/// Estimated seconds of `p` at `costs` (the regime its state runs in).
double EstimatedSeconds(const Program& p, const PassCosts& costs);

/// Fusion that pays: FuseUpTo for every k, the one with the least estimated
/// time (ties to the smaller k).
Program Fused(const Circuit& c, bool is_double);

/// The benchmark family: depth x (RY(0.1 + 0.01 q) on every qubit, then CZ
/// on neighbour pairs (0,1),(2,3),... in even layers and (1,2),(3,4),... in odd ones).
Circuit LayeredCircuit(int qubits, int depth);

/// The 4x4 of a 2-qubit op (CZ, CNOT, SWAP or general) over |hi lo> with the given order.
Mat4<double> AsMatrix(const Op& op, int hi, int lo);

}  // namespace hetbench::agent::qpu
