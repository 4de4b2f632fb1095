#pragma once
/// The merge of a replicated serving run (serving.replicas): each replica's
/// task ends on its own; its exact latencies wait here until every replica
/// of its gang has ended, then the union is judged as one run (JudgeServing
/// over every replica's latencies merged exactly: never averaged
/// percentiles, never interpolated histogram buckets).
///
/// Owns: the parts of the gangs not yet complete (at most one attempt per
/// gang: a newer attempt's part replaces an older one's). A coordinator
/// restart loses the parts held: a gang completed after it gets no merged
/// figures (its replicas' own stand), which its report says.
///
/// Threading: the coordinator's loop thread only.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// One replica's ended task, as the merge needs it.
struct ReplicaPart {
  std::string task_id;
  int rank = 0;
  int attempt = 0;
  std::vector<int64_t> sorted_latencies;  // every stored SERVE sample, ascending
  int64_t stored = 0;                     // SERVE samples stored (= sorted_latencies.size() when exact)
  int64_t items = 0;
  int64_t window_start_coordinator_ns = 0;  // the SERVE window on the coordinator's clock
  int64_t window_end_coordinator_ns = 0;
  int64_t queries_scheduled = 0;
  int64_t queries_answered = 0;
  int64_t issue_delay_p99_ns = 0;
  int64_t clock_bound_ns = 0;
  double target_qps = 0;  // the run's rate (the whole schedule's)
};

class ReplicaMerges {
 public:
  /// Adds `part` of gang `gang_id` of `replicas` ranks; returns every part,
  /// in rank order, once each rank has one of the same attempt (and forgets
  /// the gang), else nothing.
  std::optional<std::vector<ReplicaPart>> Add(const std::string& gang_id, int replicas, ReplicaPart part);
  size_t gangs() const { return gangs_.size(); }

 private:
  std::map<std::string, std::map<int, ReplicaPart>> gangs_;  // gang -> rank -> part
};

/// The union of `parts` judged as one run by the spec's rules: its
/// percentiles (exact when every part was), queries, rate over the union's
/// window on the coordinator's clock, the largest replica issue-delay p99
/// (each replica's p99 is exact; the union's is at most their maximum), and
/// the verdict with its reasons.
v1::ReplicaMerge MergeReplicas(const v1::JobSpec& spec, const std::vector<ReplicaPart>& parts);

}  // namespace hetbench::server
