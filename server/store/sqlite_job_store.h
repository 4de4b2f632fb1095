#pragma once
/// JobStore on SQLite in WAL mode with synchronous=FULL, so a commit survives
/// a crash of the process or the machine.
///
/// A sample batch's bytes go to an append-only segment file beside the
/// database (`<path>.samples/`, sample_segments.h), written once and made
/// durable before the transaction holding its row commits; the row (task,
/// attempt, seq: stored once) names where they are.
///
/// Checkpoints (copying the WAL into the database file) run on a thread of
/// their own with a second connection, in PASSIVE mode: they never block the
/// writer, and the event loop that commits no longer pays for reading the
/// WAL back and writing the pages a second time.

#include <sqlite3.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/store/job_store.h"
#include "server/store/sample_segments.h"

namespace hetbench::server {

class SqliteJobStore final : public JobStore {
 public:
  /// Opens (creating if needed) the database at `path`; ":memory:" for tests.
  /// A store written by an older hetbench (one blob per job) is migrated to
  /// rows once, in one transaction.
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(const std::string& path);
  /// Another connection to the same file, for another thread (no migration,
  /// no checkpoints of its own); writers wait for each other in 0.2 ms steps.
  absl::StatusOr<std::unique_ptr<JobStore>> Connect() override;
  ~SqliteJobStore() override;

  absl::Status Begin() override;
  absl::Status Commit() override;
  absl::Status Rollback() override;
  absl::Status InsertJob(const v1::Job& job, const std::string& request_id) override;
  absl::Status PutJobHeader(const v1::Job& job) override;
  absl::Status PutTask(const v1::Task& task) override;
  absl::StatusOr<std::vector<v1::Job>> LoadLiveJobs() override;
  absl::StatusOr<std::optional<v1::Job>> GetJob(const std::string& job_id) override;
  absl::StatusOr<std::optional<v1::Task>> GetTask(const std::string& task_id) override;
  absl::StatusOr<std::string> FindRequest(const std::string& request_id) override;
  absl::StatusOr<JobPage> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<StateCounts> CountByState() override;
  absl::StatusOr<int64_t> MaxJobNumber() override;
  absl::Status PutDeviceHealth(const std::string& agent_id, const v1::DeviceHealth& health) override;
  absl::StatusOr<std::vector<std::pair<std::string, v1::DeviceHealth>>> LoadDeviceHealth() override;
  absl::Status PutBaseline(const v1::Baseline& baseline) override;
  absl::StatusOr<int> LatestBaselineVersion(const std::string& name) override;
  absl::StatusOr<std::optional<v1::Baseline>> GetBaseline(const std::string& name, int version) override;
  absl::StatusOr<std::vector<v1::Baseline>> ListBaselines(const std::string& name, int limit) override;
  absl::StatusOr<bool> PutSampleBatch(const v1::SampleBatch& batch) override;
  using JobStore::LoadPowerBatches;
  using JobStore::LoadSampleBatches;
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt,
                                                                 uint64_t from_seq, int max_batches) override;
  absl::StatusOr<bool> PutPowerBatch(const v1::PowerBatch& batch) override;
  absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt,
                                                               uint64_t from_seq, int max_batches) override;
  absl::StatusOr<int> PruneRawBatches(double finished_before_unix, int max_jobs) override;

  /// Runs PRAGMA integrity_check; OK when SQLite answers "ok".
  absl::Status CheckIntegrity();

 private:
  explicit SqliteJobStore(sqlite3* db) : db_(db) {}
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> OpenConnection(const std::string& path, bool primary);
  /// Starts the checkpoint thread on a second connection to `path`.
  absl::Status StartCheckpointer(const std::string& path);
  void CheckpointLoop();
  absl::Status Exec(const char* sql);
  /// BEGIN IMMEDIATE at the first write of a batch (see Begin).
  absl::Status EnsureWriting();
  absl::Status Error(const char* what) const;
  /// Remembers the first failed write of the transaction: Commit rolls it
  /// back and returns it.
  absl::Status Failed(absl::Status s);
  absl::Status Prepare(const char* sql, sqlite3_stmt** stmt);
  absl::Status MigrateFromBlobs();
  /// Schema 2 -> 3: sample_batches from WITHOUT ROWID to a rowid table; then AddSegmentColumns.
  absl::Status MigrateSampleTable();
  /// Schema 3 -> 4: sample_batches' segment, segment_offset and segment_bytes.
  absl::Status AddSegmentColumns();
  /// The segment the open write transaction appends to, and where (read at its first batch).
  absl::Status StartAppending();
  /// Frees the bytes of the batches pruned (released_), adjacent ones as one range.
  void ReleasePruned();
  /// The tasks of job `number`, in index order; `with_results` false clears them.
  absl::Status LoadTasks(int64_t number, bool with_results, v1::Job* job);
  /// Steps `stmt` (bound) once: its first column parsed, or none when no row.
  template <typename Message>
  absl::StatusOr<std::optional<Message>> StepOneBlob(sqlite3_stmt* stmt, const std::string& name);
  template <typename Message>
  absl::StatusOr<std::vector<Message>> LoadBlobs(sqlite3_stmt* stmt, const std::string& task_id, int attempt,
                                                 uint64_t from_seq, int max_rows, const char* what);

  sqlite3* db_;
  std::string path_;
  bool in_batch_ = false;  // between Begin and Commit/Rollback
  bool writing_ = false;   // ... and holding the write lock
  absl::Status txn_error_;  // first failed write of the transaction
  // Sample batches' bytes (a file store; null for ":memory:", whose rows hold them).
  std::unique_ptr<SampleSegments> segments_;
  struct Released {
    int64_t segment, offset, bytes;
  };
  std::vector<Released> released_;  // batches pruned by the transaction: freed once it commits
  sqlite3* checkpoint_db_ = nullptr;
  std::thread checkpointer_;
  absl::Mutex checkpoint_mu_;
  bool stop_checkpointer_ ABSL_GUARDED_BY(checkpoint_mu_) = false;
  sqlite3_stmt* insert_job_ = nullptr;
  sqlite3_stmt* put_header_ = nullptr;
  sqlite3_stmt* put_task_ = nullptr;
  sqlite3_stmt* get_header_ = nullptr;
  sqlite3_stmt* get_tasks_ = nullptr;
  sqlite3_stmt* get_task_ = nullptr;
  sqlite3_stmt* find_request_ = nullptr;
  sqlite3_stmt* put_batch_ = nullptr;
  sqlite3_stmt* load_batches_ = nullptr;
  sqlite3_stmt* put_power_ = nullptr;
  sqlite3_stmt* load_power_ = nullptr;
  sqlite3_stmt* last_segment_ = nullptr;
  sqlite3_stmt* put_segment_ = nullptr;
};

}  // namespace hetbench::server
