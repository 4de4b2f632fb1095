#pragma once
/// JobApi: what clients ask of the coordinator — submit, get, cancel, list and
/// watch jobs, list agents, page through a task's stored data.
///
/// Owns: nothing; it checks requests at the edge and posts them to the loop,
/// where the parts answer. A live job is copied from the JobTable in the
/// request's batch and answered after that batch commits (never a state that
/// could still roll back; a failed commit answers UNAVAILABLE); ended ones
/// are read from the store on a StoreReader, off the loop.
///
/// Threading: each call's edge work (spec defaults and validation, request
/// checks) runs on the caller's thread; the rest on the loop thread; answers
/// from the store come on the reader's thread. Calls are refused with
/// RESOURCE_EXHAUSTED and a retry hint when the loop's queue is full.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/loop/event_loop.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/placer.h"
#include "server/service/agent_sessions.h"
#include "server/service/job_table.h"
#include "server/service/session_table.h"
#include "server/service/watches.h"
#include "server/store/job_store.h"
#include "server/store/store_reader.h"

namespace hetbench::server {

class JobApi {
 public:
  struct Parts {
    EventLoop* loop;
    JobTable* jobs;
    SessionTable* sessions;
    AgentSessions* agents;
    Placer* placer;
    Watches* watches;
    Metrics* metrics;
    const Clock* clock;
  };
  explicit JobApi(Parts parts) : p_(parts) {}

  /// Where ended jobs and task data are read (set once the store is open,
  /// before the loop runs; until then reads are refused as UNAVAILABLE).
  void set_readers(StoreReader* ended, StoreReader* task_data) {
    ended_reader_ = ended;
    task_data_reader_ = task_data;
  }

  using JobCallback = std::function<void(absl::StatusOr<v1::Job>)>;
  struct Submitted {
    v1::Job job;
    bool existing = false;  // the request id named an earlier job
  };
  /// Fills defaults and validates on the calling thread (the edge), then
  /// posts. `request_id` makes it idempotent; a request still queued past
  /// `deadline` is dropped without creating anything.
  void SubmitJob(v1::JobSpec spec, std::string request_id, absl::Time deadline,
                 std::function<void(absl::StatusOr<Submitted>)> done);
  /// Shorthand without request id or deadline (tests).
  void SubmitJob(v1::JobSpec spec, JobCallback done);
  void GetJob(std::string job_id, JobCallback done);
  void CancelJob(std::string job_id, JobCallback done);
  void ListJobs(JobFilter filter, std::function<void(absl::StatusOr<JobPage>)> done);
  void ListAgents(std::function<void(std::vector<v1::AgentInfo>)> done);
  /// A page of one task's stored samples or power readings; `done` runs on
  /// the reader's thread.
  void GetTaskData(v1::GetTaskDataRequest request, std::function<void(absl::StatusOr<v1::TaskData>)> done);
  /// Sends a snapshot, then the latest state at most once per watch interval
  /// while it changes; closes with OK once the job ends. `summary`: events
  /// carry tasks without results (JOB_VIEW_SUMMARY).
  void WatchJob(std::string job_id, bool summary, std::shared_ptr<WatchSink> sink);
  /// Fleet-validation baselines (job_api_baselines.cc). Save checks at the
  /// edge, then gives the next version of the name and stores it in one
  /// transaction on the ended jobs' reader; Get and List read there too.
  void SaveBaseline(v1::Baseline baseline, std::function<void(absl::StatusOr<v1::Baseline>)> done);
  void GetBaseline(std::string name, int version, std::function<void(absl::StatusOr<v1::Baseline>)> done);
  void ListBaselines(std::string name, std::function<void(absl::StatusOr<std::vector<v1::Baseline>>)> done);
  /// On the loop: a job the coordinator makes itself (a scheduled
  /// revalidation), its spec already effective and trusted.
  void CreateOwnJob(v1::JobSpec effective, std::function<void(absl::StatusOr<Submitted>)> done) {
    CreateJob(std::move(effective), "", std::move(done));
  }

 private:
  /// On the loop: the job a request id already made, else a new one stored
  /// in this batch. A request id not in memory is first looked up in the
  /// store off the loop (`stored`: that answer, "" for none; nullopt before).
  void CreateJob(v1::JobSpec effective, const std::string& request_id,
                 std::function<void(absl::StatusOr<Submitted>)> done,
                 std::optional<std::string> stored = std::nullopt);
  /// Answers `done` with the job `existing` a request id already made, after this batch's commit.
  void AnswerExisting(const std::string& existing, std::function<void(absl::StatusOr<Submitted>)> done);
  /// A read's answer when the state it copied was rolled back.
  static absl::Status NotCommitted(const absl::Status& commit);
  /// Posts a client request (sheddable); false when the queue is full.
  bool Post(std::function<void()> fn) { return p_.loop->Post(std::move(fn), /*sheddable=*/true); }

  const Parts p_;
  StoreReader* ended_reader_ = nullptr;
  StoreReader* task_data_reader_ = nullptr;
};

}  // namespace hetbench::server
