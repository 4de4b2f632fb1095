#pragma once
/// Durable storage of jobs, tasks and the batches agents stream.
///
/// Layout: a job is one row (its spec and header) and each task one row, so a
/// task's change writes that task alone. Only live (unfinished) jobs are
/// loaded at start; finished ones are read on demand, a job or a page at a time.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::server {

/// Which jobs a listing shows, newest first.
struct JobFilter {
  int page_size = 50;
  std::string page_token;  // from JobPage::next_page_token; empty = newest
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string model;
  v1::DeviceKind device_kind = v1::DEVICE_KIND_UNSPECIFIED;
};

struct JobPage {
  std::vector<v1::Job> jobs;    // tasks carry states, not results
  std::string next_page_token;  // empty on the last page
};

struct StateCounts {
  std::map<v1::JobState, int64_t> jobs;
  std::map<v1::TaskState, int64_t> tasks;
};

class JobStore;
/// One row write of the coordinator's loop, run later on its writer thread
/// inside a batch's transaction (server/loop/event_loop.h). It owns copies of
/// what it writes; it never refers to live state.
using StoreWrite = std::function<absl::Status(JobStore&)>;

/// The devices' validation health (server/validation/health), one row per
/// (agent, device): what a JobStore keeps beside jobs and batches.
class DeviceHealthStore {
 public:
  virtual ~DeviceHealthStore() = default;
  /// A device's last validation verdict, replacing its row; a PASS deletes it.
  virtual absl::Status PutDeviceHealth(const std::string& agent_id, const v1::DeviceHealth& health) = 0;
  /// Every stored row: (agent id, health).
  virtual absl::StatusOr<std::vector<std::pair<std::string, v1::DeviceHealth>>> LoadDeviceHealth() = 0;
};

/// Fleet-validation baselines, one row per (name, version), never rewritten.
class BaselineStore {
 public:
  virtual ~BaselineStore() = default;
  /// Stores `baseline` (its name and version set); ALREADY_EXISTS when that version is taken.
  virtual absl::Status PutBaseline(const v1::Baseline& baseline) = 0;
  /// The highest version stored for `name`; 0 when none.
  virtual absl::StatusOr<int> LatestBaselineVersion(const std::string& name) = 0;
  /// One version (0: the latest), or nullopt.
  virtual absl::StatusOr<std::optional<v1::Baseline>> GetBaseline(const std::string& name, int version) = 0;
  /// Headers (no SKUs) of every version of `name` (empty: every name), newest first, at most `limit`.
  virtual absl::StatusOr<std::vector<v1::Baseline>> ListBaselines(const std::string& name, int limit) = 0;
};

/// Not thread-safe: one connection is used by one thread at a time (the
/// event loop's writer, the batch writer, a StoreReader).
/// Writes between Begin() and Commit() become durable together at Commit();
/// nothing is acknowledged to a caller before that.
class JobStore : public DeviceHealthStore, public BaselineStore {
 public:
  ~JobStore() override = default;

  /// Another connection to the same store, for another thread (the batch
  /// writer). Its transactions and this one's exclude each other.
  virtual absl::StatusOr<std::unique_ptr<JobStore>> Connect() = 0;

  virtual absl::Status Begin() = 0;
  virtual absl::Status Commit() = 0;
  /// Discards writes since Begin().
  virtual absl::Status Rollback() = 0;

  /// Inserts a new job: its header row and one row per task. `request_id`
  /// (may be empty) is its idempotency key, unique across the store.
  virtual absl::Status InsertJob(const v1::Job& job, const std::string& request_id) = 0;
  /// Rewrites a job's header (state, error, times); its tasks are untouched.
  virtual absl::Status PutJobHeader(const v1::Job& job) = 0;
  /// Rewrites one task's row.
  virtual absl::Status PutTask(const v1::Task& task) = 0;
  /// Jobs that have not ended, with their tasks, oldest first.
  virtual absl::StatusOr<std::vector<v1::Job>> LoadLiveJobs() = 0;
  /// One job with its tasks (results included), or nullopt.
  virtual absl::StatusOr<std::optional<v1::Job>> GetJob(const std::string& job_id) = 0;
  /// One task, or nullopt.
  virtual absl::StatusOr<std::optional<v1::Task>> GetTask(const std::string& task_id) = 0;
  /// The job made for `request_id`, or "".
  virtual absl::StatusOr<std::string> FindRequest(const std::string& request_id) = 0;
  virtual absl::StatusOr<JobPage> ListJobs(const JobFilter& filter) = 0;
  /// Jobs and tasks per state, over the whole store.
  virtual absl::StatusOr<StateCounts> CountByState() = 0;
  /// The highest job number ("job-000042" is 42); 0 when empty.
  virtual absl::StatusOr<int64_t> MaxJobNumber() = 0;

  /// Stores a batch once per (task_id, attempt, seq). Returns false, and
  /// stores nothing, when that key is already stored.
  virtual absl::StatusOr<bool> PutSampleBatch(const v1::SampleBatch& batch) = 0;
  /// Several batches, each as PutSampleBatch stores it; one result each, in
  /// order. A store may send them together (PostgreSQL: one pipeline, one
  /// round trip); this default stores them one by one.
  virtual std::vector<absl::StatusOr<bool>> PutSampleBatches(const std::vector<const v1::SampleBatch*>& batches) {
    std::vector<absl::StatusOr<bool>> out;
    out.reserve(batches.size());
    for (const v1::SampleBatch* b : batches) out.push_back(PutSampleBatch(*b));
    return out;
  }
  /// Up to `max_batches` (negative: all) batches of one task attempt whose
  /// seq is `from_seq` or more, in seq order: a page of a task's samples.
  virtual absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt,
                                                                         uint64_t from_seq, int max_batches) = 0;
  /// All batches of one task attempt, in seq order.
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt) {
    return LoadSampleBatches(task_id, attempt, 0, -1);
  }

  /// Power readings, stored once per (task_id, attempt, seq) like samples.
  virtual absl::StatusOr<bool> PutPowerBatch(const v1::PowerBatch& batch) = 0;
  virtual absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt,
                                                                       uint64_t from_seq, int max_batches) = 0;
  absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt) {
    return LoadPowerBatches(task_id, attempt, 0, -1);
  }

  /// Deletes the raw sample and power batches of up to `max_jobs` jobs that
  /// finished before `finished_before_unix` (their aggregated results stay).
  /// Returns how many jobs were pruned; bounded work per call.
  virtual absl::StatusOr<int> PruneRawBatches(double finished_before_unix, int max_jobs) = 0;
};

/// "job-000042" -> 42; 0 when the id has another shape.
int64_t JobNumber(const std::string& job_id);
/// "job-000042-t7" -> ("job-000042", 7); nullopt when malformed.
std::optional<std::pair<std::string, int>> SplitTaskId(const std::string& task_id);

}  // namespace hetbench::server
