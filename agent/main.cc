// hetbench-agent: flags into NodeOptions, the BLAS kernels settled, then a
// Node (agent/node) runs until SIGTERM/SIGINT.
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <iostream>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/devices/calibration.h"
#include "agent/devices/cpu_discovery.h"
#include "agent/node/blas_settle.h"
#include "agent/node/node.h"
#include "agent/platform/malloc_arenas.h"
#include "common/log.h"
#include "common/names.h"
#include "common/security.h"
#include "common/validate_spec.h"

namespace {

namespace ag = hetbench::agent;

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// What the flags set beyond NodeOptions, before it is complete.
struct Flags {
  ag::NodeOptions node;
  std::vector<std::string> labels;
  std::string blas_mode = "auto";
  std::vector<std::string> nominal;
  std::string qpu_sim = "on";
  int64_t qpu_memory_mib = 0;
  bool calibrate_only = false;
  std::string calibration = "on";
  hetbench::ClientSecurity security;
};

// Every flag, with its default, range and environment variable.
void AddFlags(CLI::App& app, Flags& f) {
  app.set_version_flag("--version", hetbench::HetbenchVersion());
  app.add_option("--server", f.node.agent.server_address,
                 "coordinator address (host:port), or a comma-separated list of a leader and its standbys")
      ->envname("HETBENCH_SERVER")
      ->capture_default_str();
  app.add_option("--agent-id", f.node.agent.agent_id, "unique id of this agent (default: hostname)");
  app.add_option("--rendezvous-host", f.node.agent.rendezvous_host,
                 "address other agents reach this one at, for the TCPStore of a data-parallel gang whose rank 0 "
                 "runs here (multi-node gangs need a routable address)")
      ->capture_default_str();
  app.add_option("--rendezvous-port-base", f.node.agent.rendezvous_port_base,
                 "first TCPStore port; device i of this agent uses base + i")
      ->capture_default_str()
      ->check(CLI::Range(1024, 65000));
  app.add_option("--label", f.labels, "label key=value a job's targets can select on (repeatable)");
  app.add_option("--threads", f.node.executor.threads, "LibTorch threads (0 = all usable cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--data-dir", f.node.executor.data_dir, "Fashion-MNIST directory (dataset-fashion-mnist)")
      ->capture_default_str();
  app.add_option("--blas-coretype", f.blas_mode, "auto: fix OpenBLAS's generic-kernel fallback; keep: leave it")
      ->check(CLI::IsMember({"auto", "keep"}))
      ->capture_default_str();
  app.add_option("--qpu-sim", f.qpu_sim, "offer the state-vector simulator as a qpu-sim device (runs qnn and qsim)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--qpu-memory-mib", f.qpu_memory_mib,
                 "largest simulator state (default: half the memory, at most 8 GiB)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_flag("--calibrate", f.calibrate_only,
               "settle the BLAS kernels, measure the CPU (GEMM rate, memory bandwidth), print JSON and exit");
  app.add_option("--calibration", f.calibration, "calibrate each device before its first task")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--calibration-gemm-size", f.node.executor.calibration_gemm_size, "n of the n^3 SGEMM of calibration")
      ->capture_default_str()
      ->check(CLI::Range(64, 16384));
  app.add_option("--power-sample-hz", f.node.power_sample_hz, "power sampler rate")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 1000.0));
  app.add_option("--nominal-watts", f.nominal,
                 "kind=W for the modeled power of a device kind without a sensor (repeatable), e.g. cpu=205");
  app.add_option("--cost-usd-per-hour", f.node.cost_usd_per_hour, "what this node's devices cost per hour")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--ipmi-command", f.node.ipmi_command,
                 "command printing a DCMI power reading, e.g. 'ipmitool dcmi power reading'");
  app.add_option("--nvml-library", f.node.nvml_library, "NVML library to load at run time")->capture_default_str();
  app.add_option("--sysfs-root", f.node.sysfs_root, "prefix for /sys, /proc and /dev paths (tests)");
  app.add_option("--validation-fault", f.node.validation_fault,
                 "drills and tests: TEST=fail (that validation test reports a wrong result) or TEST=hang")
      ->check([](const std::string& v) -> std::string {
        const auto eq = v.find('=');
        const std::string test = v.substr(0, eq), what = eq == std::string::npos ? "fail" : v.substr(eq + 1);
        const auto& known = hetbench::KnownValidationTests();
        if (std::find(known.begin(), known.end(), test) == known.end()) return "unknown validation test " + test;
        return what == "fail" || what == "hang" ? "" : "give TEST=fail or TEST=hang";
      });
  app.add_option("--python-runner", f.node.python_runner,
                 "the PyTorch runner: auto (/usr/bin/python3 with agent/runners/torch_runner.py), off, or a "
                 "command, e.g. '/opt/venv/bin/python /opt/hetbench/torch_runner.py' (TPU VMs: a Python with "
                 "torch_xla)")
      ->capture_default_str();
  app.add_option("--runner-deadline-seconds", f.node.runner.deadline_seconds,
                 "a runner task running longer is killed and fails")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
  app.add_option("--tls-ca", f.security.tls_ca, "the coordinator's CA (PEM): use TLS")->envname("HETBENCH_TLS_CA");
  app.add_option("--tls-cert", f.security.tls_cert, "this agent's client certificate (PEM) for mutual TLS")
      ->envname("HETBENCH_TLS_CERT");
  app.add_option("--tls-key", f.security.tls_key, "its private key (PEM)")->envname("HETBENCH_TLS_KEY");
  app.add_option("--token-file", f.security.token_file, "file holding this agent's bearer token (role agent)")
      ->envname("HETBENCH_TOKEN_FILE");
}

// The flags that need parsing into NodeOptions: security, labels, nominal watts.
absl::Status Complete(Flags& f, const char* argv0) {
  auto credentials = hetbench::MakeChannelCredentials(f.security);
  if (!credentials.ok()) return credentials.status();
  auto token = hetbench::LoadCallerToken(f.security.token_file);
  if (!token.ok()) return token.status();
  ag::AgentConfig& config = f.node.agent;
  config.credentials = *credentials;
  config.token = *token;
  for (const std::string& l : f.labels) {
    auto kv = ag::ParseLabel(l);
    if (!kv.ok()) return kv.status();
    config.labels[kv->first] = kv->second;
  }
  for (const std::string& n : f.nominal) {
    auto kw = ag::ParseNominalWatts(n);
    if (!kw.ok()) return kw.status();
    f.node.nominal_watts[kw->first] = kw->second;
  }
  f.node.qpu_sim = f.qpu_sim == "on";
  f.node.qpu_memory_bytes = f.qpu_memory_mib << 20;
  f.node.agent_executable = argv0;
  f.node.executor.calibrate = f.calibration == "on";
  return absl::OkStatus();
}

// --calibrate: the CPU's calibration as JSON on stdout.
int PrintCalibration(const ag::TorchExecutorConfig& exec_config, const ag::BlasCheck& blas, int cores) {
  torch::set_num_threads(exec_config.threads > 0 ? exec_config.threads : std::max(cores, 1));
  const hetbench::v1::Calibration cal = ag::Calibrate(blas, exec_config.calibration_gemm_size);
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(cal, &json, opts);
  std::cout << json << "\n";
  return 0;
}

// Runs the node until SIGTERM or SIGINT.
int RunUntilSignal(ag::NodeOptions node, hetbench::v1::Device cpu) {
  // SIGTERM/SIGINT go to one waiting thread, blocked in every other (the
  // node's threads inherit the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto built = ag::Node::Create(std::move(node), std::move(cpu));
  if (!built.ok()) {
    std::cerr << "hetbench-agent: " << built.status().message() << "\n";
    return 1;
  }
  ag::Node& agent = **built;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    hetbench::LogInfo("agent", "signal ", sig, ": shutting down");
    agent.Shutdown();
  });
  agent.Run();
  signal_thread.detach();  // Run returned: either a signal arrived or we are exiting anyway
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // First: may start the agent again with its malloc settings (agent/platform/malloc_arenas.h).
  const std::string malloc_note = hetbench::agent::SetAgentMalloc(argv);
  Flags f;
  f.node.agent.hostname = Hostname();
  CLI::App app{"hetbench-agent: runs benchmark tasks on this node's devices"};
  AddFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  // Debian's Abseil keeps its debug default, a lock-order graph updated on
  // every mutex acquisition; the test binaries keep it on (server/main.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (absl::Status s = Complete(f, argv[0]); !s.ok()) {
    std::cerr << "hetbench-agent: " << s.message() << "\n";
    return 2;
  }
  // NVML and CUDA number GPUs alike only in PCI bus order.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  auto cpu = ag::DiscoverCpu(f.node.sysfs_root + "/proc", ag::AffinityCores());
  if (!cpu.ok()) {
    std::cerr << "hetbench-agent: CPU discovery failed: " << cpu.status().message() << "\n";
    return 1;
  }
  const ag::BlasCheck blas = ag::SettleOpenBlasKernel(f.blas_mode, *cpu, argv);
  hetbench::LogInfo("agent", "cpu0: ", cpu->model(), ", ", cpu->cores(), " cores, ", cpu->memory_bytes() >> 20,
                    " MiB; BLAS: ", ag::DescribeBlas(), "; ", blas.text, "; ", malloc_note);
  f.node.executor.blas = blas;
  (*cpu->mutable_attributes())["blas"] = ag::DescribeBlas();
  (*cpu->mutable_attributes())["blas_check"] = blas.text;
  if (f.calibrate_only) return PrintCalibration(f.node.executor, blas, cpu->cores());
  return RunUntilSignal(std::move(f.node), *std::move(cpu));
}
