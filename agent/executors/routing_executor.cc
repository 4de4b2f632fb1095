#include "agent/executors/routing_executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/validate_spec.h"

namespace hetbench::agent {

void RoutingExecutor::Add(const std::string& name, std::shared_ptr<Executor> executor) {
  executors_[name] = std::move(executor);
}

absl::StatusOr<v1::TaskResult> RoutingExecutor::Run(const v1::Assign& task, const v1::Device& device,
                                                    TaskControl* control) {
  if (IsValidate(task.spec())) {  // the suite, whatever executor the device runs benchmarks with
    auto v = executors_.find("validate");
    if (v == executors_.end()) return absl::FailedPreconditionError("this agent has no validation suite");
    return v->second->Run(task, device, control);
  }
  const std::string name = task.executor().empty() ? DefaultExecutor(device) : task.executor();
  if (device.executors_size() > 0 &&
      std::find(device.executors().begin(), device.executors().end(), name) == device.executors().end()) {
    return absl::FailedPreconditionError(absl::StrCat("device ", device.id(), " does not run the ", name,
                                                      " executor; it runs ", absl::StrJoin(device.executors(), ", ")));
  }
  auto it = executors_.find(name);
  if (it == executors_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("this agent has no ", name, " executor"));
  }
  auto result = it->second->Run(task, device, control);
  if (result.ok() && result->environment().executor().empty()) result->mutable_environment()->set_executor(name);
  return result;
}

}  // namespace hetbench::agent
