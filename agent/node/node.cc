#include "agent/node/node.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/devices/accelerators.h"
#include "agent/devices/cuda.h"
#include "agent/executors/routing_executor.h"
#include "agent/validation/suite.h"
#include "agent/platform/sysfs_reader.h"
#include "agent/power/sensors.h"
#include "agent/qpu/device.h"
#include "agent/qpu/tensor_backend.h"
#include "common/log.h"
#include "common/names.h"

namespace hetbench::agent {

absl::StatusOr<std::unique_ptr<Node>> Node::Create(NodeOptions options, v1::Device cpu) {
  std::unique_ptr<Node> node(new Node(std::move(options)));
  if (absl::Status s = node->Assemble(std::move(cpu)); !s.ok()) return s;
  return node;
}

namespace {

// The validation suite's settings, and the --validation-fault drill.
ValidationConfig ValidationSetup(const NodeOptions& o, PowerSampler* sampler) {
  ValidationConfig validation;
  validation.threads = o.executor.threads;
  validation.agent_version = HetbenchVersion();
  validation.sampler = sampler;
  validation.qpu_memory_limit_bytes = o.executor.qpu_memory_limit_bytes;
  validation.rendezvous_host = o.agent.rendezvous_host;
  if (!o.validation_fault.empty()) {  // a drill: the operator asked for a broken test
    const std::vector<std::string> fault = absl::StrSplit(o.validation_fault, absl::MaxSplits('=', 1));
    LogWarning("agent", "--validation-fault ", o.validation_fault, ": validation test ", fault[0], " will ",
               fault.size() > 1 ? fault[1] : "fail", " on purpose");
    validation.before_test = [fault](const std::string& test) {
      if (test != fault[0]) return;
      if (fault.size() > 1 && fault[1] == "hang") std::this_thread::sleep_for(std::chrono::seconds(400));
      throw std::runtime_error("wrong result (injected by the agent's --validation-fault)");
    };
  }
  return validation;
}

}  // namespace

absl::Status Node::Assemble(v1::Device cpu) {
  NodeOptions& o = options_;
  if (o.agent.agent_id.empty()) o.agent.agent_id = o.agent.hostname;
  o.executor.hostname = o.agent.hostname;
  o.executor.rendezvous_host = o.agent.rendezvous_host;
  if (o.cost_usd_per_hour > 0) (*cpu.mutable_attributes())["cost_usd_per_hour"] = absl::StrCat(o.cost_usd_per_hour);

  // Every kind is looked for; what is not offered is reported with why.
  const RealSysfsReader root(o.sysfs_root);
  Discovered found;
  ApplyBlueField(DetectBlueField(root, cpu.attributes().contains("cpu_implementer")), &cpu, &found);
  cpu.add_executors("torch");

  if (o.python_runner == "auto") {
    const std::string script = DefaultRunnerScript(o.agent_executable);
    if (!script.empty()) o.runner.command = {"/usr/bin/python3", script};
  } else if (o.python_runner != "off") {
    o.runner.command = absl::StrSplit(o.python_runner, ' ', absl::SkipEmpty());
  }
  v1::RunnerProbe probe;
  if (o.runner.command.empty()) {
    probe.set_error(o.python_runner == "off" ? "off (--python-runner off)" : "torch_runner.py not found");
  } else if (o.runner_probe.has_value()) {
    probe = *o.runner_probe;
  } else {
    probe = PythonExecutor::Probe(o.runner.command, 120);
  }
  auto& cpu_attributes = *cpu.mutable_attributes();
  if (probe.error().empty()) {
    cpu.add_executors("python");
    cpu_attributes["python_runner"] = absl::StrCat("Python ", probe.python(), ", PyTorch ", probe.torch_version());
  } else {
    cpu_attributes["python_runner"] = absl::StrCat("unavailable: ", probe.error());
  }
  LogInfo("agent", "python runner: ", cpu_attributes["python_runner"]);

  devices_ = {cpu};
  Discovered gpus = DiscoverGpus(o.nvml_library, CudaDeviceCount(), CudaUnavailableReason());
  Discovered tpus = DiscoverTpus(root, ProcessEnvironment(), probe, !o.runner.command.empty());
  for (Discovered* d : {&gpus, &tpus}) {
    devices_.insert(devices_.end(), d->devices.begin(), d->devices.end());
    found.absent.insert(found.absent.end(), d->absent.begin(), d->absent.end());
  }
  if (o.qpu_sim) {
    const int64_t limit =
        o.qpu_memory_bytes > 0 ? o.qpu_memory_bytes : std::min<int64_t>(int64_t{8} << 30, cpu.memory_bytes() / 2);
    o.executor.qpu_memory_limit_bytes = limit;
    devices_.push_back(qpu::QpuSimDevice(cpu, limit));
    for (const v1::Device& gpu : gpus.devices) {  // the tensor backend where a CUDA LibTorch reaches the GPU
      const int index = std::max(CudaIndex(gpu), 0);
      auto on_gpu = qpu::QpuSimGpuDevice(
          gpu, qpu::TensorBackendUsable(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index))));
      if (on_gpu.ok()) {
        devices_.push_back(*std::move(on_gpu));
      } else {
        found.Absent(v1::DEVICE_KIND_QPU_SIM, std::string(on_gpu.status().message()));
      }
    }
  } else {
    found.Absent(v1::DEVICE_KIND_QPU_SIM, "the simulator is off (--qpu-sim off)");
  }
  for (const v1::Device& d : devices_) {
    LogInfo("agent", "offering ", d.id(), " (", DeviceKindName(d.kind()), "): ", d.model());
  }
  for (const v1::AbsentDevice& a : found.absent) LogInfo("agent", "no ", DeviceKindName(a.kind()), ": ", a.reason());

  // Power: every sensor source is tried; each device without a measured
  // sensor of its own gets a labelled modeled one.
  PowerDiscoveryConfig power;
  power.sys = std::make_shared<RealSysfsReader>(o.sysfs_root);
  power.proc = std::make_shared<RealSysfsReader>(o.sysfs_root + "/proc");
  power.nvml_library = o.nvml_library;
  power.ipmi_command = o.ipmi_command;
  power.nominal_watts_override = o.nominal_watts;
  SensorDiscovery sensors = DiscoverPowerSensors(power, devices_);
  for (const v1::SensorInfo& t : sensors.tried) {
    LogInfo("agent", "power sensor ", t.name(), ": ", t.available() ? "available: " : "unavailable: ", t.detail());
  }
  o.agent.sensors_tried = sensors.tried;
  o.agent.absent = found.absent;
  AttachSensors(sensors.tried, &devices_);
  sampler_ = std::make_unique<PowerSampler>(std::move(sensors.sensors), o.power_sample_hz);
  sampler_->Start();

  auto executor = std::make_unique<RoutingExecutor>();
  auto torch_executor = std::make_shared<TorchExecutor>(o.executor);
  executor->Add("torch", torch_executor);
  // The state-vector simulator's workloads live in the torch executor's run
  // loop. "qsim" is the name older coordinators send for it.
  executor->Add("statevector", torch_executor);
  executor->Add("qsim", torch_executor);
  ValidationConfig validation = ValidationSetup(o, sampler_.get());
  if (probe.error().empty()) {
    o.runner.data_dir = o.executor.data_dir;
    o.runner.threads = o.executor.threads;
    o.runner.hostname = o.agent.hostname;
    auto runner = std::make_shared<PythonExecutor>(o.runner);
    executor->Add("python", runner);
    validation.runner = runner;  // a TPU's suite runs there (PyTorch/XLA)
  } else {
    validation.runner_absent = probe.error();
  }
  executor->Add("validate", std::make_shared<ValidationExecutor>(std::move(validation)));
  agent_ = std::make_unique<Agent>(o.agent, devices_, std::move(executor), sampler_.get());
  return absl::OkStatus();
}

absl::StatusOr<std::pair<v1::DeviceKind, double>> ParseNominalWatts(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('=', 1));
  auto kind = parts.size() == 2 ? ParseDeviceKind(parts[0]) : std::nullopt;
  double watts = 0;
  if (!kind || !absl::SimpleAtod(parts[1], &watts) || watts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nominal-watts ", text, ": expected kind=watts with a known kind, e.g. cpu=205"));
  }
  return std::make_pair(*kind, watts);
}

absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(const std::string& text) {
  std::vector<std::string> kv = absl::StrSplit(text, absl::MaxSplits('=', 1));
  if (kv.size() != 2 || kv[0].empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--label ", text, ": expected key=value"));
  }
  return std::make_pair(kv[0], kv[1]);
}

}  // namespace hetbench::agent
