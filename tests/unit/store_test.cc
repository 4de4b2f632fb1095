#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "common/sample_codec.h"
#include "server/store/sqlite_job_store.h"
#include "server/store/store_reader.h"
// The tests every store passes are in store_contract_test.cc; these are
// SQLite's own (migrations, the old layouts, paths) and the data reader's.
#include "tests/testing/store_rows.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::server {
namespace {

using testing::Batch;
using testing::MakeJob;

// GetTaskData's pages: the task's current attempt only, in seq order, each
// page says where the next starts, the last says nothing; bad fields named.
TEST(StoreReaderTest, PagesOfTheCurrentAttemptInSeqOrder) {
  auto store = *SqliteJobStore::Open(":memory:");
  v1::Job job = MakeJob(3, v1::JOB_STATE_RUNNING, 1);
  job.mutable_tasks(0)->set_attempt(2);
  ASSERT_TRUE(store->Begin().ok());
  ASSERT_TRUE(store->InsertJob(job, "").ok());
  ASSERT_TRUE(store->Commit().ok());
  const std::string task = job.tasks(0).id();
  for (uint64_t seq : {4, 0, 2, 1, 3}) ASSERT_TRUE(store->PutSampleBatch(Batch(task, 2, seq, 3)).ok());
  ASSERT_TRUE(store->PutSampleBatch(Batch(task, 1, 9, 3)).ok());  // an earlier attempt's
  for (uint64_t seq : {0, 1}) {
    v1::PowerBatch p;
    p.set_task_id(task);
    p.set_attempt(2);
    p.set_seq(seq);
    p.mutable_sensor()->set_name("rapl:package-0");
    p.add_t_ns(static_cast<int64_t>(seq));
    p.add_watts(20);
    p.add_joules(1);
    ASSERT_TRUE(store->PutPowerBatch(p).ok());
  }

  v1::GetTaskDataRequest r;
  r.set_task_id(task);
  r.set_kind(v1::GetTaskDataRequest::KIND_SAMPLES);
  r.set_page_size(2);
  std::vector<uint64_t> seen;
  int pages = 0;
  do {
    auto page = StoreReader::ReadPage(*store, r);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ(page->attempt(), 2);
    for (const auto& b : page->samples()) seen.push_back(b.seq());
    r.set_page_token(page->next_page_token());
    ++pages;
  } while (!r.page_token().empty() && pages < 10);
  EXPECT_THAT(seen, ::testing::ElementsAre(0, 1, 2, 3, 4));
  EXPECT_EQ(pages, 3);

  r.set_kind(v1::GetTaskDataRequest::KIND_POWER);
  r.set_page_size(0);
  auto power = StoreReader::ReadPage(*store, r);
  ASSERT_TRUE(power.ok());
  EXPECT_EQ(power->power_size(), 2);
  EXPECT_TRUE(power->next_page_token().empty());

  auto refuse = [&](auto edit, const std::string& field) {
    v1::GetTaskDataRequest bad = r;
    edit(bad);
    auto got = StoreReader::ReadPage(*store, bad);
    EXPECT_FALSE(got.ok());
    EXPECT_THAT(std::string(got.status().message()), ::testing::StartsWith(field)) << got.status();
  };
  refuse([](auto& b) { b.set_kind(v1::GetTaskDataRequest::KIND_UNSPECIFIED); }, "kind");
  refuse([](auto& b) { b.set_page_size(1000); }, "page_size");
  refuse([](auto& b) { b.set_page_token("x"); }, "page_token");
  refuse([](auto& b) { b.clear_task_id(); }, "task_id");
  v1::GetTaskDataRequest missing = r;
  missing.set_task_id("job-000003-t7");
  EXPECT_EQ(StoreReader::ReadPage(*store, missing).status().code(), absl::StatusCode::kNotFound);
}

// Requests past the queue's bound are refused at once, not queued without end.
TEST(StoreReaderTest, AFullQueueAnswersResourceExhausted) {
  auto store = SqliteJobStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int answered = 0, exhausted = 0;
  {
    StoreReader reader(std::move(*store), /*max_queued=*/2);
    v1::GetTaskDataRequest r;
    r.set_task_id("t");
    r.set_kind(v1::GetTaskDataRequest::KIND_SAMPLES);
    // The first holds the reader's thread until released; two more queue; the rest are refused.
    std::atomic<bool> first_running{false};
    reader.Read(r, [&](absl::StatusOr<v1::TaskData>) {
      first_running = true;
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return release; });
      ++answered;
    });
    while (!first_running) std::this_thread::yield();
    for (int i = 0; i < 5; ++i) {
      reader.Read(r, [&](absl::StatusOr<v1::TaskData> got) {
        std::lock_guard<std::mutex> l(mu);
        if (got.status().code() == absl::StatusCode::kResourceExhausted) {
          ++exhausted;
        } else {
          ++answered;
        }
      });
    }
    {
      std::lock_guard<std::mutex> l(mu);
      release = true;
    }
    cv.notify_all();
  }  // Stop: the queued ones are answered first
  EXPECT_EQ(exhausted, 3);
  EXPECT_EQ(answered, 3);
}

TEST(SqliteJobStoreTest, AStoreOfTheOldOneBlobPerJobLayoutIsMigrated) {
  testing::TempDir dir("hetbench-store");
  const std::string path = dir.path() + "/old.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE jobs (id TEXT PRIMARY KEY, created_unix_seconds REAL NOT NULL, state INTEGER "
                           "NOT NULL, job BLOB NOT NULL);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    for (const v1::Job& job : {MakeJob(1, v1::JOB_STATE_SUCCEEDED, 2), MakeJob(2, v1::JOB_STATE_QUEUED, 1)}) {
      sqlite3_stmt* stmt = nullptr;
      sqlite3_prepare_v2(db, "INSERT INTO jobs VALUES (?, ?, ?, ?)", -1, &stmt, nullptr);
      const std::string blob = job.SerializeAsString();
      sqlite3_bind_text(stmt, 1, job.id().c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(stmt, 2, job.created_unix_seconds());
      sqlite3_bind_int(stmt, 3, job.state());
      sqlite3_bind_blob(stmt, 4, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
  }
  auto store = SqliteJobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto live = (*store)->LoadLiveJobs();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id(), "job-000002");
  auto ended = (*store)->GetJob("job-000001");
  ASSERT_TRUE(ended.ok() && ended->has_value());
  EXPECT_EQ((*ended)->tasks_size(), 2);
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
}

// Batches written by an older build (the whole protobuf as the blob) load
// beside the compact ones; the checkpoint thread's work survives a reopen.
TEST(SqliteJobStoreTest, OlderWholeProtobufBatchesLoadBesideCompactOnes) {
  testing::TempDir dir("hetbench-store");
  const std::string path = dir.path() + "/mixed.db";
  {
    auto store = SqliteJobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Begin().ok());
    for (uint64_t seq : {0u, 2u}) ASSERT_TRUE((*store)->PutSampleBatch(Batch("t0", 1, seq, 4)).ok());
    ASSERT_TRUE((*store)->Commit().ok());
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    // As an older hetbench wrote it: the whole batch in the row (no segment).
    sqlite3_prepare_v2(db,
                       "INSERT INTO sample_batches (task_id, attempt, seq, phase, sample_count, batch) "
                       "VALUES ('t0', 1, 1, 1, 4, ?)",
                       -1, &stmt, nullptr);
    const std::string whole = Batch("t0", 1, 1, 4).SerializeAsString();
    sqlite3_bind_blob(stmt, 1, whole.data(), static_cast<int>(whole.size()), SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
  }
  auto store = SqliteJobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto batches = (*store)->LoadSampleBatches("t0", 1);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 3u);
  const v1::SampleBatch want = Batch("t0", 1, 1, 4);
  for (uint64_t seq = 0; seq < 3; ++seq) {
    const v1::SampleBatch& b = (*batches)[seq];
    EXPECT_EQ(b.seq(), seq);
    EXPECT_EQ(b.task_id(), "t0");
    EXPECT_EQ(b.phase(), v1::PHASE_TRAIN);
    EXPECT_EQ(std::vector<int64_t>(b.start_ns().begin(), b.start_ns().end()),
              std::vector<int64_t>(want.start_ns().begin(), want.start_ns().end()));
    EXPECT_EQ(std::vector<int64_t>(b.duration_ns().begin(), b.duration_ns().end()),
              std::vector<int64_t>(want.duration_ns().begin(), want.duration_ns().end()));
  }
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
}

// Schema 2 kept sample batches in a WITHOUT ROWID table: opening such a store
// moves them to the rowid table once, keeping every batch and its key.
TEST(SqliteJobStoreTest, ASampleTableOfSchema2IsMovedToARowidTable) {
  testing::TempDir dir("hetbench-store");
  const std::string path = dir.path() + "/v2.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE sample_batches (task_id TEXT NOT NULL, attempt INTEGER NOT NULL, seq INTEGER "
                           "NOT NULL, phase INTEGER NOT NULL, sample_count INTEGER NOT NULL, batch BLOB NOT NULL, "
                           "PRIMARY KEY (task_id, attempt, seq)) WITHOUT ROWID;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    for (int seq = 0; seq < 3; ++seq) {
      sqlite3_stmt* stmt = nullptr;
      sqlite3_prepare_v2(db, "INSERT INTO sample_batches VALUES ('t0', 1, ?, 1, 4, ?)", -1, &stmt, nullptr);
      const std::string blob = Batch("t0", 1, seq, 4).SerializeAsString();
      sqlite3_bind_int(stmt, 1, seq);
      sqlite3_bind_blob(stmt, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
  }
  for (int open = 0; open < 2; ++open) {  // the second open finds nothing to move
    auto store = SqliteJobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto batches = (*store)->LoadSampleBatches("t0", 1);
    ASSERT_TRUE(batches.ok()) << batches.status();
    ASSERT_EQ(batches->size(), 3u);
    EXPECT_EQ((*batches)[2].duration_ns(3), Batch("t0", 1, 2, 4).duration_ns(3));
    auto again = (*store)->PutSampleBatch(Batch("t0", 1, 1, 4));  // the key still holds
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(*again);
    EXPECT_TRUE((*store)->CheckIntegrity().ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE name = 'sample_batches'", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))).find("WITHOUT ROWID"),
            std::string::npos);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// Schema 4: a file store writes a batch's bytes once, to a segment file
// beside the database; its row names where (and stays empty itself).
class SegmentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteJobStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::string SegmentPath(int id) const { return absl::StrFormat("%s.samples/%06d.seg", path_, id); }
  int64_t SegmentStat(int id, bool blocks) const {
    struct stat st;
    if (stat(SegmentPath(id).c_str(), &st) != 0) return -1;
    return static_cast<int64_t>(blocks ? st.st_blocks : st.st_size);
  }
  /// Stores `batches` in one transaction on `store` (this test's when null).
  void CommitBatches(const std::vector<v1::SampleBatch>& batches, JobStore* store = nullptr) {
    JobStore& s = store == nullptr ? *store_ : *store;
    ASSERT_TRUE(s.Begin().ok());
    for (const v1::SampleBatch& b : batches) {
      auto stored = s.PutSampleBatch(b);
      ASSERT_TRUE(stored.ok() && *stored) << stored.status();
    }
    ASSERT_TRUE(s.Commit().ok());
  }
  /// Task t0's stored batches, attempt 1, against `want` step by step (start times tell batches apart).
  void ExpectStored(const std::vector<v1::SampleBatch>& want) {
    auto batches = store_->LoadSampleBatches("t0", 1);
    ASSERT_TRUE(batches.ok()) << batches.status();
    ASSERT_EQ(batches->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      v1::SampleBatch w = want[i];
      if (!w.columns().empty()) ASSERT_TRUE(DecodeSampleColumns(w.columns(), &w).ok());
      const v1::SampleBatch& got = (*batches)[i];
      EXPECT_EQ(got.seq(), w.seq());
      EXPECT_EQ(std::vector<int64_t>(got.start_ns().begin(), got.start_ns().end()),
                std::vector<int64_t>(w.start_ns().begin(), w.start_ns().end()))
          << "batch " << i;
      EXPECT_EQ(std::vector<int64_t>(got.duration_ns().begin(), got.duration_ns().end()),
                std::vector<int64_t>(w.duration_ns().begin(), w.duration_ns().end()))
          << "batch " << i;
    }
    EXPECT_TRUE(store_->CheckIntegrity().ok()) << store_->CheckIntegrity();
  }

  testing::TempDir dir_{"hetbench-store"};
  const std::string path_ = dir_.path() + "/jobs.db";
  std::unique_ptr<SqliteJobStore> store_;
};

TEST_F(SegmentStoreTest, BatchBytesGoOnceToASegmentBesideTheDatabase) {
  std::vector<v1::SampleBatch> batches;
  int64_t bytes = 0;
  for (uint64_t seq : {0u, 1u, 2u}) {
    batches.push_back(Batch("t0", 1, seq, 5 + static_cast<int>(seq)));
    if (seq == 1) PackSampleColumns(&batches.back());  // as an agent sends them
    bytes += static_cast<int64_t>(EncodeSampleColumns(batches.back()).size());
  }
  ASSERT_TRUE(store_->Begin().ok());
  for (const v1::SampleBatch& b : batches) ASSERT_TRUE(*store_->PutSampleBatch(b));
  EXPECT_FALSE(*store_->PutSampleBatch(Batch("t0", 1, 1, 6)));  // a repeat: no bytes staged
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(SegmentStat(1, /*blocks=*/false), bytes);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT length(batch), segment, segment_offset, segment_bytes, sample_count FROM sample_batches "
                     "ORDER BY seq",
                     -1, &stmt, nullptr);
  int64_t offset = 0;
  for (int seq = 0; seq < 3; ++seq) {
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(stmt, 0), 0);
    EXPECT_EQ(sqlite3_column_int(stmt, 1), 1);
    EXPECT_EQ(sqlite3_column_int64(stmt, 2), offset);
    offset += sqlite3_column_int64(stmt, 3);
    EXPECT_EQ(sqlite3_column_int(stmt, 4), 5 + seq);
  }
  EXPECT_EQ(offset, bytes);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  store_.reset();
  SetUp();  // read back over a fresh open
  ExpectStored(batches);
}

// Bytes past a segment's committed length (a rollback, or a crash between the
// segment's write and the commit) belong to no row: the next commit writes
// over them, and every committed batch reads back as stored.
TEST_F(SegmentStoreTest, BytesPastTheCommittedLengthAreWrittenOver) {
  const v1::SampleBatch first = Batch("t0", 1, 0, 4), last = Batch("t0", 1, 2, 7);
  CommitBatches({first});
  ASSERT_GT(SegmentStat(1, /*blocks=*/false), 0);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(*store_->PutSampleBatch(Batch("t0", 1, 1, 50)));
  ASSERT_TRUE(store_->Rollback().ok());
  {  // what a crash after the segment's write would leave
    FILE* f = std::fopen(SegmentPath(1).c_str(), "ab");
    ASSERT_NE(f, nullptr);
    const std::string junk(700, '\x5a');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  CommitBatches({last});
  ExpectStored({first, last});
  const int64_t size = SegmentStat(1, /*blocks=*/false);
  ASSERT_TRUE(store_->Begin().ok());  // repeats only: nothing to write
  EXPECT_FALSE(*store_->PutSampleBatch(first));
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(SegmentStat(1, /*blocks=*/false), size);
  ExpectStored({first, last});
}

// A large commit goes past the page cache from its first block boundary on
// (O_DIRECT where the file system takes it), its last block padded; small
// commits before and after it start mid-block, as does a fresh connection's
// first. Every batch reads back whole.
TEST_F(SegmentStoreTest, LargeAndSmallCommitsMidBlockReadBackWhole) {
  std::vector<v1::SampleBatch> all;
  uint64_t seq = 0;
  for (int commit : {0, 1, 2, 3}) {
    std::vector<v1::SampleBatch> batches;
    const int count = commit % 2 == 1 ? 40 : 1;  // 40 of ~2,000 steps: past 64 KiB
    for (int b = 0; b < count; ++b, ++seq) {
      batches.push_back(Batch("t0", 1, seq, commit % 2 == 1 ? 1990 + static_cast<int>(seq % 17) : 3 + commit));
    }
    CommitBatches(batches);
    all.insert(all.end(), batches.begin(), batches.end());
  }
  auto other = store_->Connect();
  ASSERT_TRUE(other.ok()) << other.status();
  all.push_back(Batch("t0", 1, seq, 9));
  CommitBatches({all.back()}, other->get());
  ExpectStored(all);
}

// A batch stored outside Begin/Commit is a transaction of its own: its bytes
// are written before its row commits, and read back over a fresh open.
TEST_F(SegmentStoreTest, ABatchOutsideATransactionIsWrittenBeforeItsRow) {
  const v1::SampleBatch batch = Batch("t0", 1, 0, 30);
  auto stored = store_->PutSampleBatch(batch);
  ASSERT_TRUE(stored.ok() && *stored) << stored.status();
  store_.reset();
  SetUp();
  ExpectStored({batch});
}

// A segment shorter than its committed length is lost data, and said so.
TEST_F(SegmentStoreTest, AShortenedSegmentIsDataLoss) {
  CommitBatches({Batch("t0", 1, 0, 40), Batch("t0", 1, 1, 40)});
  ASSERT_EQ(truncate(SegmentPath(1).c_str(), SegmentStat(1, /*blocks=*/false) - 10), 0);
  const absl::Status integrity = store_->CheckIntegrity();
  EXPECT_EQ(integrity.code(), absl::StatusCode::kDataLoss) << integrity;
  EXPECT_THAT(std::string(integrity.message()), ::testing::HasSubstr("000001.seg"));
  auto batches = store_->LoadSampleBatches("t0", 1);
  ASSERT_FALSE(batches.ok());
  EXPECT_EQ(batches.status().code(), absl::StatusCode::kDataLoss) << batches.status();
}

// Bytes of a batch that no longer decode (zeros where a prune punched its
// hole under a read that began before it) are lost data, and the error says
// where they were.
TEST_F(SegmentStoreTest, ZeroedSegmentBytesAreDataLossNamingTheSegment) {
  CommitBatches({Batch("t0", 1, 0, 40)});
  FILE* f = std::fopen(SegmentPath(1).c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  const std::string zeros(16, '\0');
  std::fwrite(zeros.data(), 1, zeros.size(), f);
  std::fclose(f);
  auto batches = store_->LoadSampleBatches("t0", 1);
  ASSERT_FALSE(batches.ok());
  EXPECT_EQ(batches.status().code(), absl::StatusCode::kDataLoss) << batches.status();
  EXPECT_THAT(std::string(batches.status().message()), ::testing::HasSubstr("in a segment file"));
}

// Pruning a job's raw batches gives their segment blocks back (hole punching).
TEST_F(SegmentStoreTest, PruningGivesTheSegmentBlocksBack) {
  v1::Job old_job = MakeJob(1, v1::JOB_STATE_SUCCEEDED, 1);
  old_job.set_finished_unix_seconds(100);
  ASSERT_TRUE(store_->Begin().ok());
  ASSERT_TRUE(store_->InsertJob(old_job, "").ok());
  ASSERT_TRUE(store_->Commit().ok());
  std::vector<v1::SampleBatch> batches;
  for (uint64_t seq = 0; seq < 64; ++seq) batches.push_back(Batch("job-000001-t0", 1, seq, 2000));
  CommitBatches(batches);
  const int64_t before = SegmentStat(1, /*blocks=*/true);
  ASSERT_GT(before, 8);
  ASSERT_TRUE(store_->Begin().ok());
  auto pruned = store_->PruneRawBatches(500, 8);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(SegmentStat(1, /*blocks=*/true), before);  // nothing freed before the deletes commit
  ASSERT_TRUE(store_->Commit().ok());
  EXPECT_EQ(*pruned, 1);
  EXPECT_TRUE(store_->LoadSampleBatches("job-000001-t0", 1)->empty());
  EXPECT_LT(SegmentStat(1, /*blocks=*/true), before / 4) << "blocks before " << before;
  EXPECT_TRUE(store_->CheckIntegrity().ok());
}

TEST(SqliteJobStoreTest, UnopenablePathIsAClearError) {
  auto store = SqliteJobStore::Open("/nonexistent-dir/for/sure/jobs.db");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), ::testing::HasSubstr("cannot open"));
}

}  // namespace
}  // namespace hetbench::server
