// Moving a store of an older schema to the current one, once, on open.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "server/store/sqlite_job_store.h"
#include "server/store/sqlite_schema.h"

namespace hetbench::server {

using sqlite::ColumnText;
using sqlite::kSchema;
using sqlite::Stmt;

absl::Status SqliteJobStore::MigrateSampleTable() {
  // Schema v2 kept sample batches in a WITHOUT ROWID table; rows of several
  // kilobytes made every insert a B-tree split there (bench_fleet ingest:
  // 18.7 M samples/s against 23.4 M/s in a rowid table with a unique index).
  bool without_rowid = false;
  {
    Stmt table(db_, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'sample_batches'");
    if (!table.ok()) return Error("read schema");
    if (sqlite3_step(table.get()) == SQLITE_ROW) {
      without_rowid = ColumnText(table.get(), 0).find("WITHOUT ROWID") != std::string::npos;
    }
  }
  if (!without_rowid) return AddSegmentColumns();
  const absl::Status s = Exec(
      "BEGIN IMMEDIATE;"
      "ALTER TABLE sample_batches RENAME TO sample_batches_v2;"
      "CREATE TABLE sample_batches (task_id TEXT NOT NULL, attempt INTEGER NOT NULL, seq INTEGER NOT NULL, "
      "  phase INTEGER NOT NULL, sample_count INTEGER NOT NULL, batch BLOB NOT NULL, UNIQUE (task_id, attempt, seq));"
      "INSERT INTO sample_batches (task_id, attempt, seq, phase, sample_count, batch) "
      "  SELECT task_id, attempt, seq, phase, sample_count, batch FROM sample_batches_v2;"
      "DROP TABLE sample_batches_v2;"
      "COMMIT;");
  if (!s.ok()) {
    (void)Exec("ROLLBACK;");
    return absl::Status(s.code(), absl::StrCat("job store: moving sample batches to a rowid table: ", s.message()));
  }
  std::fprintf(stderr, "job store: sample batches moved to a rowid table (schema 3)\n");
  return AddSegmentColumns();
}

absl::Status SqliteJobStore::AddSegmentColumns() {
  // Schema 3 -> 4: where a batch's bytes are in a segment file. The rows
  // already stored keep their bytes in `batch` (segment NULL).
  bool has_table = false, has_segment = false;
  {
    Stmt info(db_, "PRAGMA table_info(sample_batches)");
    if (!info.ok()) return Error("read schema");
    while (sqlite3_step(info.get()) == SQLITE_ROW) {
      has_table = true;
      has_segment = has_segment || ColumnText(info.get(), 1) == "segment";
    }
  }
  if (!has_table || has_segment) return absl::OkStatus();
  const absl::Status s = Exec(
      "BEGIN IMMEDIATE;"
      "ALTER TABLE sample_batches ADD COLUMN segment INTEGER;"
      "ALTER TABLE sample_batches ADD COLUMN segment_offset INTEGER;"
      "ALTER TABLE sample_batches ADD COLUMN segment_bytes INTEGER;"
      "COMMIT;");
  if (!s.ok()) {
    (void)Exec("ROLLBACK;");
    return absl::Status(s.code(), absl::StrCat("job store: adding the segment columns: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStore::MigrateFromBlobs() {
  bool old_layout = false;
  {
    Stmt info(db_, "PRAGMA table_info(jobs)");
    if (!info.ok()) return Error("read schema");
    while (sqlite3_step(info.get()) == SQLITE_ROW) old_layout = old_layout || ColumnText(info.get(), 1) == "job";
  }
  if (!old_layout) return absl::OkStatus();
  if (auto s = Exec("BEGIN IMMEDIATE; ALTER TABLE jobs RENAME TO jobs_v1;"); !s.ok()) return s;
  auto fail = [this](absl::Status s) {
    (void)Exec("ROLLBACK;");
    return absl::Status(s.code(), absl::StrCat("job store: migrating to one row per task: ", s.message()));
  };
  if (auto s = Exec(kSchema); !s.ok()) return fail(s);
  if (auto s = Prepare("INSERT INTO jobs (number, id, created_unix_seconds, finished_unix_seconds, state, request_id, "
                       "models, kinds, header) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       &insert_job_);
      !s.ok()) {
    return fail(s);
  }
  if (auto s = Prepare("INSERT OR REPLACE INTO tasks (job_number, idx, state, task) VALUES (?, ?, ?, ?)", &put_task_);
      !s.ok()) {
    return fail(s);
  }
  int64_t migrated = 0;
  {
    Stmt rows(db_, "SELECT job FROM jobs_v1 ORDER BY created_unix_seconds, id");
    if (!rows.ok()) return fail(Error("read old jobs"));
    while (sqlite3_step(rows.get()) == SQLITE_ROW) {
      v1::Job job;
      if (!job.ParseFromArray(sqlite3_column_blob(rows.get(), 0), sqlite3_column_bytes(rows.get(), 0))) {
        return fail(absl::DataLossError("a job of the old layout does not parse"));
      }
      if (auto s = InsertJob(job, ""); !s.ok()) return fail(s);
      ++migrated;
    }
  }
  sqlite3_finalize(insert_job_);
  sqlite3_finalize(put_task_);
  insert_job_ = put_task_ = nullptr;
  if (auto s = Exec("DROP TABLE jobs_v1; COMMIT;"); !s.ok()) return fail(s);
  std::fprintf(stderr, "job store: migrated %lld jobs to one row per task\n", static_cast<long long>(migrated));
  return absl::OkStatus();
}

}  // namespace hetbench::server
