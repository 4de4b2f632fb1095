#pragma once
/// The coordinator's Prometheus metrics. Labels are bounded: job state,
/// device kind, model, phase; never a job or task id.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>

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
  void AddRejectedMessage(const std::string& reason);
  void ObserveTaskFinished(const std::string& model, v1::DeviceKind kind, v1::TaskState state, double duration_seconds);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* agents_;
  prometheus::Family<prometheus::Counter>* samples_;
  prometheus::Family<prometheus::Counter>* duplicate_batches_;
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Counter>* tasks_finished_;
  prometheus::Family<prometheus::Histogram>* task_duration_;
};

}  // namespace hetbench::server
