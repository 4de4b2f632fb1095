#include "agent/serving/serving_run.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/time/time.h"
#include "agent/serving/issuer.h"
#include "common/clock.h"
#include "common/serving_spec.h"
#include "common/serving_stats.h"

namespace hetbench::agent {

namespace {

int64_t Percentile(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  return NearestRank(v, p);
}

// One run of the scenario at `qps` against a fresh batcher.
struct OneRun {
  ScenarioRun scenario;
  std::vector<ServedBatch> batches;
  double workers_cpu_seconds = 0;  // the batcher's workers over the run
};

OneRun RunOnce(const v1::JobSpec& spec, double qps, const BatchingOptions& options,
               const BatchingServer::Compute& compute, const ServingControl& control,
               const ReplicaStart* replica = nullptr) {
  OneRun one;
  BatchingServer server(options, compute);
  const double workers_cpu = server.WorkersCpuSeconds();
  one.scenario = RunScenario(spec, qps, server, control, absl::ZeroDuration(), replica);
  one.workers_cpu_seconds = server.WorkersCpuSeconds() - workers_cpu;
  one.batches = server.Batches();  // every batch: each is recorded before its answers
  return one;
}

}  // namespace

absl::StatusOr<ReplicaStart> StartReplica(const ServingControl& control, v1::ServingRun* out) {
  if (control.replicas == nullptr || control.replicas->gang.world_size() <= 1) return ReplicaStart();
  // The lead covers the agreement's own round and the issuers' wake-up.
  auto start = MeetReplicas(*control.replicas, absl::Milliseconds(500));
  if (!start.ok()) return start.status();
  *out->mutable_replica() = start->record;
  return start;
}

ScenarioRun RunScenario(const v1::JobSpec& spec, double qps, ServingTarget& target, const ServingControl& control,
                        absl::Duration answer_allowance, const ReplicaStart* replica) {
  const v1::ServingSpec& s = spec.serving();
  // Answers after the last issue (single_stream: after each).
  const absl::Duration wait = absl::Seconds(10) + 10 * absl::Milliseconds(s.latency_bound_ms()) + answer_allowance;
  ScenarioRun one;
  control.issued->store(0);
  const double issuer_cpu = ThreadCpuSeconds();
  if (s.scenario() == "single_stream" || s.scenario() == "multi_stream") {
    ClosedLoopLimits limits;
    limits.min_queries = s.min_queries();
    limits.min_duration = absl::Seconds(s.min_duration_seconds());
    limits.max_queries = ServingLimits::kMaxQueries;
    limits.timeout = wait;
    control.total->store(s.min_queries());
    if (s.scenario() == "multi_stream") {
      FanOutTarget queries(target, s.samples_per_query());
      one.run = RunClosedLoop(queries, limits, control.cancel, control.issued);
    } else {
      one.run = RunClosedLoop(target, limits, control.cancel, control.issued);
    }
    if (!one.run.queries.empty())
      one.schedule_seconds = static_cast<double>(one.run.queries.back().scheduled_ns) * 1e-9;
  } else {
    std::vector<int64_t> schedule =
        s.scenario() == "offline" ? std::vector<int64_t>(static_cast<size_t>(ServingQueryCapacity(spec, qps)), 0)
                                  : ServerSchedule(spec, qps);
    if (!schedule.empty()) one.schedule_seconds = static_cast<double>(schedule.back()) * 1e-9;
    int64_t start_ns = 0;
    if (replica != nullptr && replica->replicas > 1) {  // this replica's share of the global schedule
      std::vector<int64_t> share;
      for (size_t i = static_cast<size_t>(replica->rank); i < schedule.size(); i += static_cast<size_t>(replica->replicas)) {
        share.push_back(schedule[i]);
      }
      schedule = std::move(share);
      start_ns = replica->start_ns;
    }
    control.total->store(static_cast<int64_t>(schedule.size()));
    one.run = RunOpenLoop(schedule, target, wait, kIssuerSpin, control.cancel, control.issued, start_ns);
  }
  one.issuer_cpu_seconds = ThreadCpuSeconds() - issuer_cpu;
  return one;
}

v1::PhaseWindow SummarizeRun(const ScenarioRun& one, const std::vector<ServedBatch>& batches, int64_t task_start_ns,
                             v1::ServingRun* out, std::vector<ServedQuery>* answered) {
  const OpenLoopRun& run = one.run;
  const int64_t origin = run.run_start_ns - task_start_ns;
  std::vector<int64_t> delays;
  delays.reserve(run.queries.size());
  int64_t n = 0, first_scheduled = -1, last_answered = 0;
  for (const QueryTimes& q : run.queries) {
    delays.push_back(q.issue_delay_ns());
    if (first_scheduled < 0) first_scheduled = q.scheduled_ns;
    if (q.answered_ns < 0) continue;
    ++n;
    last_answered = std::max(last_answered, q.answered_ns);
    answered->push_back({origin + q.scheduled_ns, q.latency_ns()});
  }
  out->set_queries_scheduled(static_cast<int64_t>(run.queries.size()));
  if (!run.queries.empty()) {
    out->set_issuer_cpu_us_per_query(one.issuer_cpu_seconds / static_cast<double>(run.queries.size()) * 1e6);
  }
  out->set_queries_answered(n);
  out->set_schedule_seconds(one.schedule_seconds);
  if (n > 0 && last_answered > first_scheduled) {
    out->set_achieved_qps(static_cast<double>(n) / (static_cast<double>(last_answered - first_scheduled) * 1e-9));
  }
  if (!delays.empty()) {
    out->set_issue_delay_p50_ns(Percentile(delays, 50));
    out->set_issue_delay_p99_ns(Percentile(delays, 99));
    out->set_issue_delay_max_ns(*std::max_element(delays.begin(), delays.end()));
  }
  int64_t batched = 0;
  for (const ServedBatch& b : batches) batched += b.size;
  out->set_batches(static_cast<int64_t>(batches.size()));
  if (!batches.empty()) out->set_mean_batch(static_cast<double>(batched) / static_cast<double>(batches.size()));
  v1::PhaseWindow w;
  w.set_phase(v1::PHASE_SERVE);
  if (!run.queries.empty()) {
    w.set_start_ns(origin + first_scheduled);
    w.set_end_ns(origin + std::max(last_answered, run.queries.back().issued_ns));
  }
  return w;
}

namespace {

// A peak search's run at `qps`, judged here by the coordinator's rules from
// its own latencies (the final run is judged by the coordinator itself).
v1::ServingStep PeakStep(const v1::JobSpec& spec, double qps, const BatchingOptions& options,
                         const BatchingServer::Compute& compute, const ServingControl& control) {
  const OneRun one = RunOnce(spec, qps, options, compute, control);
  v1::ServingRun figures;
  std::vector<ServedQuery> answered;
  const v1::PhaseWindow w = SummarizeRun(one.scenario, one.batches, control.task_start_ns, &figures, &answered);
  std::vector<int64_t> latencies;
  latencies.reserve(answered.size());
  for (const ServedQuery& q : answered) latencies.push_back(q.latency_ns);
  const auto n = static_cast<int64_t>(latencies.size());
  return JudgeStep(spec, qps, std::move(latencies), n, w, &figures);
}

}  // namespace

v1::ServingStep JudgeStep(const v1::JobSpec& spec, double qps, std::vector<int64_t> latencies, int64_t items,
                          const v1::PhaseWindow& window, v1::ServingRun* figures, const GenerativeTimes* generative) {
  std::sort(latencies.begin(), latencies.end());
  v1::PhaseResult phase;
  phase.set_phase(v1::PHASE_SERVE);
  phase.mutable_stats()->set_count(static_cast<int64_t>(latencies.size()));
  phase.mutable_stats()->set_items(items);
  phase.mutable_stats()->set_window_seconds(static_cast<double>(window.end_ns() - window.start_ns()) * 1e-9);
  JudgeServing(spec, latencies, figures, &phase, nullptr, generative);
  v1::ServingStep step;
  step.set_qps(qps);
  step.set_achieved_qps(figures->achieved_qps());
  step.set_queries(figures->queries_answered());
  step.set_latency_p50_ns(figures->latency_p50_ns());
  step.set_latency_p99_ns(figures->latency_p99_ns());
  step.set_latency_at_percentile_ns(figures->latency_at_percentile_ns());
  step.set_valid(phase.valid());
  *step.mutable_invalid_reasons() = phase.invalid_reasons();
  return step;
}

double SearchPeak(const v1::JobSpec& spec, const ServingControl& control,
                  const std::function<v1::ServingStep(double qps)>& run_at, v1::ServingRun* out) {
  const v1::ServingSpec& s = spec.serving();
  const double max_qps = ServingMaxQps(spec);
  const double min_qps = 1.0 / s.min_duration_seconds();  // at least one query in the run's duration
  double valid = 0, invalid = std::numeric_limits<double>::infinity(), lowest = s.target_qps();
  double qps = std::min(s.target_qps(), max_qps);
  for (int run = 0; run < s.peak_max_runs() && !control.cancel->load(); ++run) {
    lowest = std::min(lowest, qps);
    const v1::ServingStep step = run_at(qps);
    *out->add_steps() = step;
    if (step.valid()) {
      valid = std::max(valid, qps);
    } else {
      invalid = std::min(invalid, qps);
    }
    double next;
    if (valid == 0) {
      next = qps / 2;
      if (next < min_qps) break;  // nothing this slow meets the bound either
    } else if (invalid == std::numeric_limits<double>::infinity()) {
      if (qps >= max_qps) break;  // VALID at the highest rate a run may ask for
      next = std::min(qps * 2, max_qps);
    } else {
      if (invalid - valid <= s.peak_precision() * valid) break;
      next = (valid + invalid) / 2;
    }
    qps = next;
  }
  out->set_peak_qps(valid);
  return valid > 0 ? valid : lowest;
}

absl::Status RunServing(const v1::JobSpec& spec, double qps, int max_batch, const BatchingServer::Compute& compute,
                        const std::string& what, const ServingControl& control, v1::TaskResult* result,
                        std::vector<ServedQuery>* answered) {
  const v1::ServingSpec& s = spec.serving();
  max_batch = std::max(max_batch, 1);
  v1::ServingRun* out = result->mutable_serving();
  out->set_scenario(s.scenario());
  out->set_max_batch(max_batch);
  out->set_instances(s.instances());
  // One query outstanding (single_stream, multi_stream: its samples arrive
  // together) never fills a batch later: no waiting for one.
  const bool closed_loop = s.scenario() == "single_stream" || s.scenario() == "multi_stream";
  const double queue_delay_ms = closed_loop ? 0.0 : s.max_queue_delay_ms();
  out->set_samples_per_query(s.scenario() == "multi_stream" ? s.samples_per_query() : 1);
  out->set_max_queue_delay_ms(queue_delay_ms);
  out->set_compute(what);

  // Warm-up: full batches, untimed, on instance 0 (first-call allocations).
  const int64_t warm_start = SteadyNowNs();
  std::vector<int64_t> indices(static_cast<size_t>(max_batch));
  for (int b = 0; b < s.warmup_batches() && !control.cancel->load(); ++b) {
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(b * indices.size() + i);
    compute(indices, 0);
  }
  result->set_warmup_seconds(static_cast<double>(SteadyNowNs() - warm_start) * 1e-9);

  BatchingOptions options;
  options.max_batch = max_batch;
  options.max_queue_delay = absl::Milliseconds(queue_delay_ms);
  options.instances = s.instances();
  if (s.scenario() == "peak") {
    qps = SearchPeak(spec, control, [&](double at) { return PeakStep(spec, at, options, compute, control); }, out);
  }
  out->set_target_qps(s.scenario() == "server" || s.scenario() == "peak" ? qps : 0.0);
  const absl::StatusOr<ReplicaStart> replica = StartReplica(control, out);
  if (!replica.ok()) return replica.status();
  const OneRun one = RunOnce(spec, qps, options, compute, control, &*replica);
  const v1::PhaseWindow w = SummarizeRun(one.scenario, one.batches, control.task_start_ns, out, answered);
  if (!one.scenario.run.queries.empty()) {
    out->set_batcher_cpu_us_per_query(one.workers_cpu_seconds /
                                      static_cast<double>(one.scenario.run.queries.size()) * 1e6);
  }
  if (!one.scenario.run.queries.empty()) {
    *result->add_windows() = w;
    result->set_evaluate_seconds(static_cast<double>(w.end_ns() - w.start_ns()) * 1e-9);
  }
  return absl::OkStatus();
}

}  // namespace hetbench::agent
