#pragma once
/// Watches: the open WatchJob streams and what their jobs' watchers have not
/// been sent yet. A part of the coordinator (server/service/coordinator.h).
///
/// Owns: every open watch, by job id, with the view it asked for; per job,
/// whether it changed since its last event, the latest change's message, and
/// when its last event went out.
///
/// Pacing: a job's watchers get at most one event per interval, carrying the
/// job's latest state (built once per view and shared by its watchers); a
/// job's end is sent at once, and then its watches close with OK. Each sink
/// keeps only the latest unsent event, so a slow watcher costs one event.
///
/// Threading: the coordinator's loop thread only; not thread-safe. `clock`
/// paces events (the coordinator passes a real clock: the pace people see is
/// a property of this process; tests drive a simulated one).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "server/service/sinks.h"

namespace hetbench::server {

/// The job's tasks without their results (JOB_VIEW_SUMMARY).
void StripResults(v1::Job* job);

class Watches {
 public:
  /// `clock` must outlive this.
  Watches(const Clock* clock, double interval_seconds);

  /// From now on `sink` watches `job_id` (the caller sent its snapshot).
  /// `summary`: events carry tasks without results.
  void Add(const std::string& job_id, bool summary, std::shared_ptr<WatchSink> sink);
  /// `job_id` changed; `message` says how (the latest one is sent).
  void Changed(const std::string& job_id, const std::string& message);

  /// What Flush needs of the coordinator's jobs.
  struct JobView {
    /// The live job `job_id`, or null when it is not in memory.
    std::function<const v1::Job*(const std::string& job_id)> find;
    /// Whether `job_id` ended in the batch just committed.
    std::function<bool(const std::string& job_id)> ended_now;
  };
  /// Runs a send once the batch that made the state is committed (EventLoop::Defer).
  using Defer = std::function<void(std::function<void(const absl::Status& commit)>)>;
  /// At the end of a batch: builds each changed job's event now (the state
  /// this batch commits) and `defer`s its send to the job's watchers: jobs
  /// whose interval has passed, and ended jobs at once, whose watches then
  /// close with OK. If the commit fails, nothing is sent: the job is marked
  /// changed again (and an ended job's watches kept), so the reloaded state
  /// goes out next. A changed job no longer live, or with no watcher, is
  /// dropped from the pending set.
  void Flush(const JobView& jobs, const Defer& defer);

  /// Drops `job_id`'s pending change (the job left memory).
  void Forget(const std::string& job_id);
  /// Closes every watch with `status` and forgets them all (shutdown).
  void CloseAll(const grpc::Status& status);
  /// Whether CloseAll ran: new watches are refused.
  bool closed() const { return closed_; }

  /// Open watches of `job_id`, and of all jobs.
  size_t watchers(const std::string& job_id) const { return watchers_.count(job_id); }
  size_t watchers() const { return watchers_.size(); }

 private:
  struct Watcher {
    std::shared_ptr<WatchSink> sink;
    bool summary = false;
  };
  struct Pacing {
    std::string message;       // the latest change's
    bool sent_before = false;
    int64_t last_sent_ns = 0;  // clock_'s monotonic time
  };

  const Clock* const clock_;
  const int64_t interval_ns_;
  std::multimap<std::string, Watcher> watchers_;  // by job id
  std::map<std::string, Pacing> pacing_;          // by job id, while the job is live
  std::set<std::string> changed_;                 // jobs changed since their last event
  bool closed_ = false;
};

}  // namespace hetbench::server
