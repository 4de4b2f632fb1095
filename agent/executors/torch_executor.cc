#include "agent/executors/torch_executor.h"

#include "agent/devices/accelerators.h"

#include <torch/version.h>

#include <algorithm>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <optional>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "absl/strings/str_format.h"
#include "agent/devices/calibration.h"
#include "agent/executors/torch_threads.h"
#include "agent/distributed/gradient_sync.h"
#include "agent/distributed/stage_link.h"
#include "agent/executors/split_step.h"
#include "common/stats.h"
#include "agent/devices/cuda.h"
#include "agent/executors/layer_profiler.h"
#include "agent/models/models.h"
#include "agent/models/workload.h"
#include "common/job_spec.h"
#include "common/names.h"

namespace hetbench::agent {

namespace {

void AddWindow(v1::TaskResult* result, v1::Phase phase, int64_t start_ns, int64_t end_ns) {
  v1::PhaseWindow* w = result->add_windows();
  w->set_phase(phase);
  w->set_start_ns(start_ns);
  w->set_end_ns(end_ns);
}

// One rank's figures: the step split into all-reduce and the rest.
void RecordDistributed(const GradientSync& sync, const v1::GangAssign& gang, int64_t global_bs,
                       const std::vector<int64_t>& step_ns, const std::vector<int64_t>& comm_ns,
                       const std::vector<torch::Tensor>& params, v1::TaskResult* result) {
  v1::DistributedRun* d = result->mutable_distributed();
  d->set_rank(sync.rank());
  d->set_world_size(sync.world_size());
  d->set_backend(sync.backend());
  d->set_bytes_per_step(sync.bytes_per_step());
  d->set_rendezvous_seconds(sync.rendezvous_seconds());
  d->set_master(absl::StrCat(gang.master_host(), ":", gang.master_port()));
  d->set_global_batch_size(global_bs);
  std::vector<StepSample> comm, compute;
  const int32_t items = static_cast<int32_t>(global_bs / std::max(sync.world_size(), 1));
  for (size_t i = 0; i < step_ns.size() && i < comm_ns.size(); ++i) {
    comm.push_back({0, comm_ns[i], items});
    compute.push_back({0, std::max<int64_t>(step_ns[i] - comm_ns[i], 0), items});
  }
  *d->mutable_allreduce() = ComputeTimingStats(comm);
  *d->mutable_compute() = ComputeTimingStats(compute);
  if (sync.world_size() > 1 && d->allreduce().p50_ns() > 0) {
    d->set_allreduce_gbytes_per_second(static_cast<double>(sync.bytes_per_step()) / d->allreduce().p50_ns());
  }
  double checksum = 0;
  for (const torch::Tensor& p : params) checksum += p.detach().abs().sum().item<double>();
  d->set_parameter_checksum(checksum);
}

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

// Runs `fn`, an exchange with the gang's peers (all-reduce, send, receive);
// when it throws, marks `*failed` (a peer gone or timed out: TorchFailure
// makes that retryable) and rethrows.
template <typename Fn>
auto WithPeers(bool* failed, const Fn& fn) {
  try {
    return fn();
  } catch (...) {
    *failed = true;
    throw;
  }
}

// "agent/device", a gang peer, split at the slash.
std::pair<std::string, std::string> SplitPeer(const std::string& peer) {
  const size_t slash = peer.find('/');
  return {peer.substr(0, slash), slash == std::string::npos ? "" : peer.substr(slash + 1)};
}

// The stages of a split across agents as rank `own` sees them: its own
// device, and for the others the device named in the gang's peers
// ("agent/device") with the kind of the stage's target.
std::vector<v1::Device> SplitGangDevices(const v1::Assign& task, const v1::Device& own) {
  std::vector<v1::Device> devices;
  for (int s = 0; s < task.spec().split().stages_size(); ++s) {
    if (s == task.gang().rank()) {
      devices.push_back(own);
      continue;
    }
    v1::Device d;
    d.set_id(SplitPeer(s < task.gang().peers_size() ? task.gang().peers(s) : "").second);
    d.set_kind(task.spec().split().stages(s).target().device_kind());
    devices.push_back(std::move(d));
  }
  return devices;
}

// The inference phase begins: the test set's batches of `bs` (all of them,
// and those the spec measures), the latter as the task's progress total.
std::pair<int64_t, int64_t> BeginInference(const v1::JobSpec& spec, int64_t n_test, int64_t bs, TaskControl* control) {
  const int64_t all = (n_test + bs - 1) / bs;
  const int64_t max_batches = spec.inference().max_batches();
  const int64_t measured = max_batches > 0 ? std::min(max_batches, all) : all;
  control->phase = v1::PHASE_INFER;
  control->step = 0;
  control->total_steps = measured;
  return {all, measured};
}

absl::StatusOr<v1::TaskResult> InferAcrossAgents(StageLink& link, Workload& w, const ImageDataset& ds, int64_t bs,
                                                 const v1::JobSpec& spec, int64_t task_start_ns,
                                                 TaskControl* control, bool* collective_failed,
                                                 v1::TaskResult result) {
  // Inference through the stages, a batch at a time: rank 0 drives (and
  // times each batch through every stage), the last stage scores, every
  // stage reports the totals that came back. No warm-up batches: the
  // training warmed every stage.
  w.SetTraining(false);
  torch::NoGradGuard no_grad;
  const int64_t n_test = ds.test.size();
  const auto [batches_all, batches] = BeginInference(spec, n_test, bs, control);
  QualityTotals quality;
  StageLink::Totals totals{};
  // The last stage scores its output against batch b of the test set.
  int64_t b = 0;
  const auto score = [&](const torch::Tensor& out) {
    const int64_t lo = b * bs, hi = std::min(lo + bs, n_test);
    w.Score(ds.test.images.slice(0, lo, hi).to(out.device()), ds.test.labels.slice(0, lo, hi).to(out.device()), out,
            &quality);
    return StageLink::Totals{static_cast<double>(quality.correct), static_cast<double>(quality.scored),
                             quality.squared_error, static_cast<double>(quality.error_values)};
  };
  const int64_t infer_start_ns = SteadyNowNs();
  for (;; ++b) {
    const int64_t t0 = SteadyNowNs();
    int64_t rows = 0;
    if (link.first()) {
      if (b >= batches || control->cancel.load(std::memory_order_relaxed)) {
        WithPeers(collective_failed, [&] { link.SendStop(); });
        break;
      }
      const int64_t lo = b * bs, hi = std::min(lo + bs, n_test);
      rows = hi - lo;
      const torch::Tensor x = ds.test.images.slice(0, lo, hi).to(link.plan()[0].device);
      totals = WithPeers(collective_failed, [&] { return link.InferBatch(x, score); });
    } else {
      const StageLink::Message got = WithPeers(collective_failed, [&] { return link.Receive(); });
      if (got == StageLink::Message::kStop) break;
      if (got != StageLink::Message::kInfer || b >= batches_all) {
        return absl::InternalError("split across agents: a training step arrived during inference");
      }
      rows = link.rows();
      totals = WithPeers(collective_failed, [&] { return link.InferBatch(torch::Tensor(), score); });
    }
    const int64_t t1 = SteadyNowNs();
    if (!control->samples.Push({t0 - task_start_ns, t1 - t0, static_cast<int32_t>(rows), v1::PHASE_INFER})) {
      return absl::ResourceExhaustedError(absl::StrCat("sample buffer full at ", control->samples.capacity(),
                                                       " records"));
    }
    control->step = b + 1;
  }
  const int64_t infer_end_ns = SteadyNowNs();
  if (b > 0) AddWindow(&result, v1::PHASE_INFER, infer_start_ns - task_start_ns, infer_end_ns - task_start_ns);
  result.set_evaluate_seconds(static_cast<double>(infer_end_ns - infer_start_ns) * 1e-9);
  QualityTotals passed;  // what the last stage counted, as every stage received it
  passed.correct = static_cast<int64_t>(totals[0]);
  passed.scored = static_cast<int64_t>(totals[1]);
  passed.squared_error = totals[2];
  passed.error_values = static_cast<int64_t>(totals[3]);
  SetQuality(passed, &result);
  result.set_input_note(absl::StrCat(result.input_note(), result.input_note().empty() ? "" : "; ",
                                     "split across agents (stage ", link.rank(), " of ", link.world_size(),
                                     ", rendezvous ", absl::StrFormat("%.2f", link.rendezvous_seconds()),
                                     " s): inference a batch at a time through every stage, scored by the last; "
                                     "no per-layer or FLOP profile"));
  return result;
}

}  // namespace

size_t SampleCapacity(const v1::Assign& task) {
  const v1::JobSpec& spec = task.spec();
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
  const v1::JobSpec& spec = task.spec();
  const int64_t task_start_ns = control->task_start_ns;
  v1::TaskResult result;
  const std::string model = !task.model().empty()      ? task.model()
                            : spec.models_size() > 0 ? spec.models(0)
                                                     : spec.model();

  // GPUs run on cuda:N (N from discovery); everything else on the CPU.
  torch::Device torch_device(torch::kCPU);
  // A GPU, or the simulator's tensor backend hosted on one (its cuda_index).
  if (device.kind() == v1::DEVICE_KIND_GPU || (device.kind() == v1::DEVICE_KIND_QPU_SIM && CudaIndex(device) >= 0)) {
    if (CudaDeviceCount() == 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot run on ", device.id(), ": ", CudaUnavailableReason()));
    }
    torch_device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(std::max(CudaIndex(device), 0)));
  }
  const bool on_cpu = torch_device.is_cpu();

  const int threads = spec.threads() > 0 ? spec.threads() : (config_.threads > 0 ? config_.threads : device.cores());
  const TorchThreads thread_setting(threads);  // process-wide: see torch_threads.h

  double load_seconds = 0;
  auto dataset = Dataset(&load_seconds);
  if (!dataset.ok()) return dataset.status();
  result.set_data_load_seconds(load_seconds);

  bool collective_failed = false;  // set by WithPeers when an exchange with the gang's peers throws
  try {
    // Once per device, outside every timed window: what the device can do.
    if (config_.calibrate && on_cpu) *result.mutable_calibration() = DeviceCalibration();

    const int64_t preprocess_start_ns = SteadyNowNs();
    if (device.kind() == v1::DEVICE_KIND_QPU_SIM && model != "qnn" && model != "qsim") {
      return absl::InvalidArgumentError(absl::StrCat("model \"", model, "\" cannot run on the qpu-sim device ",
                                                     device.id(), "; use qnn (the quantum variant) or qsim"));
    }
    auto made = config_.make_workload ? config_.make_workload(model, spec, **dataset)
                                      : MakeWorkload(model, spec, **dataset, config_.qpu_memory_limit_bytes);
    if (!made.ok()) return made.status();
    Workload& w = **made;
    if (auto s = w.To(torch_device); !s.ok()) return s;
    const ImageDataset& ds = w.Data();
    result.set_dataset_train_size(ds.train.size());
    result.set_dataset_test_size(ds.test.size());
    result.set_input_note(w.InputNote());
    if (w.Qpu().qubits() > 0) *result.mutable_qpu() = w.Qpu();

    v1::RunEnvironment* env = result.mutable_environment();
    const int64_t params = ParameterCount(w.Parameters());
    env->set_torch_version(TORCH_VERSION);
    env->set_blas(DescribeBlas());
    env->set_threads(torch::get_num_threads());
    env->set_threads_note(thread_setting.note());
    env->set_seed(spec.seed());
    env->set_device_model(device.model());
    env->set_hostname(config_.hostname);
    env->set_agent_version(HetbenchVersion());
    env->set_parameter_count(params);
    env->set_architecture_fingerprint(ArchitectureFingerprint(model, w.Parameters()));
    env->set_executor("torch");
    env->set_torch_device(torch_device.str());
    env->set_model_fingerprint(
        absl::StrFormat("%s/params=%d/init=%016x/data=%016x", model, params, w.InitialHash(), ds.content_hash));

    const int64_t bs = task.batch_size();
    const int64_t n_train = ds.train.size();
    // A rank of a data-parallel gang trains on its share of the global
    // batch (rank r takes rows [r bs, (r+1) bs) of it) and averages the
    // gradients with the other ranks before each optimizer step. A rank of
    // a split across agents (a stage) draws the whole batch, as every stage
    // does: the gang's ranks share one permutation.
    const bool gang = task.has_gang();
    const bool split_gang = gang && spec.split().across_agents();
    const int64_t world = gang && !split_gang ? std::max(task.gang().world_size(), 1) : 1;
    const int64_t rank = gang && !split_gang ? task.gang().rank() : 0;
    const int64_t global_bs = bs * world;
    if (w.Trainable() && global_bs > n_train) {
      return absl::InvalidArgumentError(absl::StrCat("batch size ", bs, gang ? absl::StrCat(" x ", world, " ranks") : "",
                                                     " exceeds the training set of ", model, " (", n_train, " rows)"));
    }
    // Per-step records of a split or a gang's rank, reserved before the loop
    // so a measured step never allocates.
    const auto measured_capacity = static_cast<size_t>(std::min<int64_t>(
        std::min(EffectiveMinSteps(spec, static_cast<int>(bs), n_train), spec.train().max_steps()) + 16, 1 << 20));
    // Split execution: the layer stack in stages, each on its device.
    std::vector<SplitStagePlan> split;
    std::vector<StageTimes> split_times;  // measured steps x stages, flat
    std::vector<int64_t> split_step_ns;
    if (task.stage_device_ids_size() > 0) {
      torch::nn::Sequential* layers = w.Layers();
      if (layers == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("split: ", model, " is not one layer stack"));
      }
      std::vector<v1::Device> stage_devices = {device};
      for (const v1::Device& d : control->stage_devices) stage_devices.push_back(d);
      auto plan = PlanSplit(spec.split(), (*layers)->size(), stage_devices);
      if (!plan.ok()) return plan.status();
      split = *std::move(plan);
      for (const SplitStagePlan& p : split) {
        for (int i = p.begin; i < p.end; ++i) (*layers)[i]->to(p.device);  // in place: the optimizer keeps them
      }
      split_times.reserve(measured_capacity * split.size());
      split_step_ns.reserve(measured_capacity);
    }
    std::unique_ptr<StageLink> link;  // a split across agents: this rank's stage
    if (split_gang) {
      torch::nn::Sequential* layers = w.Layers();
      if (layers == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("split: ", model, " is not one layer stack"));
      }
      auto plan = PlanSplit(spec.split(), (*layers)->size(), SplitGangDevices(task, device));
      if (!plan.ok()) return plan.status();
      (*plan)[task.gang().rank()].device = torch_device;
      auto joined = GangGroup::Join(task.gang(), config_.rendezvous_host);
      if (!joined.ok()) return joined.status();
      auto made_link = StageLink::Create(*std::move(joined), *layers, *std::move(plan),
                                         ds.train.images.slice(0, 0, 2).to(torch_device), bs,
                                         task.gang().timeout_seconds());
      if (!made_link.ok()) return made_link.status();
      link = *std::move(made_link);
      if (link->first()) {
        split_times.reserve(measured_capacity * link->plan().size());
        split_step_ns.reserve(measured_capacity);
      }
    }
    std::unique_ptr<GradientSync> sync;
    double vote = 0, voted = 0;
    std::vector<int64_t> step_ns, comm_ns;
    if (gang && !split_gang) {
      auto joined = GradientSync::Join(task.gang(), config_.rendezvous_host);
      if (!joined.ok()) return joined.status();
      sync = *std::move(joined);
      // The parameter list is fixed for the task: taken once, not rebuilt inside every timed step.
      auto hooked = w.SetAfterBackward([params = w.Parameters(), s = sync.get(), &vote, &voted, &collective_failed] {
        voted = WithPeers(&collective_failed, [&] { return s->AllReduce(params, vote); });
      });
      if (!hooked.ok()) return hooked;
      step_ns.reserve(measured_capacity);
      comm_ns.reserve(measured_capacity);
    }
    const int64_t warmup = w.Trainable() ? spec.train().warmup_steps() : 0;
    const int64_t min_steps = EffectiveMinSteps(spec, static_cast<int>(bs), n_train);
    const int64_t max_steps = spec.train().max_steps();
    const auto min_duration_ns = static_cast<int64_t>(spec.train().min_duration_seconds() * 1e9);
    control->samples.Reserve(static_cast<size_t>(std::min(min_steps, max_steps) + (ds.test.size() + bs - 1) / bs));

    // ---- training: warm-up, then measured steps until min steps and min duration
    w.SetTraining(true);
    // Every rank of a gang draws the same permutation from its own generator
    // (seeded by the spec), whatever else ran in the process before.
    c10::optional<at::Generator> shuffle;
    if (gang) shuffle = at::detail::createCPUGenerator(spec.seed());
    auto permutation = [&] {
      return torch::randperm(n_train, shuffle, torch::TensorOptions().dtype(torch::kInt64));
    };
    torch::Tensor perm = permutation();
    bool stop_voted = false;
    // A split step's forward and backward, built once: the loop only points it at the batch.
    torch::Tensor split_x, split_y;
    std::vector<StageTimes> stage_times(split.size());
    const LossFn split_loss = [&w](const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y) {
      return w.Loss(out, x, y);
    };
    const std::function<torch::Tensor()> split_step = [&] {
      if (link) return WithPeers(&collective_failed, [&] { return link->ForwardBackward(split_x, split_y, split_loss); });
      return SplitForwardBackward(*w.Layers(), split, split_x, split_y, split_loss, stage_times.data());
    };
    int64_t pos = 0, steps_total = 0, measured = 0, samples_seen = 0;
    int64_t measure_start_ns = 0, first_step_start_ns = 0, last_step_end_ns = 0;
    torch::Tensor loss;
    control->phase = v1::PHASE_TRAIN;
    control->total_steps = w.Trainable() ? min_steps : 0;
    if (!on_cpu) CudaResetPeakMemory(torch_device.index());
    const int64_t warmup_start_ns = SteadyNowNs();
    result.set_preprocess_seconds(static_cast<double>(warmup_start_ns - preprocess_start_ns) * 1e-9);
    while (w.Trainable()) {
      const bool measuring = steps_total >= warmup;
      // A later stage of a split across agents: its step starts when it
      // waits for the activation (the sample is the pipeline's period).
      int64_t wait_start_ns = 0;
      if (link && !link->first()) {
        if (measuring && measured == 0) measure_start_ns = SteadyNowNs();
        wait_start_ns = SteadyNowNs();
        const StageLink::Message got = WithPeers(&collective_failed, [&] { return link->Receive(); });
        if (got == StageLink::Message::kStop) break;  // rank 0 said the training ended
        if (got != StageLink::Message::kTrain) {
          return absl::InternalError("split across agents: an inference batch arrived during training");
        }
      } else if (!gang || link) {
        bool stop = control->cancel.load(std::memory_order_relaxed);
        if (measuring && !stop) {
          if (measured == 0) measure_start_ns = SteadyNowNs();
          // The duration is the one validity judges: the first measured step's
          // start to the last one's end (the stats' window), not the loop's clock.
          const bool enough = measured >= min_steps && last_step_end_ns - first_step_start_ns >= min_duration_ns;
          stop = enough || measured >= max_steps;
        }
        if (stop) {
          if (link) WithPeers(&collective_failed, [&] { link->SendStop(); });
          break;
        }
      } else {
        // The ranks stop together: each votes in the step's all-reduce
        // whether this is its last step (or it was cancelled), and all
        // stop after a step whose votes sum above 0.
        if (stop_voted) break;
        if (measuring && measured == 0) measure_start_ns = SteadyNowNs();
        const bool last =
            measuring && (measured + 1 >= max_steps ||
                          (measured + 1 >= min_steps &&
                           (measured == 0 ? 0 : last_step_end_ns - first_step_start_ns) >= min_duration_ns));
        vote = last || control->cancel.load(std::memory_order_relaxed) ? 1.0 : 0.0;
      }
      if (pos + global_bs > n_train) {  // next epoch: reshuffle, keep every batch full
        perm = permutation();
        pos = 0;
      }
      torch::Tensor idx = perm.slice(0, pos + rank * bs, pos + rank * bs + bs);
      torch::Tensor x = ds.train.images.index_select(0, idx);
      torch::Tensor y = ds.train.labels.index_select(0, idx);
      pos += global_bs;
      if (!on_cpu) {  // the host-to-device copy is done before the timer starts
        x = x.to(torch_device);
        y = y.to(torch_device);
        SyncDevice(torch_device);
      }

      const int64_t t0 = wait_start_ns > 0 ? wait_start_ns : SteadyNowNs();
      if (split.empty() && !link) {
        loss = w.TrainStep(x, y);
      } else {
        split_x = x, split_y = y;
        loss = w.TrainStepWith(split_step);
      }
      SyncDevice(torch_device);
      const int64_t t1 = SteadyNowNs();
      if (steps_total >= warmup && split_step_ns.size() < split_step_ns.capacity()) {
        const std::vector<StageTimes>& st = link ? link->step_times() : stage_times;
        split_times.insert(split_times.end(), st.begin(), st.end());
        split_step_ns.push_back(t1 - t0);
      }

      ++steps_total;
      samples_seen += bs;
      if (measuring) {
        if (!control->samples.Push({t0 - task_start_ns, t1 - t0, static_cast<int32_t>(bs), v1::PHASE_TRAIN})) {
          return absl::ResourceExhaustedError(
              absl::StrCat("sample buffer full at ", control->samples.capacity(), " records"));
        }
        if (measured == 0) first_step_start_ns = t0;
        last_step_end_ns = t1;
        ++measured;
        control->step = measured;
        if (sync && step_ns.size() < step_ns.capacity()) {
          step_ns.push_back(t1 - t0);
          comm_ns.push_back(sync->last_ns());
        }
      }
      if (sync) stop_voted = voted > 0;
    }
    // A split's stages: on one agent, or across agents where rank 0 holds
    // every stage's figures (the others report their own samples).
    if (!link || link->first()) {
      for (v1::SplitStageResult& r : SummarizeSplit(link ? link->plan() : split, split_times, split_step_ns)) {
        if (link) r.set_agent_id(SplitPeer(task.gang().peers(r.stage())).first);
        *result.add_split() = std::move(r);
      }
    }
    if (sync) RecordDistributed(*sync, task.gang(), global_bs, step_ns, comm_ns, w.Parameters(), &result);
    const int64_t train_end_ns = SteadyNowNs();
    if (measured > 0) {
      AddWindow(&result, v1::PHASE_TRAIN, measure_start_ns - task_start_ns, train_end_ns - task_start_ns);
      result.set_train_seconds(static_cast<double>(train_end_ns - measure_start_ns) * 1e-9);
    }
    const int64_t train_warmup_ns = (measured > 0 ? measure_start_ns : train_end_ns) - warmup_start_ns;
    result.set_train_steps_total(steps_total);
    result.set_epochs_seen(n_train > 0 ? static_cast<double>(samples_seen) / static_cast<double>(n_train) : 0.0);
    if (loss.defined()) result.set_final_train_loss(loss.item<double>());
    if (control->cancel.load()) return result;
    if (link) {
      return InferAcrossAgents(*link, w, ds, bs, spec, task_start_ns, control, &collective_failed, std::move(result));
    }

    // ---- inference over the test set
    w.SetTraining(false);
    torch::NoGradGuard no_grad;
    const int64_t n_test = ds.test.size();
    const auto [batches_all, batches] = BeginInference(spec, n_test, bs, control);
    const int64_t infer_warmup_start_ns = SteadyNowNs();
    for (int i = 0; i < spec.inference().warmup_batches(); ++i) {
      const int64_t lo = (i % batches_all) * bs;
      (void)w.Infer(ds.test.images.slice(0, lo, std::min(lo + bs, n_test)).to(torch_device));
    }
    result.set_warmup_seconds(static_cast<double>(train_warmup_ns + SteadyNowNs() - infer_warmup_start_ns) * 1e-9);
    QualityTotals quality;
    const int64_t infer_start_ns = SteadyNowNs();
    int64_t seen = 0;
    for (int64_t b = 0; b < batches; ++b) {
      if (control->cancel.load(std::memory_order_relaxed)) break;
      const int64_t lo = b * bs, hi = std::min(lo + bs, n_test);
      torch::Tensor x = ds.test.images.slice(0, lo, hi).to(torch_device);
      torch::Tensor y = ds.test.labels.slice(0, lo, hi).to(torch_device);
      SyncDevice(torch_device);
      const int64_t t0 = SteadyNowNs();
      torch::Tensor out = w.Infer(x);
      SyncDevice(torch_device);
      const int64_t t1 = SteadyNowNs();
      if (!control->samples.Push({t0 - task_start_ns, t1 - t0, static_cast<int32_t>(hi - lo), v1::PHASE_INFER})) {
        return absl::ResourceExhaustedError(
            absl::StrCat("sample buffer full at ", control->samples.capacity(), " records"));
      }
      w.Score(x, y, out, &quality);
      seen += hi - lo;
      control->step = b + 1;
    }
    const int64_t infer_end_ns = SteadyNowNs();
    if (!on_cpu) result.set_device_memory_peak_bytes(CudaPeakMemoryBytes(torch_device.index()));
    if (seen > 0) AddWindow(&result, v1::PHASE_INFER, infer_start_ns - task_start_ns, infer_end_ns - task_start_ns);
    result.set_evaluate_seconds(static_cast<double>(infer_end_ns - infer_start_ns) * 1e-9);
    SetQuality(quality, &result);
    if (control->cancel.load()) return result;

    // ---- after the measured phases, so they stay unperturbed: FLOPs, per-layer times
    torch::Tensor probe = ds.test.images.slice(0, 0, std::min<int64_t>(bs, n_test)).to(torch_device);
    const double n_probe = static_cast<double>(probe.size(0));
    result.set_forward_flops_per_sample(CountFlops([&] { (void)w.Infer(probe); }) / n_probe);
    if (w.Trainable()) {
      result.set_train_flops_per_sample(3.0 * CountFlops([&] { w.TrainForwards(probe); }) / n_probe);
    }
    if (spec.layers().enabled()) {
      if (torch::nn::Sequential* layers = w.Layers()) {
        torch::AutoGradMode grad(true);
        control->phase = v1::PHASE_UNSPECIFIED;
        auto timings = ProfileLayers(
            *layers, [&w](const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y) {
              return w.Loss(out, x, y);
            },
            ds.train.images, ds.train.labels, bs, spec.layers().steps(), torch_device,
            LayerEnergyOptions{control->task_start_ns, spec.layers().energy_seconds()});
        for (auto& t : timings) *result.add_layers() = std::move(t);
      } else {
        result.set_input_note(absl::StrCat(result.input_note(), result.input_note().empty() ? "" : "; ",
                                           "per-layer timing: not available for ", model,
                                           " (not a single stack of layers)"));
      }
    }
  } catch (const c10::Error& e) {
    return TorchFailure(task, model, FirstLine(e.what_without_backtrace()), collective_failed);
  } catch (const std::exception& e) {
    return TorchFailure(task, model, FirstLine(e.what()), collective_failed);
  }
  return result;
}

}  // namespace hetbench::agent
