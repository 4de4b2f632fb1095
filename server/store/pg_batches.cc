// PgJobStore's sample and power batches: one at a time, many at once (one
// binary COPY, one multi-row INSERT, or a pipeline), and pages of them read
// back (their statements are prepared with the others in pg_job_store.cc).
#include <algorithm>
#include <cstring>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/sample_codec.h"
#include "server/store/pg_columns.h"
#include "server/store/pg_job_store.h"
#include "server/store/pg_schema.h"

namespace hetbench::server {

using pg::GetBytes;
using pg::GetInt;
using pg::ParseColumn;

PgJobStore::Params PgJobStore::PageParams(const std::string& task_id, int attempt, uint64_t from_seq, int max_rows) {
  Params p;
  p.Text(task_id).Int(attempt).Int(static_cast<int64_t>(from_seq));
  if (max_rows < 0) {
    p.Null();  // LIMIT NULL: no limit
  } else {
    p.Int(max_rows);
  }
  return p;
}

PgJobStore::Params PgJobStore::BatchParams(const v1::SampleBatch& batch) const {
  Params p;
  p.Text(batch.task_id()).Int(batch.attempt()).Int(static_cast<int64_t>(batch.seq())).Int(batch.phase());
  p.Int(batch.duration_ns_size()).Int(options_.epoch).Bytes(EncodeSampleColumns(batch));
  return p;
}

absl::StatusOr<bool> PgJobStore::PutSampleBatch(const v1::SampleBatch& batch) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  auto res = Run("put_batch", BatchParams(batch), PGRES_COMMAND_OK);
  if (!res.ok()) return res.status();
  return std::strcmp(PQcmdTuples(res->get()), "1") == 0;
}

std::vector<absl::StatusOr<bool>> PgJobStore::PutSampleBatches(const std::vector<const v1::SampleBatch*>& batches) {
  using Writes = PgStoreOptions::BatchWrites;
  if (batches.size() < 2 || options_.batch_writes == Writes::kOneByOne) return JobStore::PutSampleBatches(batches);
  std::vector<absl::StatusOr<bool>> out;
  out.reserve(batches.size());
  // COPY and multi-row: at most 512 rows (~2.5 MB of 1,000-step batches) a
  // statement. Pipelined: at most 256 statements per sync; their results
  // (~25 bytes each) stay far below what the sockets buffer, so neither side
  // blocks the other while libpq sends in blocking mode.
  const size_t per_round_trip = options_.batch_writes == Writes::kPipelined ? 256 : 512;
  for (size_t at = 0; at < batches.size(); at += per_round_trip) {
    const size_t to = std::min(batches.size(), at + per_round_trip);
    switch (options_.batch_writes) {
      case Writes::kCopy:
        CopyChunk(batches, at, to, &out);
        break;
      case Writes::kMultiRow:
        MultiRowChunk(batches, at, to, &out);
        break;
      default:
        PipelineChunk(batches, at, to, &out);
    }
  }
  return out;
}

void PgJobStore::CopyChunk(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to,
                           std::vector<absl::StatusOr<bool>>* out) {
  if (absl::Status ready = EnsureWriting(); !ready.ok()) {
    out->insert(out->end(), to - from, ready);
    return;
  }
  // COPY stores all its rows or fails: a key twice in the group needs the
  // INSERT's per-row answers, and so does COPY outside a transaction (no
  // savepoint to return to).
  absl::flat_hash_set<std::tuple<std::string_view, int, uint64_t>> keys;
  keys.reserve(to - from);
  bool repeated = !writing_;
  for (size_t i = from; i < to && !repeated; ++i) {
    repeated = !keys.insert({batches[i]->task_id(), batches[i]->attempt(), batches[i]->seq()}).second;
  }
  if (repeated) {
    MultiRowChunk(batches, from, to, out);
    return;
  }
  absl::Status s;
  const absl::StatusOr<Result> copied = CopyRows(batches, from, to);
  const PGresult* res = copied.ok() ? copied->get() : nullptr;
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (!copied.ok()) {
    s = copied.status();                                 // nothing sent: the batches' group ids could not be taken
  } else if (PQresultStatus(res) == PGRES_COMMAND_OK) {  // the savepoint released
    out->insert(out->end(), to - from, true);
    return;
  } else if (state != nullptr && std::strcmp(state, "23505") == 0) {
    // A key stored before (an agent's batch sent again after a reconnect):
    // the rows COPY wrote are undone, and the INSERT answers which are new.
    s = RunCommand("ROLLBACK TO SAVEPOINT hetbench_copy; RELEASE SAVEPOINT hetbench_copy");
    if (s.ok()) {
      MultiRowChunk(batches, from, to, out);
      return;
    }
  } else {
    s = ErrorOf(res, "put_batches (COPY)");
  }
  if (txn_error_.ok()) txn_error_ = s;  // the transaction fails, as Run's failures do
  out->insert(out->end(), to - from, s);
}

absl::StatusOr<int64_t> PgJobStore::TakeGroupId() {
  if (next_group_ == groups_end_) {
    auto res = Run("take_groups", Params(), PGRES_TUPLES_OK);
    if (!res.ok()) return res.status();
    if (PQntuples(res->get()) != 1) return absl::InternalError("job store: the sequence sample_group_ids is missing");
    next_group_ = GetInt(res->get(), 0, 0);
    groups_end_ = next_group_ + std::max<int64_t>(1, GetInt(res->get(), 0, 1));
  }
  return next_group_++;
}

PgJobStore::Result PgJobStore::SendCopy(const char* sql, const std::function<bool(pg::BinaryCopy*)>& next_row) {
  Result res(PQexec(conn_, sql), PQclear);
  if (PQresultStatus(res.get()) != PGRES_COPY_IN) return res;
  // Sent in pieces of ~256 KiB: libpq copies each into its output buffer.
  pg::BinaryCopy rows;
  bool sent = true;
  for (bool more = true; more && sent;) {
    more = next_row(&rows);
    if (!more) rows.End();
    if (rows.bytes().size() >= (256 << 10) || !more) {
      sent = PQputCopyData(conn_, rows.bytes().data(), static_cast<int>(rows.bytes().size())) == 1;
      rows.Clear();
    }
  }
  // A failed send ends the COPY with an error: nothing of it is stored.
  (void)PQputCopyEnd(conn_, sent ? nullptr : "hetbench: sending the rows failed");
  res.reset(PQgetResult(conn_));
  while (PGresult* more = PQgetResult(conn_)) PQclear(more);
  return res;
}

absl::StatusOr<PgJobStore::Result> PgJobStore::CopyRows(const std::vector<const v1::SampleBatch*>& batches, size_t from,
                                                        size_t to) {
  // Each batch's columns (the agent's own bytes where it sent columns,
  // encoded here where it did not) and where they go: groups of batches one
  // after another, a new group when one would pass max_group_bytes.
  struct Place {
    std::string_view bytes;
    int64_t grp, offset;
  };
  const int64_t max_group_bytes = std::min(options_.max_group_bytes, int64_t{1} << 30);
  std::vector<std::string> encoded;
  std::vector<Place> places;
  std::vector<std::pair<int64_t, int64_t>> groups;  // id, batches
  encoded.reserve(to - from);
  places.reserve(to - from);
  int64_t offset = 0;
  for (size_t i = from; i < to; ++i) {
    const v1::SampleBatch& b = *batches[i];
    const std::string_view bytes = SampleColumnsView(b, &encoded.emplace_back());  // `encoded` never reallocates
    if (groups.empty() || (offset > 0 && offset + static_cast<int64_t>(bytes.size()) > max_group_bytes)) {
      absl::StatusOr<int64_t> grp = TakeGroupId();
      if (!grp.ok()) return grp.status();
      groups.emplace_back(*grp, 0);
      offset = 0;
    }
    places.push_back({bytes, groups.back().first, offset});
    offset += static_cast<int64_t>(bytes.size());
    ++groups.back().second;
  }
  // The savepoint and the rows' COPY in one round trip (PQexec stops at COPY's start).
  size_t i = from;
  Result res = SendCopy(
      "SAVEPOINT hetbench_copy; COPY sample_batches (task_id, attempt, seq, phase, sample_count, epoch, grp, "
      "grp_offset, grp_bytes) FROM STDIN (FORMAT binary)",
      [&](pg::BinaryCopy* rows) {
        if (i == to) return false;
        const v1::SampleBatch& b = *batches[i];
        const Place& place = places[i - from];
        rows->Row(9);
        rows->Bytes(b.task_id());
        rows->Int4(b.attempt());
        rows->Int8(static_cast<int64_t>(b.seq()));
        rows->Int4(b.phase());
        rows->Int4(b.duration_ns_size());
        rows->Int8(options_.epoch);
        rows->Int8(place.grp);
        rows->Int4(static_cast<int32_t>(place.offset));
        rows->Int4(static_cast<int32_t>(place.bytes.size()));
        ++i;
        return true;
      });
  if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return res;
  // No key was stored before: the savepoint goes, and the groups' rows
  // (fenced: they carry the epoch) and their pieces are written, in one
  // round trip. The numbers are the store's own, never an agent's text.
  std::string sql = "RELEASE SAVEPOINT hetbench_copy; INSERT INTO sample_groups (grp, live, epoch) VALUES ";
  for (size_t g = 0; g < groups.size(); ++g) {
    absl::StrAppend(&sql, g == 0 ? "" : ", ", "(", groups[g].first, ", ", groups[g].second, ", ", options_.epoch, ")");
  }
  absl::StrAppend(&sql, "; COPY sample_pieces (grp, idx, bytes) FROM STDIN (FORMAT binary)");
  // Each group's bytes cut into pieces of kSamplePieceBytes, its last piece shorter.
  std::string piece;
  piece.reserve(pg::kSamplePieceBytes);
  size_t next = 0, at = 0;  // the next byte to pack: places[next].bytes[at]
  int32_t idx = 0;
  return SendCopy(sql.c_str(), [&](pg::BinaryCopy* rows) {
    if (next == places.size()) return false;
    const int64_t grp = places[next].grp;
    piece.clear();
    while (piece.size() < static_cast<size_t>(pg::kSamplePieceBytes) && next < places.size() &&
           places[next].grp == grp) {
      const std::string_view bytes = places[next].bytes;
      const size_t n = std::min(pg::kSamplePieceBytes - piece.size(), bytes.size() - at);
      piece.append(bytes.substr(at, n));
      at += n;
      if (at == bytes.size()) ++next, at = 0;
    }
    rows->Row(3);
    rows->Int8(grp);
    rows->Int4(idx);
    rows->Bytes(piece);
    idx = next < places.size() && places[next].grp == grp ? idx + 1 : 0;
    return true;
  });
}

void PgJobStore::MultiRowChunk(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to,
                               std::vector<absl::StatusOr<bool>>* out) {
  if (absl::Status ready = EnsureWriting(); !ready.ok()) {
    out->insert(out->end(), to - from, ready);
    return;
  }
  using pg::BinaryArray;
  const size_t n = to - from;
  BinaryArray task_ids(BinaryArray::kText, n), attempts(BinaryArray::kInt4, n), seqs(BinaryArray::kInt8, n),
      phases(BinaryArray::kInt4, n), counts(BinaryArray::kInt4, n), blobs(BinaryArray::kBytea, n);
  for (size_t i = from; i < to; ++i) {
    const v1::SampleBatch& b = *batches[i];
    task_ids.Bytes(b.task_id());
    attempts.Int4(b.attempt());
    seqs.Int8(static_cast<int64_t>(b.seq()));
    phases.Int4(b.phase());
    counts.Int4(b.duration_ns_size());
    blobs.Bytes(EncodeSampleColumns(b));
  }
  Params p;
  p.Bytes(task_ids.Take()).Bytes(attempts.Take()).Bytes(seqs.Take()).Bytes(phases.Take()).Bytes(counts.Take());
  p.Int(options_.epoch).Bytes(blobs.Take());
  auto res = Run("put_batches", p, PGRES_TUPLES_OK);
  if (!res.ok()) {  // Run remembered it: the transaction fails
    out->insert(out->end(), n, res.status());
    return;
  }
  // Each key RETURNING names is stored once: the first batch of the call with
  // that key answers true, a repeat (or a key stored before) false.
  absl::flat_hash_map<std::tuple<std::string_view, int64_t, int64_t>, int> stored;
  const PGresult* r = res->get();
  for (int row = 0; row < PQntuples(r); ++row) {
    ++stored[{GetBytes(r, row, 0), GetInt(r, row, 1), GetInt(r, row, 2)}];
  }
  for (size_t i = from; i < to; ++i) {
    const v1::SampleBatch& b = *batches[i];
    auto it = stored.find({b.task_id(), b.attempt(), static_cast<int64_t>(b.seq())});
    const bool first = it != stored.end() && it->second > 0;
    if (first) --it->second;
    out->push_back(first);
  }
}

void PgJobStore::PipelineChunk(const std::vector<const v1::SampleBatch*>& batches, size_t from, size_t to,
                               std::vector<absl::StatusOr<bool>>* out) {
  absl::Status ready = EnsureWriting();
  if (ready.ok() && PQenterPipelineMode(conn_) != 1) ready = ErrorOf(nullptr, "entering pipeline mode");
  if (!ready.ok()) {
    out->insert(out->end(), to - from, ready);
    return;
  }
  absl::Status sent = absl::OkStatus();
  size_t queued = 0;
  for (size_t i = from; i < to; ++i) {
    const Params p = BatchParams(*batches[i]);  // libpq copies the parameters as it sends
    const Params::Arrays a = p.ForLibpq();
    if (PQsendQueryPrepared(conn_, "put_batch", a.n(), a.values.data(), a.lengths.data(), a.formats.data(), 1) != 1) {
      sent = ErrorOf(nullptr, "put_batch (pipeline)");
      break;
    }
    ++queued;
  }
  if (PQpipelineSync(conn_) != 1 && sent.ok()) sent = ErrorOf(nullptr, "pipeline sync");
  // One result per statement sent (each followed by a null), then the sync.
  for (size_t i = 0; i < queued; ++i) {
    Result res(PQgetResult(conn_), PQclear);
    while (PGresult* end = PQgetResult(conn_)) PQclear(end);
    const ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK) {
      out->push_back(std::strcmp(PQcmdTuples(res.get()), "1") == 0);
    } else if (st == PGRES_PIPELINE_ABORTED) {
      out->push_back(absl::AbortedError("job store: put_batch: an earlier statement of its pipeline failed"));
    } else {
      out->push_back(ErrorOf(res.get(), "put_batch"));
    }
  }
  for (;;) {
    Result res(PQgetResult(conn_), PQclear);
    if (res == nullptr || PQresultStatus(res.get()) == PGRES_PIPELINE_SYNC) break;
  }
  if (PQexitPipelineMode(conn_) != 1 && sent.ok()) sent = ErrorOf(nullptr, "leaving pipeline mode");
  for (size_t i = from + queued; i < to; ++i) out->push_back(sent);
  // The first failure fails the transaction, as Run's does.
  for (size_t i = from; i < to && txn_error_.ok(); ++i) {
    if (!(*out)[i].ok()) txn_error_ = (*out)[i].status();
  }
  if (!sent.ok() && txn_error_.ok()) txn_error_ = sent;
}

absl::StatusOr<std::vector<v1::SampleBatch>> PgJobStore::LoadSampleBatches(const std::string& task_id, int attempt,
                                                                           uint64_t from_seq, int max_batches) {
  const Params p = PageParams(task_id, attempt, from_seq, max_batches);
  auto res = Run("load_batches", p, PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  std::vector<v1::SampleBatch> out;
  out.reserve(PQntuples(res->get()));
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    v1::SampleBatch& b = out.emplace_back();
    b.set_task_id(task_id);
    b.set_attempt(attempt);
    b.set_seq(static_cast<uint64_t>(GetInt(res->get(), r, 0)));
    b.set_phase(static_cast<v1::Phase>(GetInt(res->get(), r, 1)));
    const std::string_view bytes = GetBytes(res->get(), r, 2);
    if (!PQgetisnull(res->get(), r, 3) && static_cast<int64_t>(bytes.size()) != GetInt(res->get(), r, 3)) {
      return absl::DataLossError(absl::StrCat("job store: batch ", b.seq(), " of task '", task_id, "': ", bytes.size(),
                                              " of its ", GetInt(res->get(), r, 3),
                                              " bytes found; a piece of its group is missing"));
    }
    if (absl::Status s = DecodeSampleColumns(bytes, &b); !s.ok()) {
      return absl::DataLossError(absl::StrCat("job store: batch ", b.seq(), " of task '", task_id, "': ", s.message()));
    }
  }
  return out;
}

absl::StatusOr<bool> PgJobStore::PutPowerBatch(const v1::PowerBatch& batch) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  Params p;
  p.Text(batch.task_id()).Int(batch.attempt()).Int(static_cast<int64_t>(batch.seq())).Text(batch.sensor().name());
  p.Int(batch.t_ns_size()).Int(options_.epoch).Bytes(batch.SerializeAsString());
  auto res = Run("put_power", p, PGRES_COMMAND_OK);
  if (!res.ok()) return res.status();
  return std::strcmp(PQcmdTuples(res->get()), "1") == 0;
}

absl::StatusOr<std::vector<v1::PowerBatch>> PgJobStore::LoadPowerBatches(const std::string& task_id, int attempt,
                                                                         uint64_t from_seq, int max_batches) {
  const Params p = PageParams(task_id, attempt, from_seq, max_batches);
  auto res = Run("load_power", p, PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  std::vector<v1::PowerBatch> out;
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    if (!ParseColumn(res->get(), r, 0, &out.emplace_back())) {
      return absl::DataLossError(absl::StrCat("job store: a power batch of task '", task_id, "' does not parse"));
    }
  }
  return out;
}

}  // namespace hetbench::server
