#include "agent/validation/suite.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <complex>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/devices/accelerators.h"
#include "agent/devices/cuda.h"
#include "agent/executors/torch_threads.h"
#include "agent/models/global_generator.h"
#include "agent/models/models.h"
#include "agent/power/power_sampler.h"
#include "agent/qpu/circuit.h"
#include "agent/qpu/device.h"
#include "agent/qpu/kernels.h"
#include "agent/qpu/statevector.h"
#include "agent/validation/allreduce.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/validate_spec.h"

namespace hetbench::agent {

namespace {

constexpr int kFingerprintSteps = 8;  // training steps whose loss is the SDC fingerprint
constexpr int kDataBatches = 8;        // synthetic batches the training tests cycle through

// A test's limits: its box's deadline, and a flag set when the task is
// cancelled or the test is abandoned at its box.
struct Box {
  const Clock* clock = nullptr;  // ValidationConfig::box_clock, or a RealClock
  int64_t deadline_ns = 0;       // on `clock`
  std::shared_ptr<std::atomic<bool>> stop = std::make_shared<std::atomic<bool>>(false);
  bool Expired() const {
    return stop->load() || (clock != nullptr ? clock->MonotonicNowNs() : SteadyNowNs()) >= deadline_ns;
  }
};

struct Context {
  v1::ValidateSpec spec;
  v1::Device device;
  torch::Device torch_device = torch::kCPU;
  int batch_size = 128;
  uint64_t seed = 42;
  bool standard = false;
  Box box;
  PowerSampler* sampler = nullptr;
  int64_t qpu_memory_limit_bytes = 0;
  v1::GangAssign gang;  // an all-reduce pair's rank (kAllReduceTest)
  std::string own_host;
};

v1::ValidationTest Outcome(v1::TestOutcome outcome, std::string reason) {
  v1::ValidationTest t;
  t.set_outcome(outcome);
  t.set_reason(std::move(reason));
  return t;
}

void Sync(const Context& c) {
  if (c.torch_device.is_cuda()) SyncDevice(c.torch_device);
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Times `op` (one unit = `items` of the metric's work): once untimed, then
// units for 10 ms to size a repetition (about box / (4 x repetitions),
// within 20-250 ms), then the repetitions. False when the box expired first.
bool TimedReps(const Context& c, const std::function<void()>& op, double items, v1::ValidationTest* t) {
  op();
  Sync(c);
  if (c.box.Expired()) return false;
  int64_t t0 = SteadyNowNs();
  int units = 0;
  while (true) {
    op();
    ++units;
    Sync(c);
    if (SteadyNowNs() - t0 >= 10'000'000) break;
    if (c.box.Expired()) return false;
  }
  const double per_unit = static_cast<double>(SteadyNowNs() - t0) * 1e-9 / units;
  const int reps = c.spec.repetitions();
  const double rep_s = std::clamp(c.spec.time_box_seconds() / (4.0 * reps), 0.02, 0.25);
  const int per_rep = std::max(1, static_cast<int>(std::lround(rep_s / std::max(per_unit, 1e-9))));
  for (int r = 0; r < reps; ++r) {
    if (c.box.Expired()) return false;
    t0 = SteadyNowNs();
    for (int i = 0; i < per_rep; ++i) op();
    Sync(c);
    const double seconds = static_cast<double>(SteadyNowNs() - t0) * 1e-9;
    t->add_values(items * per_rep / std::max(seconds, 1e-9));
  }
  return true;
}

v1::ValidationTest Expired(const Context& c, const v1::ValidationTest& partial) {
  return Outcome(v1::TEST_OUTCOME_TIMED_OUT,
                 absl::StrCat(partial.values_size(), " of ", c.spec.repetitions(), " repetitions done"));
}

// The matrix product: a float32 64x64 product against float64 first (a
// wrong result FAILs), then GFLOP/s at a fixed size per kind and level, so
// devices of one SKU multiply the same matrices.
v1::ValidationTest Matmul(const Context& c) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(c.seed);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor a = torch::randn({64, 64}, gen, f64), b = torch::randn({64, 64}, gen, f64);
  torch::Tensor ref = a.matmul(b);
  torch::Tensor got = a.to(torch::kFloat32).to(c.torch_device).matmul(b.to(torch::kFloat32).to(c.torch_device));
  const double err = ((got.to(torch::kCPU).to(torch::kFloat64) - ref).abs().max() / ref.abs().max()).item<double>();
  if (!(err <= 1e-4)) {
    return Outcome(v1::TEST_OUTCOME_FAILED,
                   absl::StrFormat("wrong result: a float32 64x64 product is off by %.3g relative to float64 "
                                   "(at most 1e-4)",
                                   err));
  }
  const int64_t n = c.device.kind() == v1::DEVICE_KIND_GPU ? (c.standard ? 8192 : 4096) : (c.standard ? 1024 : 512);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  torch::Tensor x = torch::randn({n, n}, gen, f32).to(c.torch_device);
  torch::Tensor y = torch::randn({n, n}, gen, f32).to(c.torch_device);
  torch::Tensor out = torch::empty({n, n}, f32.device(c.torch_device));
  v1::ValidationTest t;
  t.set_detail(absl::StrFormat("n=%d float32; a 64x64 product within %.2g of float64", n, err));
  if (!TimedReps(
          c, [&] { torch::mm_out(out, x, y); }, 2.0 * n * n * n * 1e-9, &t))
    return Expired(c, t);
  return t;
}

v1::ValidationTest MemoryBandwidth(const Context& c) {
  const int64_t bytes = (c.standard ? 256 : 64) << 20;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(c.torch_device);
  torch::Tensor src = torch::ones({bytes / 4}, f32), dst = torch::empty({bytes / 4}, f32);
  v1::ValidationTest t;
  t.set_detail(absl::StrFormat("copy of %d MiB (read + write counted)", bytes >> 20));
  if (!TimedReps(
          c, [&] { dst.copy_(src); }, 2.0 * static_cast<double>(bytes) * 1e-9, &t))
    return Expired(c, t);
  return t;
}

// Training (fingerprint, then samples/s) or inference (samples/s) of a zoo
// model on fixed-seed synthetic batches.
v1::ValidationTest ModelTest(const Context& c, const std::string& model, bool train) {
  BuiltModel built;
  torch::Tensor x, y;
  {
    auto made = BuildModel(model, c.seed);  // seeded and built alone (global_generator.h)
    if (!made.ok()) return Outcome(v1::TEST_OUTCOME_FAILED, std::string(made.status().message()));
    built = *std::move(made);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(c.seed + 1);
    x = torch::rand({kDataBatches, c.batch_size, 784}, gen, torch::TensorOptions().dtype(torch::kFloat32));
    y = torch::randint(0, 10, {kDataBatches, c.batch_size}, gen, torch::TensorOptions().dtype(torch::kLong));
  }
  torch::nn::Sequential net = built.net;
  net->to(c.torch_device);
  x = x.to(c.torch_device);
  y = y.to(c.torch_device);
  v1::ValidationTest t;
  int64_t step = 0;
  if (!train) {
    net->eval();
    torch::NoGradGuard no_grad;
    t.set_detail(absl::StrFormat("%s eval, batch %d, no autograd", model, c.batch_size));
    if (!TimedReps(
            c, [&] { net->forward(x[step++ % kDataBatches]); }, c.batch_size, &t))
      return Expired(c, t);
    return t;
  }
  net->train();
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto one_step = [&]() -> torch::Tensor {
    const int64_t i = step++ % kDataBatches;
    torch::Tensor out = net->forward(x[i]);
    torch::Tensor loss = built.reconstruction ? torch::mse_loss(out, x[i]) : torch::cross_entropy_loss(out, y[i]);
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  };
  {
    // The fingerprint's dropout masks come from the seed alone: no other
    // task's build or dropout draws between them. On another device they come
    // from its own generator: the CPU's is held only to seed, so a step hung
    // there (a test abandoned at its box) does not hold up the agent's builds.
    std::optional<SeededDraws> alone;
    alone.emplace();
    torch::manual_seed(c.seed + 2);
    if (!c.torch_device.is_cpu()) alone.reset();
    for (int s = 0; s < kFingerprintSteps; ++s) {
      const float loss = one_step().item<float>();
      if (!std::isfinite(loss)) {
        return Outcome(v1::TEST_OUTCOME_FAILED, absl::StrFormat("wrong result: the loss is %g at step %d", loss, s));
      }
      t.add_loss_bits(Bits(loss));
      if (c.box.Expired()) return Expired(c, t);
    }
  }
  t.set_detail(absl::StrFormat("%s, Adam 1e-3, batch %d; fingerprint: the loss of its first %d steps from seed %d",
                               model, c.batch_size, kFingerprintSteps, c.seed));
  UnseededDraws dropout(c.torch_device.is_cpu());  // taken once, outside the timed repetitions
  if (!TimedReps(
          c, [&] { one_step(); }, c.batch_size, &t))
    return Expired(c, t);
  return t;
}

// The power sensors that measure the device: reading rate per slice of a
// window, failed reads, and (where a sensor gives both) its energy counter
// against the integral of its power readings.
v1::ValidationTest PowerSensorTest(const Context& c) {
  if (c.sampler == nullptr) return Outcome(v1::TEST_OUTCOME_SKIPPED, "this agent reads no power sensors");
  std::vector<size_t> measured;
  std::vector<std::string> modeled;
  const auto& sensors = c.sampler->sensors();
  for (size_t i = 0; i < sensors.size(); ++i) {
    const v1::SensorInfo& info = sensors[i]->info();
    if (!info.device_id().empty() && info.device_id() != c.device.id()) continue;
    if (info.source() == v1::POWER_SOURCE_MODELED) {
      modeled.push_back(info.name());
    } else {
      measured.push_back(i);
    }
  }
  if (measured.empty()) {
    return Outcome(v1::TEST_OUTCOME_SKIPPED, modeled.empty()
                                                 ? absl::StrCat("no power sensor measures ", c.device.id())
                                                 : absl::StrCat("only a modeled sensor (", absl::StrJoin(modeled, ", "),
                                                                "): nothing is measured to check"));
  }
  std::shared_ptr<PowerTap> tap = c.sampler->Subscribe();
  const int slices = std::min(c.spec.repetitions(), 4);
  const double window = std::min(2.0, c.spec.time_box_seconds() / 2);
  std::vector<std::vector<TimedReading>> all(sensors.size());
  std::vector<int> errors(sensors.size(), 0);
  v1::ValidationTest t;
  bool expired = false;
  for (int s = 0; s < slices && !expired; ++s) {
    const int64_t t0 = SteadyNowNs();
    const int64_t end = t0 + static_cast<int64_t>(window / slices * 1e9);
    while (SteadyNowNs() < end) {
      if (c.box.Expired()) {
        expired = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    double slowest = INFINITY;
    for (size_t i : measured) {
      int err = 0;
      std::vector<TimedReading> got = tap->Take(i, &err);
      errors[i] += err;
      slowest = std::min(slowest, static_cast<double>(got.size()) / (static_cast<double>(SteadyNowNs() - t0) * 1e-9));
      all[i].insert(all[i].end(), got.begin(), got.end());
    }
    if (!expired) t.add_values(slowest);
  }
  c.sampler->Unsubscribe(tap);
  if (expired) return Expired(c, t);
  std::vector<std::string> notes;
  for (size_t i : measured) {
    const std::string& name = sensors[i]->info().name();
    const std::vector<TimedReading>& r = all[i];
    if (r.empty() || errors[i] * 2 >= static_cast<int>(r.size()) + errors[i]) {
      return Outcome(v1::TEST_OUTCOME_FAILED, absl::StrFormat("sensor %s: %d readings, %d failed reads in %.1f s", name,
                                                              r.size(), errors[i], window));
    }
    // Energy counter against integrated power, over readings that have both.
    double integrated = 0, first_j = NAN, last_j = NAN;
    int both = 0;
    for (size_t k = 0; k < r.size(); ++k) {
      if (!std::isfinite(r[k].watts) || !std::isfinite(r[k].joules)) continue;
      if (both++ == 0) {
        first_j = r[k].joules;
      } else {
        integrated += 0.5 * (r[k].watts + r[k - 1].watts) * static_cast<double>(r[k].t_ns - r[k - 1].t_ns) * 1e-9;
      }
      last_j = r[k].joules;
    }
    std::string note = absl::StrFormat("%s: %d readings, %d failed", name, r.size(), errors[i]);
    if (both >= 3) {
      const double counted = last_j - first_j;
      const double apart =
          std::fabs(counted - integrated) / std::max({std::fabs(counted), std::fabs(integrated), 1e-9});
      absl::StrAppendFormat(&note, "; counter %.3g J vs integrated power %.3g J (%.1f%% apart)", counted, integrated,
                            100 * apart);
      if (apart > c.spec.power_tolerance()) {
        return Outcome(v1::TEST_OUTCOME_FAILED,
                       absl::StrFormat("sensor %s disagrees with itself: its energy counter says %.3g J, its power "
                                       "readings integrate to %.3g J over the same %.1f s (%.0f%% apart; "
                                       "power_tolerance %.0f%%)",
                                       name, counted, integrated, window, 100 * apart, 100 * c.spec.power_tolerance()));
      }
    }
    notes.push_back(std::move(note));
  }
  t.set_detail(absl::StrJoin(notes, "; "));
  return t;
}

// The simulator's state passes: GB/s moved by one-qubit-gate passes over a
// complex64 state (read + write counted).
v1::ValidationTest GateBandwidth(const Context& c) {
  const int max_q = qpu::MaxQubits(c.qpu_memory_limit_bytes, 8);
  const int n = std::min(c.standard ? 24 : 20, max_q);
  if (n < 10) return Outcome(v1::TEST_OUTCOME_SKIPPED, "the simulator's memory limit allows fewer than 10 qubits");
  auto sv = qpu::StateVector<float>::Create(n, 1, c.qpu_memory_limit_bytes);
  if (!sv.ok()) return Outcome(v1::TEST_OUTCOME_FAILED, std::string(sv.status().message()));
  const qpu::Program p = qpu::Unfused(qpu::LayeredCircuit(n, 1));
  v1::ValidationTest t;
  t.set_detail(absl::StrFormat("%d qubits complex64, %d passes per unit, %s kernels", n, p.size(),
                               qpu::kernels::ActiveTarget()));
  const double bytes = 2.0 * static_cast<double>(sv->bytes()) * static_cast<double>(p.size());
  if (!TimedReps(
          c, [&] { p.Run(*sv); }, bytes * 1e-9, &t))
    return Expired(c, t);
  return t;
}

// The simulator's kernels against the plain reference loop on a 10-qubit
// complex128 circuit; the first 64 probabilities are its fingerprint.
v1::ValidationTest StatevectorCheck(const Context& c) {
  constexpr int n = 10;
  qpu::Circuit circuit = qpu::LayeredCircuit(n, 4);
  circuit.Qft();
  auto fast = qpu::StateVector<double>::Create(n);
  if (!fast.ok()) return Outcome(v1::TEST_OUTCOME_FAILED, "cannot allocate a 10-qubit state");
  std::vector<std::complex<double>> ref(size_t{1} << n);
  ref[0] = 1;
  for (const qpu::Op& op : circuit.ops()) {
    const qpu::kernels::Block b = qpu::ToBlock(op);
    fast->Apply(b);
    qpu::kernels::ApplyReference(b, ref.data(), n);
  }
  double worst = 0;
  for (int64_t i = 0; i < fast->dim(); ++i) worst = std::max(worst, std::abs(fast->amplitude(i) - ref[i]));
  if (!(worst <= 1e-10)) {
    return Outcome(
        v1::TEST_OUTCOME_FAILED,
        absl::StrFormat("wrong result: the kernels differ from the reference loop by %.3g (at most 1e-10)", worst));
  }
  v1::ValidationTest t;
  for (int64_t i = 0; i < 64; ++i) t.add_loss_bits(Bits(static_cast<float>(std::norm(fast->amplitude(i)))));
  t.set_detail(
      absl::StrFormat("%d gates on %d qubits match the reference loop within %.2g; fingerprint: 64 "
                      "probabilities",
                      circuit.size(), n, worst));
  return t;
}

struct TestInfo {
  const char* unit;
  bool higher_is_better;
};

TestInfo InfoOf(const std::string& name) {
  if (name == "matmul") return {"GFLOP/s", true};
  if (name == "memory_bandwidth" || name == "gate_bandwidth" || name == kAllReduceTest) return {"GB/s", true};
  if (name == "power_sensor") return {"readings/s", true};
  if (name == "statevector_check") return {"", true};
  return {"samples/s", true};
}

v1::ValidationTest RunOne(const std::string& name, const Context& c) {
  if (name == "matmul") return Matmul(c);
  if (name == "memory_bandwidth") return MemoryBandwidth(c);
  if (name == "train_mlp") return ModelTest(c, "mlp", true);
  if (name == "infer_mlp") return ModelTest(c, "mlp", false);
  if (name == "train_cnn") return ModelTest(c, "cnn", true);
  if (name == "infer_cnn") return ModelTest(c, "cnn", false);
  if (name == "power_sensor") return PowerSensorTest(c);
  if (name == "gate_bandwidth") return GateBandwidth(c);
  if (name == "statevector_check") return StatevectorCheck(c);
  if (name == kAllReduceTest) {
    AllReduceRun run;
    run.gang = c.gang;
    run.own_host = c.own_host;
    run.device = c.torch_device;
    run.bytes = AllReduceBytes(c.spec.level());
    run.repetitions = c.spec.repetitions();
    run.time_box_seconds = c.spec.time_box_seconds();
    run.expired = [box = c.box] { return box.Expired(); };
    return AllReduceBandwidth(run);
  }
  return Outcome(v1::TEST_OUTCOME_SKIPPED, absl::StrCat("this agent has no test ", QuotedInput(name)));
}

// Why no LibTorch test can run on `device`, or "".
std::string TorchUnreachable(const v1::Device& device, const ValidationConfig& config) {
  if (device.kind() == v1::DEVICE_KIND_TPU) {
    return absl::StrCat("a TPU's tests run in the Python runner (PyTorch/XLA), and this agent has none: ",
                        config.runner_absent);
  }
  if (device.kind() == v1::DEVICE_KIND_GPU && CudaDeviceCount() == 0) {
    return absl::StrCat("the agent's LibTorch cannot reach ", device.id(), ": ", CudaUnavailableReason());
  }
  if (device.kind() == v1::DEVICE_KIND_QPU_SIM && CudaIndex(device) >= 0) {
    return "the suite checks the native kernels; the tensor backend on a GPU is not covered";
  }
  return "";
}

// Runs one test on a thread of its own; abandons it at its box (plus a
// second's grace for a repetition under way).
v1::ValidationTest Boxed(const std::string& name, Context c, const ValidationConfig& config,
                         const std::atomic<bool>& cancel) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    v1::ValidationTest result;
  };
  auto shared = std::make_shared<Shared>();
  static const RealClock real;
  const Clock* clock = config.box_clock != nullptr ? config.box_clock : &real;
  const double box_s = c.spec.time_box_seconds();
  c.box.clock = clock;
  c.box.deadline_ns = clock->MonotonicNowNs() + static_cast<int64_t>(box_s * 1e9);
  c.box.stop = std::make_shared<std::atomic<bool>>(false);  // this test's own: an abandoned one stops alone
  auto stop = c.box.stop;
  const int64_t t0 = clock->MonotonicNowNs();
  std::thread worker([shared, name, c, hook = config.before_test] {
    v1::ValidationTest r;
    try {
      if (hook) hook(name);
      r = RunOne(name, c);
    } catch (const std::exception& e) {
      r = Outcome(v1::TEST_OUTCOME_FAILED, absl::StrCat("error: ", e.what()).substr(0, 1000));
    }
    std::lock_guard<std::mutex> l(shared->mu);
    shared->result = std::move(r);
    shared->done = true;
    shared->cv.notify_all();
  });
  v1::ValidationTest out;
  {
    std::unique_lock<std::mutex> l(shared->mu);
    const int64_t give_up_ns = t0 + static_cast<int64_t>((box_s + 1.0) * 1e9);
    while (!shared->done && clock->MonotonicNowNs() < give_up_ns) {
      if (cancel.load()) stop->store(true);
      shared->cv.wait_for(l, std::chrono::milliseconds(50));
    }
    if (shared->done) {
      out = shared->result;
    } else {
      out = Outcome(v1::TEST_OUTCOME_TIMED_OUT, "did not return: its thread was abandoned");
    }
  }
  if (out.outcome() == v1::TEST_OUTCOME_TIMED_OUT && !shared->done) {
    stop->store(true);
    worker.detach();  // it holds only what it shares; the device's other tests go on
  } else {
    worker.join();
  }
  const TestInfo info = InfoOf(name);
  out.set_name(name);
  out.set_unit(info.unit);
  out.set_higher_is_better(info.higher_is_better);
  out.set_seconds(static_cast<double>(clock->MonotonicNowNs() - t0) * 1e-9);
  out.set_time_box_seconds(box_s);
  if (out.outcome() == v1::TEST_OUTCOME_UNSPECIFIED) out.set_outcome(v1::TEST_OUTCOME_MEASURED);
  return out;
}

// One test of a TPU in the Python runner: a runner start of its own with
// validate.tests naming it, killed past its box plus the runner's start-up
// allowance (PythonExecutor). Its seconds include the start-up.
v1::ValidationTest RunnerTest(const std::string& name, const v1::Assign& task, const v1::JobSpec& spec,
                              const v1::Device& device, Executor& runner, TaskControl* control) {
  v1::Assign one = task;
  *one.mutable_spec() = spec;
  one.mutable_spec()->mutable_validate()->clear_tests();
  one.mutable_spec()->mutable_validate()->add_tests(name);
  const int64_t t0 = SteadyNowNs();
  absl::StatusOr<v1::TaskResult> r = runner.Run(one, device, control);
  v1::ValidationTest out;
  if (!r.ok()) {
    out = Outcome(absl::IsDeadlineExceeded(r.status()) ? v1::TEST_OUTCOME_TIMED_OUT : v1::TEST_OUTCOME_FAILED,
                  absl::StrCat("the Python runner: ", r.status().message()).substr(0, 1000));
  } else {
    out = Outcome(v1::TEST_OUTCOME_FAILED, "the Python runner reported no result for it");
    for (const v1::ValidationTest& t : r->validation().tests()) {
      if (t.name() == name) out = t;
    }
  }
  const TestInfo info = InfoOf(name);
  out.set_name(name);
  out.set_unit(info.unit);
  out.set_higher_is_better(info.higher_is_better);
  out.set_seconds(static_cast<double>(SteadyNowNs() - t0) * 1e-9);
  out.set_time_box_seconds(spec.validate().time_box_seconds());
  if (out.outcome() == v1::TEST_OUTCOME_UNSPECIFIED) out.set_outcome(v1::TEST_OUTCOME_MEASURED);
  return out;
}

}  // namespace

absl::StatusOr<v1::TaskResult> ValidationExecutor::Run(const v1::Assign& task, const v1::Device& device,
                                                       TaskControl* control) {
  v1::JobSpec spec = task.spec();
  FillValidateDefaults(&spec);
  const v1::ValidateSpec& v = spec.validate();
  const int threads = spec.threads() > 0 ? spec.threads() : (config_.threads > 0 ? config_.threads : device.cores());
  const TorchThreads thread_setting(threads);
  v1::TaskResult result;
  v1::ValidationRun* run = result.mutable_validation();
  run->set_sku(SkuOf(device, spec.threads() > 0 ? spec.threads() : config_.threads, config_.agent_version));
  run->set_level(v.level());
  run->set_simulated(device.simulated());

  // A rank of an all-reduce pair runs that test alone; the device's suite is its own task.
  const bool pair = task.gang().world_size() > 1;
  std::vector<std::string> tests = pair ? std::vector<std::string>{kAllReduceTest} : SuiteFor(device.kind(), v.level());
  if (v.tests_size() > 0 && !pair) {
    std::vector<std::string> wanted;
    for (const std::string& t : tests) {
      if (std::find(v.tests().begin(), v.tests().end(), t) != v.tests().end()) wanted.push_back(t);
    }
    tests = std::move(wanted);
  }
  Context c;
  c.spec = v;
  c.device = device;
  c.batch_size = task.batch_size() > 0 ? task.batch_size() : 128;
  c.seed = spec.seed();
  c.standard = v.level() == "standard";
  c.sampler = config_.sampler;
  c.qpu_memory_limit_bytes = config_.qpu_memory_limit_bytes;
  c.gang = task.gang();
  c.own_host = config_.rendezvous_host;
  // A TPU with a runner: its tests run there (the power sensors here).
  const bool in_runner = device.kind() == v1::DEVICE_KIND_TPU && config_.runner != nullptr && !pair;
  const std::string unreachable = in_runner ? "" : TorchUnreachable(device, config_);
  if (unreachable.empty() && device.kind() == v1::DEVICE_KIND_GPU) {
    c.torch_device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(std::max(CudaIndex(device), 0)));
  }
  control->phase.store(v1::PHASE_VALIDATE);
  control->total_steps.store(static_cast<int64_t>(tests.size()));
  for (size_t i = 0; i < tests.size(); ++i) {
    if (control->cancel.load()) return absl::CancelledError("validation cancelled");
    control->step.store(static_cast<int64_t>(i));
    const std::string& name = tests[i];
    v1::ValidationTest t;
    if (!unreachable.empty() && name != "power_sensor") {
      t = Outcome(v1::TEST_OUTCOME_SKIPPED, unreachable);
      const TestInfo info = InfoOf(name);
      t.set_name(name);
      t.set_unit(info.unit);
      t.set_higher_is_better(info.higher_is_better);
      t.set_time_box_seconds(v.time_box_seconds());
    } else if (in_runner && name != "power_sensor") {
      t = RunnerTest(name, task, spec, device, *config_.runner, control);
    } else {
      t = Boxed(name, c, config_, control->cancel);
    }
    *run->add_tests() = std::move(t);
  }
  control->step.store(static_cast<int64_t>(tests.size()));
  result.mutable_environment()->set_threads(threads);
  return result;
}

}  // namespace hetbench::agent
