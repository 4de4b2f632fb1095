// The state-vector simulator against analytic results, fusion against the
// unfused circuit, and the quantum layer's adjoint gradients against finite
// differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "agent/qpu/circuit.h"
#include "agent/qpu/device.h"
#include "agent/qpu/qnn.h"
#include "agent/qpu/statevector.h"
#include "agent/qpu/tensor_backend.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::agent::qpu {
namespace {

using ::testing::HasSubstr;

template <typename Real>
class StateVectorTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(StateVectorTest, Precisions);

template <typename Real>
double Tolerance() {
  return std::is_same_v<Real, float> ? 1e-5 : 1e-12;
}

TYPED_TEST(StateVectorTest, BellAndGhzStates) {
  using Real = TypeParam;
  auto s = StateVector<Real>::Create(3);
  ASSERT_TRUE(s.ok());
  Circuit(3).H(0).Cnot(0, 1).Cnot(1, 2).Run(*s);
  const double half = 0.5;
  for (int64_t i = 0; i < 8; ++i) {
    const double p = std::norm(s->amplitude(i));
    EXPECT_NEAR(p, (i == 0 || i == 7) ? half : 0.0, Tolerance<Real>()) << "basis " << i;
  }
  for (int q = 0; q < 3; ++q) EXPECT_NEAR(s->ExpectationZ(q), 0.0, Tolerance<Real>());
  // Shots only ever see 000 and 111, about half each, the same for the same seed.
  const std::vector<int64_t> shots = s->Sample(2000, 7);
  int ones = 0;
  for (int64_t x : shots) {
    ASSERT_TRUE(x == 0 || x == 7) << x;
    ones += x == 7;
  }
  EXPECT_NEAR(ones / 2000.0, 0.5, 0.05);
  EXPECT_EQ(s->Sample(50, 7), s->Sample(50, 7));

  auto bell = StateVector<Real>::Create(2);
  Circuit(2).H(1).Cnot(1, 0).Run(*bell);
  EXPECT_NEAR(std::norm(bell->amplitude(0)), 0.5, Tolerance<Real>());
  EXPECT_NEAR(std::norm(bell->amplitude(3)), 0.5, Tolerance<Real>());
}

// The VmFlags line of the mapping of /proc/self/smaps that holds `p` ("" if none).
std::string VmFlagsOf(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0;                                // NOLINT(runtime/int): sscanf's %lx
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line; fields are "Name: ..."
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HugePagesTest, AStateOfTwoMebibytesOrMoreIsAlignedToAHugePageAndAdvised) {
  // 2^17 complex64 = 1 MiB: ordinary memory; 2^18 = 2 MiB: a huge page's worth.
  auto small = StateVector<float>::Create(17);
  auto large = StateVector<float>::Create(18);
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small->storage()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large->storage()) % kHugePageBytes, 0u);
  EXPECT_EQ(large->amplitude(0), std::complex<float>(1));  // |0...0>, the rest zero
  EXPECT_EQ(large->amplitude(large->dim() - 1), std::complex<float>(0));
  // The device says what the kernel does with the advice.
  v1::Device cpu;
  cpu.set_id("cpu0");
  EXPECT_EQ(QpuSimDevice(cpu, int64_t{1} << 30).attributes().at("huge_pages"), TransparentHugePagesMode());
  if (TransparentHugePagesMode() == "unknown") GTEST_SKIP() << "this kernel has no transparent huge pages";
  // "hg": the mapping carries MADV_HUGEPAGE (whether the kernel found free huge pages is its business).
  EXPECT_THAT(VmFlagsOf(large->storage()), HasSubstr(" hg"));
  EXPECT_THAT(VmFlagsOf(small->storage()), ::testing::Not(HasSubstr(" hg")));
}

TYPED_TEST(StateVectorTest, QftOfABasisStateIsThePlaneWave) {
  using Real = TypeParam;
  constexpr int n = 5;
  const int64_t dim = 1 << n;
  for (int64_t x : {0, 1, 6, 19, 31}) {
    auto s = StateVector<Real>::Create(n);
    Circuit prep(n);
    for (int q = 0; q < n; ++q) {
      if ((x >> q) & 1) prep.X(q);
    }
    prep.Run(*s);
    Circuit(n).Qft().Run(*s);
    for (int64_t k = 0; k < dim; ++k) {
      const std::complex<double> expected = std::polar(1.0 / std::sqrt(dim), 2 * M_PI * x * k / dim);
      const auto got = s->amplitude(k);
      ASSERT_NEAR(got.real(), expected.real(), 10 * Tolerance<Real>()) << "x=" << x << " k=" << k;
      ASSERT_NEAR(got.imag(), expected.imag(), 10 * Tolerance<Real>()) << "x=" << x << " k=" << k;
    }
  }
}

TYPED_TEST(StateVectorTest, RotationExpectationsAreCosines) {
  using Real = TypeParam;
  for (double t : {0.0, 0.3, 1.2, M_PI / 2, 2.5, M_PI}) {
    auto s = StateVector<Real>::Create(2);
    Circuit(2).Rx(0, t).Ry(1, t).Run(*s);
    EXPECT_NEAR(s->ExpectationZ(0), std::cos(t), 10 * Tolerance<Real>()) << t;
    EXPECT_NEAR(s->ExpectationZ(1), std::cos(t), 10 * Tolerance<Real>()) << t;
    auto r = StateVector<Real>::Create(1);
    Circuit(1).H(0).Rz(0, t).H(0).Run(*r);  // H RZ H = RX up to phase
    EXPECT_NEAR(r->ExpectationZ(0), std::cos(t), 10 * Tolerance<Real>()) << t;
  }
}

Circuit RandomCircuit(int n, int gates, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> angle(-M_PI, M_PI);
  std::uniform_int_distribution<int> qubit(0, n - 1), kind(0, 12);
  Circuit c(n);
  for (int i = 0; i < gates; ++i) {
    const int a = qubit(gen);
    int b = qubit(gen);
    if (b == a) b = (a + 1) % n;
    switch (kind(gen)) {
      case 0: c.H(a); break;
      case 1: c.X(a); break;
      case 2: c.Y(a); break;
      case 3: c.Z(a); break;
      case 4: c.S(a); break;
      case 5: c.T(a); break;
      case 6: c.Rx(a, angle(gen)); break;
      case 7: c.Ry(a, angle(gen)); break;
      case 8: c.Rz(a, angle(gen)); break;
      case 9: c.Cnot(a, b); break;
      case 10: c.Cz(a, b); break;
      case 11: c.Swap(a, b); break;
      default: c.Crx(a, b, angle(gen)).Cry(b, a, angle(gen)).Crz(a, b, angle(gen)); break;
    }
  }
  return c;
}

TYPED_TEST(StateVectorTest, DeepRandomCircuitsKeepTheNormAndFusionChangesNothing) {
  using Real = TypeParam;
  constexpr int n = 10;
  const Circuit c = RandomCircuit(n, 2000, 11);
  auto a = StateVector<Real>::Create(n);
  c.Run(*a);
  constexpr bool kSingle = std::is_same_v<Real, float>;
  EXPECT_NEAR(a->Norm(), 1.0, kSingle ? 1e-4 : 1e-6);
  // Every k, and the k chosen by cost: the same state in fewer passes.
  std::vector<Program> programs;
  for (int k = 1; k <= kernels::kMaxDenseQubits; ++k) programs.push_back(FuseUpTo(c, k));
  programs.push_back(Fused(c, !kSingle));
  size_t previous = c.size();
  for (const Program& p : programs) {
    SCOPED_TRACE("k = " + std::to_string(p.max_block_qubits));
    EXPECT_EQ(p.gates, c.size());
    if (p.max_block_qubits >= 2) {
      EXPECT_LT(p.size(), c.size() / 2);
    }
    for (const kernels::Block& b : p.blocks) {
      EXPECT_LE(static_cast<int>(b.qubits.size()), std::max(p.max_block_qubits, 2));
    }
    auto b = StateVector<Real>::Create(n);
    p.Run(*b);
    double worst = 0;
    for (int64_t i = 0; i < a->dim(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(a->amplitude(i) - b->amplitude(i))));
    }
    EXPECT_LT(worst, kSingle ? 1e-4 : 1e-9);
  }
  // More qubits per block never needs more passes on this circuit.
  for (int k = 2; k <= kernels::kMaxDenseQubits; ++k) {
    EXPECT_LE(programs[k - 1].size(), previous) << k;
    previous = programs[k - 1].size();
  }
}

TEST(FusionTest, DiagonalGatesStayDiagonalAndTheLayeredCircuitFusesDeeply) {
  Circuit phases(6);
  phases.Rz(0, 0.3).Cz(0, 1).T(2).S(1).Cz(1, 2);
  const Program p = FuseUpTo(phases, 3);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_TRUE(p.blocks[0].diagonal);
  EXPECT_EQ(p.blocks[0].matrix.size(), 8u);
  // depth 10 on 26 qubits: 385 gates; 4-qubit blocks need far fewer passes than gates.
  const Circuit layered = LayeredCircuit(26, 10);
  EXPECT_EQ(layered.size(), 385u);
  EXPECT_LT(FuseUpTo(layered, 4).size(), 120u);
}

// The cost model's regime: a state at least the size of the last-level
// cache streams from memory; that size comes from sysfs's cache directory
// (the highest level that holds data; instruction caches do not count).
TEST(FusionTest, TheLastLevelCacheIsTheHighestDataCacheSysfsLists) {
  hetbench::testing::TempDir dir{"hetbench-cache"};
  const RealSysfsReader sysfs(dir.path());  // a fake tree standing in for /sys
  const std::string cache = "/devices/system/cpu/cpu0/cache";
  auto write = [&](int index, int level, const std::string& type, const std::string& size) {
    const std::string d = dir.path() + cache + "/index" + std::to_string(index);
    std::filesystem::create_directories(d);
    std::ofstream(d + "/level") << level << "\n";
    std::ofstream(d + "/type") << type << "\n";
    std::ofstream(d + "/size") << size << "\n";
  };
  EXPECT_EQ(LargestCacheBytes(sysfs, cache), 0);  // nothing listed: the caller falls back
  write(0, 1, "Data", "32K");
  write(1, 1, "Instruction", "64K");
  EXPECT_EQ(LargestCacheBytes(sysfs, cache), 32 << 10);
  write(2, 2, "Unified", "1024K");
  write(3, 3, "Unified", "32768K");
  write(4, 3, "Instruction", "65536K");  // an instruction cache never counts
  std::filesystem::create_directories(dir.path() + cache + "/uevent-dir");  // not an index: skipped
  EXPECT_EQ(LargestCacheBytes(sysfs, cache), int64_t{32} << 20);
  EXPECT_EQ(LargestCacheBytes(sysfs, cache + "/absent"), 0);

  const int64_t llc = LastLevelCacheBytes();
  ASSERT_GT(llc, 0);
  int n = 1;  // the smallest complex64 state of at least the cache's size
  while ((int64_t{8} << n) < llc) ++n;
  EXPECT_TRUE(StreamsFromMemory(n, /*is_double=*/false));
  EXPECT_FALSE(StreamsFromMemory(n - 1, /*is_double=*/false));
  EXPECT_TRUE(StreamsFromMemory(n - 1, /*is_double=*/true));  // twice the bytes an amplitude
  EXPECT_FALSE(StreamsFromMemory(n - 2, /*is_double=*/true));
}

TYPED_TEST(StateVectorTest, TheTensorBackendGivesTheNativeKernelsAmplitudes) {
  using Real = TypeParam;
  constexpr bool kDouble = std::is_same_v<Real, double>;
  constexpr int n = 9;
  const Circuit c = RandomCircuit(n, 300, 5);
  for (const Program& p : {Unfused(c), FuseUpTo(c, 3), FuseUpTo(c, 6)}) {
    SCOPED_TRACE("k = " + std::to_string(p.max_block_qubits));
    auto native = StateVector<Real>::Create(n);
    p.Run(*native);
    auto tensor = TensorState::Create(n, torch::kCPU, kDouble, int64_t{1} << 30);
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    tensor->Run(p);
    const torch::Tensor amps = tensor->amplitudes().to(torch::kComplexDouble).contiguous();
    const auto* t = reinterpret_cast<const std::complex<double>*>(amps.data_ptr());
    double worst = 0;
    for (int64_t i = 0; i < native->dim(); ++i) {
      worst = std::max(worst, std::abs(std::complex<double>(native->amplitude(i)) - t[i]));
    }
    EXPECT_LT(worst, kDouble ? 1e-12 : 1e-5);
    for (int q : {0, 4, 8}) EXPECT_NEAR(tensor->ExpectationZ(q), native->ExpectationZ(q), kDouble ? 1e-12 : 1e-5);
  }
}

TEST(TensorBackendTest, AGpuIsOfferedOnlyWhereLibTorchHasCuda) {
  EXPECT_TRUE(TensorBackendUsable(torch::kCPU).ok());
  const absl::Status cuda = TensorBackendUsable(torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(cuda.ok(), torch::cuda::is_available());
  if (!cuda.ok()) {
    EXPECT_THAT(std::string(cuda.message()), HasSubstr("CUDA LibTorch"));
    EXPECT_EQ(TensorState::Create(4, torch::Device(torch::kCUDA, 0), false, 1 << 20).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(TensorState::Create(30, torch::kCPU, true, int64_t{1} << 30).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(TensorBackendTest, TheInventoryOffersAGpuHostedSimulatorOnlyWhenUsable) {
  v1::Device gpu;  // a fake GPU as discovery reports one
  gpu.set_id("gpu1");
  gpu.set_kind(v1::DEVICE_KIND_GPU);
  gpu.set_model("NVIDIA A100-SXM4-40GB");
  gpu.set_memory_bytes(int64_t{40} << 30);
  (*gpu.mutable_attributes())["cuda_index"] = "1";
  auto offered = QpuSimGpuDevice(gpu, absl::OkStatus());
  ASSERT_TRUE(offered.ok());
  EXPECT_EQ(offered->id(), "qpu-gpu1");
  EXPECT_EQ(offered->kind(), v1::DEVICE_KIND_QPU_SIM);
  EXPECT_EQ(offered->attributes().at("cuda_index"), "1");
  EXPECT_EQ(offered->attributes().at("backend"), "tensor");
  EXPECT_EQ(offered->attributes().at("max_qubits_complex64"), "31");  // 20 GiB of 8-byte amplitudes
  EXPECT_THAT(offered->model(), HasSubstr("tensor backend"));
  const auto refused = QpuSimGpuDevice(gpu, TensorBackendUsable(torch::Device(torch::kCUDA, 1)));
  if (!torch::cuda::is_available()) {
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("qpu-sim on gpu1: "));
  }
}

TEST(StateVectorLimitsTest, TooManyQubitsForTheMemoryLimitAreRefused) {
  auto s = StateVector<double>::Create(30, 1, int64_t{1} << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("1 state(s) of 30 qubits need 16384 MiB"));
  EXPECT_FALSE(StateVector<float>::Create(0).ok());
}

TEST(StateVectorLimitsTest, BatchedStatesAreIndependent) {
  auto s = StateVector<double>::Create(3, 4);
  ASSERT_TRUE(s.ok());
  s->Apply1(0, PauliX<double>(), 2);  // only state 2
  for (int64_t b = 0; b < 4; ++b) EXPECT_NEAR(s->ExpectationZ(0, b), b == 2 ? -1.0 : 1.0, 1e-12);
  Circuit(3).H(1).Run(*s);  // all states
  for (int64_t b = 0; b < 4; ++b) EXPECT_NEAR(s->ExpectationZ(1, b), 0.0, 1e-12);
}

TYPED_TEST(StateVectorTest, APaddedStateGivesTheFlatStatesResults) {
  // Pads of 3 amplitudes after every 16 (as large states get 2 MiB after
  // every 256 MiB): gates, reads, sampling and a batch see amplitudes only.
  using Real = TypeParam;
  constexpr int n = 8;
  auto padded = StateVector<Real>::Create(n, 2, kDefaultMemoryLimitBytes, kernels::Padding{4, 3});
  auto flat = StateVector<Real>::Create(n, 2);
  ASSERT_TRUE(padded.ok() && flat.ok());
  EXPECT_TRUE(padded->layout().padded());
  EXPECT_FALSE(flat->layout().padded());
  EXPECT_EQ(padded->layout().Storage(n), 256 + 15 * 3);
  EXPECT_EQ(padded->bytes(), flat->bytes());  // the amplitudes' bytes
  EXPECT_GT(padded->storage_bytes(), flat->storage_bytes());
  Circuit c = LayeredCircuit(n, 3);
  c.Qft();
  for (StateVector<Real>* s : {&*padded, &*flat}) {
    c.Run(*s);
    s->Apply1(7, Rx<Real>(0.4), 1);  // state 1 only
    FuseUpTo(c, 3).Run(*s);
  }
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < flat->dim(); ++i) {
      ASSERT_NEAR(std::abs(padded->amplitude(i, b) - flat->amplitude(i, b)), 0.0, Tolerance<Real>()) << b << " " << i;
    }
    EXPECT_NEAR(padded->Norm(b), 1.0, 10 * Tolerance<Real>());
    const std::vector<double> ep = padded->ExpectationsZ(b), ef = flat->ExpectationsZ(b);
    for (int q = 0; q < n; ++q) {
      EXPECT_NEAR(ep[q], ef[q], 10 * Tolerance<Real>()) << q;
      EXPECT_NEAR(padded->ExpectationZ(q, b), ef[q], 10 * Tolerance<Real>()) << q;
    }
  }
  EXPECT_NEAR(std::abs(padded->amplitude(5, 1) - padded->amplitude(5, 0)),
              std::abs(flat->amplitude(5, 1) - flat->amplitude(5, 0)), Tolerance<Real>());
  if constexpr (std::is_same_v<Real, double>) EXPECT_EQ(padded->Sample(200, 3, 1), flat->Sample(200, 3, 1));
  padded->Reset();
  EXPECT_EQ(padded->amplitude(0, 1), std::complex<Real>(1));
  EXPECT_NEAR(padded->Norm(1), 1.0, 1e-12);
  EXPECT_FALSE(StateVector<Real>::Create(n, 1, kDefaultMemoryLimitBytes, kernels::Padding{4, -1}).ok());
}

TEST(StateVectorLimitsTest, LargeStatesArePaddedUnlessOnlyTheFlatStateFitsTheLimit) {
  // 2^26 complex64 amplitudes: 512 MiB, padded by 2 MiB; with a limit of
  // exactly 512 MiB the same state is stored flat instead of refused.
  {
    auto roomy = StateVector<float>::Create(26, 1, int64_t{1} << 30);
    ASSERT_TRUE(roomy.ok());
    EXPECT_TRUE(roomy->layout().padded());
    EXPECT_EQ(roomy->storage_bytes(), (size_t{512} + 2) << 20);
    EXPECT_EQ(roomy->bytes(), size_t{512} << 20);
    roomy->Apply1(25, PauliX<float>());  // the upper half's first amplitude, past the pad
    EXPECT_EQ(roomy->amplitude(int64_t{1} << 25), std::complex<float>(1));
    EXPECT_EQ(roomy->storage()[(int64_t{1} << 25) + roomy->layout().pad], std::complex<float>(1));
  }
  auto tight = StateVector<float>::Create(26, 1, int64_t{512} << 20);
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->layout().padded());
  EXPECT_EQ(tight->storage_bytes(), size_t{512} << 20);
  EXPECT_FALSE(StateVector<float>::Create(25, 1, int64_t{1} << 30)->layout().padded());  // one chunk
}

TEST(QuantumLayerTest, AdjointGradientsMatchFiniteDifferences) {
  torch::manual_seed(5);
  const int n = 4, layers = 2, batch = 3;
  torch::Tensor angles = torch::randn({batch, n}, torch::kFloat64);
  torch::Tensor weights = torch::randn({layers, n, 2}, torch::kFloat64);
  torch::Tensor g = torch::randn({batch, n}, torch::kFloat64);
  torch::Tensor ga, gw;
  QuantumGradients(angles, weights, g, &ga, &gw);
  auto objective = [&](const torch::Tensor& a, const torch::Tensor& w) {
    return (QuantumExpectations(a, w) * g).sum().item<double>();
  };
  const double h = 1e-6;
  for (int64_t i = 0; i < angles.numel(); ++i) {
    torch::Tensor p = angles.clone(), m = angles.clone();
    p.view(-1)[i] += h;
    m.view(-1)[i] -= h;
    EXPECT_NEAR(ga.view(-1)[i].item<double>(), (objective(p, weights) - objective(m, weights)) / (2 * h), 1e-6) << i;
  }
  for (int64_t i = 0; i < weights.numel(); ++i) {
    torch::Tensor p = weights.clone(), m = weights.clone();
    p.view(-1)[i] += h;
    m.view(-1)[i] -= h;
    EXPECT_NEAR(gw.view(-1)[i].item<double>(), (objective(angles, p) - objective(angles, m)) / (2 * h), 1e-6) << i;
  }
  // Angle encoding on |0>: with no variational layer <Z_q> = cos(angle_q).
  torch::Tensor e = QuantumExpectations(angles, torch::zeros({0, n, 2}, torch::kFloat64));
  EXPECT_TRUE(torch::allclose(e, angles.cos(), 1e-12, 1e-12));
}

TEST(QuantumLayerTest, TheBatchedSimulatorEqualsOneStatePerSample) {
  // 37 samples: one full chunk and a padded one; 5 qubits, 3 layers.
  torch::manual_seed(9);
  const int n = 5, layers = 3, batch = 37;
  torch::Tensor angles = torch::rand({batch, n}, torch::kFloat64) * M_PI;
  torch::Tensor weights = torch::randn({layers, n, 2}, torch::kFloat64);
  torch::Tensor g = torch::randn({batch, n}, torch::kFloat64);
  const torch::Tensor want = QuantumExpectationsPerSample(angles, weights);
  const torch::Tensor got = QuantumExpectations(angles, weights);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-12);
  torch::Tensor ga, gw, ra, rw;
  QuantumGradients(angles, weights, g, &ga, &gw);
  QuantumGradientsPerSample(angles, weights, g, &ra, &rw);
  EXPECT_LT((ga - ra).abs().max().item<double>(), 1e-12);
  EXPECT_LT((gw - rw).abs().max().item<double>(), 1e-11);
  // Through autograd: the layer that keeps the forward states gives the same gradients.
  torch::Tensor a1 = angles.clone().requires_grad_(true), w1 = weights.clone().requires_grad_(true);
  torch::Tensor a2 = angles.clone().requires_grad_(true), w2 = weights.clone().requires_grad_(true);
  (QuantumLayer(a1, w1) * g).sum().backward();
  (QuantumLayerPerSample(a2, w2) * g).sum().backward();
  EXPECT_LT((a1.grad() - a2.grad()).abs().max().item<double>(), 1e-12);
  EXPECT_LT((w1.grad() - w2.grad()).abs().max().item<double>(), 1e-11);
}

TEST(QuantumLayerTest, QnnTrainsEndToEndThroughAutograd) {
  torch::manual_seed(1);
  torch::nn::Sequential net = MakeQnn(QnnShape{4, 1});
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(0.05));
  torch::Tensor x = torch::randn({16, 784});
  torch::Tensor y = torch::arange(16, torch::kInt64).remainder(2);
  double first = 0, last = 0;
  for (int i = 0; i < 30; ++i) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.7) << "a fixed batch of 16 is learnt";
  EXPECT_EQ(QnnGatesPerCircuit(QnnShape{4, 1}), 4 + 1 * 3 * 4);
}

}  // namespace
}  // namespace hetbench::agent::qpu
