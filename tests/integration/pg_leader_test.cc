// Leader election and fencing on a real PostgreSQL server.
#include "server/store/pg_leader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "server/store/pg_job_store.h"
#include "server/store/pg_schema.h"
#include "tests/integration/pg_test_support.h"

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<PgLeaderLock> Leader(const std::string& url, const std::string& holder, double lease = 10,
                                     double poll = 0.05) {
  PgLeaderOptions o;
  o.url = url;
  o.holder = holder;
  o.lease_seconds = lease;
  o.poll_seconds = poll;
  auto lock = PgLeaderLock::Connect(o);
  EXPECT_TRUE(lock.ok()) << lock.status();
  return lock.ok() ? std::move(*lock) : nullptr;
}

class PgLeaderTest : public PgDatabaseTest {};

TEST_F(PgLeaderTest, ADeposedLeadersWritesAreRefusedByTheDatabase) {
  auto a = Leader(url_, "coordinator-a");
  ASSERT_NE(a, nullptr);
  auto epoch_a = a->Acquire(nullptr, nullptr);
  ASSERT_TRUE(epoch_a.ok()) << epoch_a.status();
  std::atomic<int> fenced{0};
  auto store_a = Store(url_, *epoch_a, [&](const absl::Status&) { ++fenced; });
  ASSERT_TRUE(store_a->Begin().ok());
  ASSERT_TRUE(store_a->InsertJob(MakeJob(1), "").ok());
  ASSERT_TRUE(store_a->Commit().ok());

  a.reset();  // A's session ends (a crash, or its lease ran out): B takes over
  std::vector<std::string> seen;
  auto b = Leader(url_, "coordinator-b");
  auto epoch_b = b->Acquire(nullptr, [&](const std::string& l) { seen.push_back(l); });
  ASSERT_TRUE(epoch_b.ok());
  EXPECT_EQ(*epoch_b, *epoch_a + 1);

  // A, back, writes with its old epoch: refused, nothing stored, A told.
  ASSERT_TRUE(store_a->Begin().ok());
  const absl::Status insert = store_a->InsertJob(MakeJob(2), "req-late");
  EXPECT_EQ(insert.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(insert.message()), HasSubstr("fenced"));
  EXPECT_FALSE(store_a->Commit().ok());
  EXPECT_GE(fenced.load(), 1);
  // So are its sample batches, many in one statement: none stored.
  std::vector<v1::SampleBatch> late(3);
  std::vector<const v1::SampleBatch*> late_refs;
  for (size_t i = 0; i < late.size(); ++i) {
    late[i].set_task_id("job-000001-t0");
    late[i].set_attempt(1);
    late[i].set_seq(i);
    late[i].add_start_ns(0);
    late[i].add_duration_ns(10);
    late[i].add_items(1);
    late_refs.push_back(&late[i]);
  }
  ASSERT_TRUE(store_a->Begin().ok());
  for (const absl::StatusOr<bool>& r : store_a->PutSampleBatches(late_refs)) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  }
  EXPECT_FALSE(store_a->Commit().ok());
  auto store_b = Store(url_, *epoch_b, nullptr);
  EXPECT_TRUE(store_b->LoadSampleBatches("job-000001-t0", 1)->empty());
  EXPECT_FALSE(store_b->GetJob("job-000002")->has_value());
  EXPECT_EQ(*store_b->FindRequest("req-late"), "");
  // Not by the client's good will: a row written with the old epoch without
  // the fence call is refused by the table's trigger.
  const std::string raw = Sql(url_, absl::StrCat("INSERT INTO tasks (job_number, idx, state, epoch, task) VALUES "
                                                 "(1, 5, 1, ",
                                                 *epoch_a, ", '')"));
  EXPECT_THAT(raw, HasSubstr("fenced"));
  // A transaction checks the fence once per epoch, not once per row: after a
  // row of the current epoch, a row of the old one in the same transaction
  // is still refused (and takes the first with it).
  const std::string mixed = Sql(url_, absl::StrCat("BEGIN; INSERT INTO tasks (job_number, idx, state, epoch, task) "
                                                   "VALUES (1, 6, 1, ",
                                                   *epoch_b,
                                                   ", ''); INSERT INTO tasks (job_number, idx, state, epoch, task) "
                                                   "VALUES (1, 7, 1, ",
                                                   *epoch_a, ", ''); COMMIT;"));
  EXPECT_THAT(mixed, HasSubstr("fenced"));
  EXPECT_EQ(SqlValue(url_, "SELECT count(*) FROM tasks WHERE job_number = 1 AND idx IN (6, 7)"), "0");
  // What a transaction remembers goes with its lock: a savepoint rolled back
  // after the check (the share lock released with it) forgets the check.
  EXPECT_EQ(SqlValue(url_, absl::StrCat("BEGIN; SELECT hetbench_fence(", *epoch_b,
                                        "); SELECT current_setting('hetbench.fenced_epoch', true)")),
            absl::StrCat(*epoch_b));
  EXPECT_EQ(SqlValue(url_, absl::StrCat("BEGIN; SAVEPOINT s; SELECT hetbench_fence(", *epoch_b,
                                        "); ROLLBACK TO s; SELECT coalesce(current_setting('hetbench.fenced_epoch', "
                                        "true), '')")),
            "");
  // The leader of the new epoch writes; the history names both.
  ASSERT_TRUE(store_b->Begin().ok());
  ASSERT_TRUE(store_b->InsertJob(MakeJob(2), "req-b").ok());
  ASSERT_TRUE(store_b->Commit().ok());
  EXPECT_EQ(Sql(url_,
                "SELECT 1 FROM hetbench_leaders WHERE holder IN ('coordinator-a', 'coordinator-b') HAVING "
                "count(*) = 2"),
            "");
}

// Every commit of epoch E lands before epoch E+1 exists: the new leader's
// bump waits for the old leader's open transaction.
TEST_F(PgLeaderTest, ANewEpochWaitsForTheOldLeadersOpenTransaction) {
  auto a = Leader(url_, "coordinator-a");
  auto epoch_a = a->Acquire(nullptr, nullptr);
  ASSERT_TRUE(epoch_a.ok());
  auto store_a = Store(url_, *epoch_a, nullptr);
  ASSERT_TRUE(store_a->Begin().ok());
  ASSERT_TRUE(store_a->InsertJob(MakeJob(1), "").ok());  // open, holding the leader row's share lock
  a.reset();
  std::atomic<bool> b_leads{false};
  std::unique_ptr<PgLeaderLock> b;
  std::thread standby([&] {
    b = Leader(url_, "coordinator-b");
    ASSERT_TRUE(b->Acquire(nullptr, nullptr).ok());
    b_leads = true;
  });
  // B's epoch bump is seen waiting on a lock (at most 10 s), and still waits.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool bump_waits = false;
  while (!bump_waits && std::chrono::steady_clock::now() < deadline) {
    bump_waits = SqlValue(url_,
                          "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                          "'WITH bumped%'") == "1";
  }
  EXPECT_TRUE(bump_waits) << SqlValue(
      url_, "SELECT string_agg(coalesce(wait_event_type, '-') || ':' || left(query, 40), ' / ') FROM pg_stat_activity");
  EXPECT_FALSE(b_leads.load());         // waiting for A's transaction
  EXPECT_TRUE(store_a->Commit().ok());  // which commits, in epoch A
  standby.join();
  EXPECT_TRUE(b_leads.load());
  auto store_b = Store(url_, b->epoch(), nullptr);
  EXPECT_TRUE(store_b->GetJob("job-000001")->has_value());
}

// The lease: a leader that keeps its session alive stays leader; one that
// stops answering (SIGSTOP, a hung host) is cut off by the server after the
// lease, and a standby takes over; the old one learns it lost the lock.
TEST_F(PgLeaderTest, AStoppedLeaderLosesTheLockAfterItsLeaseAndAStandbyTakesOver) {
  constexpr double kLease = 0.6;
  auto a = Leader(url_, "coordinator-a", kLease);
  ASSERT_TRUE(a->Acquire(nullptr, nullptr).ok());
  absl::Notification a_lost;
  a->KeepAlive([&](const absl::Status&) { a_lost.Notify(); });
  auto b = Leader(url_, "coordinator-b", kLease);
  absl::Notification stop_b;
  std::vector<std::string> seen;
  std::atomic<bool> b_leads{false};
  std::thread standby([&] { b_leads = b->Acquire(&stop_b, [&](const std::string& l) { seen.push_back(l); }).ok(); });
  // Three leases: A losing the lock ends the wait early (and fails the test).
  EXPECT_FALSE(a_lost.WaitForNotificationWithTimeout(absl::Seconds(kLease * 3)));
  EXPECT_FALSE(b_leads.load());  // a live leader keeps the lock past several leases
  stop_b.Notify();
  standby.join();
  ASSERT_FALSE(b_leads.load());
  ASSERT_FALSE(seen.empty());
  EXPECT_THAT(seen.back(), HasSubstr("coordinator-a (epoch 1)"));

  a.reset();

  // S leads, then "stops": no keepalive, as if SIGSTOPped. The server ends
  // its idle session after the lease; T, standing by, takes over.
  auto s_lock = Leader(url_, "coordinator-s", kLease);
  ASSERT_TRUE(s_lock->Acquire(nullptr, nullptr).ok());
  const auto stopped_at = std::chrono::steady_clock::now();
  auto t = Leader(url_, "coordinator-t", kLease);
  auto epoch_t = t->Acquire(nullptr, nullptr);
  ASSERT_TRUE(epoch_t.ok()) << epoch_t.status();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  std::printf("standby took over %.2f s after the leader stopped (lease %.1f s)\n", took, kLease);
  EXPECT_GE(took, kLease * 0.9);
  EXPECT_EQ(*epoch_t, s_lock->epoch() + 1);
  // S "resumes": its first check finds the lock gone.
  absl::Notification s_lost;
  s_lock->KeepAlive([&](const absl::Status&) { s_lost.Notify(); });
  EXPECT_TRUE(s_lost.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

// Schema 5: every fence trigger has a WHEN clause (the function runs only
// for an epoch the transaction has not checked; ADeposedLeadersWrites...
// checks that rows of an old epoch are still refused); a database of
// schema 4 is converted when it is next opened.
TEST_F(PgLeaderTest, TheFenceTriggersFireOnlyForAnUncheckedEpochAndAnOlderSchemaIsConverted) {
  const std::string guarded =
      "SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%\\_fenced' AND tgqual IS NOT NULL AND NOT tgisinternal";
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(SqlValue(url_, guarded), "7");
  EXPECT_EQ(AsOlderSchema(url_,
                          "CREATE OR REPLACE TRIGGER sample_batches_fenced BEFORE INSERT OR UPDATE ON sample_batches "
                          "FOR EACH ROW EXECUTE FUNCTION hetbench_check_epoch()",
                          4),
            "");
  EXPECT_EQ(SqlValue(url_, guarded), "6");
  ASSERT_NE(Store(url_, 0, nullptr), nullptr);
  EXPECT_EQ(SqlValue(url_, guarded), "7");
  EXPECT_EQ(StoredSchemaVersion(url_), absl::StrCat(pg::kSchemaVersion));
}

}  // namespace
}  // namespace hetbench::server

namespace hetbench::server {
namespace {

TEST(PgUrlTest, PasswordsNeverReachTheLog) {
  EXPECT_EQ(RedactDbUrl("postgresql://hb:s3cret@db:5432/hetbench"), "postgresql://hb:***@db:5432/hetbench");
  EXPECT_EQ(RedactDbUrl("postgresql://hb@db/x?password=s3cret&sslmode=require"),
            "postgresql://hb@db/x?password=***&sslmode=require");
  EXPECT_EQ(RedactDbUrl("postgresql://postgres@/x?host=/tmp/s&port=5432"),
            "postgresql://postgres@/x?host=/tmp/s&port=5432");
  EXPECT_TRUE(IsPostgresUrl("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUrl("/var/lib/hetbench/jobs.db"));
}

}  // namespace
}  // namespace hetbench::server
