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

/// Where amplitude i lies in a state's storage: after every 2^every_log2
/// amplitudes, `pad` unused ones. A qubit whose two halves lie exactly
/// 256 MiB apart ran a one-qubit gate at 0.53 of the read-modify-write on
/// one AMD EPYC host (L1D 32 KiB; a lone loop with the halves 2 MiB further
/// apart: full speed); on another (CPU family 26) there was no such
/// collision, and padded and flat measured the same (docs/devices.md, "Runs
/// in step" and "Padded states"). StateVector pads large states
/// (ForLargeStates). The default is no padding: i at i.
struct Padding {
  int every_log2 = 62;
  int64_t pad = 0;
  /// Storage index of amplitude i. Linear over disjoint bits: Index(a | b)
  /// = Index(a) + Index(b) when a & b = 0, so a kernel adds padded offsets.
  int64_t Index(int64_t i) const { return i + (i >> every_log2) * pad; }
  /// Amplitudes of storage a state of n qubits takes.
  int64_t Storage(int n) const { return Index((int64_t{1} << n) - 1) + 1; }
  bool padded() const { return pad != 0; }
  /// What StateVector uses for amplitudes of `amp_bytes` bytes: a 2 MiB pad
  /// (one huge page: each chunk stays huge-page aligned) after every
  /// 256 MiB, in states of at least two such chunks; none below.
  static Padding ForLargeStates(int n, int amp_bytes) {
    constexpr int64_t kChunkBytes = int64_t{256} << 20, kPadBytes = int64_t{2} << 20;
    int every = 0;
    while ((int64_t{amp_bytes} << every) < kChunkBytes) ++every;
    if (n < every + 1) return {};  // under two chunks: nothing to pad
    return Padding{every, kPadBytes / amp_bytes};
  }
};

/// Applies `block` to the `dim` = 2^n amplitudes at `state` (laid out as
/// `layout` says), splitting the pass over LibTorch's intra-op threads
/// (torch::set_num_threads).
void Apply(const Block& block, std::complex<float>* state, int n, const Padding& layout = {});
void Apply(const Block& block, std::complex<double>* state, int n, const Padding& layout = {});

/// The same, one thread: for callers that parallelise over states themselves.
void ApplySerial(const Block& block, std::complex<float>* state, int n, const Padding& layout = {});
void ApplySerial(const Block& block, std::complex<double>* state, int n, const Padding& layout = {});

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
