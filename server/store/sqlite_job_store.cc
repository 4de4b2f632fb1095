#include "server/store/sqlite_job_store.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "server/store/job_rows.h"
#include "server/store/sqlite_schema.h"

namespace hetbench::server {

using sqlite::BindBlob;
using sqlite::BindText;
using sqlite::ColumnText;
using sqlite::kSchema;
using sqlite::kSchemaVersion;
using sqlite::Stmt;

namespace {
// Waits for another connection's write transaction in 0.2 ms steps (SQLite's
// own handler sleeps up to 100 ms a step), for at most 5 s.
int ShortBusyWait(void*, int tries) {
  if (tries >= 25000) return 0;
  usleep(200);
  return 1;
}
}  // namespace

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  return OpenConnection(path, /*primary=*/true);
}

absl::StatusOr<std::unique_ptr<JobStore>> SqliteJobStore::Connect() {
  if (path_ == ":memory:" || path_.empty()) {
    return absl::FailedPreconditionError("job store: an in-memory store has one connection; use a file");
  }
  auto store = OpenConnection(path_, /*primary=*/false);
  if (!store.ok()) return store.status();
  return std::unique_ptr<JobStore>(std::move(*store));
}

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::OpenConnection(const std::string& path, bool primary) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (primary ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("job store: cannot open '", path, "': ", msg,
                                               "; check that the directory exists and is writable"));
  }
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(db));
  store->path_ = path;
  if (path != ":memory:" && !path.empty()) {
    store->segments_ = std::make_unique<SampleSegments>(path + ".samples");
    if (primary) {
      if (auto s = store->segments_->CreateDirectory(); !s.ok()) return s;
    }
  }
  sqlite3_busy_handler(db, ShortBusyWait, nullptr);
  for (const char* pragma : {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=FULL;", "PRAGMA foreign_keys=ON;",
                             "PRAGMA cache_size=-65536;"}) {
    if (auto s = store->Exec(pragma); !s.ok()) return s;
  }
  if (primary) {
    if (auto s = store->MigrateFromBlobs(); !s.ok()) return s;
    if (auto s = store->MigrateSampleTable(); !s.ok()) return s;
    if (auto s = store->Exec(kSchema); !s.ok()) return s;
    if (auto s = store->Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion, ";").c_str()); !s.ok()) return s;
    if (auto s = store->StartCheckpointer(path); !s.ok()) return s;
  } else {
    // The primary checkpoints; this connection only writes.
    if (auto s = store->Exec("PRAGMA wal_autocheckpoint=0;"); !s.ok()) return s;
  }
  struct {
    const char* sql;
    sqlite3_stmt** stmt;
  } statements[] = {
      {"INSERT INTO jobs (number, id, created_unix_seconds, finished_unix_seconds, state, request_id, models, kinds, "
       "header) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
       &store->insert_job_},
      {"UPDATE jobs SET state = ?, finished_unix_seconds = ?, header = ? WHERE number = ?", &store->put_header_},
      {"INSERT OR REPLACE INTO tasks (job_number, idx, state, task) VALUES (?, ?, ?, ?)", &store->put_task_},
      {"SELECT header FROM jobs WHERE number = ?", &store->get_header_},
      {"SELECT task FROM tasks WHERE job_number = ? ORDER BY idx", &store->get_tasks_},
      {"SELECT task FROM tasks WHERE job_number = ? AND idx = ?", &store->get_task_},
      {"SELECT id FROM jobs WHERE request_id = ?", &store->find_request_},
      {"INSERT OR IGNORE INTO sample_batches (task_id, attempt, seq, phase, sample_count, batch, segment, "
       "segment_offset, segment_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
       &store->put_batch_},
      {"SELECT seq, phase, batch, segment, segment_offset, segment_bytes FROM sample_batches WHERE task_id = ? AND "
       "attempt = ? AND seq >= ? ORDER BY seq LIMIT ?",
       &store->load_batches_},
      {"SELECT id, bytes FROM sample_segments ORDER BY id DESC LIMIT 1", &store->last_segment_},
      {"INSERT OR REPLACE INTO sample_segments (id, bytes) VALUES (?, ?)", &store->put_segment_},
      {"INSERT OR IGNORE INTO power_batches (task_id, attempt, seq, sensor, reading_count, batch) "
       "VALUES (?, ?, ?, ?, ?, ?)",
       &store->put_power_},
      {"SELECT batch FROM power_batches WHERE task_id = ? AND attempt = ? AND seq >= ? ORDER BY seq LIMIT ?",
       &store->load_power_},
  };
  for (const auto& st : statements) {
    if (auto s = store->Prepare(st.sql, st.stmt); !s.ok()) return s;
  }
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  if (checkpointer_.joinable()) {
    {
      absl::MutexLock l(&checkpoint_mu_);
      stop_checkpointer_ = true;
    }
    checkpointer_.join();
  }
  sqlite3_close(checkpoint_db_);
  for (sqlite3_stmt* s : {insert_job_, put_header_, put_task_, get_header_, get_tasks_, get_task_, find_request_,
                          put_batch_, load_batches_, put_power_, load_power_, last_segment_, put_segment_}) {
    sqlite3_finalize(s);
  }
  sqlite3_close(db_);
}

absl::Status SqliteJobStore::StartCheckpointer(const std::string& path) {
  if (path == ":memory:" || path.empty()) return absl::OkStatus();
  if (sqlite3_open_v2(path.c_str(), &checkpoint_db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    return absl::UnavailableError(
        absl::StrCat("job store: checkpoint connection to '", path, "': ", sqlite3_errmsg(checkpoint_db_)));
  }
  sqlite3_busy_timeout(checkpoint_db_, 5000);
  // A fresh connection knows the file is in WAL mode only once it read it.
  if (sqlite3_exec(checkpoint_db_, "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return absl::UnavailableError(
        absl::StrCat("job store: checkpoint connection to '", path, "': ", sqlite3_errmsg(checkpoint_db_)));
  }
  // The writer no longer checkpoints by itself.
  if (auto s = Exec("PRAGMA wal_autocheckpoint=0;"); !s.ok()) return s;
  checkpointer_ = std::thread([this] { CheckpointLoop(); });
  return absl::OkStatus();
}

namespace {
// 16,384 pages of 4 KiB: a WAL of 64 MiB at most between restarts.
constexpr int kRestartWalFrames = 16384;
}  // namespace

void SqliteJobStore::CheckpointLoop() {
  pthread_setname_np(pthread_self(), "hb-checkpoint");
  const auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkpoint_mu_) { return stop_checkpointer_; };
  for (;;) {
    {
      absl::MutexLock l(&checkpoint_mu_);
      if (checkpoint_mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(100))) break;
    }
    int wal_frames = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &wal_frames, &copied);
    // The WAL starts over only when a write begins after everything was
    // copied, which a writer that never pauses does not see. Past a size,
    // a RESTART checkpoint holds the next write back for the few frames
    // written since the passive one, so the WAL stays bounded.
    if (rc == SQLITE_OK && wal_frames > kRestartWalFrames) {
      rc = sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_RESTART, nullptr, nullptr);
    }
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      std::fprintf(stderr, "job store: checkpoint failed: %s (the WAL grows until one succeeds)\n",
                   sqlite3_errmsg(checkpoint_db_));
    }
  }
  sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
}

absl::Status SqliteJobStore::Prepare(const char* sql, sqlite3_stmt** stmt) {
  return sqlite3_prepare_v2(db_, sql, -1, stmt, nullptr) == SQLITE_OK ? absl::OkStatus() : Error("prepare");
}

absl::Status SqliteJobStore::Error(const char* what) const {
  const int code = sqlite3_errcode(db_);
  std::string msg = absl::StrCat("job store: ", what, ": ", sqlite3_errmsg(db_));
  if (code == SQLITE_FULL) return absl::ResourceExhaustedError(msg + "; free disk space");
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return absl::DataLossError(msg);
  return absl::UnavailableError(msg);
}

absl::Status SqliteJobStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::UnavailableError(absl::StrCat("job store: ", msg));
  }
  return absl::OkStatus();
}

// The write lock is taken at the first write, not at Begin: the event loop
// begins a transaction for every batch, and most batches under ingest write
// nothing (the batch writer's connection stores the samples), so they never
// wait for the writer's transactions. Reads before the first write see the
// latest commit; only this connection writes what they read (jobs, tasks).
absl::Status SqliteJobStore::Begin() {
  if (in_batch_) return absl::FailedPreconditionError("job store: Begin inside a transaction");
  in_batch_ = true;
  return absl::OkStatus();
}

absl::Status SqliteJobStore::EnsureWriting() {
  if (!in_batch_ || writing_) return absl::OkStatus();
  if (auto s = Exec("BEGIN IMMEDIATE;"); !s.ok()) return s;
  writing_ = true;
  return absl::OkStatus();
}

absl::Status SqliteJobStore::Commit() {
  const bool writing = writing_;
  in_batch_ = writing_ = false;
  if (!writing) return absl::OkStatus();
  if (txn_error_.ok() && segments_ && segments_->staged_bytes() > 0) {
    // The batches' bytes durable first, then the rows naming them and the
    // segment's new length, in one commit.
    const int64_t segment = segments_->segment(), length = segments_->end();
    txn_error_ = segments_->Flush();
    if (txn_error_.ok()) {
      sqlite3_reset(put_segment_);
      sqlite3_bind_int64(put_segment_, 1, segment);
      sqlite3_bind_int64(put_segment_, 2, length);
      if (sqlite3_step(put_segment_) != SQLITE_DONE) txn_error_ = Error("store the segment's length");
    }
  }
  if (segments_) segments_->Discard();  // a transaction that stored no new bytes started one too
  if (!txn_error_.ok()) {
    // A failed write fails its whole transaction, as on PostgreSQL.
    absl::Status failed = std::move(txn_error_);
    txn_error_ = absl::OkStatus();
    released_.clear();
    (void)Exec("ROLLBACK;");
    return failed;
  }
  absl::Status committed = Exec("COMMIT;");
  if (!committed.ok()) (void)Exec("ROLLBACK;");
  // Pruned batches' blocks go back to the file system once their rows are gone for good.
  if (committed.ok()) ReleasePruned();
  released_.clear();
  return committed;
}

absl::Status SqliteJobStore::Failed(absl::Status s) {
  if (writing_ && txn_error_.ok()) txn_error_ = s;
  return s;
}

absl::Status SqliteJobStore::Rollback() {
  const bool writing = writing_;
  in_batch_ = writing_ = false;
  txn_error_ = absl::OkStatus();
  if (segments_) segments_->Discard();
  released_.clear();
  return writing ? Exec("ROLLBACK;") : absl::OkStatus();
}

absl::Status SqliteJobStore::InsertJob(const v1::Job& job, const std::string& request_id) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  const int64_t number = JobNumber(job.id());
  if (number == 0) return absl::InvalidArgumentError(absl::StrCat("job store: job id '", job.id(), "' is malformed"));
  sqlite3_reset(insert_job_);
  sqlite3_clear_bindings(insert_job_);
  sqlite3_bind_int64(insert_job_, 1, number);
  BindText(insert_job_, 2, job.id());
  sqlite3_bind_double(insert_job_, 3, job.created_unix_seconds());
  sqlite3_bind_double(insert_job_, 4, job.finished_unix_seconds());
  sqlite3_bind_int(insert_job_, 5, job.state());
  if (request_id.empty()) {
    sqlite3_bind_null(insert_job_, 6);
  } else {
    BindText(insert_job_, 6, request_id);
  }
  BindText(insert_job_, 7, ModelsKey(job.spec()));
  BindText(insert_job_, 8, KindsKey(job.spec()));
  BindBlob(insert_job_, 9, HeaderBlob(job));
  if (sqlite3_step(insert_job_) != SQLITE_DONE) return Failed(Error("store job"));
  for (const v1::Task& task : job.tasks()) {
    if (auto s = PutTask(task); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStore::PutJobHeader(const v1::Job& job) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  sqlite3_reset(put_header_);
  sqlite3_bind_int(put_header_, 1, job.state());
  sqlite3_bind_double(put_header_, 2, job.finished_unix_seconds());
  BindBlob(put_header_, 3, HeaderBlob(job));
  sqlite3_bind_int64(put_header_, 4, JobNumber(job.id()));
  if (sqlite3_step(put_header_) != SQLITE_DONE) return Failed(Error("store job"));
  return absl::OkStatus();
}

absl::Status SqliteJobStore::PutTask(const v1::Task& task) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  const std::string blob = task.SerializeAsString();
  sqlite3_reset(put_task_);
  sqlite3_bind_int64(put_task_, 1, JobNumber(task.job_id()));
  sqlite3_bind_int(put_task_, 2, task.index());
  sqlite3_bind_int(put_task_, 3, task.state());
  BindBlob(put_task_, 4, blob);
  if (sqlite3_step(put_task_) != SQLITE_DONE) return Failed(Error("store task"));
  return absl::OkStatus();
}

absl::Status SqliteJobStore::LoadTasks(int64_t number, bool with_results, v1::Job* job) {
  sqlite3_reset(get_tasks_);
  sqlite3_bind_int64(get_tasks_, 1, number);
  int rc;
  while ((rc = sqlite3_step(get_tasks_)) == SQLITE_ROW) {
    v1::Task* task = job->add_tasks();
    if (!task->ParseFromArray(sqlite3_column_blob(get_tasks_, 0), sqlite3_column_bytes(get_tasks_, 0))) {
      return absl::DataLossError(absl::StrCat("job store: a task of '", job->id(), "' does not parse"));
    }
    if (!with_results) task->clear_result();
  }
  if (rc != SQLITE_DONE) return Error("load tasks");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Job>> SqliteJobStore::LoadLiveJobs() {
  Stmt stmt(db_, "SELECT number, header FROM jobs WHERE state IN (1, 2) ORDER BY number");
  if (!stmt.ok()) return Error("load jobs");
  std::vector<v1::Job> jobs;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    v1::Job job;
    if (!job.ParseFromArray(sqlite3_column_blob(stmt.get(), 1), sqlite3_column_bytes(stmt.get(), 1))) {
      return absl::DataLossError(
          absl::StrCat("job store: job number ", sqlite3_column_int64(stmt.get(), 0), " does not parse"));
    }
    if (auto s = LoadTasks(sqlite3_column_int64(stmt.get(), 0), /*with_results=*/true, &job); !s.ok()) return s;
    jobs.push_back(std::move(job));
  }
  if (rc != SQLITE_DONE) return Error("load jobs");
  return jobs;
}

template <typename Message>
absl::StatusOr<std::optional<Message>> SqliteJobStore::StepOneBlob(sqlite3_stmt* stmt, const std::string& name) {
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) return std::optional<Message>();
  if (rc != SQLITE_ROW) return Error(absl::StrCat("load ", name).c_str());
  Message m;
  const bool parsed = m.ParseFromArray(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0));
  sqlite3_reset(stmt);  // no read transaction left open
  if (!parsed) return absl::DataLossError(absl::StrCat("job store: ", name, " does not parse"));
  return std::optional<Message>(std::move(m));
}

absl::StatusOr<std::optional<v1::Job>> SqliteJobStore::GetJob(const std::string& job_id) {
  const int64_t number = JobNumber(job_id);
  if (number == 0) return std::optional<v1::Job>();
  sqlite3_reset(get_header_);
  sqlite3_bind_int64(get_header_, 1, number);
  auto job = StepOneBlob<v1::Job>(get_header_, absl::StrCat("job '", job_id, "'"));
  if (!job.ok() || !job->has_value()) return job;
  if ((*job)->id() != job_id) return std::optional<v1::Job>();  // "job-42" vs "job-000042"
  if (auto s = LoadTasks(number, /*with_results=*/true, &**job); !s.ok()) return s;
  return job;
}

absl::StatusOr<std::optional<v1::Task>> SqliteJobStore::GetTask(const std::string& task_id) {
  auto key = SplitTaskId(task_id);
  if (!key) return std::optional<v1::Task>();
  sqlite3_reset(get_task_);
  sqlite3_bind_int64(get_task_, 1, JobNumber(key->first));
  sqlite3_bind_int(get_task_, 2, key->second);
  auto task = StepOneBlob<v1::Task>(get_task_, absl::StrCat("task '", task_id, "'"));
  if (task.ok() && task->has_value() && (*task)->id() != task_id) return std::optional<v1::Task>();
  return task;
}

absl::StatusOr<std::string> SqliteJobStore::FindRequest(const std::string& request_id) {
  sqlite3_reset(find_request_);
  BindText(find_request_, 1, request_id);
  const int rc = sqlite3_step(find_request_);
  if (rc == SQLITE_DONE) return std::string();
  if (rc != SQLITE_ROW) return Error("find request");
  std::string id = ColumnText(find_request_, 0);
  sqlite3_reset(find_request_);
  return id;
}

absl::StatusOr<JobPage> SqliteJobStore::ListJobs(const JobFilter& filter) {
  int64_t before = INT64_MAX;
  if (!filter.page_token.empty() && (!absl::SimpleAtoi(filter.page_token, &before) || before <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token ", QuotedInput(filter.page_token), ": not a token this coordinator gave; start without one"));
  }
  Stmt stmt(db_,
            "SELECT number, header FROM jobs WHERE number < ?1 AND (?2 = 0 OR state = ?2) AND (?3 = '' OR "
            "instr(models, ',' || ?3 || ',') > 0) AND (?4 = '' OR instr(kinds, ',' || ?4 || ',') > 0) "
            "ORDER BY number DESC LIMIT ?5");  // instr: the filter matches literally, never as a pattern
  if (!stmt.ok()) return Error("list jobs");
  sqlite3_bind_int64(stmt.get(), 1, before);
  sqlite3_bind_int(stmt.get(), 2, filter.state);
  BindText(stmt.get(), 3, filter.model);
  BindText(stmt.get(), 4,
           filter.device_kind == v1::DEVICE_KIND_UNSPECIFIED ? std::string() : DeviceKindName(filter.device_kind));
  const int page_size = std::max(1, filter.page_size);
  sqlite3_bind_int(stmt.get(), 5, page_size + 1);  // one more tells whether a next page exists
  JobPage page;
  int64_t last_number = 0;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    if (static_cast<int>(page.jobs.size()) == page_size) {
      page.next_page_token = absl::StrCat(last_number);
      break;
    }
    last_number = sqlite3_column_int64(stmt.get(), 0);
    v1::Job job;
    if (!job.ParseFromArray(sqlite3_column_blob(stmt.get(), 1), sqlite3_column_bytes(stmt.get(), 1))) {
      return absl::DataLossError(absl::StrCat("job store: job number ", last_number, " does not parse"));
    }
    if (auto s = LoadTasks(last_number, /*with_results=*/false, &job); !s.ok()) return s;
    page.jobs.push_back(std::move(job));
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error("list jobs");
  return page;
}

absl::StatusOr<StateCounts> SqliteJobStore::CountByState() {
  StateCounts counts;
  {
    Stmt stmt(db_, "SELECT state, COUNT(*) FROM jobs GROUP BY state");
    if (!stmt.ok()) return Error("count jobs");
    while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
      counts.jobs[static_cast<v1::JobState>(sqlite3_column_int(stmt.get(), 0))] = sqlite3_column_int64(stmt.get(), 1);
    }
  }
  Stmt stmt(db_, "SELECT state, COUNT(*) FROM tasks GROUP BY state");
  if (!stmt.ok()) return Error("count tasks");
  while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    counts.tasks[static_cast<v1::TaskState>(sqlite3_column_int(stmt.get(), 0))] = sqlite3_column_int64(stmt.get(), 1);
  }
  return counts;
}

absl::StatusOr<int64_t> SqliteJobStore::MaxJobNumber() {
  Stmt stmt(db_, "SELECT COALESCE(MAX(number), 0) FROM jobs");
  if (!stmt.ok() || sqlite3_step(stmt.get()) != SQLITE_ROW) return Error("max job number");
  return sqlite3_column_int64(stmt.get(), 0);
}

absl::Status SqliteJobStore::CheckIntegrity() {
  Stmt stmt(db_, "PRAGMA integrity_check");
  if (!stmt.ok()) return Error("integrity_check");
  std::string answer;
  if (sqlite3_step(stmt.get()) == SQLITE_ROW) answer = ColumnText(stmt.get(), 0);
  if (answer != "ok") return absl::DataLossError(absl::StrCat("job store: integrity_check: ", answer));
  // Every segment holds the bytes its committed batches name.
  Stmt segments(db_, "SELECT id, bytes FROM sample_segments ORDER BY id");
  if (!segments.ok()) return Error("integrity_check");
  while (sqlite3_step(segments.get()) == SQLITE_ROW) {
    if (!segments_) return absl::DataLossError("job store: sample segments listed in a store without a directory");
    if (auto s =
            segments_->CheckLength(sqlite3_column_int64(segments.get(), 0), sqlite3_column_int64(segments.get(), 1));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace hetbench::server
