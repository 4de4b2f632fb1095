#pragma once
/// The state-vector simulator's inner loops: a dense gate on k qubits and a
/// diagonal gate on k qubits, applied in one pass over an interleaved
/// complex state (re, im, re, im, ...; qubit 0 is the least significant bit
/// of an amplitude's index). Compiled once per instruction set with Google
/// Highway (AVX-512, AVX2, SSE4, SSSE3 and the portable EMU128 on x86; NEON
/// on Arm) and chosen at run time for the CPU at hand.
///
/// A gate's qubits are sorted ascending; bit t of a row or column index of
/// its 2^k x 2^k matrix is qubit qubits[t]. Qubits inside one SIMD vector
/// (below log2 of the complex lanes) are mixed by lane permutations with
/// per-lane coefficients, the rest by combining whole vectors, so every
/// placement costs 2^k complex multiply-adds per amplitude and one read and
/// one write of it. A dense block whose entries are all real (products of
/// RY, H, X, CNOT, CZ, SWAP) takes half of them: no imaginary coefficients.

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

namespace hetbench::agent::qpu::kernels {

/// Largest k a dense block may have (a 64x64 matrix).
inline constexpr int kMaxDenseQubits = 6;
/// Largest k a diagonal block may have.
inline constexpr int kMaxDiagonalQubits = 10;

/// A gate on `qubits` (sorted ascending, distinct): `matrix` is 2^k x 2^k
/// row-major when dense, the 2^k diagonal entries when `diagonal`.
struct Block {
  std::vector<int> qubits;
  std::vector<std::complex<double>> matrix;
  bool diagonal = false;
};

/// Applies `block` to the `dim` = 2^n amplitudes at `state`, splitting the
/// pass over LibTorch's intra-op threads (torch::set_num_threads).
void Apply(const Block& block, std::complex<float>* state, int n);
void Apply(const Block& block, std::complex<double>* state, int n);

/// The same, one thread: for callers that parallelise over states themselves.
void ApplySerial(const Block& block, std::complex<float>* state, int n);
void ApplySerial(const Block& block, std::complex<double>* state, int n);

/// The instruction set Apply uses now ("AVX3", "AVX2", "EMU128", ...).
std::string ActiveTarget();
/// Every instruction set compiled in that this CPU runs, best first.
std::vector<std::string> AvailableTargets();
/// Makes Apply use `name` (one of AvailableTargets()) until the next call;
/// "" restores the CPU's best. For tests and benches; not thread-safe.
bool ForceTarget(const std::string& name);

/// Complex lanes of one vector of the active target for float or double.
int ComplexLanes(bool is_double);
/// Whether `block`'s lowest qubit lies inside one vector of the active
/// target (below log2 of its complex lanes): the lane-permuting kernels.
bool HasQubitInsideVector(const Block& block, bool is_double);

/// The straightforward loop over amplitudes, in double: the reference every
/// kernel is tested against.
void ApplyReference(const Block& block, std::complex<double>* state, int n);

}  // namespace hetbench::agent::qpu::kernels
