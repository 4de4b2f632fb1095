#include "agent/executors/torch_executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/data/fashion_mnist.h"
#include "agent/devices/calibration.h"
#include "agent/executors/machine_probe.h"
#include "agent/executors/torch_run.h"
#include "agent/executors/torch_threads.h"
#include "common/log.h"
#include "common/names.h"
#include "common/serving_spec.h"

namespace hetbench::agent {

namespace {

// A LibTorch error. One thrown by the gang's all-reduce means a peer is gone
// or timed out: retryable, so the coordinator runs the gang again. Any other
// (a shape error, out of memory) is the task's own, as without a gang.
absl::Status TorchFailure(const v1::Assign& task, const std::string& model, const std::string& what,
                          bool collective_failed) {
  if (collective_failed) {
    return absl::UnavailableError(absl::StrCat("gang ", task.gang().gang_id(), " rank ", task.gang().rank(),
                                               ": a collective failed (peer gone or timed out): ", what));
  }
  return absl::InternalError(absl::StrCat("LibTorch (", model, "): ", what));
}

}  // namespace

size_t SampleCapacity(const v1::Assign& task) {
  const v1::JobSpec& spec = task.spec();
  if (IsServing(spec)) {
    const double qps = task.target_qps() > 0 ? task.target_qps() : spec.serving().target_qps();
    const int64_t per_query = IsGenerative(spec) ? 3 : 1;  // the decoder: SERVE, TTFT, TPOT per request
    return static_cast<size_t>(ServingQueryCapacity(spec, qps) * per_query + 16);
  }
  const int64_t bs = std::max(task.batch_size(), 1);
  const int64_t test_rows = std::max<int64_t>(kFashionMnistTestSize, spec.qpu().circuits());
  const int64_t test_batches = (test_rows + bs - 1) / bs;
  return static_cast<size_t>(spec.train().max_steps() + test_batches + 16);
}

absl::StatusOr<const ImageDataset*> TorchExecutor::Dataset(double* load_seconds) {
  absl::MutexLock l(&lazy_mu_);  // a second task waits for the first load rather than loading again
  *load_seconds = 0;
  if (!dataset_) {
    auto ds = LoadFashionMnist(config_.data_dir);
    if (!ds.ok()) return ds.status();
    dataset_ = std::make_unique<ImageDataset>(*std::move(ds));
    *load_seconds = dataset_->load_seconds;
  }
  return dataset_.get();
}

v1::Calibration TorchExecutor::DeviceCalibration() {
  absl::MutexLock l(&lazy_mu_);
  if (!calibration_) {
    calibration_ = std::make_unique<v1::Calibration>(Calibrate(config_.blas, config_.calibration_gemm_size));
  }
  return *calibration_;
}

absl::StatusOr<v1::TaskResult> TorchExecutor::Run(const v1::Assign& task, const v1::Device& device,
                                                  TaskControl* control) {
  TorchRun run(config_, task, device, control);
  if (auto s = run.SelectDevice(); !s.ok()) return s;
  const TorchThreads thread_setting(run.threads());  // process-wide: see torch_threads.h
  const bool serving = IsServing(task.spec());
  // The machine's state around the run, outside its timed windows, on a
  // CPU task. A gang's ranks read it before training only, one rank after
  // another (TorchRun::InTurn: ranks may share a host); after inference a
  // rank cancelled early would leave the others waiting at the turn. Not a
  // replicated server's replicas: they meet only inside the serving run.
  const bool probe = config_.machine_probe && run.on_cpu() && !(serving && task.has_gang());
  auto probe_before = [&] {
    if (!probe) return;
    const ProbeWindow before = TimeProbe();
    v1::MachineProbe* p = run.result().mutable_machine_probe();
    p->set_kernel(ProbeKernel(thread_setting.threads()));
    p->set_before_ns(before.median_ns);
    p->set_calls(before.calls);
  };
  auto probe_after = [&] {
    if (probe && !task.has_gang() && !control->cancel.load()) {
      run.result().mutable_machine_probe()->set_after_ns(TimeProbe().median_ns);
    }
  };
  if (serving && IsServingOnlyModel(run.model())) {  // no dataset: the harness alone, or the decoder
    try {
      if (run.model() == kDecoderModel && config_.calibrate && run.on_cpu()) {
        *run.result().mutable_calibration() = DeviceCalibration();
      }
      probe_before();
      if (auto s = run.Serve(); !s.ok()) return s;
      probe_after();
    } catch (const c10::Error& e) {
      return TorchFailure(task, run.model(), FirstLine(e.what_without_backtrace()), false);
    } catch (const std::exception& e) {
      return TorchFailure(task, run.model(), FirstLine(e.what()), false);
    }
    return std::move(run.result());
  }

  double load_seconds = 0;
  auto dataset = Dataset(&load_seconds);
  if (!dataset.ok()) return dataset.status();
  v1::TaskResult& result = run.result();
  result.set_data_load_seconds(load_seconds);
  try {
    // Once per device, outside every timed window: what the device can do.
    if (config_.calibrate && run.on_cpu()) *result.mutable_calibration() = DeviceCalibration();
    if (auto s = run.BuildWorkload(**dataset, thread_setting.note()); !s.ok()) return s;
    if (serving) {
      probe_before();
      if (auto s = run.Serve(); !s.ok()) return s;
      probe_after();
      return result;
    }
    // A gang rank cancelled while it loaded (fenced: its gang was retried as
    // a whole) must not reach the rendezvous: the gang's store port is the
    // same for every attempt, so a stale rank would join the next attempt's
    // gang in place of the rank waiting for this device (seen in e2e.gang
    // under load). It ends with nothing measured.
    if (task.has_gang() && control->cancel.load()) return result;
    if (auto s = run.SetUpParallel(); !s.ok()) return s;
    // Every rank of a gang takes its turn, probing or not (a GPU rank of a
    // split has nothing to read): a barrier needs all ranks.
    std::unique_ptr<ProbeDuringRun> during;
    if (task.has_gang()) {
      run.InTurn(probe_before);
    } else {
      probe_before();
      if (probe && config_.machine_probe_every_ms > 0) {
        during = std::make_unique<ProbeDuringRun>(int64_t{config_.machine_probe_every_ms} * 1'000'000,
                                                  control->task_start_ns, result.mutable_machine_probe());
        run.ProbeDuring(during.get());
      }
    }
    if (auto s = run.Train(); !s.ok()) return s;
    if (control->cancel.load()) return result;
    if (auto s = run.Infer(); !s.ok()) return s;
    probe_after();
    if (!run.profiles() || control->cancel.load()) return result;
    run.ProfileAfter();
  } catch (const c10::Error& e) {
    return TorchFailure(task, run.model(), FirstLine(e.what_without_backtrace()), run.collective_failed());
  } catch (const std::exception& e) {
    return TorchFailure(task, run.model(), FirstLine(e.what()), run.collective_failed());
  }
  return result;
}

}  // namespace hetbench::agent
