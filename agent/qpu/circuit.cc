#include "agent/qpu/circuit.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"

namespace hetbench::agent::qpu {

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
      m = SwapMatrix<double>();
      break;
    case Op::Kind::kOne:
      break;
  }
  const bool natural = (op.q0 == hi && op.q1 == lo);
  return natural ? m : SwapQubitOrder(m);
}

kernels::Block ToBlock(const Op& op) {
  kernels::Block b;
  if (op.kind == Op::Kind::kOne) {
    b.qubits = {op.q0};
    if (op.m1[1] == 0.0 && op.m1[2] == 0.0) {
      b.diagonal = true;
      b.matrix = {op.m1[0], op.m1[3]};
    } else {
      b.matrix.assign(op.m1.begin(), op.m1.end());
    }
    return b;
  }
  const int lo = std::min(op.q0, op.q1), hi = std::max(op.q0, op.q1);
  b.qubits = {lo, hi};  // bit 0 of the block's index is `lo`: the 4x4 over |hi lo>
  if (op.kind == Op::Kind::kCz) {
    b.diagonal = true;
    b.matrix = {1.0, 1.0, 1.0, -1.0};
    return b;
  }
  const Mat4<double> m = AsMatrix(op, hi, lo);
  b.matrix.assign(m.begin(), m.end());
  return b;
}

Program Unfused(const Circuit& c) {
  Program p;
  p.qubits = c.qubits();
  p.gates = c.size();
  for (const Op& op : c.ops()) {
    p.blocks.push_back(ToBlock(op));
    p.largest_block = std::max<int>(p.largest_block, static_cast<int>(p.blocks.back().qubits.size()));
  }
  return p;
}

namespace {

// Gates collected for one block, multiplied out when it closes.
struct OpenBlock {
  std::vector<int> qubits;  // sorted
  std::vector<const kernels::Block*> gates;
  int64_t created = 0;
};

// The block's unitary over its own qubits: each gate applied, in order, to
// every column of the identity (columns are states of `qubits.size()` qubits).
kernels::Block Multiply(const OpenBlock& open) {
  const int u = static_cast<int>(open.qubits.size());
  const int64_t dim = int64_t{1} << u;
  bool diagonal = true;
  for (const kernels::Block* g : open.gates) diagonal = diagonal && g->diagonal;
  kernels::Block out;
  out.qubits = open.qubits;
  out.diagonal = diagonal;
  auto local = [&](const kernels::Block& g) {  // the gate with its qubits renamed to positions in the block
    kernels::Block l = g;
    for (int& q : l.qubits) q = static_cast<int>(std::lower_bound(open.qubits.begin(), open.qubits.end(), q) - open.qubits.begin());
    return l;
  };
  if (diagonal) {
    std::vector<std::complex<double>> d(static_cast<size_t>(dim), 1.0);
    for (const kernels::Block* g : open.gates) kernels::ApplyReference(local(*g), d.data(), u);
    out.matrix = std::move(d);
    return out;
  }
  std::vector<std::complex<double>> cols(static_cast<size_t>(dim * dim), 0.0);  // column-major
  for (int64_t c = 0; c < dim; ++c) cols[c * dim + c] = 1.0;
  for (const kernels::Block* g : open.gates) {
    const kernels::Block l = local(*g);
    for (int64_t c = 0; c < dim; ++c) kernels::ApplyReference(l, cols.data() + c * dim, u);
  }
  out.matrix.resize(cols.size());
  for (int64_t r = 0; r < dim; ++r) {
    for (int64_t c = 0; c < dim; ++c) out.matrix[r * dim + c] = cols[c * dim + r];
  }
  return out;
}

}  // namespace

Program FuseUpTo(const Circuit& c, int k) {
  const Program unfused = Unfused(c);
  Program p;
  p.qubits = c.qubits();
  p.gates = c.size();
  p.max_block_qubits = k;
  std::vector<OpenBlock> open;          // by id; closed ones are emptied
  std::vector<int> owner(static_cast<size_t>(c.qubits()), -1);  // open block holding each qubit
  auto close = [&](int id) {
    p.blocks.push_back(Multiply(open[id]));
    for (int q : open[id].qubits) owner[q] = -1;
    open[id].qubits.clear();
    open[id].gates.clear();
  };
  for (const kernels::Block& gate : unfused.blocks) {
    std::vector<int> touched;
    std::vector<int> qubits = gate.qubits;
    for (int q : gate.qubits) {
      const int id = owner[q];
      if (id >= 0 && std::find(touched.begin(), touched.end(), id) == touched.end()) {
        touched.push_back(id);
        qubits.insert(qubits.end(), open[id].qubits.begin(), open[id].qubits.end());
      }
    }
    std::sort(qubits.begin(), qubits.end());
    qubits.erase(std::unique(qubits.begin(), qubits.end()), qubits.end());
    std::sort(touched.begin(), touched.end());  // creation order
    OpenBlock merged;
    if (static_cast<int>(qubits.size()) <= std::max<int>(k, static_cast<int>(gate.qubits.size()))) {
      // Open blocks are each the latest on their qubits, so they commute with
      // one another: theirs and this gate make one block.
      merged.qubits = qubits;
      for (int id : touched) {
        merged.gates.insert(merged.gates.end(), open[id].gates.begin(), open[id].gates.end());
        for (int q : open[id].qubits) owner[q] = -1;
        open[id].qubits.clear();
        open[id].gates.clear();
      }
    } else {
      for (int id : touched) close(id);
      merged.qubits = gate.qubits;
    }
    merged.gates.push_back(&gate);
    merged.created = static_cast<int64_t>(open.size());
    for (int q : merged.qubits) owner[q] = static_cast<int>(open.size());
    open.push_back(std::move(merged));
  }
  for (size_t id = 0; id < open.size(); ++id) {
    if (!open[id].gates.empty()) close(static_cast<int>(id));
  }
  for (const kernels::Block& b : p.blocks) p.largest_block = std::max<int>(p.largest_block, static_cast<int>(b.qubits.size()));
  return p;
}

namespace {

// The block each cost is measured on: a dense k-qubit block with its qubits
// all across vectors (the top k) or with qubit 0 among them (`low`), real or
// complex entries.
kernels::Block CostBlock(int n, int low, int real, int k) {
  kernels::Block b;
  if (low) b.qubits.push_back(0);
  while (static_cast<int>(b.qubits.size()) < k) b.qubits.push_back(n - k + static_cast<int>(b.qubits.size()));
  const int64_t dim = int64_t{1} << k;
  b.matrix.assign(static_cast<size_t>(dim * dim),
                  std::complex<double>(0.5 / static_cast<double>(dim), real ? 0.0 : 0.1));
  return b;
}

kernels::Block DiagonalCostBlock(int n) {
  kernels::Block diag;
  diag.qubits = {n / 2};
  diag.diagonal = true;
  diag.matrix = {std::complex<double>(0.6, 0.8), std::complex<double>(0.6, -0.8)};
  return diag;
}

// A state of n qubits stored as StateVector stores it (padded from 512 MiB).
template <typename Real>
struct CostState {
  explicit CostState(int qubits)
      : n(qubits),
        layout(kernels::Padding::ForLargeStates(qubits, static_cast<int>(sizeof(std::complex<Real>)))),
        s(static_cast<size_t>(layout.Storage(qubits)), std::complex<Real>(0.001f)) {}
  int n;
  kernels::Padding layout;
  std::vector<std::complex<Real>> s;
};

// Seconds per amplitude of one pass of `b` over `state`, best of `reps`, one
// thread; `warm`: one untimed pass first.
template <typename Real>
double SecondsPerAmp(CostState<Real>& state, const kernels::Block& b, int reps, bool warm) {
  if (warm) kernels::ApplySerial(b, state.s.data(), state.n, state.layout);
  int64_t best = INT64_MAX;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::ApplySerial(b, state.s.data(), state.n, state.layout);
    best = std::min<int64_t>(
        best, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(best) * 1e-9 / static_cast<double>(int64_t{1} << state.n);
}

// In cache: a 1 MiB state, each pass warmed, best of 5: the arithmetic alone.
template <typename Real>
PassCosts MeasureInCache() {
  const int n = std::is_same_v<Real, float> ? 17 : 16;
  CostState<Real> s(n);
  PassCosts c;
  for (int low = 0; low < 2; ++low) {
    for (int real = 0; real < 2; ++real) {
      for (int k = 1; k <= kernels::kMaxDenseQubits; ++k) {
        c.dense_s_per_amp[low][real][k] = SecondsPerAmp(s, CostBlock(n, low, real, k), 5, /*warm=*/true);
      }
    }
  }
  c.diagonal_s_per_amp = SecondsPerAmp(s, DiagonalCostBlock(n), 5, /*warm=*/true);
  return c;
}

// Past the caches: the smallest state of at least 4x the last-level cache (at
// most 512 MiB), best of 2 (the vector's fill has touched its pages; every
// pass reads the state from memory). The cheapest pass (a real 1-qubit block
// across vectors) is the memory's time an amplitude; a kernel whose
// arithmetic alone (in cache) takes more than 6 times that is
// arithmetic-bound and is not timed again here: it costs its arithmetic plus
// the memory's time (a bound; against timing them on the development VM,
// within ~10 % for most such kernels, once 39 % above), which keeps both
// regimes' measurement under 2 s there.
template <typename Real>
PassCosts MeasureStreamed(const PassCosts& in_cache) {
  constexpr int64_t kAmpBytes = 2 * sizeof(Real);
  int n = 1;
  while (n < 30 && (int64_t{1} << n) * kAmpBytes < std::min<int64_t>(4 * LastLevelCacheBytes(), 512LL << 20)) ++n;
  CostState<Real> s(n);
  PassCosts c;
  const double memory = SecondsPerAmp(s, CostBlock(n, 0, 1, 1), 2, /*warm=*/false);
  for (int low = 0; low < 2; ++low) {
    for (int real = 0; real < 2; ++real) {
      for (int k = 1; k <= kernels::kMaxDenseQubits; ++k) {
        const double arithmetic = in_cache.dense_s_per_amp[low][real][k];
        double& cost = c.dense_s_per_amp[low][real][k];
        if (!low && real && k == 1) {
          cost = memory;
        } else if (arithmetic > 6 * memory) {
          cost = arithmetic + memory;
        } else {
          cost = SecondsPerAmp(s, CostBlock(n, low, real, k), 2, /*warm=*/false);
        }
      }
    }
  }
  c.diagonal_s_per_amp = SecondsPerAmp(s, DiagonalCostBlock(n), 2, /*warm=*/false);
  return c;
}

}  // namespace

int64_t LargestCacheBytes(const SysfsReader& sysfs, const std::string& cache_dir) {
  const absl::StatusOr<std::vector<std::string>> entries = sysfs.ListDir(cache_dir);
  if (!entries.ok()) return 0;
  int64_t largest = 0;
  int64_t best_level = 0;
  for (const std::string& entry : *entries) {
    if (entry.rfind("index", 0) != 0) continue;
    const std::string dir = cache_dir + "/" + entry + "/";
    const absl::StatusOr<int64_t> level = ReadInt(sysfs, dir + "level");
    const absl::StatusOr<std::string> type = sysfs.ReadFile(dir + "type");
    const absl::StatusOr<std::string> size = sysfs.ReadFile(dir + "size");  // "32768K"
    if (!level.ok() || !type.ok() || !size.ok() || absl::StartsWith(*type, "Instruction") || *level < best_level) {
      continue;
    }
    char* end = nullptr;
    int64_t bytes = std::strtoll(size->c_str(), &end, 10);
    if (*end == 'K') bytes <<= 10;
    if (*end == 'M') bytes <<= 20;
    if (*end == 'G') bytes <<= 30;
    if (bytes > 0) {
      best_level = *level;
      largest = bytes;
    }
  }
  return largest;
}

int64_t LastLevelCacheBytes() {
  static const int64_t bytes = [] {
    if (const int64_t b = LargestCacheBytes(RealSysfsReader(), "/sys/devices/system/cpu/cpu0/cache"); b > 0) return b;
    if (const long b = sysconf(_SC_LEVEL3_CACHE_SIZE); b > 0) return static_cast<int64_t>(b);
    if (const long b = sysconf(_SC_LEVEL2_CACHE_SIZE); b > 0) return static_cast<int64_t>(b);
    return int64_t{32} << 20;
  }();
  return bytes;
}

bool StreamsFromMemory(int qubits, bool is_double) {
  const int64_t amp_bytes = is_double ? 16 : 8;
  return qubits >= 40 || (int64_t{1} << qubits) * amp_bytes >= LastLevelCacheBytes();
}

const PassCosts& MeasuredPassCosts(bool is_double, bool streamed) {
  // Each measured on first use only; past the caches needs the in-cache costs.
  if (is_double) {
    static const PassCosts d = MeasureInCache<double>();
    if (streamed) {
      static const PassCosts ds = MeasureStreamed<double>(d);
      return ds;
    }
    return d;
  }
  static const PassCosts f = MeasureInCache<float>();
  if (streamed) {
    static const PassCosts fs = MeasureStreamed<float>(f);
    return fs;
  }
  return f;
}

double EstimatedSeconds(const Program& p, const PassCosts& costs) {
  const double amps = std::ldexp(1.0, p.qubits);
  double s = 0;
  for (const kernels::Block& b : p.blocks) {
    const int k = std::min<int>(static_cast<int>(b.qubits.size()), kernels::kMaxDenseQubits);
    const int low = kernels::HasQubitInsideVector(b, false) ? 1 : 0;
    const int real = std::all_of(b.matrix.begin(), b.matrix.end(), [](const auto& e) { return e.imag() == 0.0; });
    s += amps * (b.diagonal ? costs.diagonal_s_per_amp : costs.dense_s_per_amp[low][real][k]);
  }
  return s;
}

Program Fused(const Circuit& c, bool is_double) {
  const PassCosts& costs = MeasuredPassCosts(is_double, StreamsFromMemory(c.qubits(), is_double));
  Program best = Unfused(c);
  double best_s = EstimatedSeconds(best, costs);
  for (int k = 1; k <= kernels::kMaxDenseQubits; ++k) {
    Program p = FuseUpTo(c, k);
    const double t = EstimatedSeconds(p, costs);
    if (t < best_s) {
      best_s = t;
      best = std::move(p);
    }
  }
  return best;
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
