#pragma once
/// The job table: the live (unfinished) jobs and their tasks, and what the
/// loop's current batch changed of them. A part of the coordinator
/// (server/service/coordinator.h), which decides; the table keeps the books.
///
/// Owns: live jobs by number (submit order); task id -> job; request id ->
/// job (idempotent submit) for live jobs; the rows changed in this batch;
/// the jobs that ended in this batch (evicted after its commit); counts of
/// ended jobs and tasks by state (evicted jobs, for the gauges); the next
/// job number. Ended jobs live in the store only.
///
/// Threading: the coordinator's loop thread only; not thread-safe. Time
/// comes in as arguments (`now_unix`), so tests need no clock.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hetbench/v1/coordinator.pb.h"
#include "server/store/job_store.h"

namespace hetbench::server {

/// A live job and which of its rows the current batch changed.
struct LiveJob {
  v1::Job job;
  std::string request_id;
  bool header_dirty = false;
  std::set<int> dirty_tasks;  // task indexes
};

class JobTable {
 public:
  /// Replaces the table with the store's live jobs (start-up, or a reload
  /// after a failed commit); `counts` are the store's counts of all jobs and
  /// tasks, `max_number` its highest job number. The next number never goes
  /// down. Nothing is marked changed.
  void Reset(std::vector<v1::Job> jobs, const StateCounts& counts, int64_t max_number);

  /// A new job from an effective spec: a task per model x target x batch
  /// size, or with `parallel.devices` a gang per device count (its ranks
  /// consecutive tasks, rank 0 first), or with a split across agents one gang
  /// whose rank s runs stage s, or with serving.replicas N a gang of N
  /// replicas per task. Queued at `now_unix`. The caller stores it.
  LiveJob& Create(v1::JobSpec effective, const std::string& request_id, double now_unix);

  /// Appends to a validation job (after Create) a gang of two ranks per
  /// pair of its targets (the all-reduce pairs, ExpandedValidation::pairs):
  /// ranks consecutive, rank 0 on the pair's first target, gang ids
  /// "<job>-g0", "-g1", ... The caller stores the job.
  void AddPairGangs(LiveJob& live, const std::vector<std::pair<size_t, size_t>>& pairs, double now_unix);

  /// The live job `job_id`, or null.
  LiveJob* Find(const std::string& job_id);
  /// The task `task_id` of a live job (with its job in `*job`), or null.
  v1::Task* FindTask(const std::string& task_id, LiveJob** job = nullptr);
  /// The live job an earlier submit with `request_id` created, if any.
  std::optional<std::string> JobForRequest(const std::string& request_id) const;

  /// Marks a row changed in this batch (written by WriteChanged).
  void MarkTask(LiveJob& job, const v1::Task& task);
  void MarkHeader(LiveJob& job);
  /// Settles the job's state from its tasks' (a cancelled job stays
  /// cancelled); a job all of whose tasks ended is evicted after this batch.
  void Recompute(LiveJob& job, double now_unix);
  /// Evicts `job` after this batch's commit (a cancelled job with nothing running).
  void EndAfterCommit(const LiveJob& job) { ended_.push_back(JobNumber(job.job.id())); }
  /// Validation jobs judged since the last call (their report is set), for
  /// the coordinator to apply their verdicts to device health.
  std::vector<std::string> TakeJudged() { return std::exchange(judged_, {}); }
  /// Whether `job_id` ended in this batch.
  bool EndedNow(const std::string& job_id) const;

  /// The rows this batch changed, as writes owning copies of them (the
  /// loop's writer commits them); clears the marks.
  std::vector<StoreWrite> TakeWrites();
  /// The jobs that ended in this batch (numbers), to evict after its commit.
  std::vector<int64_t> TakeEnded() { return std::exchange(ended_, {}); }
  /// After the commit of the batch they ended in: evicts `ended` jobs still
  /// ended, counting them as ended unless `count` is false (after Reset: the
  /// store's counts hold them); `evicted` runs for each first (the other
  /// parts forget its tasks).
  void Evict(const std::vector<int64_t>& ended, bool count, const std::function<void(const v1::Job&)>& evicted);

  /// Jobs and tasks by state, ended and live.
  void Count(std::map<v1::JobState, int64_t>* jobs, std::map<v1::TaskState, int64_t>* tasks) const;
  /// Whether a state may have changed since the last call (gauges).
  bool TakeCountsChanged() { return std::exchange(counts_changed_, false); }

  /// Every live job, in submit order (the scheduling pass walks them).
  std::map<int64_t, LiveJob>& live() { return jobs_; }
  size_t size() const { return jobs_.size(); }

 private:
  /// A queued task appended to `job` (its id "<job>-t<index>"), indexed.
  v1::Task* AddTask(v1::Job& job, const std::string& model, int batch_size, const v1::TargetSelector& target,
                    double now_unix);
  static void SetGang(v1::Task* task, const std::string& gang_id, int rank, int world);

  std::map<int64_t, LiveJob> jobs_;                // by number
  std::map<std::string, std::string> task_index_;  // task id -> job id
  std::map<std::string, std::string> requests_;    // request id -> job id
  std::set<int64_t> dirty_;                        // jobs with changed rows
  std::vector<int64_t> ended_;                     // ended in this batch (TakeEnded)
  int64_t next_number_ = 1;
  std::map<v1::JobState, int64_t> ended_jobs_;
  std::map<v1::TaskState, int64_t> ended_tasks_;
  bool counts_changed_ = true;
  std::vector<std::string> judged_;  // validation jobs judged in this batch
};

}  // namespace hetbench::server
