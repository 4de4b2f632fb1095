// The SQLite store's sample and power batches: a sample batch's bytes in a
// segment file (sample_segments.h) and its row naming where, power batches in
// their rows, and pruning both once a job's retention ends.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/sample_codec.h"
#include "server/store/sqlite_job_store.h"
#include "server/store/sqlite_schema.h"

namespace hetbench::server {

using sqlite::BindBlob;
using sqlite::BindText;
using sqlite::ColumnText;
using sqlite::Stmt;

absl::Status SqliteJobStore::StartAppending() {
  if (segments_->started()) return absl::OkStatus();
  sqlite3_reset(last_segment_);
  int64_t id = 0, bytes = 0;
  const int rc = sqlite3_step(last_segment_);
  if (rc == SQLITE_ROW) {
    id = sqlite3_column_int64(last_segment_, 0);
    bytes = sqlite3_column_int64(last_segment_, 1);
  }
  sqlite3_reset(last_segment_);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Failed(Error("read the last sample segment"));
  if (id == 0 || bytes >= SampleSegments::kSegmentBytes) {
    ++id;  // a new segment: its row is written at commit
    bytes = 0;
  }
  segments_->StartAt(id, bytes);
  return absl::OkStatus();
}

absl::StatusOr<bool> SqliteJobStore::PutSampleBatch(const v1::SampleBatch& batch) {
  if (!in_batch_) {
    // Outside Begin a write commits at once; a batch's bytes must be in its
    // segment first, so it is a transaction of its own.
    if (auto s = Begin(); !s.ok()) return s;
    absl::StatusOr<bool> stored = PutSampleBatch(batch);
    if (!stored.ok()) {
      (void)Rollback();
      return stored;
    }
    if (auto s = Commit(); !s.ok()) return s;
    return stored;
  }
  if (auto s = EnsureWriting(); !s.ok()) return s;
  // The compact columns as the agent sent them, or encoded from the arrays.
  std::string encoded;
  if (batch.columns().empty()) encoded = EncodeSampleColumns(batch);
  const std::string& blob = batch.columns().empty() ? encoded : batch.columns();
  sqlite3_reset(put_batch_);
  BindText(put_batch_, 1, batch.task_id());
  sqlite3_bind_int(put_batch_, 2, batch.attempt());
  sqlite3_bind_int64(put_batch_, 3, static_cast<sqlite3_int64>(batch.seq()));
  sqlite3_bind_int(put_batch_, 4, batch.phase());
  sqlite3_bind_int(put_batch_, 5, static_cast<int>(SampleCount(batch)));
  if (segments_) {
    if (auto s = StartAppending(); !s.ok()) return s;
    sqlite3_bind_zeroblob(put_batch_, 6, 0);
    sqlite3_bind_int64(put_batch_, 7, segments_->segment());
    sqlite3_bind_int64(put_batch_, 8, segments_->end());
    sqlite3_bind_int64(put_batch_, 9, static_cast<sqlite3_int64>(blob.size()));
  } else {
    sqlite3_bind_blob(put_batch_, 6, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
    for (int i = 7; i <= 9; ++i) sqlite3_bind_null(put_batch_, i);
  }
  if (sqlite3_step(put_batch_) != SQLITE_DONE) return Failed(Error("store sample batch"));
  const bool stored = sqlite3_changes(db_) == 1;
  if (stored && segments_) segments_->Stage(blob);
  return stored;
}

absl::StatusOr<std::vector<v1::SampleBatch>> SqliteJobStore::LoadSampleBatches(const std::string& task_id, int attempt,
                                                                               uint64_t from_seq, int max_batches) {
  sqlite3_reset(load_batches_);
  BindText(load_batches_, 1, task_id);
  sqlite3_bind_int(load_batches_, 2, attempt);
  sqlite3_bind_int64(load_batches_, 3, static_cast<sqlite3_int64>(from_seq));
  sqlite3_bind_int(load_batches_, 4, max_batches < 0 ? -1 : max_batches);  // LIMIT -1: no limit
  std::vector<v1::SampleBatch> out;
  int rc;
  while ((rc = sqlite3_step(load_batches_)) == SQLITE_ROW) {
    v1::SampleBatch& b = out.emplace_back();
    b.set_task_id(task_id);
    b.set_attempt(attempt);
    b.set_seq(static_cast<uint64_t>(sqlite3_column_int64(load_batches_, 0)));
    b.set_phase(static_cast<v1::Phase>(sqlite3_column_int(load_batches_, 1)));
    std::string_view columns;
    std::string from_segment;
    if (sqlite3_column_type(load_batches_, 3) != SQLITE_NULL) {
      if (!segments_) {
        sqlite3_reset(load_batches_);
        return absl::DataLossError("job store: a batch in a segment file, in a store without them");
      }
      absl::StatusOr<std::string> read =
          segments_->Read(sqlite3_column_int64(load_batches_, 3), sqlite3_column_int64(load_batches_, 4),
                          sqlite3_column_int64(load_batches_, 5));
      if (!read.ok()) {
        sqlite3_reset(load_batches_);
        return read.status();
      }
      from_segment = std::move(*read);
      columns = from_segment;
    } else {
      const auto* data = static_cast<const char*>(sqlite3_column_blob(load_batches_, 2));
      columns = std::string_view(data == nullptr ? "" : data, sqlite3_column_bytes(load_batches_, 2));
    }
    const absl::Status s = DecodeSampleColumns(columns, &b);
    if (!s.ok()) {
      sqlite3_reset(load_batches_);
      return absl::DataLossError(absl::StrCat(
          "job store: batch ", b.seq(), " of task '", task_id, "': ", s.message(),
          from_segment.empty() ? "" : " (in a segment file: pruned while it was read, or the file was changed)"));
    }
  }
  if (rc != SQLITE_DONE) return Error("load sample batches");
  return out;
}

absl::StatusOr<bool> SqliteJobStore::PutPowerBatch(const v1::PowerBatch& batch) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  const std::string blob = batch.SerializeAsString();
  sqlite3_reset(put_power_);
  BindText(put_power_, 1, batch.task_id());
  sqlite3_bind_int(put_power_, 2, batch.attempt());
  sqlite3_bind_int64(put_power_, 3, static_cast<sqlite3_int64>(batch.seq()));
  BindText(put_power_, 4, batch.sensor().name());
  sqlite3_bind_int(put_power_, 5, batch.t_ns_size());
  BindBlob(put_power_, 6, blob);
  if (sqlite3_step(put_power_) != SQLITE_DONE) return Failed(Error("store power batch"));
  return sqlite3_changes(db_) == 1;
}

template <typename Message>
absl::StatusOr<std::vector<Message>> SqliteJobStore::LoadBlobs(sqlite3_stmt* stmt, const std::string& task_id,
                                                               int attempt, uint64_t from_seq, int max_rows,
                                                               const char* what) {
  sqlite3_reset(stmt);
  BindText(stmt, 1, task_id);
  sqlite3_bind_int(stmt, 2, attempt);
  sqlite3_bind_int64(stmt, 3, static_cast<sqlite3_int64>(from_seq));
  sqlite3_bind_int(stmt, 4, max_rows < 0 ? -1 : max_rows);
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

absl::StatusOr<std::vector<v1::PowerBatch>> SqliteJobStore::LoadPowerBatches(const std::string& task_id, int attempt,
                                                                             uint64_t from_seq, int max_batches) {
  return LoadBlobs<v1::PowerBatch>(load_power_, task_id, attempt, from_seq, max_batches, "power batch");
}

void SqliteJobStore::ReleasePruned() {
  // Adjacent batches as one range: a block they share is freed too.
  std::sort(released_.begin(), released_.end(), [](const Released& a, const Released& b) {
    return a.segment != b.segment ? a.segment < b.segment : a.offset < b.offset;
  });
  for (size_t i = 0; i < released_.size();) {
    Released run = released_[i];
    for (++i;
         i < released_.size() && released_[i].segment == run.segment && released_[i].offset == run.offset + run.bytes;
         ++i) {
      run.bytes += released_[i].bytes;
    }
    segments_->Release(run.segment, run.offset, run.bytes);
  }
  released_.clear();
}

absl::StatusOr<int> SqliteJobStore::PruneRawBatches(double finished_before_unix, int max_jobs) {
  std::vector<std::pair<int64_t, std::string>> jobs;
  {
    Stmt stmt(db_,
              "SELECT number, id FROM jobs WHERE raw_pruned = 0 AND state >= 3 AND finished_unix_seconds < ? "
              "ORDER BY finished_unix_seconds LIMIT ?");
    if (!stmt.ok()) return Error("prune");
    sqlite3_bind_double(stmt.get(), 1, finished_before_unix);
    sqlite3_bind_int(stmt.get(), 2, max_jobs);
    while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
      jobs.emplace_back(sqlite3_column_int64(stmt.get(), 0), ColumnText(stmt.get(), 1));
    }
  }
  // Inside a transaction (Begin), a job's deletes and its mark commit together.
  if (!jobs.empty()) {
    if (auto s = EnsureWriting(); !s.ok()) return s;
  }
  for (const auto& [number, id] : jobs) {
    // Task ids of a job share the prefix "<job>-t": a range over the key.
    const std::string lo = id + "-t", hi = id + "-u";
    if (segments_) {  // their bytes are freed once the deletes commit
      Stmt where(db_,
                 "SELECT segment, segment_offset, segment_bytes FROM sample_batches WHERE task_id >= ? AND task_id < ? "
                 "AND segment IS NOT NULL");
      if (!where.ok()) return Error("prune");
      BindText(where.get(), 1, lo);
      BindText(where.get(), 2, hi);
      while (sqlite3_step(where.get()) == SQLITE_ROW) {
        released_.push_back(Released{sqlite3_column_int64(where.get(), 0), sqlite3_column_int64(where.get(), 1),
                                     sqlite3_column_int64(where.get(), 2)});
      }
    }
    for (const char* sql : {"DELETE FROM sample_batches WHERE task_id >= ? AND task_id < ?",
                            "DELETE FROM power_batches WHERE task_id >= ? AND task_id < ?"}) {
      Stmt del(db_, sql);
      if (!del.ok()) return Error("prune");
      BindText(del.get(), 1, lo);
      BindText(del.get(), 2, hi);
      if (sqlite3_step(del.get()) != SQLITE_DONE) return Error("prune");
    }
    Stmt mark(db_, "UPDATE jobs SET raw_pruned = 1 WHERE number = ?");
    sqlite3_bind_int64(mark.get(), 1, number);
    if (!mark.ok() || sqlite3_step(mark.get()) != SQLITE_DONE) return Error("prune");
  }
  if (!writing_) ReleasePruned();  // no transaction: each delete committed by itself
  return static_cast<int>(jobs.size());
}

}  // namespace hetbench::server
