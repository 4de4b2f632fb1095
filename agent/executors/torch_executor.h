#pragma once
/// Runs a model of the zoo with LibTorch on the CPU: warm-up, measured
/// training steps, measured inference over the test set, test accuracy.

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "agent/data/fashion_mnist.h"
#include "absl/synchronization/mutex.h"
#include "agent/devices/calibration.h"
#include "agent/executors/executor.h"
#include "agent/models/workload.h"

namespace hetbench::agent {

struct TorchExecutorConfig {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int threads = 0;  // 0 = all cores of the device; a job's `threads` overrides
  std::string hostname;
  /// Calibrate the device (GEMM rate, memory bandwidth) before its first task.
  bool calibrate = true;
  int calibration_gemm_size = 2048;
  /// Time the machine probe (machine_probe.h) around each CPU training or
  /// serving task's run: before training (serving) and after inference
  /// (serving), each reading about 70 ms; a gang's ranks before training
  /// only, in turn.
  bool machine_probe = true;
  /// With machine_probe, on a CPU task that is no serving run and no gang rank:
  /// read the probe between its measured steps too, this often (about 6 ms
  /// a reading; 0: not), so compare can tell which steps were taken in
  /// which state when the machine flipped during the run.
  int machine_probe_every_ms = 250;
  /// What the agent concluded about the math library's kernels at start-up.
  BlasCheck blas;
  /// Largest state the quantum models may allocate.
  int64_t qpu_memory_limit_bytes = int64_t{8} << 30;
  /// This agent's address for a gang's collectives (AgentConfig.rendezvous_host).
  std::string rendezvous_host = "127.0.0.1";
  /// Builds the workload of a task; MakeWorkload when empty (benches inject others).
  std::function<absl::StatusOr<std::unique_ptr<Workload>>(const std::string&, const v1::JobSpec&,
                                                          const ImageDataset&)>
      make_workload;
};

class TorchExecutor final : public Executor {
 public:
  explicit TorchExecutor(TorchExecutorConfig config) : config_(std::move(config)) {}
  absl::StatusOr<v1::TaskResult> Run(const v1::Assign& task, const v1::Device& device, TaskControl* control) override;

 private:
  /// Loads the dataset once per executor; later tasks reuse it (load time 0).
  /// Tasks on two devices of the agent may ask at once: the first loads,
  /// the other waits. The dataset is immutable once loaded.
  absl::StatusOr<const ImageDataset*> Dataset(double* load_seconds) ABSL_LOCKS_EXCLUDED(lazy_mu_);

  /// Calibrates once; later tasks reuse the figures (a copy, under the lock).
  v1::Calibration DeviceCalibration() ABSL_LOCKS_EXCLUDED(lazy_mu_);

  const TorchExecutorConfig config_;
  absl::Mutex lazy_mu_;
  std::unique_ptr<ImageDataset> dataset_ ABSL_GUARDED_BY(lazy_mu_);
  std::unique_ptr<v1::Calibration> calibration_ ABSL_GUARDED_BY(lazy_mu_);
};


}  // namespace hetbench::agent
