#include "agent/gang/stage_link.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/devices/cuda.h"
#include "common/clock.h"
#include "common/stats.h"

namespace hetbench::agent {

namespace {

// The forward message's tail: what it is (StageLink::Message) and its rows.
constexpr int64_t kForwardTail = 2;
// The backward message's tail: the sender's hold time and the step's loss,
// then per stage from the sender on (forward, backward, outgoing link).
constexpr int64_t kHead = 2;
constexpr int64_t kPerStage = 3;

}  // namespace

absl::StatusOr<std::unique_ptr<StageLink>> StageLink::Create(std::unique_ptr<GangGroup> group,
                                                             torch::nn::Sequential& net,
                                                             std::vector<SplitStagePlan> plan,
                                                             const torch::Tensor& probe, int64_t batch,
                                                             double timeout_seconds) {
  const int world = group->world_size();
  if (static_cast<int>(plan.size()) != world || world < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("split across agents: ", plan.size(), " stages for a gang of ", world, " ranks"));
  }
  if (probe.dim() < 1 || probe.size(0) < 2) {
    return absl::InvalidArgumentError("split across agents: the shape probe needs at least two rows");
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  std::unique_ptr<StageLink> link(new StageLink(std::move(group), net, std::move(plan), timeout));
  {
    // The activation after each stage but the last, per sample: eval mode
    // (a batch norm would refuse or learn from the probe in training mode).
    torch::NoGradGuard no_grad;
    const bool training = net->is_training();
    net->eval();
    torch::Tensor a = probe;
    for (int s = 0; s + 1 < world; ++s) {
      for (int i = link->plan_[s].begin; i < link->plan_[s].end; ++i) a = net->begin()[i].forward<torch::Tensor>(a);
      std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end());
      shape[0] = batch;
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      link->shapes_.push_back(std::move(shape));
      link->boundary_numel_.push_back(numel);
    }
    net->train(training);
  }
  const int s = link->rank();
  link->batch_ = batch;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const int64_t answer = std::tuple_size<Totals>::value;
  if (s > 0) {
    const int64_t n = link->boundary_numel_[s - 1];
    link->in_buffer_ = torch::zeros({n + kForwardTail}, f32);
    link->grad_out_ = torch::zeros({n + kHead + kPerStage * (world - s)}, f32);
    link->answer_out_ = torch::zeros({answer}, f32);
  }
  if (s + 1 < world) {
    const int64_t n = link->boundary_numel_[s];
    link->out_buffer_ = torch::zeros({n + kForwardTail}, f32);
    link->grad_in_ = torch::zeros({n + kHead + kPerStage * (world - 1 - s)}, f32);
    link->answer_in_ = torch::zeros({answer}, f32);
  }
  link->times_.resize(world);
  link->link_ns_.resize(world);
  for (int b = 0; b + 1 < world; ++b) {
    // Both messages of link b, as sent: the activation and its tail, the gradient and figures.
    const int64_t n = link->boundary_numel_[b];
    link->link_bytes_.push_back(static_cast<int64_t>(sizeof(float)) *
                                (n + kForwardTail + n + kHead + kPerStage * (world - 1 - b)));
  }
  link->loss_out_ = torch::zeros({}, f32);
  link->ProbeLinks();
  return link;
}

void StageLink::ProbeLinks() {
  const int s = rank(), world = world_size();
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  torch::Tensor small = torch::zeros({kProbeSmallBytes / 4}, f32), large = torch::zeros({kProbeLargeBytes / 4}, f32);
  // What a step copies into the buffer before each send (an activation, a
  // gradient): each message's sender copies it, so one way is the copy and
  // the wire, as in ForwardBackward.
  torch::Tensor payload = torch::ones({kProbeLargeBytes / 4}, f32);
  auto fill = [&](torch::Tensor& t) {
    torch::NoGradGuard no_grad;
    t.copy_(payload.narrow(0, 0, t.numel()));
  };
  // A step's link always follows compute: the asking side's forward before
  // the activation, the answering side's forward and backward before the
  // gradient. So each round trip does too (GEMMs for kProbeComputeMs before
  // it, kProbeHoldMs before the answer, that hold subtracted as a step's
  // is): back to back, with nothing between round trips, a message moved
  // 1.2-2.2x faster than after compute (bench/link_step.cc). And a later
  // stage steps its optimizer right after it sends the gradient, while the
  // message is still on its way (the send completes once it is handed over):
  // with the answering side computing for 2 ms after its answer, a 2.36 MB
  // answer took 1.42-1.64x as long again, a 4.19 MB one 1.26x
  // (bench_link_step, "busy after").
  torch::Tensor a = torch::ones({256, 256}, f32);
  auto compute = [&](double ms) {
    torch::NoGradGuard no_grad;
    const int64_t end = SteadyNowNs() + static_cast<int64_t>(ms * 1e6);
    while (SteadyNowNs() < end) (void)torch::mm(a, a);
  };
  // One warm-up round, then the timed ones; the asking side times round trips.
  if (s > 0) {  // answer the previous stage's probe of its link
    for (torch::Tensor* t : {&small, &large}) {
      for (int r = 0; r < (t == &small ? kSmallRounds : kLargeRounds); ++r) {
        Recv(*t, s - 1);
        const int64_t got_ns = SteadyNowNs();
        compute(kProbeHoldMs);
        const int64_t copy_start_ns = SteadyNowNs();
        fill(*t);
        t->data_ptr<float>()[t->numel() - 1] = static_cast<float>(copy_start_ns - got_ns);  // the hold
        Send(*t, s - 1);
        compute(kProbeAfterMs);
      }
    }
  }
  LinkProbe own;
  if (s + 1 < world) {
    std::vector<double> rtt[2];
    for (int which = 0; which < 2; ++which) {
      torch::Tensor& t = which == 0 ? small : large;
      for (int r = 0; r < (which == 0 ? kSmallRounds : kLargeRounds); ++r) {
        compute(kProbeComputeMs);
        const int64_t t0 = SteadyNowNs();
        fill(t);
        Send(t, s + 1);
        Recv(t, s + 1);
        const double held = t.data_ptr<float>()[t.numel() - 1];
        if (r > 0) rtt[which].push_back(static_cast<double>(SteadyNowNs() - t0) - held);
      }
    }
    // Means, not medians: a step's p50 moves with the link's mean when the
    // compute's spread is the larger (a link's time is skewed to the right:
    // the cnn split's took 2.0-4.1 ms a step around a median of 2.5), so the
    // sum of the parts' medians falls short of the step's. Trimmed, so that
    // one stalled round trip does not stand for the link.
    const double one_way_small = TrimmedMeanInPlace(rtt[0], kProbeTrim) / 2,
                 one_way_large = TrimmedMeanInPlace(rtt[1], kProbeTrim) / 2;
    own.latency_ns = one_way_small;
    // Bytes beyond the small message over the time beyond it (GB/s = bytes/ns).
    own.gbytes_per_second = one_way_large > one_way_small
                                ? static_cast<double>(kProbeLargeBytes - kProbeSmallBytes) / (one_way_large - one_way_small)
                                : static_cast<double>(kProbeLargeBytes) / std::max(one_way_large, 1.0);
  }
  // Rank 0 gathers every link's figures (ranks 1 .. world - 2 send theirs).
  if (s == 0) {
    probes_.assign(static_cast<size_t>(world - 1), LinkProbe{});
    probes_[0] = own;
    torch::Tensor got = torch::zeros({2}, f32);
    for (int b = 1; b + 1 < world; ++b) {
      Recv(got, b);
      probes_[static_cast<size_t>(b)] = {got[0].item<float>(), got[1].item<float>()};
    }
  } else if (s + 1 < world) {
    torch::Tensor mine = torch::tensor({static_cast<float>(own.latency_ns), static_cast<float>(own.gbytes_per_second)}, f32);
    Send(mine, 0);
  }
}

StageLink::StageLink(std::unique_ptr<GangGroup> group, torch::nn::Sequential& net, std::vector<SplitStagePlan> plan,
                     std::chrono::milliseconds timeout)
    : group_(std::move(group)), net_(net), plan_(std::move(plan)), timeout_(timeout) {}

void StageLink::Send(torch::Tensor& buffer, int peer) {
  std::vector<at::Tensor> tensors{buffer};
  TORCH_CHECK(group_->group()->send(tensors, peer, 0)->wait(timeout_), "send to rank ", peer, " did not complete");
}

void StageLink::Recv(torch::Tensor& buffer, int peer) {
  std::vector<at::Tensor> tensors{buffer};
  TORCH_CHECK(group_->group()->recv(tensors, peer, 0)->wait(timeout_), "receive from rank ", peer,
              " did not complete");
}

namespace {

// Writes the forward tail of `buffer` (whose activation is n values).
void SetForwardTail(torch::Tensor& buffer, StageLink::Message what, int64_t rows) {
  float* tail = buffer.data_ptr<float>() + buffer.numel() - kForwardTail;
  tail[0] = static_cast<float>(static_cast<int>(what));
  tail[1] = static_cast<float>(rows);
}

}  // namespace

void StageLink::SendStop() {
  SetForwardTail(out_buffer_, Message::kStop, 0);
  Send(out_buffer_, rank() + 1);
}

StageLink::Message StageLink::Receive() {
  Recv(in_buffer_, rank() - 1);
  input_received_ns_ = SteadyNowNs();
  const float* tail = in_buffer_.data_ptr<float>() + in_buffer_.numel() - kForwardTail;
  const int what = static_cast<int>(tail[0]);
  rows_ = static_cast<int64_t>(tail[1]);
  TORCH_CHECK(what >= 0 && what <= 2 && rows_ >= 0 && rows_ <= batch_, "stage ", rank(),
              ": a malformed message from the previous stage (", what, ", ", rows_, " rows)");
  if (what == static_cast<int>(Message::kStop) && !last()) SendStop();
  return static_cast<Message>(what);
}

StageLink::Totals StageLink::InferBatch(const torch::Tensor& x,
                                        const std::function<Totals(const torch::Tensor& out)>& score) {
  torch::NoGradGuard no_grad;
  const int s = rank();
  const SplitStagePlan& stage = plan_[s];
  torch::Tensor a;
  if (first()) {
    a = x;
    rows_ = x.size(0);
  } else {
    std::vector<int64_t> shape = shapes_[s - 1];
    shape[0] = rows_;
    a = in_buffer_.narrow(0, 0, boundary_numel_[s - 1] / batch_ * rows_).view(shape).to(stage.device);
  }
  for (int i = stage.begin; i < stage.end; ++i) a = net_->begin()[i].forward<torch::Tensor>(a);
  Totals totals{};
  if (!last()) {
    out_buffer_.narrow(0, 0, a.numel()).copy_(a.reshape({-1}));
    SetForwardTail(out_buffer_, Message::kInfer, rows_);
    Send(out_buffer_, s + 1);
    Recv(answer_in_, s + 1);
    for (size_t k = 0; k < totals.size(); ++k) totals[k] = answer_in_.data_ptr<float>()[k];
  } else {
    totals = score(a);
  }
  if (!first()) {
    for (size_t k = 0; k < totals.size(); ++k) answer_out_.data_ptr<float>()[k] = static_cast<float>(totals[k]);
    Send(answer_out_, s - 1);
  }
  return totals;
}

torch::Tensor StageLink::ForwardBackward(const torch::Tensor& x, const torch::Tensor& y, const LossFn& loss) {
  const int s = rank(), world = world_size();
  const SplitStagePlan& stage = plan_[s];
  torch::Tensor input, a;
  if (first()) {
    a = x;
  } else {
    // The buffers are host memory (Gloo's); a GPU stage's input goes to its device (a no-op on the CPU).
    input = in_buffer_.narrow(0, 0, boundary_numel_[s - 1])
                .view(shapes_[s - 1])
                .to(stage.device)
                .detach()
                .requires_grad_(true);
    a = input;
  }
  int64_t t0 = SteadyNowNs();
  for (int i = stage.begin; i < stage.end; ++i) a = net_->begin()[i].forward<torch::Tensor>(a);
  SyncDevice(stage.device);
  const int64_t forward_ns = SteadyNowNs() - t0;
  int64_t backward_ns = 0, link_ns = 0;
  torch::Tensor l;
  const float* downstream = nullptr;  // per stage from s + 1: forward, backward, link
  if (!last()) {
    const int64_t n = boundary_numel_[s];
    const int64_t sent_ns = SteadyNowNs();  // the link: the copy into the buffer, the wire, the answer's copy
    {
      torch::NoGradGuard no_grad;
      out_buffer_.narrow(0, 0, n).copy_(a.detach().reshape({-1}));
      SetForwardTail(out_buffer_, Message::kTrain, batch_);
    }
    Send(out_buffer_, s + 1);
    Recv(grad_in_, s + 1);
    const float* tail = grad_in_.data_ptr<float>() + n;
    link_ns = std::max<int64_t>(0, SteadyNowNs() - sent_ns - static_cast<int64_t>(tail[0]));
    loss_ = tail[1];
    downstream = tail + kHead;
    t0 = SteadyNowNs();
    a.backward(grad_in_.narrow(0, 0, n).view(shapes_[s]).to(stage.device));
    SyncDevice(stage.device);
    backward_ns = SteadyNowNs() - t0;
    l = loss_out_.fill_(loss_);  // in place: a step allocates nothing for it
  } else {
    t0 = SteadyNowNs();
    l = loss(a, x, y);
    l.backward();
    SyncDevice(stage.device);
    backward_ns = SteadyNowNs() - t0;
    loss_ = l.item<float>();
  }
  const int later = world - 1 - s;  // stages after this one
  if (!first()) {
    const int64_t n = boundary_numel_[s - 1];
    float* out = grad_out_.data_ptr<float>();
    const int64_t copy_start_ns = SteadyNowNs();  // the gradient's copy is the link's, not this rank's hold
    {
      torch::NoGradGuard no_grad;
      grad_out_.narrow(0, 0, n).copy_(input.grad().reshape({-1}));
    }
    out[n + 1] = loss_;
    out[n + kHead] = static_cast<float>(forward_ns);
    out[n + kHead + 1] = static_cast<float>(backward_ns);
    out[n + kHead + 2] = static_cast<float>(link_ns);
    for (int64_t k = 0; k < kPerStage * later; ++k) out[n + kHead + kPerStage + k] = downstream[k];
    out[n] = static_cast<float>(copy_start_ns - input_received_ns_);  // the time this rank held the step
    Send(grad_out_, s - 1);
  } else {
    // Rank 0 assembles the step: each stage's compute, its links' time and bytes.
    times_[0] = StageTimes{forward_ns, backward_ns, 0, 0};
    link_ns_[0] = link_ns;
    for (int k = 1; k < world; ++k) {
      const float* f = downstream + kPerStage * (k - 1);
      times_[k] = StageTimes{static_cast<int64_t>(f[0]), static_cast<int64_t>(f[1]), 0, 0};
      link_ns_[k] = static_cast<int64_t>(f[2]);
    }
    for (int b = 0; b + 1 < world; ++b) {
      for (int k : {b, b + 1}) {
        times_[k].transfer_ns += link_ns_[b];
        times_[k].transfer_bytes += link_bytes_[b];
      }
    }
  }
  return l;
}

}  // namespace hetbench::agent
