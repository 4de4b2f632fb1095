#include "server/metrics/metrics.h"

#include <algorithm>
#include <cmath>

#include "common/energy.h"
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
  resumed_ = &prometheus::BuildCounter()
                  .Name("hetbench_tasks_resumed_total")
                  .Help("Running task attempts an agent took up again on a new stream after its stream broke.")
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
  power_ = &prometheus::BuildGauge()
                .Name("hetbench_device_power_watts")
                .Help(
                    "Last power reading per agent, device kind (or node) and source (rapl, nvml, hwmon, ipmi, "
                    "modeled; modeled is an estimate).")
                .Register(*registry_);
  energy_ = &prometheus::BuildCounter()
                 .Name("hetbench_device_energy_joules_total")
                 .Help("Energy reported by power sensors during tasks, per agent, device kind and source.")
                 .Register(*registry_);
  sensor_up_ = &prometheus::BuildGauge()
                    .Name("hetbench_power_sensor_up")
                    .Help(
                        "1 when an agent's power sensor of this source works, 0 when it was tried and is "
                        "unavailable.")
                    .Register(*registry_);
  read_errors_ = &prometheus::BuildCounter()
                      .Name("hetbench_power_read_errors_total")
                      .Help("Failed power sensor reads reported by agents.")
                      .Register(*registry_);
  step_seconds_ = &prometheus::BuildHistogram()
                       .Name("hetbench_step_duration_seconds")
                       .Help("Measured step (batch) durations stored, by model, device kind and phase.")
                       .Register(*registry_);
  task_throughput_ = &prometheus::BuildGauge()
                          .Name("hetbench_task_samples_per_second")
                          .Help("Samples per second of the latest finished task, by model, device kind and phase.")
                          .Register(*registry_);
  task_joules_per_sample_ = &prometheus::BuildGauge()
                                 .Name("hetbench_task_joules_per_sample")
                                 .Help(
                                     "Energy per sample of the latest finished task, by model, device kind, phase "
                                     "and power source (modeled = an estimate).")
                                 .Register(*registry_);
  task_usd_per_1000_ = &prometheus::BuildGauge()
                            .Name("hetbench_task_cost_usd_per_1000_samples")
                            .Help("Device cost per 1,000 samples of the latest finished task with a cost rate.")
                            .Register(*registry_);
  serving_latency_ = &prometheus::BuildGauge()
                         .Name("hetbench_serving_latency_seconds")
                         .Help(
                             "Latency from the scheduled time of the latest finished serving task (nearest-rank "
                             "over every query), by model, device kind, scenario and percentile (50, 90, 99).")
                         .Register(*registry_);
  serving_qps_ = &prometheus::BuildGauge()
                     .Name("hetbench_serving_achieved_queries_per_second")
                     .Help("Queries answered per second of the latest finished serving task.")
                     .Register(*registry_);
  serving_valid_ = &prometheus::BuildGauge()
                       .Name("hetbench_serving_valid")
                       .Help("1 when the latest finished serving task's run was VALID (its bound met at 99% "
                             "confidence and its minimums reached), else 0.")
                       .Register(*registry_);
  device_health_ = &prometheus::BuildGauge()
                        .Name("hetbench_device_health")
                        .Help("Devices whose last validation did not pass: 1 FAIL, 0.5 DEGRADED; quarantined=\"true\" "
                              "when no ordinary task is placed on it. A passing device has no series.")
                        .Register(*registry_);
  devices_quarantined_ = &prometheus::BuildGauge()
                              .Name("hetbench_devices_quarantined")
                              .Help("Devices quarantined by a validation (FAIL, or DEGRADED when the job said so).")
                              .Register(*registry_);
  devices_quarantined_->Add({}).Set(0);
  validation_ratio_ = &prometheus::BuildGauge()
                           .Name("hetbench_validation_ratio")
                           .Help("A validation test's figure / its SKU's baseline, for devices whose latest "
                                 "validation did not pass (a passing device has no series).")
                           .Register(*registry_);
  agent_up_ = &prometheus::BuildGauge()
                   .Name("hetbench_agent_up")
                   .Help("1 while an agent holds its stream to the coordinator, 0 after it went away.")
                   .Register(*registry_);
  agent_last_seen_ = &prometheus::BuildGauge()
                          .Name("hetbench_agent_last_heartbeat_timestamp_seconds")
                          .Help("Unix time of the latest message (heartbeat or other) from an agent.")
                          .Register(*registry_);
  tasks_ = &prometheus::BuildGauge().Name("hetbench_tasks").Help("Tasks in the store by state.").Register(*registry_);
  rpc_handled_ = &prometheus::BuildCounter()
                      .Name("hetbench_grpc_server_handled_total")
                      .Help("RPCs completed by the coordinator, by method and gRPC status code.")
                      .Register(*registry_);
  rpc_seconds_ = &prometheus::BuildHistogram()
                      .Name("hetbench_grpc_server_handling_seconds")
                      .Help("Time from the start of an RPC to its status, by method (streams: their lifetime).")
                      .Register(*registry_);
  loop_latency_ = &prometheus::BuildHistogram()
                       .Name("hetbench_coordinator_loop_latency_seconds")
                       .Help("Wait of each message or request from its arrival to its handling on the event loop.")
                       .Register(*registry_);
  loop_latency_all_ =
      &loop_latency_->Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                                      0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  commit_seconds_ = &prometheus::BuildHistogram()
                         .Name("hetbench_coordinator_commit_seconds")
                         .Help("Time of each commit of the event loop's row writes, on its writer thread.")
                         .Register(*registry_)
                         .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                                          0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
  loop_closures_ = &prometheus::BuildCounter()
                        .Name("hetbench_coordinator_loop_closures_total")
                        .Help("Messages and requests handled by the event loop.")
                        .Register(*registry_);
  live_jobs_ = &prometheus::BuildGauge()
                    .Name("hetbench_coordinator_live_jobs")
                    .Help("Jobs held in the coordinator's memory (not yet ended).")
                    .Register(*registry_);
  loop_depth_ = &prometheus::BuildGauge()
                     .Name("hetbench_coordinator_loop_queue_depth")
                     .Help("Closures waiting for the event loop.")
                     .Register(*registry_);
  shed_ = &prometheus::BuildCounter()
               .Name("hetbench_requests_shed_total")
               .Help("Client requests refused with RESOURCE_EXHAUSTED because the event loop's queue was full.")
               .Register(*registry_);
  specs_refused_ = &prometheus::BuildCounter()
                        .Name("hetbench_job_specs_refused_total")
                        .Help("Submitted job specs refused by validation at the edge.")
                        .Register(*registry_);
  tasks_assigned_ = &prometheus::BuildCounter()
                         .Name("hetbench_tasks_assigned_total")
                         .Help("Task attempts assigned to a device.")
                         .Register(*registry_);
  tasks_retried_ = &prometheus::BuildCounter()
                        .Name("hetbench_tasks_retried_total")
                        .Help("Task attempts that failed for a retryable reason and were queued again.")
                        .Register(*registry_);
  jobs_pruned_ = &prometheus::BuildCounter()
                      .Name("hetbench_jobs_raw_batches_pruned_total")
                      .Help("Finished jobs whose raw sample and power batches were deleted after their retention.")
                      .Register(*registry_);
  queue_overflow_ = &prometheus::BuildCounter()
                         .Name("hetbench_stream_send_queue_overflows_total")
                         .Help("Streams ended because their outbound queue reached its bound.")
                         .Register(*registry_);
  loop_closures_->Add({});
  live_jobs_->Add({});
  loop_depth_->Add({});
  specs_refused_->Add({});
  tasks_assigned_->Add({});
  tasks_retried_->Add({});
  jobs_pruned_->Add({});
  for (int s = v1::TASK_STATE_QUEUED; s <= v1::TASK_STATE_CANCELLED; ++s) {
    tasks_->Add({{"state", TaskStateName(static_cast<v1::TaskState>(s))}});
  }
  // Export zeros up front so dashboards and rules see the series before the first event.
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    jobs_->Add({{"state", JobStateName(static_cast<v1::JobState>(s))}});
  }
  for (v1::DeviceKind k : AllKinds()) agents_->Add({{"device_kind", DeviceKindName(k)}});
  duplicate_batches_->Add({});
  resumed_->Add({});
}

void Metrics::SetJobsByState(const std::map<v1::JobState, int64_t>& counts) {
  for (int s = v1::JOB_STATE_QUEUED; s <= v1::JOB_STATE_CANCELLED; ++s) {
    auto it = counts.find(static_cast<v1::JobState>(s));
    jobs_->Add({{"state", JobStateName(static_cast<v1::JobState>(s))}})
        .Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void Metrics::SetDeviceHealth(const std::map<std::pair<std::string, std::string>, v1::DeviceHealth>& health) {
  for (prometheus::Gauge* g : device_health_series_) device_health_->Remove(g);
  device_health_series_.clear();
  int64_t quarantined = 0;
  for (const auto& [key, h] : health) {
    prometheus::Gauge& g = device_health_->Add({{"agent", key.first},
                                                {"device", key.second},
                                                {"verdict", VerdictName(h.verdict())},
                                                {"quarantined", h.quarantined() ? "true" : "false"}});
    g.Set(h.verdict() == v1::VERDICT_FAIL ? 1.0 : 0.5);
    device_health_series_.push_back(&g);
    quarantined += h.quarantined() ? 1 : 0;
  }
  devices_quarantined_->Add({}).Set(static_cast<double>(quarantined));
}

void Metrics::SetValidationRatios(const v1::DeviceVerdict& verdict) {
  const std::pair<std::string, std::string> key{verdict.agent_id(), verdict.device_id()};
  auto it = validation_ratio_series_.find(key);
  if (it != validation_ratio_series_.end()) {
    for (prometheus::Gauge* g : it->second) validation_ratio_->Remove(g);
    validation_ratio_series_.erase(it);
  }
  if (verdict.verdict() == v1::VERDICT_PASS || verdict.verdict() == v1::VERDICT_SKIPPED) return;
  std::vector<prometheus::Gauge*>& series = validation_ratio_series_[key];
  for (const v1::TestVerdict& t : verdict.tests()) {
    if (t.baseline_median() <= 0) continue;
    prometheus::Gauge& g =
        validation_ratio_->Add({{"agent", verdict.agent_id()}, {"device", verdict.device_id()}, {"test", t.test()}});
    g.Set(t.ratio());
    series.push_back(&g);
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

void Metrics::AddResumedTask() { resumed_->Add({}).Increment(); }

void Metrics::AddRejectedMessage(const std::string& reason) { rejected_->Add({{"reason", reason}}).Increment(); }

void Metrics::ObserveTaskFinished(const std::string& model, v1::DeviceKind kind, v1::TaskState state,
                                  double duration_seconds) {
  tasks_finished_->Add({{"model", model}, {"device_kind", DeviceKindName(kind)}, {"state", TaskStateName(state)}})
      .Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
  task_duration_->Add({{"model", model}, {"device_kind", DeviceKindName(kind)}}, kBuckets).Observe(duration_seconds);
}

void Metrics::SetPower(const std::string& agent, const std::string& device_kind, v1::PowerSource source, double watts) {
  auto& g = power_->Add({{"agent", agent}, {"device_kind", device_kind}, {"source", PowerSourceName(source)}});
  g.Set(watts);
  absl::MutexLock l(&mu_);
  Track(agent, power_, &g);
}

template <typename T>
void Metrics::Track(const std::string& agent, prometheus::Family<T>* family, T* metric) {
  agent_series_[agent].emplace(metric, [family, metric] { family->Remove(metric); });
}

void Metrics::AddEnergy(const std::string& agent, const std::string& device_kind, v1::PowerSource source,
                        double joules) {
  if (joules > 0) {
    auto& c = energy_->Add({{"agent", agent}, {"device_kind", device_kind}, {"source", PowerSourceName(source)}});
    c.Increment(joules);
    absl::MutexLock l(&mu_);
    Track(agent, energy_, &c);
  }
}

void Metrics::AddPowerReadErrors(const std::string& agent, v1::PowerSource source, int n) {
  if (n > 0) {
    auto& c = read_errors_->Add({{"agent", agent}, {"source", PowerSourceName(source)}});
    c.Increment(n);
    absl::MutexLock l(&mu_);
    Track(agent, read_errors_, &c);
  }
}

void Metrics::SetSensorsUp(const std::string& agent,
                           const std::vector<std::pair<std::string, v1::SensorInfo>>& sensors) {
  // One series per (device kind, source): up if any sensor of it works.
  std::map<std::pair<std::string, std::string>, bool> up;
  for (const auto& [device_kind, info] : sensors) {
    bool& u = up[{device_kind, PowerSourceName(info.source())}];
    u = u || info.available();
  }
  absl::MutexLock l(&mu_);
  for (const auto& [key, value] : up) {
    auto& g = sensor_up_->Add({{"agent", agent}, {"device_kind", key.first}, {"source", key.second}});
    g.Set(value ? 1 : 0);
    Track(agent, sensor_up_, &g);
  }
}

Metrics::AgentGauges& Metrics::GaugesOf(const std::string& agent) {
  auto it = agent_gauges_.find(agent);
  if (it != agent_gauges_.end()) return it->second;
  // The first message of an agent: its series, made once (each heartbeat then sets two gauges).
  AgentGauges g{&agent_up_->Add({{"agent", agent}}), &agent_last_seen_->Add({{"agent", agent}})};
  Track(agent, agent_up_, g.up);
  Track(agent, agent_last_seen_, g.last_seen);
  return agent_gauges_.emplace(agent, g).first->second;
}

void Metrics::AgentSeen(const std::string& agent, double unix_seconds) {
  absl::MutexLock l(&mu_);
  AgentGauges& g = GaugesOf(agent);
  g.up->Set(1);
  g.last_seen->Set(unix_seconds);
}

void Metrics::AgentDown(const std::string& agent) {
  absl::MutexLock l(&mu_);
  GaugesOf(agent).up->Set(0);
}

void Metrics::SetTasksByState(const std::map<v1::TaskState, int64_t>& counts) {
  for (int s = v1::TASK_STATE_QUEUED; s <= v1::TASK_STATE_CANCELLED; ++s) {
    auto it = counts.find(static_cast<v1::TaskState>(s));
    tasks_->Add({{"state", TaskStateName(static_cast<v1::TaskState>(s))}})
        .Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

namespace {
constexpr std::array<double, Metrics::kStepBuckets - 1> kStepBounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

const prometheus::Histogram::BucketBoundaries& StepBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets(kStepBounds.begin(), kStepBounds.end());
  return kBuckets;
}
}  // namespace

Metrics::StepCounts Metrics::CountSteps(const google::protobuf::RepeatedField<int64_t>& durations_ns) {
  const auto& bounds = StepBuckets();
  // The bounds in whole nanoseconds: a duration d belongs to the first bucket
  // with d * 1e-9 <= bound, that is d <= floor(bound * 1e9) for integer d
  // (the bounds are whole microseconds at least, so the product is exact).
  static const std::vector<int64_t> kBoundsNs = [&bounds] {
    std::vector<int64_t> ns;
    for (double b : bounds) ns.push_back(static_cast<int64_t>(std::llround(b * 1e9)));
    return ns;
  }();
  const size_t nb = kBoundsNs.size();  // kStepBuckets - 1
  StepCounts c;
  auto& counts = c.bucket_increments;
  int64_t total_ns = 0;
  size_t b = 0;
  for (int64_t d : durations_ns) {
    total_ns += d;
    // Steps of one batch mostly share a bucket: the previous one is tried first.
    if ((b == nb || d <= kBoundsNs[b]) && (b == 0 || d > kBoundsNs[b - 1])) {
      ++counts[b];
      continue;
    }
    b = static_cast<size_t>(std::lower_bound(kBoundsNs.begin(), kBoundsNs.end(), d) - kBoundsNs.begin());
    ++counts[b];
  }
  c.sum_seconds = static_cast<double>(total_ns) * 1e-9;
  return c;
}

void Metrics::ObserveSteps(const std::string& model, v1::DeviceKind kind, v1::Phase phase, const StepCounts& counts) {
  step_seconds_
      ->Add({{"model", model}, {"device_kind", DeviceKindName(kind)}, {"phase", PhaseName(phase)}}, StepBuckets())
      .ObserveMultiple(std::vector<double>(counts.bucket_increments.begin(), counts.bucket_increments.end()),
                       counts.sum_seconds);
}

void Metrics::SetTaskFigures(const std::string& model, v1::DeviceKind kind, const v1::TaskResult& result) {
  const std::string kind_name = DeviceKindName(kind);
  for (const v1::PhaseResult& p : result.phases()) {
    const prometheus::Labels labels = {{"model", model}, {"device_kind", kind_name}, {"phase", PhaseName(p.phase())}};
    task_throughput_->Add(labels).Set(p.stats().samples_per_second());
    const EnergySummary e = SummarizeEnergy(result, p.phase());
    if (e.ok) {
      prometheus::Labels with_source = labels;
      with_source["source"] = PowerSourceName(e.source);
      task_joules_per_sample_->Add(with_source).Set(e.joules_per_sample);
    }
    for (const v1::CostResult& c : result.cost()) {
      if (c.phase() == p.phase() && c.usd_per_hour() > 0) task_usd_per_1000_->Add(labels).Set(c.usd_per_1000_samples());
    }
    if (p.phase() == v1::PHASE_SERVE && result.has_serving()) {
      // Bounded labels: models of the zoo, device kinds, four scenarios, three percentiles.
      const v1::ServingRun& s = result.serving();
      const prometheus::Labels serving = {{"model", model}, {"device_kind", kind_name}, {"scenario", s.scenario()}};
      // "percentile", not "quantile": that label is reserved for summaries (promtool refuses it on a gauge).
      for (const auto& [percentile, ns] : {std::pair{"50", s.latency_p50_ns()}, std::pair{"90", s.latency_p90_ns()},
                                           std::pair{"99", s.latency_p99_ns()}}) {
        prometheus::Labels q = serving;
        q["percentile"] = percentile;
        serving_latency_->Add(q).Set(static_cast<double>(ns) * 1e-9);
      }
      serving_qps_->Add(serving).Set(s.achieved_qps());
      serving_valid_->Add(serving).Set(p.valid() ? 1 : 0);
    }
  }
}

void Metrics::ObserveRpc(const std::string& method, const std::string& code, double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                                   0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  rpc_handled_->Add({{"method", method}, {"code", code}}).Increment();
  rpc_seconds_->Add({{"method", method}}, kBuckets).Observe(seconds);
}

void Metrics::ForgetAgent(const std::string& agent) {
  absl::MutexLock l(&mu_);
  auto it = agent_series_.find(agent);
  if (it == agent_series_.end()) return;
  for (auto& [metric, remove] : it->second) remove();
  agent_series_.erase(it);
  agent_gauges_.erase(agent);
}

size_t Metrics::agent_series() {
  absl::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [agent, series] : agent_series_) n += series.size();
  return n;
}

void Metrics::ObserveLoopBatch(const std::vector<double>& latencies_seconds, size_t closures) {
  for (double s : latencies_seconds) loop_latency_all_->Observe(s);
  if (closures > 0) loop_closures_->Add({}).Increment(static_cast<double>(closures));
}

void Metrics::ObserveCommit(double seconds) { commit_seconds_->Observe(seconds); }

void Metrics::SetLiveJobs(int64_t live_jobs, int64_t queue_depth) {
  live_jobs_->Add({}).Set(static_cast<double>(live_jobs));
  loop_depth_->Add({}).Set(static_cast<double>(queue_depth));
}

void Metrics::AddRequestShed(const std::string& method) { shed_->Add({{"method", method}}).Increment(); }
void Metrics::AddSpecRefused() { specs_refused_->Add({}).Increment(); }
void Metrics::AddTaskAssigned() { tasks_assigned_->Add({}).Increment(); }
void Metrics::AddTaskRetried() { tasks_retried_->Add({}).Increment(); }
void Metrics::AddJobsPruned(int n) { jobs_pruned_->Add({}).Increment(n); }
void Metrics::AddSendQueueOverflow(const std::string& stream) {
  queue_overflow_->Add({{"stream", stream}}).Increment();
}

}  // namespace hetbench::server
