// TorchRun's serving entry (torch_run.h): a zoo model or a calibration
// model behind the dynamic batcher, or the generative decoder; every answered
// query (request) into the task's sample buffer.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/executors/torch_run.h"
#include "agent/serving/decoder.h"
#include "agent/serving/generative.h"
#include "agent/serving/issuer.h"
#include "agent/serving/script_decoder.h"
#include "agent/serving/serving_model.h"
#include "agent/serving/serving_run.h"
#include "common/clock.h"
#include "common/serving_spec.h"

namespace hetbench::agent {

ServingControl TorchRun::Shared() {
  ServingControl shared{&control_->cancel, &control_->step, &control_->total_steps, control_->task_start_ns};
  if (task_.has_gang() && task_.gang().world_size() > 1) {  // a replica: meets the others after its warm-up
    replicas_ = std::make_unique<ReplicaMeeting>();
    replicas_->gang = task_.gang();
    replicas_->own_host = config_.rendezvous_host;
    replicas_->clock = control_->clock;
    shared.replicas = replicas_.get();
  }
  return shared;
}

absl::Status TorchRun::ServeDecoder() {
  if (device_.kind() == v1::DEVICE_KIND_QPU_SIM) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"decoder\" cannot run on the qpu-sim device ", device_.id(), "; target a cpu or gpu"));
  }
  const v1::DecoderSpec& d = spec_.serving().decoder();
  const int64_t built = SteadyNowNs();
  std::unique_ptr<DecoderModel> decoder;
  std::string origin = "weights from the seed";
  if (!d.torchscript().empty()) {
    absl::StatusOr<std::unique_ptr<ScriptDecoder>> brought = ScriptDecoder::Load(d, torch_device_);
    if (!brought.ok()) return brought.status();
    decoder = *std::move(brought);
    origin = "a brought TorchScript module";
  } else {
    const DecoderShape shape{d.layers(), d.width(), d.heads(), d.vocabulary(), d.context()};
    decoder = std::make_unique<Decoder>(shape, spec_.seed(), torch_device_);
  }
  result_.set_preprocess_seconds(static_cast<double>(SteadyNowNs() - built) * 1e-9);
  control_->phase = v1::PHASE_SERVE;
  const ServingControl shared = Shared();
  std::vector<ServedRequest> answered;
  const double qps = task_.target_qps() > 0 ? task_.target_qps() : spec_.serving().target_qps();
  const std::string what = absl::StrCat("decoder on ", device_.id(),
                                        " (LibTorch, KV cache, continuous batching, greedy; ", origin, ")");
  if (auto s = RunGenerative(spec_, qps, static_cast<int>(bs_), *decoder, what, shared, &result_, &answered); !s.ok()) {
    return s;
  }
  // Per request: SERVE (end to end; items = output tokens), TTFT (items =
  // prompt tokens), TPOT (items = tokens after the first).
  for (const ServedRequest& r : answered) {
    const SampleRecord samples[] = {{r.scheduled_ns, r.latency_ns, r.output_tokens, v1::PHASE_SERVE},
                                    {r.scheduled_ns, r.ttft_ns, r.prompt_tokens, v1::PHASE_TTFT},
                                    {r.scheduled_ns, r.tpot_ns, r.output_tokens - 1, v1::PHASE_TPOT}};
    for (const SampleRecord& sample : samples) {
      if (!control_->samples.Push(sample)) {
        return absl::InternalError(absl::StrCat("serving: the sample buffer holds ", control_->samples.capacity(),
                                                " records, the run answered ", answered.size(), " requests"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TorchRun::Serve() {
  if (model_ == kDecoderModel) return ServeDecoder();
  BatchingServer::Compute compute;
  std::string what;
  if (model_ == "null") {
    compute = NullCompute();
    what = "null (answers at once: what remains is the harness's own cost)";
  } else if (model_ == "fixed-service") {
    const double us = spec_.serving().fixed_service_us();
    compute = FixedServiceCompute(absl::Nanoseconds(static_cast<int64_t>(us * 1e3)));
    what = absl::StrFormat("fixed-service (busy-waits %g us per batch)", us);
  } else {
    if (auto s = PrepareForServing(workload_.get(), torch_device_, static_cast<int>(bs_), 0); !s.ok()) return s;
    compute = WorkloadCompute(workload_.get(), torch_device_);
    what = absl::StrCat(model_, " on ", device_.id(), " (LibTorch, eval mode, no autograd)");
  }
  control_->phase = v1::PHASE_SERVE;
  const ServingControl shared = Shared();
  std::vector<ServedQuery> answered;
  const double qps = task_.target_qps() > 0 ? task_.target_qps() : spec_.serving().target_qps();
  if (auto s = RunServing(spec_, qps, static_cast<int>(bs_), compute, what, shared, &result_, &answered); !s.ok()) {
    return s;
  }
  if (model_ == "null") {  // the harness's own figures: what this machine's issuer can offer at most
    const IssuerCeiling ceiling = MeasureIssuerCeiling(200'000);
    result_.mutable_serving()->set_issuer_ceiling_qps(ceiling.qps);
    result_.mutable_serving()->set_issuer_ceiling_cpu_us_per_query(ceiling.cpu_us_per_query);
  }
  for (const ServedQuery& q : answered) {  // one SERVE sample per answered query
    if (!control_->samples.Push(
            {q.scheduled_ns, q.latency_ns, result_.serving().samples_per_query(), v1::PHASE_SERVE})) {
      return absl::InternalError(absl::StrCat("serving: the sample buffer holds ", control_->samples.capacity(),
                                              " records, the run answered ", answered.size(), " queries"));
    }
  }
  return absl::OkStatus();
}

}  // namespace hetbench::agent
