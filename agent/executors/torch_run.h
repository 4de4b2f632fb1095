#pragma once
/// One task's run by the TorchExecutor, in phases: the LibTorch device, the
/// workload and its environment, the set-up of a gang rank or a split, the
/// measured training, the measured inference, and what is profiled after
/// the measured phases (FLOPs, per-layer times). TorchExecutor::Run calls
/// them in that order; each phase leaves in the run what the next needs.
///
/// Threading: the task's thread only. LibTorch throws (c10::Error) from any
/// phase after SelectDevice; the caller catches and reports it (a collective
/// that threw, collective_failed(), makes the failure retryable).

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/data/fashion_mnist.h"
#include "agent/executors/executor.h"
#include "agent/executors/machine_probe.h"
#include "agent/executors/torch_executor.h"
#include "agent/gang/gradient_sync.h"
#include "agent/gang/split_step.h"
#include "agent/gang/stage_link.h"
#include "agent/models/workload.h"
#include "agent/serving/replicas.h"
#include "agent/serving/serving_run.h"

namespace hetbench::agent {

class TorchRun {
 public:
  /// All must outlive the run.
  TorchRun(const TorchExecutorConfig& config, const v1::Assign& task, const v1::Device& device,
           TaskControl* control);

  /// cuda:N for a GPU (or the simulator hosted on one), else the CPU;
  /// fails when the device needs CUDA and this LibTorch has none.
  absl::Status SelectDevice();
  bool on_cpu() const { return torch_device_.is_cpu(); }
  /// Reads the machine probe between measured steps of Train and Infer (machine_probe.h); null: not.
  void ProbeDuring(ProbeDuringRun* probe) { probe_during_ = probe; }
  /// LibTorch threads the task asks for: the spec's, else the agent's, else the device's cores.
  int threads() const;

  /// Builds the workload on the device, and records the data sizes and
  /// the environment (versions, BLAS, threads, fingerprints) in the result.
  absl::Status BuildWorkload(const ImageDataset& dataset, const std::string& threads_note);
  /// A split's stages on their devices, a split-across-agents rank's link
  /// to its neighbours, or a data-parallel rank's gradient all-reduce.
  absl::Status SetUpParallel();
  /// Warm-up, then measured steps until both the minimum steps and
  /// duration (or the maximum steps, or a cancel); the split's and the
  /// gang's figures.
  absl::Status Train();
  /// Measured inference over the test set (a split across agents: through
  /// every stage, scored by the last).
  absl::Status Infer();
  /// A serving run (spec.serving) in place of training and inference: the
  /// workload in eval mode behind a dynamic batcher of the task's batch
  /// size, or a calibration model ("null", "fixed-service") without one,
  /// or the generative decoder (ServeDecoder).
  absl::Status Serve();
  /// Whether the run ends after inference (a split across agents has no
  /// per-layer or FLOP profile).
  bool profiles() const { return link_ == nullptr; }
  /// After the measured phases, so they stay unperturbed: FLOPs per
  /// sample, and per-layer times when the spec asks.
  void ProfileAfter();

  /// Runs `fn` on each rank of a gang in turn (GangGroup::InTurn; every
  /// rank must call it), else just runs it; a peer gone marks the failure
  /// as a collective's and throws.
  void InTurn(const std::function<void()>& fn);
  const std::string& model() const { return model_; }
  bool collective_failed() const { return collective_failed_; }
  v1::TaskResult& result() { return result_; }

 private:
  absl::Status InferAcrossAgents();
  /// The decoder of serving.decoder, built from the seed, served by
  /// continuous batching (agent/serving/generative.h): three samples per
  /// answered request (SERVE, TTFT, TPOT).
  absl::Status ServeDecoder();
  /// What a serving run shares with this task: cancel, progress, the time
  /// axis, and for a replica of a replicated run how to meet the others.
  ServingControl Shared();
  /// Whether training stops before the next step (cancelled, or measured
  /// enough); a later stage of a split across agents waits for its order.
  enum class Next { kStep, kStop };
  absl::StatusOr<Next> BeforeStep(bool measuring, int64_t* wait_start_ns);
  absl::Status Record(v1::Phase phase, int64_t t0, int64_t t1, int64_t items);

  const TorchExecutorConfig& config_;
  const v1::Assign& task_;
  const v1::JobSpec& spec_;
  const v1::Device& device_;
  TaskControl* const control_;
  const std::string model_;
  const int64_t bs_;
  torch::Device torch_device_{torch::kCPU};
  v1::TaskResult result_;
  bool collective_failed_ = false;  // set when an exchange with the gang's peers threw

  std::unique_ptr<Workload> workload_;
  const ImageDataset* ds_ = nullptr;  // the workload's data
  int64_t preprocess_start_ns_ = 0;

  // A gang: data-parallel ranks (world_ > 1 shares a global batch) or a split across agents (link_).
  bool gang_ = false, split_gang_ = false;
  int64_t world_ = 1, rank_ = 0;
  size_t measured_capacity_ = 0;  // per-step records reserved before the loop
  std::vector<SplitStagePlan> split_;    // a split on this agent
  std::vector<StageTimes> split_times_;  // measured steps x stages, flat
  std::vector<int64_t> split_step_ns_;
  std::unique_ptr<StageLink> link_;
  std::unique_ptr<ReplicaMeeting> replicas_;  // a serving replica's meeting (Shared)
  std::unique_ptr<GradientSync> sync_;
  double vote_ = 0, voted_ = 0;  // this rank's stop vote and the gang's sum
  std::vector<int64_t> step_ns_, comm_ns_;

  // Training's bounds (set once by SetUpParallel) and progress, read by BeforeStep.
  int64_t min_steps_ = 0, max_steps_ = 0, min_duration_ns_ = 0;
  int64_t measured_ = 0, first_step_start_ns_ = 0, last_step_end_ns_ = 0, measure_start_ns_ = 0;
  bool stop_voted_ = false;
  ProbeDuringRun* probe_during_ = nullptr;
  int64_t train_warmup_ns_ = 0;  // warm-up time of training, added to inference's
};

}  // namespace hetbench::agent
