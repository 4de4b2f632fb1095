#pragma once
/// Sends each task to the executor it names (Assign.executor, else the
/// device's default): "torch" (C++ LibTorch, CPU/DPU/GPU), "python" (the
/// external runner, CPU/TPU), "statevector" (the simulator device, run by
/// the torch executor's quantum workloads).

#include <map>
#include <memory>
#include <string>

#include "agent/executors/executor.h"

namespace hetbench::agent {

class RoutingExecutor final : public Executor {
 public:
  /// Registers `executor` under `name`; one executor may serve several names.
  void Add(const std::string& name, std::shared_ptr<Executor> executor);
  absl::StatusOr<v1::TaskResult> Run(const v1::Assign& task, const v1::Device& device, TaskControl* control) override;

 private:
  std::map<std::string, std::shared_ptr<Executor>> executors_;
};

}  // namespace hetbench::agent
