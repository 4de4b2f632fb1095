// The PostgreSQL store's layout on a real PostgreSQL server: how sample
// batches are written (COPY, multi-row INSERT, pipeline), where their bytes
// go (compression, their row, packed pieces), and each older schema
// converted when a coordinator of this version opens it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/store/pg_job_store.h"
#include "server/store/pg_schema.h"
#include "tests/integration/pg_test_support.h"

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;

// One letter per batch column (power_batches', then sample_batches'): its
// `attribute` in pg_attribute, e.g. attcompression ('l' lz4) or attstorage
// ('m' main, 'x' extended).
std::string BatchColumns(const std::string& url, const char* attribute) {
  return SqlValue(url, absl::StrCat("SELECT string_agg(", attribute,
                                    "::text, '' ORDER BY attrelid::regclass::text) FROM pg_attribute WHERE attname = "
                                    "'batch' AND attrelid IN ('sample_batches'::regclass, 'power_batches'::regclass)"));
}

// Both batch columns SET `clause` and the schema version set back to
// `version`, as a coordinator of that version left them; "" when done.
std::string AsSchema(const std::string& url, const char* clause, int version) {
  return AsOlderSchema(url,
                       absl::StrCat("ALTER TABLE sample_batches ALTER COLUMN batch SET ", clause,
                                    "; ALTER TABLE power_batches ALTER COLUMN batch SET ", clause),
                       version);
}

class PgLayoutTest : public PgDatabaseTest {};

// Schema 2: batches compress with lz4 (where PostgreSQL has it), and a
// database of schema 1 is converted when it is next opened.
TEST_F(PgLayoutTest, BatchesCompressWithLz4AndAnOlderSchemaIsConverted) {
  if (std::stoi(SqlValue(url_, "SHOW server_version_num")) < 140000) GTEST_SKIP() << "PostgreSQL < 14: no lz4";
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  if (BatchColumns(url_, "attcompression") != "ll") GTEST_SKIP() << "this PostgreSQL is built without lz4";
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
  // Back to schema 1 as it was (pglz): the next open converts it.
  EXPECT_EQ(AsSchema(url_, "COMPRESSION pglz", 1), "");
  EXPECT_EQ(BatchColumns(url_, "attcompression"), "pp");
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(BatchColumns(url_, "attcompression"), "ll");
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
}

// The store contract suite runs the default (COPY); the forms bench_ingest
// compares it with keep the same answers: each batch stored once, a repeat
// inside the call or of an earlier one answered false (COPY's group then
// goes again as one INSERT).
TEST_F(PgLayoutTest, EveryFormOfManyBatchesAtOnceStoresEachOnceInOrder) {
  using Writes = PgStoreOptions::BatchWrites;
  for (const Writes writes : {Writes::kCopy, Writes::kMultiRow, Writes::kPipelined, Writes::kOneByOne}) {
    const std::string task = absl::StrCat("job-000009-t", static_cast<int>(writes));
    auto store = Store(url_, 0, nullptr, writes);
    ASSERT_NE(store, nullptr);
    std::vector<v1::SampleBatch> owned(303);
    for (size_t i = 0; i < owned.size(); ++i) {
      owned[i].set_task_id(task);
      owned[i].set_attempt(i == 302 ? 2 : 1);
      owned[i].set_seq(i < 300 ? i : 7);  // 300: seq 7 again; 301: seq 7 again; 302: seq 7 of attempt 2
      owned[i].add_start_ns(0);
      owned[i].add_duration_ns(static_cast<int64_t>(i));
      owned[i].add_items(1);
    }
    std::vector<const v1::SampleBatch*> refs;
    for (const v1::SampleBatch& b : owned) refs.push_back(&b);
    ASSERT_TRUE(store->Begin().ok());
    ASSERT_TRUE(*store->PutSampleBatch(owned[5]));
    const std::vector<absl::StatusOr<bool>> results = store->PutSampleBatches(refs);
    ASSERT_TRUE(store->Commit().ok());
    ASSERT_EQ(results.size(), refs.size());
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << static_cast<int>(writes) << " " << i << ": " << results[i].status();
      EXPECT_EQ(*results[i], i != 5 && i != 300 && i != 301) << static_cast<int>(writes) << " " << i;
    }
    auto stored = store->LoadSampleBatches(task, 1);
    ASSERT_TRUE(stored.ok()) << stored.status();
    ASSERT_EQ(stored->size(), 300u) << static_cast<int>(writes);
    EXPECT_EQ((*stored)[7].duration_ns(0), 7) << "the first of the repeats is the one stored";
    EXPECT_EQ(store->LoadSampleBatches(task, 2)->size(), 1u);
  }
}

// The default: a group of batches is one COPY under a savepoint (its rows
// carry the savepoint's subtransaction id as xmin); a key stored before
// fails that COPY, which is undone, and the group goes again as one INSERT
// in the transaction itself; the transaction goes on and commits both.
TEST_F(PgLayoutTest, AGroupIsOneCopyAndAKeyStoredBeforeMakesItAnInsert) {
  auto store = Store(url_, 0, nullptr);
  ASSERT_NE(store, nullptr);
  const std::string task = "job-000010-t0";
  std::vector<v1::SampleBatch> b(6);
  for (size_t i = 0; i < b.size(); ++i) {
    b[i].set_task_id(task);
    b[i].set_attempt(1);
    b[i].set_seq(i < 5 ? i : 20);
    b[i].add_start_ns(0);
    b[i].add_duration_ns(static_cast<int64_t>(100 + i));
    b[i].add_items(1);
  }
  v1::SampleBatch first = b[1];
  first.set_duration_ns(0, 7);
  ASSERT_TRUE(store->Begin().ok());
  ASSERT_TRUE(*store->PutSampleBatch(first));
  ASSERT_TRUE(store->Commit().ok());

  ASSERT_TRUE(store->Begin().ok());
  ASSERT_TRUE(*store->PutSampleBatch(b[5]));  // seq 20, in the transaction itself
  const auto with_stored = store->PutSampleBatches({&b[0], &b[1], &b[2]});
  const auto fresh = store->PutSampleBatches({&b[3], &b[4]});
  ASSERT_TRUE(store->Commit().ok());
  ASSERT_EQ(with_stored.size(), 3u);
  ASSERT_EQ(fresh.size(), 2u);
  for (const auto& r : with_stored) ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& r : fresh) ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*with_stored[0]);
  EXPECT_FALSE(*with_stored[1]) << "stored before";
  EXPECT_TRUE(*with_stored[2]);
  EXPECT_TRUE(*fresh[0]);
  EXPECT_TRUE(*fresh[1]);

  auto stored = store->LoadSampleBatches(task, 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 6u);
  EXPECT_EQ((*stored)[1].duration_ns(0), 7) << "the batch stored first stays";
  for (size_t i : {0, 2, 3, 4}) EXPECT_EQ((*stored)[i].duration_ns(0), static_cast<int64_t>(100 + i)) << i;
  // Which (sub)transaction wrote each row: seq 0, 2 and 20 the transaction
  // itself (the INSERT after the COPY was undone), 3 and 4 the COPY's savepoint.
  const std::string xmin =
      absl::StrCat("(SELECT xmin::text FROM sample_batches WHERE task_id = '", task, "' AND seq = ");
  const std::string top = SqlValue(url_, xmin + "20)");
  ASSERT_FALSE(top.empty());
  EXPECT_EQ(SqlValue(url_, xmin + "0)"), top);
  EXPECT_EQ(SqlValue(url_, xmin + "2)"), top);
  const std::string copied = SqlValue(url_, xmin + "3)");
  EXPECT_NE(copied, top) << "seq 3 and 4 were not written by a COPY under a savepoint";
  EXPECT_EQ(SqlValue(url_, xmin + "4)"), copied);
}

// Schema 3: a batch stays in its row (storage MAIN), and a database of
// schema 2 is converted when it is next opened.
TEST_F(PgLayoutTest, BatchesStayInTheirRowAndAnOlderSchemaIsConverted) {
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(BatchColumns(url_, "attstorage"), "mm");
  EXPECT_EQ(AsSchema(url_, "STORAGE EXTENDED", 2), "");
  EXPECT_EQ(BatchColumns(url_, "attstorage"), "xx");
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(BatchColumns(url_, "attstorage"), "mm");
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
}

// Schema 4: a batch that fits a page is stored as it is, a longer one
// compressed; a database of schema 3 is converted when it is next opened.
TEST_F(PgLayoutTest, ABatchThatFitsAPageIsNotCompressedAndAnOlderSchemaIsConverted) {
  auto store = Store(url_, 0, nullptr);
  ASSERT_NE(store, nullptr);
  const std::string targets =
      "SELECT count(*) FROM pg_class WHERE oid IN ('sample_batches'::regclass, 'power_batches'::regclass) AND "
      "reloptions @> ARRAY['toast_tuple_target=8160']";
  EXPECT_EQ(SqlValue(url_, targets), "2");
  // seq 1: 600 steps of ~10 ms with jitter (~5 KB);
  // seq 2: 40,000 identical steps, far longer than a page but compressible.
  for (const int steps : {600, 40000}) {
    v1::SampleBatch b;
    b.set_task_id("job-000001-t0");
    b.set_attempt(1);
    b.set_seq(steps == 600 ? 1 : 2);
    for (int i = 0; i < steps; ++i) {
      b.add_start_ns(int64_t{i} * 10'500'000);
      b.add_duration_ns(steps == 600 ? 10'000'000 + (i * 7919) % 400'000 : 10'000'000);
      b.add_items(64);
    }
    ASSERT_TRUE(store->Begin().ok());
    auto stored = store->PutSampleBatch(b);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(*stored);
    ASSERT_TRUE(store->Commit().ok());
  }
  const std::string how =
      "SELECT string_agg(length(batch) || ':' || coalesce(pg_column_compression(batch), 'none'), ' ' ORDER BY seq) "
      "FROM sample_batches";
  const std::vector<std::string> rows = absl::StrSplit(SqlValue(url_, how), ' ');
  ASSERT_EQ(rows.size(), 2u);
  const std::vector<std::string> fits = absl::StrSplit(rows[0], ':');
  const std::vector<std::string> longer = absl::StrSplit(rows[1], ':');
  EXPECT_GT(std::stoi(fits[0]), 2100) << "longer than PostgreSQL's default toast_tuple_target";
  EXPECT_LT(std::stoi(fits[0]), 8000);
  EXPECT_EQ(fits[1], "none");
  EXPECT_GT(std::stoi(longer[0]), 8160);
  EXPECT_NE(longer[1], "none");
  auto loaded = store->LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[0].duration_ns(599), 10'000'000 + (599 * 7919) % 400'000);
  EXPECT_EQ((*loaded)[1].duration_ns_size(), 40000);
  store.reset();
  // Back to schema 3 as it was (the default target): the next open converts it.
  EXPECT_EQ(AsOlderSchema(url_,
                          "ALTER TABLE sample_batches RESET (toast_tuple_target); ALTER TABLE power_batches RESET "
                          "(toast_tuple_target)",
                          3),
            "");
  EXPECT_EQ(SqlValue(url_, targets), "0");
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(SqlValue(url_, targets), "2");
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
}

// A batch as an agent sends it: `steps` steps of ~10 ms with jitter (~5 bytes a step).
v1::SampleBatch Steps(const std::string& task, uint64_t seq, int steps) {
  v1::SampleBatch b;
  b.set_task_id(task);
  b.set_attempt(1);
  b.set_seq(seq);
  for (int i = 0; i < steps; ++i) {
    b.add_start_ns(int64_t{i} * 10'500'000);
    b.add_duration_ns(10'000'000 + (i * 7919 + static_cast<int>(seq) * 104729) % 400'000);
    b.add_items(64);
  }
  return b;
}

// Schema 6: a COPY's batches keep their bytes packed in pieces that each
// fill a page; a batch across two pieces reads whole, a missing piece is
// DATA_LOSS, and a group's pieces go with its last pruned batch. A database
// of schema 5 (every batch in its row) is converted when next opened, and its
// rows still read.
TEST_F(PgLayoutTest, ACopysBatchesArePackedIntoPagesAndAnOlderSchemaIsConverted) {
  const v1::SampleBatch in_row = Steps("job-000001-t0", 0, 1000);
  {
    auto store = Store(url_, 0, nullptr);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Begin().ok());
    ASSERT_TRUE(*store->PutSampleBatch(in_row));
    ASSERT_TRUE(store->Commit().ok());
  }
  // Back to schema 5 as it was: no groups, every batch in its row.
  EXPECT_EQ(AsOlderSchema(url_,
                          "DROP TABLE sample_pieces, sample_groups; DROP SEQUENCE sample_group_ids; ALTER TABLE "
                          "sample_batches DROP CONSTRAINT sample_batches_bytes_once, DROP COLUMN grp, DROP COLUMN "
                          "grp_offset, DROP COLUMN grp_bytes, ALTER COLUMN batch SET NOT NULL",
                          5),
            "");
  auto store = Store(url_, 0, nullptr);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
  EXPECT_EQ(SqlValue(url_,
                     "SELECT attstorage FROM pg_attribute WHERE attrelid = 'sample_pieces'::regclass AND "
                     "attname = 'bytes'"),
            "p");

  ASSERT_TRUE(store->Begin().ok());
  for (auto [number, finished] : {std::pair{1, 100.0}, {2, 900.0}, {3, 900.0}, {4, 900.0}}) {
    v1::Job job = MakeJob(number);
    job.set_state(v1::JOB_STATE_SUCCEEDED);
    job.set_finished_unix_seconds(finished);
    ASSERT_TRUE(store->InsertJob(job, "").ok());
  }
  // One group: jobs 1 and 2 interleaved, ~5 KB each, so batches cross pieces.
  std::vector<v1::SampleBatch> owned;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    owned.push_back(Steps("job-000001-t0", seq, 1000));
    owned.push_back(Steps("job-000002-t0", seq, 1000));
  }
  std::vector<const v1::SampleBatch*> refs;
  for (const v1::SampleBatch& b : owned) refs.push_back(&b);
  for (const auto& r : store->PutSampleBatches(refs)) ASSERT_TRUE(r.ok() && *r) << r.status();
  ASSERT_TRUE(store->Commit().ok());
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_batches WHERE batch IS NULL"), "6");
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) || ' ' || live FROM sample_groups GROUP BY live"), "1 6");
  const int total = std::stoi(SqlValue(url_, "SELECT sum(grp_bytes) FROM sample_batches"));
  EXPECT_GT(total, 6 * 4000);
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_pieces"),
            absl::StrCat((total + pg::kSamplePieceBytes - 1) / pg::kSamplePieceBytes));
  EXPECT_EQ(SqlValue(url_, "SELECT max(length(bytes)) FROM sample_pieces"), absl::StrCat(pg::kSamplePieceBytes));
  EXPECT_GE(std::stoi(SqlValue(url_,
                               "SELECT count(*) FROM sample_batches WHERE grp_offset / 8000 <> "
                               "(grp_offset + grp_bytes - 1) / 8000")),
            2)
      << "the test means batches across two pieces";
  auto check = [&](const std::string& task, std::vector<const v1::SampleBatch*> want) {
    auto got = store->LoadSampleBatches(task, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size()) << task;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*got)[i].seq(), want[i]->seq());
      EXPECT_THAT((*got)[i].duration_ns(), ::testing::ElementsAreArray(want[i]->duration_ns())) << task << " " << i;
      EXPECT_THAT((*got)[i].start_ns(), ::testing::ElementsAreArray(want[i]->start_ns())) << task << " " << i;
    }
  };
  check("job-000001-t0", {&in_row, &owned[0], &owned[2], &owned[4]});
  check("job-000002-t0", {&owned[1], &owned[3], &owned[5]});

  // Job 1's batches pruned: the group keeps its pieces for job 2's.
  ASSERT_TRUE(store->Begin().ok());
  auto pruned = store->PruneRawBatches(500, 8);
  ASSERT_TRUE(store->Commit().ok());
  ASSERT_TRUE(pruned.ok() && *pruned == 1) << pruned.status();
  EXPECT_EQ(SqlValue(url_, "SELECT live FROM sample_groups"), "3");
  check("job-000001-t0", {});
  check("job-000002-t0", {&owned[1], &owned[3], &owned[5]});
  // A COPY longer than max_group_bytes is several groups, each its own pieces from 0.
  {
    PgStoreOptions o;
    o.url = url_;
    o.max_group_bytes = 12'000;
    auto small = PgJobStore::Open(o);
    ASSERT_TRUE(small.ok()) << small.status();
    std::vector<v1::SampleBatch> four;
    for (uint64_t seq = 0; seq < 4; ++seq) four.push_back(Steps("job-000004-t0", seq, 1000));
    ASSERT_TRUE((*small)->Begin().ok());
    for (const auto& r : (*small)->PutSampleBatches({&four[0], &four[1], &four[2], &four[3]})) {
      ASSERT_TRUE(r.ok() && *r) << r.status();
    }
    ASSERT_TRUE((*small)->Commit().ok());
    const std::string groups = "(SELECT DISTINCT grp FROM sample_batches WHERE task_id = 'job-000004-t0')";
    const int n = std::stoi(SqlValue(url_, "SELECT count(*) FROM " + groups + " g"));
    EXPECT_GE(n, 2);
    EXPECT_EQ(SqlValue(url_, "SELECT sum(live) FROM sample_groups WHERE grp IN " + groups), "4");
    EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_pieces WHERE idx = 0 AND grp IN " + groups), absl::StrCat(n));
    EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_batches WHERE grp IN " + groups +
                                 " AND grp_offset > 0 AND grp_offset + grp_bytes > 12000"),
              "0");
    check("job-000004-t0", {&four[0], &four[1], &four[2], &four[3]});
  }
  // A piece lost (by hand): DATA_LOSS that says so, not a batch cut short.
  ASSERT_TRUE(store->Begin().ok());
  const v1::SampleBatch third = Steps("job-000003-t0", 0, 1000), fourth = Steps("job-000003-t0", 1, 1000);
  for (const auto& r : store->PutSampleBatches({&third, &fourth})) ASSERT_TRUE(r.ok() && *r) << r.status();
  ASSERT_TRUE(store->Commit().ok());
  EXPECT_EQ(Sql(url_,
                "DELETE FROM sample_pieces WHERE idx = 1 AND grp = (SELECT grp FROM sample_batches WHERE "
                "task_id = 'job-000003-t0' AND seq = 1)"),
            "");
  auto lost = store->LoadSampleBatches("job-000003-t0", 1);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(lost.status().message(), HasSubstr(" of task 'job-000003-t0'"));
  EXPECT_THAT(lost.status().message(), HasSubstr("a piece of its group is missing"));
  // The last batches of both groups pruned: their groups and pieces go too.
  ASSERT_TRUE(store->Begin().ok());
  pruned = store->PruneRawBatches(1000, 8);
  ASSERT_TRUE(store->Commit().ok());
  ASSERT_TRUE(pruned.ok() && *pruned == 3) << pruned.status();
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_groups"), "0");
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_pieces"), "0");
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM sample_batches"), "0");
}

}  // namespace
// Schema 7: pieces are vacuumed by pruning, not after inserts, and ANALYZE
// samples few of them and keeps no statistics of their bytes; a database of
// schema 6 is converted when it is next opened.
TEST_F(PgLayoutTest, PiecesAreNotVacuumedAfterInsertsAndAnOlderSchemaIsConverted) {
  const std::string options = "SELECT reloptions::text FROM pg_class WHERE oid = 'sample_pieces'::regclass";
  const std::string targets =
      "SELECT string_agg(attname || '=' || attstattarget, ' ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = "
      "'sample_pieces'::regclass AND attnum > 0";
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(SqlValue(url_, options), "{autovacuum_vacuum_insert_threshold=-1}");
  EXPECT_EQ(SqlValue(url_, targets), "grp=10 idx=10 bytes=0");
  // Back to schema 6 as it was: the next open converts it.
  EXPECT_EQ(AsOlderSchema(url_,
                          "ALTER TABLE sample_pieces RESET (autovacuum_vacuum_insert_threshold), ALTER COLUMN grp SET "
                          "STATISTICS -1, ALTER COLUMN idx SET STATISTICS -1, ALTER COLUMN bytes SET STATISTICS -1",
                          6),
            "");
  EXPECT_EQ(SqlValue(url_, targets), "grp=-1 idx=-1 bytes=-1");
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
  EXPECT_EQ(SqlValue(url_, options), "{autovacuum_vacuum_insert_threshold=-1}");
  EXPECT_EQ(SqlValue(url_, targets), "grp=10 idx=10 bytes=0");
}

}  // namespace hetbench::server
