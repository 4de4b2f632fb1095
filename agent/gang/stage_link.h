#pragma once
/// One stage of a split across agents: rank s of a gang of S runs the
/// layers [begin, end) of stage s; the activation goes to rank s + 1 and its
/// gradient comes back, over c10d send/recv (Gloo) of the gang's group.
///
/// Every rank builds the whole model on the same seed and draws the same
/// batches (the gang's shared permutation), so the last stage has the
/// labels without a transfer; only the boundary activations and gradients
/// cross. Rank 0 drives: it decides when to stop and tells the others.
///
/// Messages (float32, one buffer each way per link and step or batch):
///  - forward s -> s+1: the activation, then what it is (a training step,
///    an inference batch, or stop) and its rows;
///  - backward s+1 -> s: the gradient of the activation, then the time
///    rank s+1 held the step (activation in to gradient out), the step's
///    loss and, per stage from s+1 on, its forward, backward and outgoing
///    link time.
/// Rank s measures its link as (activation sent -> gradient received) minus
/// the time rank s+1 held the step: durations on each rank's own clock, so
/// no clock offset enters. Rank 0 so knows every stage's figures per step.
/// Before the first step each link is also probed alone (ping-pong at two
/// message sizes: its latency and bandwidth, which a placement advisor needs
/// to predict a boundary of another size than this split's).
/// Inference runs through the same stages, forward only, a batch at a time
/// (no micro-batches, as in training): the last stage scores the batch and
/// its running quality totals come back to every stage in the answer.
///
/// Threading: one rank's task thread only. A peer gone or silent past the
/// gang's timeout makes the next send/recv throw c10::Error (never a hang).

#include <torch/torch.h>

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/gang/gang_group.h"
#include "agent/gang/split_step.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::agent {

class StageLink {
 public:
  /// `plan`: every stage of the split (PlanSplit); this rank runs
  /// plan[group->rank()]. `probe`: two or more input rows, to learn the
  /// boundary shapes (run in eval mode, without gradients, nothing kept).
  /// `batch`: the rows of every training step.
  static absl::StatusOr<std::unique_ptr<StageLink>> Create(std::unique_ptr<GangGroup> group,
                                                           torch::nn::Sequential& net,
                                                           std::vector<SplitStagePlan> plan,
                                                           const torch::Tensor& probe, int64_t batch,
                                                           double timeout_seconds);

  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  bool first() const { return rank() == 0; }
  bool last() const { return rank() + 1 == world_size(); }
  double rendezvous_seconds() const { return group_->rendezvous_seconds(); }
  GangGroup& gang() const { return *group_; }
  const std::vector<SplitStagePlan>& plan() const { return plan_; }

  /// What the previous stage sent: a training step's activation, an
  /// inference batch's, or stop (the phase ended).
  enum class Message { kTrain = 0, kStop = 1, kInfer = 2 };

  /// Rank 0: tells the next stage the phase ended (passed on to the last).
  void SendStop();
  /// Ranks > 0: waits for the previous stage's next message; a stop is
  /// passed on downstream before it returns. rows() is the batch's.
  Message Receive();
  int64_t rows() const { return rows_; }

  /// This stage's share of one training step (inside the workload's
  /// TrainStepWith, after Receive on ranks > 0 said kTrain). `x` is the batch (rank
  /// 0's input; the last stage's loss may use it), `y` the labels (the last
  /// stage's). Returns the step's loss (computed by the last rank, passed
  /// back with the gradients); only the last rank's has a graph.
  torch::Tensor ForwardBackward(const torch::Tensor& x, const torch::Tensor& y, const LossFn& loss);

  /// Quality totals of the inference so far, as the last stage counts them.
  using Totals = std::array<double, 4>;
  /// One inference batch through this stage, forward only (no gradients).
  /// Rank 0 passes the batch `x`; the others take what Receive got (rows()).
  /// The last stage calls `score` on its output; every stage returns the
  /// totals it returned, passed back stage by stage.
  Totals InferBatch(const torch::Tensor& x, const std::function<Totals(const torch::Tensor& out)>& score);

  /// After a step on rank 0: every stage's figures of that step (plan order),
  /// in SplitForwardBackward's layout (transfer = both links of the stage).
  const std::vector<StageTimes>& step_times() const { return times_; }

  /// A link probed by Create: the one-way time of a kProbeSmallBytes
  /// message, and the bandwidth of a kProbeLargeBytes one beyond it (means
  /// of ping-pong round trips without the highest and lowest kProbeTrim of
  /// them, halved). One way is the sender's copy into
  /// the message buffer and the wire, as a step's activation and gradient
  /// move (ForwardBackward times its links the same way), and each round
  /// trip follows compute as a step's does: kProbeComputeMs of GEMMs on the
  /// asking side before it, kProbeHoldMs on the answering side before its
  /// answer (subtracted, as a step's hold is) and kProbeAfterMs right after
  /// it, as a later stage steps its optimizer while its gradient is still
  /// being received. About 0.55 s per link.
  struct LinkProbe {
    double latency_ns = 0;
    double gbytes_per_second = 0;
  };
  static constexpr int64_t kProbeSmallBytes = 1024, kProbeLargeBytes = 4 << 20;
  static constexpr int kSmallRounds = 11, kLargeRounds = 9;  // the first of each is a warm-up
  static constexpr double kProbeComputeMs = 20, kProbeHoldMs = 5, kProbeAfterMs = 2, kProbeTrim = 0.125;
  /// Rank 0: every link's probe, link b from stage b to b + 1 (the others
  /// report theirs to rank 0 once, in Create). Empty on the other ranks.
  const std::vector<LinkProbe>& link_probes() const { return probes_; }

 private:
  StageLink(std::unique_ptr<GangGroup> group, torch::nn::Sequential& net, std::vector<SplitStagePlan> plan,
            std::chrono::milliseconds timeout);
  void Send(torch::Tensor& buffer, int peer);
  void Recv(torch::Tensor& buffer, int peer);
  /// Probes this rank's links (the one from the previous stage as the
  /// answering side, then the one to the next as the asking side) and
  /// gathers every link's figures on rank 0.
  void ProbeLinks();

  std::unique_ptr<GangGroup> group_;
  torch::nn::Sequential& net_;
  std::vector<SplitStagePlan> plan_;
  std::chrono::milliseconds timeout_;
  std::vector<int64_t> boundary_numel_;       // activation values per step after stage s
  std::vector<std::vector<int64_t>> shapes_;  // the activation's shape after stage s
  torch::Tensor in_buffer_, out_buffer_;      // forward: from s-1, to s+1
  torch::Tensor grad_in_, grad_out_;          // backward: from s+1, to s-1
  torch::Tensor answer_in_, answer_out_;      // inference's totals: from s+1, to s-1
  int64_t batch_ = 0, rows_ = 0;
  int64_t input_received_ns_ = 0;
  float loss_ = 0;
  torch::Tensor loss_out_;          // the loss returned on ranks before the last
  std::vector<StageTimes> times_;   // rank 0: the last step, per stage
  std::vector<int64_t> link_ns_;    // rank 0: the last step, per link (scratch)
  std::vector<int64_t> link_bytes_; // per link and step, both messages: fixed by the shapes
  std::vector<LinkProbe> probes_;   // rank 0: per link, from Create
};

}  // namespace hetbench::agent
