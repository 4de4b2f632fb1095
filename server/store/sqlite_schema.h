#pragma once
/// What the SQLite job store's files share (internal to server/store): the
/// schema, a statement finalized on scope exit, and binding helpers.

#include <sqlite3.h>

#include <string>

namespace hetbench::server::sqlite {

// Schema 2: a row per job and a row per task. (Schema 1 kept a whole job,
// tasks included, in one blob rewritten on every change.) Schema 3: sample
// batches in a rowid table. Schema 4: a batch's bytes in a segment file
// (sample_segments.h), the row naming where; `batch` holds them only in a
// store without a directory (":memory:") and in rows written before.
inline constexpr int kSchemaVersion = 4;
inline constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  number INTEGER PRIMARY KEY,     -- "job-000042" is 42
  id TEXT NOT NULL UNIQUE,
  created_unix_seconds REAL NOT NULL,
  finished_unix_seconds REAL NOT NULL DEFAULT 0,
  state INTEGER NOT NULL,
  request_id TEXT UNIQUE,         -- idempotency key of its submit; NULL when none
  models TEXT NOT NULL,           -- ",mlp,cnn,": for listing filters
  kinds TEXT NOT NULL,            -- ",cpu,gpu,"; ",any," for a target of any kind
  raw_pruned INTEGER NOT NULL DEFAULT 0,
  header BLOB NOT NULL            -- hetbench.v1.Job without its tasks
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_to_prune ON jobs(finished_unix_seconds) WHERE raw_pruned = 0 AND state >= 3;
CREATE TABLE IF NOT EXISTS tasks (
  job_number INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  state INTEGER NOT NULL,
  task BLOB NOT NULL,             -- hetbench.v1.Task
  PRIMARY KEY (job_number, idx)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks(state);
CREATE TABLE IF NOT EXISTS sample_batches (
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  phase INTEGER NOT NULL,
  sample_count INTEGER NOT NULL,
  batch BLOB NOT NULL,           -- the columns, compact (common/sample_codec.h); empty when in a segment
  segment INTEGER,               -- schema 4: the segment file holding the columns, or NULL (in `batch`)
  segment_offset INTEGER,
  segment_bytes INTEGER,
  UNIQUE (task_id, attempt, seq)  -- a rowid table: rows append (schema 3)
);
CREATE TABLE IF NOT EXISTS sample_segments (
  id INTEGER PRIMARY KEY,        -- <db>.samples/<id as 6 digits>.seg
  bytes INTEGER NOT NULL         -- committed length: bytes past it are not referenced by any row
);
CREATE TABLE IF NOT EXISTS power_batches (
  task_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  sensor TEXT NOT NULL,
  reading_count INTEGER NOT NULL,
  batch BLOB NOT NULL,           -- hetbench.v1.PowerBatch
  PRIMARY KEY (task_id, attempt, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS device_health (
  agent_id TEXT NOT NULL,
  device_id TEXT NOT NULL,
  health BLOB NOT NULL,          -- hetbench.v1.DeviceHealth: its last validation that did not pass
  PRIMARY KEY (agent_id, device_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS baselines (
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_unix_seconds REAL NOT NULL,
  baseline BLOB NOT NULL,        -- hetbench.v1.Baseline
  PRIMARY KEY (name, version)
) WITHOUT ROWID;
)sql";

/// A statement prepared for one use, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { ok_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) == SQLITE_OK; }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return ok_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
};

inline void BindText(sqlite3_stmt* stmt, int i, const std::string& s) {
  sqlite3_bind_text(stmt, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}
inline void BindBlob(sqlite3_stmt* stmt, int i, const std::string& s) {
  sqlite3_bind_blob(stmt, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}
inline std::string ColumnText(sqlite3_stmt* stmt, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
  return p == nullptr ? std::string() : std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
}

}  // namespace hetbench::server::sqlite
