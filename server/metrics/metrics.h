#pragma once
/// The coordinator's Prometheus metrics. Labels are bounded: job state,
/// device kind, model, phase; never a job or task id.

#include <google/protobuf/repeated_field.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// Thread-safe (prometheus-cpp metrics are). The registry is shared with the
/// exposer.
class Metrics {
 public:
  Metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  /// Replaces the per-state job counts.
  void SetJobsByState(const std::map<v1::JobState, int64_t>& counts);
  /// Replaces the connected-agent counts; an agent counts once per kind it offers.
  void SetAgentsByKind(const std::map<std::string, int64_t>& counts);
  void AddSamplesIngested(v1::Phase phase, v1::DeviceKind kind, int64_t n);
  void AddDuplicateBatch();
  void AddResumedTask();
  void AddRejectedMessage(const std::string& reason);
  void ObserveTaskFinished(const std::string& model, v1::DeviceKind kind, v1::TaskState state, double duration_seconds);

  /// Power of one sensor (labels: agent, device_kind or "node", source).
  void SetPower(const std::string& agent, const std::string& device_kind, v1::PowerSource source, double watts);
  void AddEnergy(const std::string& agent, const std::string& device_kind, v1::PowerSource source, double joules);
  void AddPowerReadErrors(const std::string& agent, v1::PowerSource source, int n);
  /// Sensors an agent announced: up=1 when available, 0 when tried and unavailable.
  void SetSensorsUp(const std::string& agent, const std::vector<std::pair<std::string, v1::SensorInfo>>& sensors);
  /// hetbench_agent_up{agent} = 0: disconnected while its tasks wait for it
  /// to resume (its series stay until ForgetAgent).
  void AgentDown(const std::string& agent);
  /// Removes every series labelled with `agent` (up, last seen, power,
  /// energy, sensors, read errors): the agent is gone and not waited for, so
  /// the number of per-agent series is bounded by the agents known now.
  void ForgetAgent(const std::string& agent);
  /// Per-agent series exported now (for tests and the bench).
  size_t agent_series();
  /// hetbench_agent_up = 1 and the time of its latest message.
  void AgentSeen(const std::string& agent, double unix_seconds);
  /// Tasks by state (queued, running), replaced as a whole.
  void SetTasksByState(const std::map<v1::TaskState, int64_t>& counts);
  /// Step durations of one stored batch, pre-counted per histogram bucket so
  /// the hot ingest path takes the histogram's lock once per batch, not once
  /// per sample. Counting needs no lock and may run anywhere.
  static constexpr size_t kStepBuckets = 17;  // the step histogram's bounds, and +Inf
  struct StepCounts {
    /// One per bucket, +Inf last. In place: the counts are made on a stream's
    /// thread and dropped on the loop, where a heap block would be freed into
    /// the other thread's cache.
    std::array<int64_t, kStepBuckets> bucket_increments{};
    double sum_seconds = 0;
  };
  static StepCounts CountSteps(const google::protobuf::RepeatedField<int64_t>& durations_ns);
  /// Adds a batch's counts (labels: model, device_kind, phase).
  void ObserveSteps(const std::string& model, v1::DeviceKind kind, v1::Phase phase, const StepCounts& counts);
  /// The latest finished task's figures per model, device kind and phase:
  /// samples/s, joules per sample (with its source) and USD per 1,000 samples.
  void SetTaskFigures(const std::string& model, v1::DeviceKind kind, const v1::TaskResult& result);
  /// One finished RPC: `method` is the short name ("SubmitJob"), `code` the gRPC code name.
  void ObserveRpc(const std::string& method, const std::string& code, double seconds);

  /// One event-loop batch: the wait of each closure from Post to its start.
  void ObserveLoopBatch(const std::vector<double>& latencies_seconds, size_t closures);
  /// One commit of the loop's writer thread (a batch's row writes).
  void ObserveCommit(double seconds);
  void SetLiveJobs(int64_t live_jobs, int64_t queue_depth);
  /// Devices whose last validation did not pass, replaced as a whole:
  /// hetbench_device_health{agent,device,verdict,quarantined} = 1 (FAIL) or
  /// 0.5 (DEGRADED), and hetbench_devices_quarantined. Bounded by the
  /// devices that failed (a passing device has no series).
  void SetDeviceHealth(const std::map<std::pair<std::string, std::string>, v1::DeviceHealth>& health);
  /// hetbench_validation_ratio{agent,device,test}: each compared test's
  /// figure / its SKU's baseline, for a device whose latest validation did
  /// not pass; `verdict` PASS removes the device's series (bounded like
  /// hetbench_device_health; not restored after a coordinator restart).
  void SetValidationRatios(const v1::DeviceVerdict& verdict);
  void AddRequestShed(const std::string& method);
  void AddSpecRefused();
  void AddTaskAssigned();
  void AddTaskRetried();
  void AddJobsPruned(int n);
  /// A stream's outbound queue overflowed and the stream was ended (`stream`: agent or watch).
  void AddSendQueueOverflow(const std::string& stream);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* device_health_;
  prometheus::Family<prometheus::Gauge>* devices_quarantined_;
  std::vector<prometheus::Gauge*> device_health_series_;
  prometheus::Family<prometheus::Gauge>* validation_ratio_;
  std::map<std::pair<std::string, std::string>, std::vector<prometheus::Gauge*>> validation_ratio_series_;
  prometheus::Family<prometheus::Gauge>* agents_;
  prometheus::Family<prometheus::Counter>* samples_;
  prometheus::Family<prometheus::Counter>* duplicate_batches_;
  prometheus::Family<prometheus::Counter>* resumed_;
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Counter>* tasks_finished_;
  prometheus::Family<prometheus::Histogram>* task_duration_;
  prometheus::Family<prometheus::Gauge>* power_;
  prometheus::Family<prometheus::Counter>* energy_;
  prometheus::Family<prometheus::Gauge>* sensor_up_;
  prometheus::Family<prometheus::Counter>* read_errors_;
  prometheus::Family<prometheus::Histogram>* step_seconds_;
  prometheus::Family<prometheus::Gauge>* task_throughput_;
  prometheus::Family<prometheus::Gauge>* task_joules_per_sample_;
  prometheus::Family<prometheus::Gauge>* task_usd_per_1000_;
  prometheus::Family<prometheus::Gauge>* serving_latency_;
  prometheus::Family<prometheus::Gauge>* serving_qps_;
  prometheus::Family<prometheus::Gauge>* serving_valid_;
  prometheus::Family<prometheus::Gauge>* agent_up_;
  prometheus::Family<prometheus::Gauge>* agent_last_seen_;
  prometheus::Family<prometheus::Gauge>* tasks_;
  prometheus::Family<prometheus::Counter>* rpc_handled_;
  prometheus::Family<prometheus::Histogram>* rpc_seconds_;
  prometheus::Family<prometheus::Histogram>* loop_latency_;
  prometheus::Family<prometheus::Counter>* loop_closures_;
  prometheus::Family<prometheus::Gauge>* live_jobs_;
  prometheus::Family<prometheus::Gauge>* loop_depth_;
  prometheus::Family<prometheus::Counter>* shed_;
  prometheus::Family<prometheus::Counter>* specs_refused_;
  prometheus::Family<prometheus::Counter>* tasks_assigned_;
  prometheus::Family<prometheus::Counter>* tasks_retried_;
  prometheus::Family<prometheus::Counter>* jobs_pruned_;
  prometheus::Family<prometheus::Counter>* queue_overflow_;
  prometheus::Histogram* loop_latency_all_ = nullptr;
  prometheus::Histogram* commit_seconds_ = nullptr;

  /// Remembers a series of `agent` so ForgetAgent can remove it.
  template <typename T>
  void Track(const std::string& agent, prometheus::Family<T>* family, T* metric) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // For ForgetAgent: each agent's series, keyed by the metric's address.
  std::map<std::string, std::map<const void*, std::function<void()>>> agent_series_ ABSL_GUARDED_BY(mu_);
  // Each connected agent's up and last-seen gauges, so a heartbeat finds them without building label sets.
  struct AgentGauges {
    prometheus::Gauge* up;
    prometheus::Gauge* last_seen;
  };
  AgentGauges& GaugesOf(const std::string& agent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_map<std::string, AgentGauges> agent_gauges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetbench::server
