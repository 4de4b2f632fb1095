#pragma once
/// JobStore on PostgreSQL (libpq), chosen by `--db postgresql://...`.
///
/// The layout is SQLite's (server/store/sqlite_schema.h): a row per job, a
/// row per task, compact sample batches keyed (task, attempt, seq). As
/// SQLite keeps a batch's bytes in segment files, a group of batches written
/// by one COPY keeps its bytes packed in page-sized pieces, which their rows
/// name (server/store/pg_schema.h, schema 6); a batch written on its own
/// keeps them in its row.
///
/// Fencing: every connection writes with the epoch its coordinator was given
/// when it became leader (server/store/pg_leader.h). A write transaction
/// starts with hetbench_fence(epoch), which share-locks the leader row and
/// raises when the epoch is no longer the current one, and every row carries
/// the epoch, checked again by a trigger (once per transaction and epoch: the
/// share lock taken by the first check holds to the transaction's end). A new
/// leader's epoch bump waits for the old leader's open transaction; after it,
/// the old leader's writes are refused by the database (FAILED_PRECONDITION
/// "fenced"), never acknowledged.

#include <libpq-fe.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/store/job_store.h"

namespace hetbench::server {
namespace pg {
class BinaryCopy;
}

struct PgStoreOptions {
  /// A libpq connection URI or keyword string ("postgresql://host/db").
  std::string url;
  /// The leader epoch every write carries (PgLeaderLock::epoch()).
  int64_t epoch = 0;
  /// Bounds a transaction left open by a stopped process: the server ends
  /// the session (idle_in_transaction_session_timeout), releasing its locks.
  double idle_transaction_seconds = 10.0;
  /// Runs when the database refused a write as fenced (a newer leader): the
  /// server steps down. Tests leave it empty and see the error.
  std::function<void(const absl::Status&)> on_fenced;
  /// How PutSampleBatches sends a group of sample batches inside a write
  /// transaction: COPY in binary (the default: the rows by one COPY under a
  /// savepoint, their bytes packed into pieces by a second; when a key is
  /// already stored or repeated in the group, the group again as one
  /// multi-row INSERT ... ON CONFLICT DO NOTHING); that INSERT of many rows
  /// (arrays unnested) always; one INSERT per batch in libpq's pipeline mode
  /// (one round trip per 256); or one statement and round trip per batch.
  /// The last three are kept for bench_ingest's comparison.
  enum class BatchWrites { kCopy, kMultiRow, kPipelined, kOneByOne };
  BatchWrites batch_writes = BatchWrites::kCopy;
  /// A COPY's batches start a new group of packed bytes rather than make one
  /// longer than this (one batch longer than it is a group of its own): a
  /// group's offsets are 4-byte integers (at most 1 GiB is used). Tests set
  /// it small.
  int64_t max_group_bytes = int64_t{64} << 20;
};

/// True for "postgresql://..." and "postgres://..." (--db's PostgreSQL form).
bool IsPostgresUrl(const std::string& db);

/// The URL with its password (user:PASSWORD@ or password=) replaced by ***,
/// for logs and errors.
std::string RedactDbUrl(const std::string& db);

/// Creates the tables, the fence function and triggers once (idempotent;
/// serialized between coordinators by an advisory transaction lock).
absl::Status CreatePgSchema(PGconn* conn);

class PgJobStore final : public JobStore {
 public:
  static absl::StatusOr<std::unique_ptr<PgJobStore>> Open(const PgStoreOptions& options);
  absl::StatusOr<std::unique_ptr<JobStore>> Connect() override;
  ~PgJobStore() override;

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
  /// As PgStoreOptions::batch_writes says: by default one COPY of up to
  /// 512 rows, all answered true; a repeated key makes those rows one
  /// INSERT, the rows its RETURNING names answered true.
  std::vector<absl::StatusOr<bool>> PutSampleBatches(const std::vector<const v1::SampleBatch*>& batches) override;
  using JobStore::LoadPowerBatches;
  using JobStore::LoadSampleBatches;
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt,
                                                                 uint64_t from_seq, int max_batches) override;
  absl::StatusOr<bool> PutPowerBatch(const v1::PowerBatch& batch) override;
  absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt,
                                                               uint64_t from_seq, int max_batches) override;
  absl::StatusOr<int> PruneRawBatches(double finished_before_unix, int max_jobs) override;

  int64_t epoch() const { return options_.epoch; }
  /// The server's process id for this connection (tests cut it with
  /// pg_terminate_backend).
  int backend_pid() const { return PQbackendPID(conn_); }

 private:
  struct Params;
  using Result = std::unique_ptr<PGresult, void (*)(PGresult*)>;

  explicit PgJobStore(PgStoreOptions options) : options_(std::move(options)) {}
  absl::Status ConnectAndPrepare();
  /// Runs a prepared statement; binary results. Inside a write transaction
  /// the first failure is remembered: Commit then rolls back and returns it.
  absl::StatusOr<Result> Run(const char* name, const Params& params, ExecStatusType want);
  absl::Status RunCommand(const char* sql);
  absl::Status EnsureWriting();
  absl::Status ErrorOf(const PGresult* res, const std::string& what);
  absl::Status LoadTasks(int64_t number, bool with_results, v1::Job* job);
  /// The parameters of a page of one task attempt's batches (load_batches, load_power).
  static Params PageParams(const std::string& task_id, int attempt, uint64_t from_seq, int max_rows);
  /// The parameters of put_batch for `batch`.
  Params BatchParams(const v1::SampleBatch& batch) const;
  /// PutSampleBatches of batches[from, to) as one multi-row INSERT; appends their results.
  void MultiRowChunk(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to,
                     std::vector<absl::StatusOr<bool>>* out);
  /// PutSampleBatches of batches[from, to) as one COPY under a savepoint, or,
  /// when a key is repeated or already stored, as MultiRowChunk; appends their results.
  void CopyChunk(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to,
                 std::vector<absl::StatusOr<bool>>* out);
  /// Sets the savepoint hetbench_copy and sends batches[from, to) as COPY's
  /// binary rows, their bytes as one group's pieces; the first failure's
  /// result (the rows' COPY's first: a key stored before fails it), else the
  /// pieces' COPY's; an error with nothing sent when no group id could be
  /// taken.
  absl::StatusOr<Result> CopyRows(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to);
  /// A group id no other writer uses (ids are taken from the database's
  /// sequence a block at a time).
  absl::StatusOr<int64_t> TakeGroupId();
  /// Runs `sql`, which ends in COPY ... FROM STDIN (FORMAT binary), and sends
  /// the rows `next_row` appends (it returns false when there are no more);
  /// the COPY's result, or the first failing statement's.
  Result SendCopy(const char* sql, const std::function<bool(pg::BinaryCopy*)>& next_row);
  /// PutSampleBatches of batches[from, to) as one pipeline; appends their results.
  void PipelineChunk(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to,
                     std::vector<absl::StatusOr<bool>>* out);

  PgStoreOptions options_;
  PGconn* conn_ = nullptr;
  bool in_batch_ = false;
  bool writing_ = false;
  absl::Status txn_error_;  // first failure inside the write transaction
  int64_t next_group_ = 0;  // group ids taken and not used: [next_group_, groups_end_)
  int64_t groups_end_ = 0;
};

}  // namespace hetbench::server
