// Every SIMD kernel the machine can run (each Highway target compiled in and
// supported here, down to the portable fallback) against the reference loop
// on random gates: random qubit sets mixing in-vector and across-vector
// qubits, dense (complex and real coefficients) and diagonal, complex64 and
// complex128.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <complex>
#include <map>
#include <random>

#include "agent/qpu/kernels.h"

namespace hetbench::agent::qpu::kernels {
namespace {

std::vector<std::complex<double>> RandomState(int n, std::mt19937_64& gen) {
  std::normal_distribution<double> g;
  std::vector<std::complex<double>> s(size_t{1} << n);
  double norm = 0;
  for (auto& a : s) norm += std::norm(a = {g(gen), g(gen)});
  for (auto& a : s) a /= std::sqrt(norm);
  return s;
}

// A random unitary-ish matrix is not needed: the kernels are linear maps, and
// a general complex matrix exercises every coefficient. Entries of modulus
// about 1/sqrt(2^k) keep the result's scale near the state's.
Block RandomBlock(int n, int k, bool diagonal, std::mt19937_64& gen, bool real = false) {
  std::vector<int> all(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) all[q] = q;
  std::shuffle(all.begin(), all.end(), gen);
  Block b;
  b.qubits.assign(all.begin(), all.begin() + k);
  std::sort(b.qubits.begin(), b.qubits.end());
  b.diagonal = diagonal;
  std::normal_distribution<double> g(0.0, 1.0 / std::sqrt(static_cast<double>(int64_t{1} << k)));
  b.matrix.resize(diagonal ? size_t{1} << k : size_t{1} << (2 * k));
  for (auto& e : b.matrix) e = {g(gen), real ? 0.0 : g(gen)};  // real: the kernels' real-coefficient path
  if (diagonal && k >= 2) b.matrix[0] = 1.0;  // an untouched entry, as in controlled phases
  return b;
}

template <typename Real>
double MaxError(const Block& b, int n, const std::vector<std::complex<double>>& start) {
  std::vector<std::complex<double>> want = start;
  ApplyReference(b, want.data(), n);
  std::vector<std::complex<Real>> got(start.size());
  for (size_t i = 0; i < start.size(); ++i) got[i] = std::complex<Real>(start[i]);
  Apply(b, got.data(), n);
  double err = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    err = std::max(err, std::abs(std::complex<double>(got[i]) - want[i]));
  }
  return err;
}

class KernelTargets : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(ForceTarget(GetParam())) << GetParam(); }
  void TearDown() override { ForceTarget(""); }
};

TEST_P(KernelTargets, RandomGatesMatchTheReference) {
  EXPECT_EQ(ActiveTarget(), GetParam());
  // The dispatch really switched: the vector width is the forced target's.
  const std::map<std::string, int> lanes = {{"AVX3", 8}, {"AVX3_DL", 8}, {"AVX2", 4}, {"SSE4", 2},
                                            {"SSSE3", 2}, {"EMU128", 2}, {"SCALAR", 0}, {"NEON", 2}};
  if (lanes.count(GetParam())) EXPECT_EQ(ComplexLanes(false), lanes.at(GetParam()));
  std::mt19937_64 gen(std::hash<std::string>()(GetParam()));
  int checked = 0;
  for (int n : {1, 2, 3, 4, 5, 7, 9, 12}) {
    for (int k = 1; k <= std::min(n, kMaxDenseQubits); ++k) {
      for (const char* kind : {"dense", "real dense", "diagonal"}) {
        const bool diagonal = std::string(kind) == "diagonal", real = std::string(kind) == "real dense";
        for (int rep = 0; rep < 3; ++rep) {
          const Block b = RandomBlock(n, k, diagonal, gen, real);
          const std::vector<std::complex<double>> start = RandomState(n, gen);
          const std::string what = ::testing::PrintToString(b.qubits) + " " + kind + " n=" + std::to_string(n);
          EXPECT_LT(MaxError<float>(b, n, start), 1e-5) << what;
          EXPECT_LT(MaxError<double>(b, n, start), 1e-12) << what;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 225);
}

TEST_P(KernelTargets, EveryPlacementOfOneAndTwoQubitsOnALargerState) {
  // Each low/high split the vector width allows, including the qubits right at the boundary.
  std::mt19937_64 gen(11);
  constexpr int n = 13;
  for (int a = 0; a < n; ++a) {
    for (int c = a; c < n; ++c) {
      Block b;
      b.qubits = a == c ? std::vector<int>{a} : std::vector<int>{a, c};
      const int k = static_cast<int>(b.qubits.size());
      std::normal_distribution<double> g(0.0, 0.5);
      b.matrix.resize(size_t{1} << (2 * k));
      for (auto& e : b.matrix) e = {g(gen), g(gen)};
      const auto start = RandomState(n, gen);
      EXPECT_LT(MaxError<float>(b, n, start), 1e-5) << a << "," << c;
      EXPECT_LT(MaxError<double>(b, n, start), 1e-12) << a << "," << c;
    }
  }
}

TEST_P(KernelTargets, EverySplitOfABlockInsideAndAcrossVectors) {
  // Each count of qubits inside a vector (1 to all of the vector's) beside
  // each count across vectors, up to kMaxDenseQubits: every kernel the
  // mixed path compiles (their counts are template arguments) runs once.
  std::mt19937_64 gen(13);
  constexpr int n = 10;
  int checked = 0;
  for (const bool is_double : {false, true}) {
    int log_c = 0;
    while ((1 << log_c) < ComplexLanes(is_double)) ++log_c;
    for (int nl = 1; nl <= log_c; ++nl) {
      for (int nh = 0; nl + nh <= kMaxDenseQubits && log_c + nh <= n; ++nh) {
        for (const bool real : {false, true}) {
          Block b = RandomBlock(n, nl + nh, false, gen, real);
          b.qubits.clear();
          for (int q = 0; q < nl; ++q) b.qubits.push_back(q);
          for (int q = 0; q < nh; ++q) b.qubits.push_back(n - nh + q);
          const auto start = RandomState(n, gen);
          const std::string what = "nl=" + std::to_string(nl) + " nh=" + std::to_string(nh) + (real ? " real" : "");
          if (is_double) {
            EXPECT_LT(MaxError<double>(b, n, start), 1e-12) << what;
          } else {
            EXPECT_LT(MaxError<float>(b, n, start), 1e-5) << what;
          }
          ++checked;
        }
      }
    }
  }
  if (GetParam() != "SCALAR") EXPECT_GT(checked, 10);
}

TEST_P(KernelTargets, ADiagonalWiderThanTheKernelTablesFallsBackToTheLoop) {
  // 11 qubits: past kMaxDiagonalQubits, so no vector tables are built for it.
  std::mt19937_64 gen(3);
  constexpr int n = 12;
  const Block b = RandomBlock(n, kMaxDiagonalQubits + 1, true, gen);
  const auto start = RandomState(n, gen);
  EXPECT_LT(MaxError<float>(b, n, start), 1e-5);
  EXPECT_LT(MaxError<double>(b, n, start), 1e-12);
}

// A state mapped between two inaccessible pages: a kernel that loads or
// stores a byte before or after the state (a pair of groups taken past the
// last, say) faults. (The read-ahead only prefetches, which never faults.)
template <typename Real>
class GuardedState {
 public:
  explicit GuardedState(int n) : bytes_((size_t{1} << n) * sizeof(std::complex<Real>)) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t body = (bytes_ + page_ - 1) / page_ * page_;
    map_ =
        static_cast<char*>(mmap(nullptr, body + 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    total_ = body + 2 * page_;
    mprotect(map_, page_, PROT_NONE);
    mprotect(map_ + page_ + body, page_, PROT_NONE);
    data_ = reinterpret_cast<std::complex<Real>*>(map_ + page_ + body - bytes_);  // ends at the guard
  }
  ~GuardedState() { munmap(map_, total_); }
  std::complex<Real>* data() { return data_; }

 private:
  size_t bytes_, page_ = 0, total_ = 0;
  char* map_ = nullptr;
  std::complex<Real>* data_ = nullptr;
};

TEST_P(KernelTargets, NoKernelTouchesMemoryOutsideTheState) {
  // Every one- and two-qubit placement, and 3-qubit blocks at random, on a
  // state of two kernel chunks: every run length, paired groups, read-ahead.
  std::mt19937_64 gen(17);
  constexpr int n = 16;
  GuardedState<float> guarded(n);
  const auto start = RandomState(n, gen);
  std::vector<Block> blocks;
  for (int a = 0; a < n; ++a) {
    for (int c = a; c < n; ++c) {
      blocks.push_back(RandomBlock(n, a == c ? 1 : 2, false, gen, (a + c) % 2 == 0));
      blocks.back().qubits = a == c ? std::vector<int>{a} : std::vector<int>{a, c};
    }
  }
  for (int rep = 0; rep < 20; ++rep) blocks.push_back(RandomBlock(n, 3, rep % 3 == 2, gen, rep % 2 == 0));
  for (const Block& b : blocks) {
    std::vector<std::complex<double>> want = start;
    ApplyReference(b, want.data(), n);
    for (size_t i = 0; i < start.size(); ++i) guarded.data()[i] = std::complex<float>(start[i]);
    Apply(b, guarded.data(), n);
    double err = 0;
    for (size_t i = 0; i < start.size(); ++i)
      err = std::max(err, std::abs(std::complex<double>(guarded.data()[i]) - want[i]));
    EXPECT_LT(err, 1e-5) << ::testing::PrintToString(b.qubits);
  }
}

// `start` stored as `layout` says, every pad NaN: a kernel that reads a pad
// as an amplitude makes NaNs, one that writes a pad leaves a number there.
template <typename Real>
std::vector<std::complex<Real>> Padded(const std::vector<std::complex<double>>& start, int n, const Padding& layout) {
  std::vector<std::complex<Real>> s(static_cast<size_t>(layout.Storage(n)),
                                    std::complex<Real>(std::nan(""), std::nan("")));
  for (size_t i = 0; i < start.size(); ++i) s[layout.Index(static_cast<int64_t>(i))] = std::complex<Real>(start[i]);
  return s;
}

TEST_P(KernelTargets, PaddedStatesMatchTheReference) {
  // Chunks of 4, 16 and 64 amplitudes (fewer than a vector's lanes: the
  // scalar loop; whole vectors: every kernel with runs cut at a chunk's end)
  // and pads of 1, 5 and 8 amplitudes; every one- and two-qubit placement and
  // random blocks of 3 to 6 qubits, dense, real and diagonal.
  std::mt19937_64 gen(19);
  constexpr int n = 11;
  int checked = 0;
  for (const Padding layout : {Padding{2, 1}, Padding{4, 5}, Padding{6, 8}}) {
    std::vector<Block> blocks;
    for (int a = 0; a < n; ++a) {
      for (int c = a; c < n; ++c) {
        blocks.push_back(RandomBlock(n, a == c ? 1 : 2, (a * n + c) % 5 == 4, gen, (a + c) % 2 == 0));
        blocks.back().qubits = a == c ? std::vector<int>{a} : std::vector<int>{a, c};
      }
    }
    for (int rep = 0; rep < 24; ++rep) blocks.push_back(RandomBlock(n, 3 + rep % 4, rep % 3 == 2, gen, rep % 2 == 0));
    for (const Block& b : blocks) {
      const auto start = RandomState(n, gen);
      std::vector<std::complex<double>> want = start;
      ApplyReference(b, want.data(), n);
      auto f = Padded<float>(start, n, layout);
      auto d = Padded<double>(start, n, layout);
      Apply(b, f.data(), n, layout);
      Apply(b, d.data(), n, layout);
      double err_f = 0, err_d = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const int64_t at = layout.Index(static_cast<int64_t>(i));
        err_f = std::max(err_f, std::abs(std::complex<double>(f[at]) - want[i]));
        err_d = std::max(err_d, std::abs(d[at] - want[i]));
      }
      int pads_written = 0;
      for (int64_t at = 0; at < layout.Storage(n); ++at) {
        if ((at % ((int64_t{1} << layout.every_log2) + layout.pad)) < (int64_t{1} << layout.every_log2)) continue;
        pads_written += !std::isnan(f[at].real()) || !std::isnan(d[at].real());
      }
      const std::string what = ::testing::PrintToString(b.qubits) + (b.diagonal ? " diagonal" : " dense") +
                               " every 2^" + std::to_string(layout.every_log2) + " pad " + std::to_string(layout.pad);
      EXPECT_LT(err_f, 1e-5) << what;  // NaN fails too
      EXPECT_LT(err_d, 1e-12) << what;
      EXPECT_EQ(pads_written, 0) << what;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * (66 + 24));
}

std::vector<std::string> Targets() {
  std::vector<std::string> t = AvailableTargets();
  return t.empty() ? std::vector<std::string>{"none"} : t;
}

INSTANTIATE_TEST_SUITE_P(EachTargetHere, KernelTargets, ::testing::ValuesIn(Targets()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(Padding, LargeStatesArePaddedEvery256MiBAndIndicesAddOverDisjointBits) {
  EXPECT_FALSE(Padding::ForLargeStates(25, 8).padded());  // 256 MiB of complex64: one chunk
  const Padding f = Padding::ForLargeStates(26, 8);
  EXPECT_EQ(f.every_log2, 25);
  EXPECT_EQ(f.pad * 8, int64_t{2} << 20);  // one huge page
  EXPECT_EQ(f.Storage(26), (int64_t{1} << 26) + f.pad);
  EXPECT_EQ(f.Index(int64_t{1} << 25), (int64_t{1} << 25) + f.pad);  // the upper half starts 258 MiB in
  const Padding d = Padding::ForLargeStates(25, 16);                 // complex128: 2^24 amplitudes a chunk
  EXPECT_EQ(d.every_log2, 24);
  EXPECT_EQ(d.Storage(26), (int64_t{1} << 26) + 3 * d.pad);
  EXPECT_FALSE(Padding::ForLargeStates(24, 16).padded());
  const Padding none;
  EXPECT_EQ(none.Index(int64_t{1} << 40), int64_t{1} << 40);
  const Padding p{4, 3};
  for (int64_t a : {0, 1, 5, 7}) {
    for (int64_t b : {0, 16, 32, 48, 256}) EXPECT_EQ(p.Index(a | b), p.Index(a) + p.Index(b)) << a << " " << b;
  }
}

TEST(KernelDispatch, ThePortableFallbackAndAVectorTargetAreBothHere) {
  const std::vector<std::string> t = AvailableTargets();
  ASSERT_FALSE(t.empty());
  // The last is the fallback every machine runs; on x86-64 at least SSSE3 precedes it.
  EXPECT_TRUE(t.back() == "SCALAR" || t.back() == "EMU128") << t.back();
#if defined(__x86_64__)
  EXPECT_GE(t.size(), 2u);
#endif
  EXPECT_EQ(ActiveTarget(), t.front());
  EXPECT_FALSE(ForceTarget("NO-SUCH-ISA"));
  EXPECT_EQ(ActiveTarget(), t.front());
}

}  // namespace
}  // namespace hetbench::agent::qpu::kernels
