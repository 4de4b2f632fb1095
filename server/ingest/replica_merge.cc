#include "server/ingest/replica_merge.h"

#include <algorithm>
#include <utility>

#include "common/serving_spec.h"
#include "common/serving_stats.h"

namespace hetbench::server {

std::optional<std::vector<ReplicaPart>> ReplicaMerges::Add(const std::string& gang_id, int replicas, ReplicaPart part) {
  std::map<int, ReplicaPart>& parts = gangs_[gang_id];
  // A newer attempt of the gang starts over; an older one's late part is dropped.
  for (auto it = parts.begin(); it != parts.end();) {
    if (it->second.attempt < part.attempt) {
      it = parts.erase(it);
    } else {
      ++it;
    }
  }
  if (!parts.empty() && parts.begin()->second.attempt > part.attempt) return std::nullopt;
  parts[part.rank] = std::move(part);
  if (static_cast<int>(parts.size()) < replicas) return std::nullopt;
  std::vector<ReplicaPart> out;
  for (auto& [rank, p] : parts) out.push_back(std::move(p));
  gangs_.erase(gang_id);
  return out;
}

v1::ReplicaMerge MergeReplicas(const v1::JobSpec& spec, const std::vector<ReplicaPart>& parts) {
  v1::ReplicaMerge m;
  m.set_replicas(static_cast<int32_t>(parts.size()));
  std::vector<std::vector<int64_t>> sorted;
  int64_t stored = 0, items = 0, start = 0, end = 0, bound = 0;
  bool any_window = false;
  v1::ServingRun* run = m.mutable_serving();
  run->set_scenario(spec.serving().scenario());
  run->mutable_replica()->set_replicas(static_cast<int32_t>(parts.size()));
  run->set_samples_per_query(1);
  if (!parts.empty()) run->set_target_qps(parts.front().target_qps);
  for (const ReplicaPart& p : parts) {
    m.add_task_ids(p.task_id);
    sorted.push_back(p.sorted_latencies);
    stored += p.stored;
    items += p.items;
    if (p.window_end_coordinator_ns > p.window_start_coordinator_ns) {
      start = any_window ? std::min(start, p.window_start_coordinator_ns) : p.window_start_coordinator_ns;
      end = any_window ? std::max(end, p.window_end_coordinator_ns) : p.window_end_coordinator_ns;
      any_window = true;
    }
    run->set_queries_scheduled(run->queries_scheduled() + p.queries_scheduled);
    run->set_queries_answered(run->queries_answered() + p.queries_answered);
    run->set_issue_delay_p99_ns(std::max(run->issue_delay_p99_ns(), p.issue_delay_p99_ns));
    bound = std::max(bound, p.clock_bound_ns);
  }
  m.set_max_clock_bound_ns(bound);
  const std::vector<int64_t> merged = MergeSorted(sorted);
  v1::PhaseResult* phase = m.mutable_phase();
  phase->set_phase(v1::PHASE_SERVE);
  phase->mutable_stats()->set_count(stored);
  phase->mutable_stats()->set_items(items);
  const double window_seconds = any_window ? static_cast<double>(end - start) * 1e-9 : 0.0;
  phase->mutable_stats()->set_window_seconds(window_seconds);
  if (window_seconds > 0) run->set_achieved_qps(static_cast<double>(run->queries_answered()) / window_seconds);
  JudgeServing(spec, merged, run, phase);
  return m;
}

}  // namespace hetbench::server
