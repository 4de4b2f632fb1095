#include "server/store/sqlite_job_store.h"

#include "absl/strings/str_cat.h"

namespace hetbench::server {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  created_unix_seconds REAL NOT NULL,
  state INTEGER NOT NULL,
  job BLOB NOT NULL              -- hetbench.v1.Job, tasks included
);
CREATE TABLE IF NOT EXISTS sample_batches (
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  phase INTEGER NOT NULL,
  sample_count INTEGER NOT NULL,
  batch BLOB NOT NULL,           -- hetbench.v1.SampleBatch, columns packed
  PRIMARY KEY (task_id, attempt, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS power_batches (
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  sensor TEXT NOT NULL,
  reading_count INTEGER NOT NULL,
  batch BLOB NOT NULL,           -- hetbench.v1.PowerBatch
  PRIMARY KEY (task_id, attempt, seq)
) WITHOUT ROWID;
)sql";

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("job store: cannot open '", path, "': ", msg,
                                               "; check that the directory exists and is writable"));
  }
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(db));
  sqlite3_busy_timeout(db, 5000);
  for (const char* pragma : {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=FULL;", "PRAGMA foreign_keys=ON;"}) {
    if (auto s = store->Exec(pragma); !s.ok()) return s;
  }
  if (auto s = store->Exec(kSchema); !s.ok()) return s;
  auto prepare = [&](const char* sql, sqlite3_stmt** stmt) {
    return sqlite3_prepare_v2(db, sql, -1, stmt, nullptr) == SQLITE_OK ? absl::OkStatus() : store->Error("prepare");
  };
  if (auto s = prepare("INSERT OR REPLACE INTO jobs (id, created_unix_seconds, state, job) VALUES (?, ?, ?, ?)",
                       &store->put_job_);
      !s.ok()) {
    return s;
  }
  if (auto s = prepare("INSERT OR IGNORE INTO sample_batches (task_id, attempt, seq, phase, sample_count, batch) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       &store->put_batch_);
      !s.ok()) {
    return s;
  }
  if (auto s = prepare("SELECT batch FROM sample_batches WHERE task_id = ? AND attempt = ? ORDER BY seq",
                       &store->load_batches_);
      !s.ok()) {
    return s;
  }
  if (auto s = prepare("INSERT OR IGNORE INTO power_batches (task_id, attempt, seq, sensor, reading_count, batch) "
                       "VALUES (?, ?, ?, ?, ?, ?)",
                       &store->put_power_);
      !s.ok()) {
    return s;
  }
  if (auto s = prepare("SELECT batch FROM power_batches WHERE task_id = ? AND attempt = ? ORDER BY seq",
                       &store->load_power_);
      !s.ok()) {
    return s;
  }
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  sqlite3_finalize(put_job_);
  sqlite3_finalize(put_batch_);
  sqlite3_finalize(load_batches_);
  sqlite3_finalize(put_power_);
  sqlite3_finalize(load_power_);
  sqlite3_close(db_);
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

absl::Status SqliteJobStore::Begin() { return Exec("BEGIN IMMEDIATE;"); }
absl::Status SqliteJobStore::Commit() { return Exec("COMMIT;"); }
absl::Status SqliteJobStore::Rollback() { return Exec("ROLLBACK;"); }

absl::Status SqliteJobStore::PutJob(const v1::Job& job) {
  const std::string blob = job.SerializeAsString();
  sqlite3_reset(put_job_);
  sqlite3_bind_text(put_job_, 1, job.id().data(), static_cast<int>(job.id().size()), SQLITE_TRANSIENT);
  sqlite3_bind_double(put_job_, 2, job.created_unix_seconds());
  sqlite3_bind_int(put_job_, 3, job.state());
  sqlite3_bind_blob(put_job_, 4, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(put_job_) != SQLITE_DONE) return Error("store job");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Job>> SqliteJobStore::LoadJobs() {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT id, job FROM jobs ORDER BY created_unix_seconds, id", -1, &stmt, nullptr) !=
      SQLITE_OK) {
    return Error("load jobs");
  }
  std::vector<v1::Job> jobs;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    v1::Job job;
    const void* data = sqlite3_column_blob(stmt, 1);
    const int size = sqlite3_column_bytes(stmt, 1);
    if (!job.ParseFromArray(data, size)) {
      std::string id = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      sqlite3_finalize(stmt);
      return absl::DataLossError(absl::StrCat("job store: job '", id, "' does not parse"));
    }
    jobs.push_back(std::move(job));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return Error("load jobs");
  return jobs;
}

absl::StatusOr<bool> SqliteJobStore::PutSampleBatch(const v1::SampleBatch& batch) {
  const std::string blob = batch.SerializeAsString();
  sqlite3_reset(put_batch_);
  sqlite3_bind_text(put_batch_, 1, batch.task_id().data(), static_cast<int>(batch.task_id().size()), SQLITE_TRANSIENT);
  sqlite3_bind_int(put_batch_, 2, batch.attempt());
  sqlite3_bind_int64(put_batch_, 3, static_cast<sqlite3_int64>(batch.seq()));
  sqlite3_bind_int(put_batch_, 4, batch.phase());
  sqlite3_bind_int(put_batch_, 5, batch.duration_ns_size());
  sqlite3_bind_blob(put_batch_, 6, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(put_batch_) != SQLITE_DONE) return Error("store sample batch");
  return sqlite3_changes(db_) == 1;
}

absl::StatusOr<std::vector<v1::SampleBatch>> SqliteJobStore::LoadSampleBatches(const std::string& task_id,
                                                                               int attempt) {
  return LoadBlobs<v1::SampleBatch>(load_batches_, task_id, attempt, "sample batch");
}

absl::StatusOr<bool> SqliteJobStore::PutPowerBatch(const v1::PowerBatch& batch) {
  const std::string blob = batch.SerializeAsString();
  sqlite3_reset(put_power_);
  sqlite3_bind_text(put_power_, 1, batch.task_id().data(), static_cast<int>(batch.task_id().size()), SQLITE_TRANSIENT);
  sqlite3_bind_int(put_power_, 2, batch.attempt());
  sqlite3_bind_int64(put_power_, 3, static_cast<sqlite3_int64>(batch.seq()));
  sqlite3_bind_text(put_power_, 4, batch.sensor().name().data(), static_cast<int>(batch.sensor().name().size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_int(put_power_, 5, batch.t_ns_size());
  sqlite3_bind_blob(put_power_, 6, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(put_power_) != SQLITE_DONE) return Error("store power batch");
  return sqlite3_changes(db_) == 1;
}

template <typename Message>
absl::StatusOr<std::vector<Message>> SqliteJobStore::LoadBlobs(sqlite3_stmt* stmt, const std::string& task_id,
                                                               int attempt, const char* what) {
  sqlite3_reset(stmt);
  sqlite3_bind_text(stmt, 1, task_id.data(), static_cast<int>(task_id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int(stmt, 2, attempt);
  std::vector<Message> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    Message m;
    if (!m.ParseFromArray(sqlite3_column_blob(stmt, 0), sqlite3_column_bytes(stmt, 0))) {
      return absl::DataLossError(absl::StrCat("job store: a ", what, " of task '", task_id, "' does not parse"));
    }
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return Error(what);
  return out;
}

absl::StatusOr<std::vector<v1::PowerBatch>> SqliteJobStore::LoadPowerBatches(const std::string& task_id, int attempt) {
  return LoadBlobs<v1::PowerBatch>(load_power_, task_id, attempt, "power batch");
}

absl::Status SqliteJobStore::CheckIntegrity() {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, "PRAGMA integrity_check", -1, &stmt, nullptr) != SQLITE_OK)
    return Error("integrity_check");
  std::string answer;
  if (sqlite3_step(stmt) == SQLITE_ROW) answer = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  if (answer != "ok") return absl::DataLossError(absl::StrCat("job store: integrity_check: ", answer));
  return absl::OkStatus();
}

}  // namespace hetbench::server
