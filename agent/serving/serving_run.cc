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

// The server scenario's arrivals: a seeded Poisson schedule long enough for
// both min_queries and min_duration_seconds (measured from the first
// arrival), at most ServingLimits::kMaxQueries.
std::vector<int64_t> ServerSchedule(const v1::JobSpec& spec) {
  const v1::ServingSpec& s = spec.serving();
  const auto min_ns = static_cast<int64_t>(s.min_duration_seconds() * 1e9);
  // Enough arrivals to cover the duration with room for the draw's spread,
  // then cut at the first point where both minimums hold.
  const int64_t room = ServingQueryCapacity(spec);
  std::vector<int64_t> schedule =
      PoissonSchedule(spec.seed(), s.target_qps(), std::numeric_limits<int64_t>::max() / 4, room);
  for (size_t i = 0; i < schedule.size(); ++i) {
    if (static_cast<int64_t>(i + 1) >= s.min_queries() && schedule[i] - schedule.front() >= min_ns) {
      schedule.resize(i + 1);
      break;
    }
  }
  return schedule;
}

int64_t Percentile(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  return NearestRank(v, p);
}

}  // namespace

void RunServing(const v1::JobSpec& spec, int max_batch, const BatchingServer::Compute& compute,
                const std::string& what, const ServingControl& control, v1::TaskResult* result,
                std::vector<ServedQuery>* answered_queries) {
  const v1::ServingSpec& s = spec.serving();
  max_batch = std::max(max_batch, 1);
  v1::ServingRun* out = result->mutable_serving();
  out->set_scenario(s.scenario());
  out->set_target_qps(s.target_qps());
  out->set_max_batch(max_batch);
  out->set_instances(s.instances());
  // One query outstanding (single_stream) never fills a batch: no waiting for one.
  const double queue_delay_ms = s.scenario() == "single_stream" ? 0.0 : s.max_queue_delay_ms();
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

  const auto bound = absl::Milliseconds(s.latency_bound_ms());
  const absl::Duration wait = absl::Seconds(10) + 10 * bound;  // for answers after the last issue
  BatchingOptions options;
  options.max_batch = max_batch;
  options.max_queue_delay = absl::Milliseconds(queue_delay_ms);
  options.instances = s.instances();
  control.issued->store(0);
  OpenLoopRun run;
  std::vector<ServedBatch> batches;
  double schedule_seconds = 0;
  {
    BatchingServer server(options, compute);
    if (s.scenario() == "single_stream") {
      ClosedLoopLimits limits;
      limits.min_queries = s.min_queries();
      limits.min_duration = absl::Seconds(s.min_duration_seconds());
      limits.max_queries = ServingLimits::kMaxQueries;
      limits.timeout = wait;
      control.total->store(s.min_queries());
      run = RunClosedLoop(server, limits, control.cancel, control.issued);
    } else {
      const std::vector<int64_t> schedule = s.scenario() == "server"
                                                ? ServerSchedule(spec)
                                                : std::vector<int64_t>(static_cast<size_t>(ServingQueryCapacity(spec)), 0);
      if (!schedule.empty()) schedule_seconds = static_cast<double>(schedule.back()) * 1e-9;
      control.total->store(static_cast<int64_t>(schedule.size()));
      run = RunOpenLoop(schedule, server, wait, absl::Microseconds(50), control.cancel, control.issued);
    }
    batches = server.Batches();
  }  // the server answers what is still queued, then stops

  // Every answered query, on the task's time axis.
  const int64_t origin = run.run_start_ns - control.task_start_ns;
  answered_queries->reserve(answered_queries->size() + run.queries.size());
  std::vector<int64_t> delays;
  delays.reserve(run.queries.size());
  int64_t answered = 0, first_scheduled = -1, last_answered = 0;
  for (const QueryTimes& q : run.queries) {
    delays.push_back(q.issue_delay_ns());
    if (first_scheduled < 0) first_scheduled = q.scheduled_ns;
    if (q.answered_ns < 0) continue;
    ++answered;
    last_answered = std::max(last_answered, q.answered_ns);
    answered_queries->push_back({origin + q.scheduled_ns, q.latency_ns()});
  }
  out->set_queries_scheduled(static_cast<int64_t>(run.queries.size()));
  out->set_queries_answered(answered);
  out->set_schedule_seconds(s.scenario() == "single_stream" && !run.queries.empty()
                                ? static_cast<double>(run.queries.back().scheduled_ns) * 1e-9
                                : schedule_seconds);
  if (answered > 0 && last_answered > first_scheduled) {
    out->set_achieved_qps(static_cast<double>(answered) / (static_cast<double>(last_answered - first_scheduled) * 1e-9));
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

  if (!run.queries.empty()) {
    v1::PhaseWindow* w = result->add_windows();
    w->set_phase(v1::PHASE_SERVE);
    w->set_start_ns(origin + first_scheduled);
    w->set_end_ns(origin + std::max(last_answered, run.queries.back().issued_ns));
    result->set_evaluate_seconds(static_cast<double>(w->end_ns() - w->start_ns()) * 1e-9);
  }
}

}  // namespace hetbench::agent
