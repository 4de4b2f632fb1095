#include "agent/executors/torch_run.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/devices/accelerators.h"
#include "agent/devices/calibration.h"
#include "agent/devices/cuda.h"
#include "agent/executors/layer_profiler.h"
#include "agent/models/global_generator.h"
#include "agent/models/models.h"
#include "agent/platform/malloc_arenas.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/names.h"
#include "common/serving_spec.h"
#include "common/stats.h"

namespace hetbench::agent {

namespace {

void AddWindow(v1::TaskResult* result, v1::Phase phase, int64_t start_ns, int64_t end_ns) {
  v1::PhaseWindow* w = result->add_windows();
  w->set_phase(phase);
  w->set_start_ns(start_ns);
  w->set_end_ns(end_ns);
}

// One rank's figures: the step split into all-reduce and the rest.
void RecordParallel(const GradientSync& sync, const v1::GangAssign& gang, int64_t global_bs,
                       const std::vector<int64_t>& step_ns, const std::vector<int64_t>& comm_ns,
                       const std::vector<torch::Tensor>& params, v1::TaskResult* result) {
  v1::ParallelRun* d = result->mutable_parallel();
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

// The training batches in order: a permutation of the training set drawn each epoch (every batch full) from
// the task's own generator, seeded by the spec (every rank of a gang draws the same); this rank's slice of each
// global batch, on the device, copied before the step's timer starts.
class TrainBatches {
 public:
  TrainBatches(const ImageDataset& ds, int64_t batch, int64_t world, int64_t rank, const torch::Device& device,
               uint64_t seed)
      : ds_(ds), batch_(batch), global_(batch * world), rank_(rank), device_(device) {
    shuffle_ = at::detail::createCPUGenerator(seed);
    perm_ = Permutation();
  }
  // The next batch's images and labels.
  void Next(torch::Tensor& x, torch::Tensor& y) {
    if (pos_ + global_ > ds_.train.size()) {
      perm_ = Permutation();
      pos_ = 0;
    }
    const torch::Tensor idx = perm_.slice(0, pos_ + rank_ * batch_, pos_ + rank_ * batch_ + batch_);
    x = ds_.train.images.index_select(0, idx);
    y = ds_.train.labels.index_select(0, idx);
    pos_ += global_;
    if (!device_.is_cpu()) {
      x = x.to(device_);
      y = y.to(device_);
      SyncDevice(device_);
    }
  }

 private:
  torch::Tensor Permutation() {
    return torch::randperm(ds_.train.size(), shuffle_, torch::TensorOptions().dtype(torch::kInt64));
  }
  const ImageDataset& ds_;
  const int64_t batch_, global_, rank_;
  const torch::Device device_;
  at::Generator shuffle_;
  torch::Tensor perm_;
  int64_t pos_ = 0;
};

std::string ModelOf(const v1::Assign& task) {
  const v1::JobSpec& spec = task.spec();
  return !task.model().empty() ? task.model() : spec.models_size() > 0 ? spec.models(0) : spec.model();
}

}  // namespace

TorchRun::TorchRun(const TorchExecutorConfig& config, const v1::Assign& task, const v1::Device& device,
                   TaskControl* control)
    : config_(config),
      task_(task),
      spec_(task.spec()),
      device_(device),
      control_(control),
      model_(ModelOf(task)),
      bs_(task.batch_size()) {}

absl::Status TorchRun::SelectDevice() {
  // A GPU, or the simulator's tensor backend hosted on one (its cuda_index).
  if (device_.kind() == v1::DEVICE_KIND_GPU ||
      (device_.kind() == v1::DEVICE_KIND_QPU_SIM && CudaIndex(device_) >= 0)) {
    if (CudaDeviceCount() == 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot run on ", device_.id(), ": ", CudaUnavailableReason()));
    }
    torch_device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(std::max(CudaIndex(device_), 0)));
  }
  return absl::OkStatus();
}

int TorchRun::threads() const {
  return spec_.threads() > 0 ? spec_.threads() : (config_.threads > 0 ? config_.threads : device_.cores());
}

absl::Status TorchRun::Record(v1::Phase phase, int64_t t0, int64_t t1, int64_t items) {
  if (!control_->samples.Push({t0 - control_->task_start_ns, t1 - t0, static_cast<int32_t>(items), phase})) {
    return absl::ResourceExhaustedError(absl::StrCat("sample buffer full at ", control_->samples.capacity(),
                                                     " records"));
  }
  return absl::OkStatus();
}

absl::Status TorchRun::BuildWorkload(const ImageDataset& dataset, const std::string& threads_note) {
  preprocess_start_ns_ = SteadyNowNs();
  if (device_.kind() == v1::DEVICE_KIND_QPU_SIM && model_ != "qnn" && model_ != "qsim") {
    return absl::InvalidArgumentError(absl::StrCat("model \"", model_, "\" cannot run on the qpu-sim device ",
                                                   device_.id(), "; use qnn (the quantum variant) or qsim"));
  }
  auto made = config_.make_workload ? config_.make_workload(model_, spec_, dataset)
                                    : MakeWorkload(model_, spec_, dataset, config_.qpu_memory_limit_bytes);
  if (!made.ok()) return made.status();
  workload_ = *std::move(made);
  Workload& w = *workload_;
  if (auto s = w.To(torch_device_); !s.ok()) return s;
  ds_ = &w.Data();
  result_.set_dataset_train_size(ds_->train.size());
  result_.set_dataset_test_size(ds_->test.size());
  result_.set_input_note(w.InputNote());
  if (w.Qpu().qubits() > 0) *result_.mutable_qpu() = w.Qpu();

  v1::RunEnvironment* env = result_.mutable_environment();
  const int64_t params = ParameterCount(w.Parameters());
  env->set_torch_version(TORCH_VERSION);
  env->set_blas(DescribeBlas());
  env->set_threads(torch::get_num_threads());
  env->set_threads_note(threads_note);
  env->set_malloc(AgentMallocNote());
  env->set_seed(spec_.seed());
  env->set_device_model(device_.model());
  env->set_hostname(config_.hostname);
  env->set_agent_version(HetbenchVersion());
  env->set_parameter_count(params);
  env->set_architecture_fingerprint(ArchitectureFingerprint(model_, w.Parameters()));
  env->set_executor("torch");
  env->set_torch_device(torch_device_.str());
  env->set_model_fingerprint(
      absl::StrFormat("%s/params=%d/init=%016x/data=%016x", model_, params, w.InitialHash(), ds_->content_hash));
  return absl::OkStatus();
}

absl::Status TorchRun::SetUpParallel() {
  Workload& w = *workload_;
  const int64_t n_train = ds_->train.size();
  // A rank of a data-parallel gang trains on its share of the global batch
  // (rank r takes rows [r bs, (r+1) bs) of it) and averages the gradients
  // with the other ranks before each optimizer step. A rank of a split
  // across agents (a stage) draws the whole batch, as every stage does: the
  // gang's ranks share one permutation.
  gang_ = task_.has_gang();
  split_gang_ = gang_ && spec_.split().across_agents();
  world_ = gang_ && !split_gang_ ? std::max(task_.gang().world_size(), 1) : 1;
  rank_ = gang_ && !split_gang_ ? task_.gang().rank() : 0;
  if (w.Trainable() && bs_ * world_ > n_train) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", bs_,
                                                   gang_ ? absl::StrCat(" x ", world_, " ranks") : "",
                                                   " exceeds the training set of ", model_, " (", n_train, " rows)"));
  }
  // The training's bounds, once for the task.
  min_steps_ = EffectiveMinSteps(spec_, static_cast<int>(bs_), n_train);
  max_steps_ = spec_.train().max_steps();
  min_duration_ns_ = static_cast<int64_t>(spec_.train().min_duration_seconds() * 1e9);
  result_.set_min_train_steps(w.Trainable() ? std::min(min_steps_, max_steps_) : 0);  // the coordinator judges by it
  // Per-step records of a split or a gang's rank, reserved before the loop
  // so a measured step never allocates.
  measured_capacity_ = static_cast<size_t>(std::min<int64_t>(std::min(min_steps_, max_steps_) + 16, 1 << 20));
  if (task_.stage_device_ids_size() > 0) {  // split execution on this agent: each stage on its device
    torch::nn::Sequential* layers = w.Layers();
    if (layers == nullptr) return absl::InvalidArgumentError(absl::StrCat("split: ", model_, " is not one layer stack"));
    std::vector<v1::Device> stage_devices = {device_};
    for (const v1::Device& d : control_->stage_devices) stage_devices.push_back(d);
    auto plan = PlanSplit(spec_.split(), (*layers)->size(), stage_devices);
    if (!plan.ok()) return plan.status();
    split_ = *std::move(plan);
    for (const SplitStagePlan& p : split_) {
      for (int i = p.begin; i < p.end; ++i) (*layers)[i]->to(p.device);  // in place: the optimizer keeps them
    }
    split_times_.reserve(measured_capacity_ * split_.size());
    split_step_ns_.reserve(measured_capacity_);
  }
  if (split_gang_) {  // a split across agents: this rank's stage
    torch::nn::Sequential* layers = w.Layers();
    if (layers == nullptr) return absl::InvalidArgumentError(absl::StrCat("split: ", model_, " is not one layer stack"));
    auto plan = PlanSplit(spec_.split(), (*layers)->size(), SplitGangDevices(task_, device_));
    if (!plan.ok()) return plan.status();
    (*plan)[task_.gang().rank()].device = torch_device_;
    auto joined = GangGroup::Join(task_.gang(), config_.rendezvous_host);
    if (!joined.ok()) return joined.status();
    // Create probes the links: a peer gone or silent there fails like one in a step.
    auto made_link = WithPeers(&collective_failed_, [&] {
      return StageLink::Create(*std::move(joined), *layers, *std::move(plan),
                               ds_->train.images.slice(0, 0, 2).to(torch_device_), bs_,
                               task_.gang().timeout_seconds());
    });
    if (!made_link.ok()) return made_link.status();
    link_ = *std::move(made_link);
    if (link_->first()) {
      split_times_.reserve(measured_capacity_ * link_->plan().size());
      split_step_ns_.reserve(measured_capacity_);
    }
  }
  if (gang_ && !split_gang_) {  // a data-parallel rank
    auto joined = GradientSync::Join(task_.gang(), config_.rendezvous_host);
    if (!joined.ok()) return joined.status();
    sync_ = *std::move(joined);
    // The parameter list is fixed for the task: taken once, not rebuilt inside every timed step.
    auto hooked = w.SetAfterBackward([this, params = w.Parameters()] {
      voted_ = WithPeers(&collective_failed_, [&] { return sync_->AllReduce(params, vote_); });
    });
    if (!hooked.ok()) return hooked;
    step_ns_.reserve(measured_capacity_);
    comm_ns_.reserve(measured_capacity_);
  }
  return absl::OkStatus();
}

void TorchRun::InTurn(const std::function<void()>& fn) {
  GangGroup* gang = sync_ ? &sync_->gang() : link_ ? &link_->gang() : nullptr;
  if (gang == nullptr) return fn();
  WithPeers(&collective_failed_, [&] { gang->InTurn(fn); });
}

absl::StatusOr<TorchRun::Next> TorchRun::BeforeStep(bool measuring, int64_t* wait_start_ns) {
  const int64_t min_steps = min_steps_, max_steps = max_steps_, min_duration_ns = min_duration_ns_;
  if (link_ && !link_->first()) {
    // A later stage of a split across agents: its step starts when it waits
    // for the activation (the sample is the pipeline's period).
    if (measuring && measured_ == 0) measure_start_ns_ = SteadyNowNs();
    *wait_start_ns = SteadyNowNs();
    const StageLink::Message got = WithPeers(&collective_failed_, [&] { return link_->Receive(); });
    if (got == StageLink::Message::kStop) return Next::kStop;  // rank 0 said the training ended
    if (got != StageLink::Message::kTrain) {
      return absl::InternalError("split across agents: an inference batch arrived during training");
    }
    return Next::kStep;
  }
  if (!gang_ || link_) {
    bool stop = control_->cancel.load(std::memory_order_relaxed);
    if (measuring && !stop) {
      if (measured_ == 0) measure_start_ns_ = SteadyNowNs();
      // The duration is the one validity judges: the first measured step's
      // start to the last one's end (the stats' window), not the loop's clock.
      const bool enough = measured_ >= min_steps && last_step_end_ns_ - first_step_start_ns_ >= min_duration_ns;
      stop = enough || measured_ >= max_steps;
    }
    if (stop) {
      if (link_) WithPeers(&collective_failed_, [&] { link_->SendStop(); });
      return Next::kStop;
    }
    return Next::kStep;
  }
  // A data-parallel rank: the ranks stop together. Each votes in the step's
  // all-reduce whether this is its last step (or it was cancelled), and all
  // stop after a step whose votes sum above 0.
  if (stop_voted_) return Next::kStop;
  if (measuring && measured_ == 0) measure_start_ns_ = SteadyNowNs();
  const bool last = measuring && (measured_ + 1 >= max_steps ||
                                  (measured_ + 1 >= min_steps &&
                                   (measured_ == 0 ? 0 : last_step_end_ns_ - first_step_start_ns_) >= min_duration_ns));
  vote_ = last || control_->cancel.load(std::memory_order_relaxed) ? 1.0 : 0.0;
  return Next::kStep;
}

absl::Status TorchRun::Train() {
  Workload& w = *workload_;
  const ImageDataset& ds = *ds_;
  const int64_t n_train = ds.train.size();
  const int64_t global_bs = bs_ * world_;
  const int64_t warmup = w.Trainable() ? spec_.train().warmup_steps() : 0;
  const int64_t min_steps = min_steps_;
  control_->samples.Reserve(static_cast<size_t>(std::min(min_steps, max_steps_) + (ds.test.size() + bs_ - 1) / bs_));

  w.SetTraining(true);
  TrainBatches batches(ds, bs_, world_, rank_, torch_device_, spec_.seed());
  // A split step's forward and backward, built once: the loop only points it at the batch.
  torch::Tensor split_x, split_y;
  std::vector<StageTimes> stage_times(split_.size());
  const LossFn split_loss = [&w](const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y) {
    return w.Loss(out, x, y);
  };
  const std::function<torch::Tensor()> split_step = [&] {
    if (link_) {
      return WithPeers(&collective_failed_, [&] { return link_->ForwardBackward(split_x, split_y, split_loss); });
    }
    return SplitForwardBackward(*w.Layers(), split_, split_x, split_y, split_loss, stage_times.data());
  };
  int64_t steps_total = 0, samples_seen = 0;
  torch::Tensor loss;
  control_->phase = v1::PHASE_TRAIN;
  control_->total_steps = w.Trainable() ? min_steps : 0;
  if (!on_cpu()) CudaResetPeakMemory(torch_device_.index());
  const int64_t warmup_start_ns = SteadyNowNs();
  result_.set_preprocess_seconds(static_cast<double>(warmup_start_ns - preprocess_start_ns_) * 1e-9);
  // A later stage of a split across agents draws its batch before it waits
  // for the activation and clears its gradients after its optimizer step, so
  // that neither lies between the activation's arrival and its forward (rank
  // 0 draws its batch before its timer starts).
  const bool later_stage = link_ && !link_->first();
  const Workload::ClearGradients clear =
      later_stage ? Workload::ClearGradients::kAfterStep : Workload::ClearGradients::kBeforeForward;
  torch::Tensor x, y;
  while (w.Trainable()) {
    const bool measuring = steps_total >= warmup;
    int64_t wait_start_ns = 0;
    if (later_stage) batches.Next(x, y);
    auto next = BeforeStep(measuring, &wait_start_ns);
    if (!next.ok()) return next.status();
    if (*next == Next::kStop) break;
    if (measuring && probe_during_) probe_during_->Between(v1::PHASE_TRAIN, measured_);
    if (!later_stage) batches.Next(x, y);

    UnseededDraws dropout(on_cpu() && world_ == 1 && !link_);  // before the timer; gangs wait at collectives
    const int64_t t0 = wait_start_ns > 0 ? wait_start_ns : SteadyNowNs();
    if (split_.empty() && !link_) {
      loss = w.TrainStep(x, y);
    } else {
      split_x = x, split_y = y;
      loss = w.TrainStepWith(split_step, clear);
    }
    SyncDevice(torch_device_);
    const int64_t t1 = SteadyNowNs();
    if (steps_total >= warmup && split_step_ns_.size() < split_step_ns_.capacity()) {
      const std::vector<StageTimes>& st = link_ ? link_->step_times() : stage_times;
      split_times_.insert(split_times_.end(), st.begin(), st.end());
      split_step_ns_.push_back(t1 - t0);
    }

    ++steps_total;
    samples_seen += bs_;
    if (measuring) {
      if (auto s = Record(v1::PHASE_TRAIN, t0, t1, bs_); !s.ok()) return s;
      if (measured_ == 0) first_step_start_ns_ = t0;
      last_step_end_ns_ = t1;
      ++measured_;
      control_->step = measured_;
      if (sync_ && step_ns_.size() < step_ns_.capacity()) {
        step_ns_.push_back(t1 - t0);
        comm_ns_.push_back(sync_->last_ns());
      }
    }
    if (sync_) stop_voted_ = voted_ > 0;
  }
  // A split's stages: on one agent, or across agents where rank 0 holds
  // every stage's figures (the others report their own samples).
  if (!link_ || link_->first()) {
    for (v1::SplitStageResult& r : SummarizeSplit(link_ ? link_->plan() : split_, split_times_, split_step_ns_)) {
      if (link_) {
        r.set_agent_id(SplitPeer(task_.gang().peers(r.stage())).first);
        if (static_cast<size_t>(r.stage()) < link_->link_probes().size()) {
          const StageLink::LinkProbe& p = link_->link_probes()[static_cast<size_t>(r.stage())];
          r.set_link_latency_ns(p.latency_ns);
          r.set_link_gbytes_per_second(p.gbytes_per_second);
        }
      }
      *result_.add_split() = std::move(r);
    }
  }
  if (sync_) RecordParallel(*sync_, task_.gang(), global_bs, step_ns_, comm_ns_, w.Parameters(), &result_);
  const int64_t train_end_ns = SteadyNowNs();
  const int64_t task_start_ns = control_->task_start_ns;
  if (measured_ > 0) {
    AddWindow(&result_, v1::PHASE_TRAIN, measure_start_ns_ - task_start_ns, train_end_ns - task_start_ns);
    result_.set_train_seconds(static_cast<double>(train_end_ns - measure_start_ns_) * 1e-9);
  }
  train_warmup_ns_ = (measured_ > 0 ? measure_start_ns_ : train_end_ns) - warmup_start_ns;
  result_.set_train_steps_total(steps_total);
  result_.set_epochs_seen(n_train > 0 ? static_cast<double>(samples_seen) / static_cast<double>(n_train) : 0.0);
  if (loss.defined()) result_.set_final_train_loss(loss.item<double>());
  return absl::OkStatus();
}

absl::Status TorchRun::Infer() {
  if (link_) return InferAcrossAgents();
  Workload& w = *workload_;
  const ImageDataset& ds = *ds_;
  const int64_t task_start_ns = control_->task_start_ns;
  w.SetTraining(false);
  torch::NoGradGuard no_grad;
  const int64_t n_test = ds.test.size();
  const auto [batches_all, batches] = BeginInference(spec_, n_test, bs_, control_);
  // Inference lasts about 0.1 s at the job's defaults, seldom long enough
  // for a reading every 250 ms: it gets one before its warm-up batches
  // (none without them: its measured batches would follow the SGEMM).
  if (probe_during_ && spec_.inference().warmup_batches() > 0) probe_during_->BeforeWarmUp(v1::PHASE_INFER);
  const int64_t infer_warmup_start_ns = SteadyNowNs();
  for (int i = 0; i < spec_.inference().warmup_batches(); ++i) {
    const int64_t lo = (i % batches_all) * bs_;
    (void)w.Infer(ds.test.images.slice(0, lo, std::min(lo + bs_, n_test)).to(torch_device_));
  }
  result_.set_warmup_seconds(static_cast<double>(train_warmup_ns_ + SteadyNowNs() - infer_warmup_start_ns) * 1e-9);
  QualityTotals quality;
  const int64_t infer_start_ns = SteadyNowNs();
  int64_t seen = 0;
  for (int64_t b = 0; b < batches; ++b) {
    if (control_->cancel.load(std::memory_order_relaxed)) break;
    if (probe_during_) probe_during_->Between(v1::PHASE_INFER, b);
    const int64_t lo = b * bs_, hi = std::min(lo + bs_, n_test);
    torch::Tensor x = ds.test.images.slice(0, lo, hi).to(torch_device_);
    torch::Tensor y = ds.test.labels.slice(0, lo, hi).to(torch_device_);
    SyncDevice(torch_device_);
    const int64_t t0 = SteadyNowNs();
    torch::Tensor out = w.Infer(x);
    SyncDevice(torch_device_);
    const int64_t t1 = SteadyNowNs();
    if (auto s = Record(v1::PHASE_INFER, t0, t1, hi - lo); !s.ok()) return s;
    w.Score(x, y, out, &quality);
    seen += hi - lo;
    control_->step = b + 1;
  }
  const int64_t infer_end_ns = SteadyNowNs();
  if (!on_cpu()) result_.set_device_memory_peak_bytes(CudaPeakMemoryBytes(torch_device_.index()));
  if (seen > 0) AddWindow(&result_, v1::PHASE_INFER, infer_start_ns - task_start_ns, infer_end_ns - task_start_ns);
  result_.set_evaluate_seconds(static_cast<double>(infer_end_ns - infer_start_ns) * 1e-9);
  SetQuality(quality, &result_);
  return absl::OkStatus();
}

absl::Status TorchRun::InferAcrossAgents() {
  // Inference through the stages, a batch at a time: rank 0 drives (and
  // times each batch through every stage), the last stage scores, every
  // stage reports the totals that came back. No warm-up batches: the
  // training warmed every stage.
  Workload& w = *workload_;
  const ImageDataset& ds = *ds_;
  StageLink& link = *link_;
  const int64_t task_start_ns = control_->task_start_ns;
  w.SetTraining(false);
  torch::NoGradGuard no_grad;
  const int64_t n_test = ds.test.size();
  const auto [batches_all, batches] = BeginInference(spec_, n_test, bs_, control_);
  QualityTotals quality;
  StageLink::Totals totals{};
  // The last stage scores its output against batch b of the test set.
  int64_t b = 0;
  const auto score = [&](const torch::Tensor& out) {
    const int64_t lo = b * bs_, hi = std::min(lo + bs_, n_test);
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
      if (b >= batches || control_->cancel.load(std::memory_order_relaxed)) {
        WithPeers(&collective_failed_, [&] { link.SendStop(); });
        break;
      }
      const int64_t lo = b * bs_, hi = std::min(lo + bs_, n_test);
      rows = hi - lo;
      const torch::Tensor x = ds.test.images.slice(0, lo, hi).to(link.plan()[0].device);
      totals = WithPeers(&collective_failed_, [&] { return link.InferBatch(x, score); });
    } else {
      const StageLink::Message got = WithPeers(&collective_failed_, [&] { return link.Receive(); });
      if (got == StageLink::Message::kStop) break;
      if (got != StageLink::Message::kInfer || b >= batches_all) {
        return absl::InternalError("split across agents: a training step arrived during inference");
      }
      rows = link.rows();
      totals = WithPeers(&collective_failed_, [&] { return link.InferBatch(torch::Tensor(), score); });
    }
    if (auto s = Record(v1::PHASE_INFER, t0, SteadyNowNs(), rows); !s.ok()) return s;
    control_->step = b + 1;
  }
  const int64_t infer_end_ns = SteadyNowNs();
  if (b > 0) AddWindow(&result_, v1::PHASE_INFER, infer_start_ns - task_start_ns, infer_end_ns - task_start_ns);
  result_.set_evaluate_seconds(static_cast<double>(infer_end_ns - infer_start_ns) * 1e-9);
  QualityTotals passed;  // what the last stage counted, as every stage received it
  passed.correct = static_cast<int64_t>(totals[0]);
  passed.scored = static_cast<int64_t>(totals[1]);
  passed.squared_error = totals[2];
  passed.error_values = static_cast<int64_t>(totals[3]);
  SetQuality(passed, &result_);
  result_.set_input_note(absl::StrCat(result_.input_note(), result_.input_note().empty() ? "" : "; ",
                                      "split across agents (stage ", link.rank(), " of ", link.world_size(),
                                      ", rendezvous ", absl::StrFormat("%.2f", link.rendezvous_seconds()),
                                      " s): inference a batch at a time through every stage, scored by the last; "
                                      "no per-layer or FLOP profile"));
  return absl::OkStatus();
}

void TorchRun::ProfileAfter() {
  Workload& w = *workload_;
  const ImageDataset& ds = *ds_;
  const int64_t n_test = ds.test.size();
  torch::Tensor probe = ds.test.images.slice(0, 0, std::min<int64_t>(bs_, n_test)).to(torch_device_);
  const double n_probe = static_cast<double>(probe.size(0));
  result_.set_forward_flops_per_sample(CountFlops([&] { (void)w.Infer(probe); }) / n_probe);
  if (w.Trainable()) result_.set_train_flops_per_sample(3.0 * CountFlops([&] { w.TrainForwards(probe); }) / n_probe);
  if (!spec_.layers().enabled()) return;
  torch::nn::Sequential* layers = w.Layers();
  if (layers == nullptr) {
    result_.set_input_note(absl::StrCat(result_.input_note(), result_.input_note().empty() ? "" : "; ",
                                        "per-layer timing: not available for ", model_,
                                        " (not a single stack of layers)"));
    return;
  }
  torch::AutoGradMode grad(true);
  control_->phase = v1::PHASE_UNSPECIFIED;
  auto timings = ProfileLayers(
      *layers,
      [&w](const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y) { return w.Loss(out, x, y); },
      ds.train.images, ds.train.labels, bs_, spec_.layers().steps(), torch_device_,
      LayerEnergyOptions{control_->task_start_ns, spec_.layers().energy_seconds()},
      [&w](std::vector<torch::Tensor> params) { return w.NewOptimizer(std::move(params)); });
  for (auto& t : timings) *result_.add_layers() = std::move(t);
}

}  // namespace hetbench::agent
