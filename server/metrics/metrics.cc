#include "server/metrics/metrics.h"

#include "common/names.h"

namespace hetbench::server {

namespace {
const std::vector<v1::DeviceKind>& AllKinds() {
  static const std::vector<v1::DeviceKind> kinds = {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU,
                                                    v1::DEVICE_KIND_DPU, v1::DEVICE_KIND_QPU_SIM};
  return kinds;
}
}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& build = prometheus::BuildGauge()
                    .Name("hetbench_build_info")
                    .Help("Always 1; labels carry the hetbench version.")
                    .Register(*registry_);
  build.Add({{"version", HetbenchVersion()}, {"component", "server"}}).Set(1);
  jobs_ = &prometheus::BuildGauge().Name("hetbench_jobs").Help("Jobs in the store by state.").Register(*registry_);
  agents_ = &prometheus::BuildGauge()
                 .Name("hetbench_agents_connected")
                 .Help("Connected agents by the kinds of device they offer.")
                 .Register(*registry_);
  samples_ = &prometheus::BuildCounter()
                  .Name("hetbench_samples_ingested_total")
                  .Help("Timing samples stored, by phase and device kind.")
                  .Register(*registry_);
  duplicate_batches_ = &prometheus::BuildCounter()
                            .Name("hetbench_sample_batches_duplicate_total")
                            .Help("Sample batches received again and not stored twice.")
                            .Register(*registry_);
  rejected_ = &prometheus::BuildCounter()
                   .Name("hetbench_agent_messages_rejected_total")
                   .Help("Agent messages refused, by reason.")
                   .Register(*registry_);
  tasks_finished_ = &prometheus::BuildCounter()
                         .Name("hetbench_tasks_finished_total")
                         .Help("Tasks that ended, by model, device kind and final state.")
                         .Register(*registry_);
  task_duration_ = &prometheus::BuildHistogram()
                        .Name("hetbench_task_duration_seconds")
                        .Help("Wall time of a task from assignment to result, by model and device kind.")
                        .Register(*registry_);
  // Export zeros up front so dashboards and rules see the series before the first event.
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    jobs_->Add({{"state", JobStateName(static_cast<v1::JobState>(s))}});
  }
  for (v1::DeviceKind k : AllKinds()) agents_->Add({{"device_kind", DeviceKindName(k)}});
  duplicate_batches_->Add({});
}

void Metrics::SetJobsByState(const std::map<v1::JobState, int64_t>& counts) {
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    auto it = counts.find(static_cast<v1::JobState>(s));
    jobs_->Add({{"state", JobStateName(static_cast<v1::JobState>(s))}})
        .Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void Metrics::SetAgentsByKind(const std::map<std::string, int64_t>& counts) {
  for (v1::DeviceKind k : AllKinds()) {
    auto it = counts.find(DeviceKindName(k));
    agents_->Add({{"device_kind", DeviceKindName(k)}}).Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void Metrics::AddSamplesIngested(v1::Phase phase, v1::DeviceKind kind, int64_t n) {
  samples_->Add({{"phase", PhaseName(phase)}, {"device_kind", DeviceKindName(kind)}}).Increment(static_cast<double>(n));
}

void Metrics::AddDuplicateBatch() { duplicate_batches_->Add({}).Increment(); }

void Metrics::AddRejectedMessage(const std::string& reason) { rejected_->Add({{"reason", reason}}).Increment(); }

void Metrics::ObserveTaskFinished(const std::string& model, v1::DeviceKind kind, v1::TaskState state,
                                  double duration_seconds) {
  tasks_finished_->Add({{"model", model}, {"device_kind", DeviceKindName(kind)}, {"state", TaskStateName(state)}})
      .Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  task_duration_->Add({{"model", model}, {"device_kind", DeviceKindName(kind)}}, kBuckets).Observe(duration_seconds);
}

}  // namespace hetbench::server
