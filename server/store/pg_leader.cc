#include "server/store/pg_leader.h"

#include <pthread.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/store/pg_job_store.h"
#include "server/store/pg_schema.h"

namespace hetbench::server {

absl::StatusOr<std::unique_ptr<PgLeaderLock>> PgLeaderLock::Connect(PgLeaderOptions options) {
  std::unique_ptr<PgLeaderLock> lock(new PgLeaderLock(std::move(options)));
  lock->conn_ = PQconnectdb(lock->options_.url.c_str());
  if (PQstatus(lock->conn_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(lock->conn_);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    return absl::UnavailableError(absl::StrCat("leader election: cannot connect to PostgreSQL at '",
                                               RedactDbUrl(lock->options_.url), "': ", msg,
                                               "; check --db (postgresql://USER@HOST:PORT/DB)"));
  }
  if (auto s = CreatePgSchema(lock->conn_); !s.ok()) return s;
  // The lease: a session idle this long (its process stopped or cut off) is
  // ended by the server, and its advisory lock with it.
  const int lease_ms = static_cast<int>(std::max(0.1, lock->options_.lease_seconds) * 1000);
  if (auto r = lock->Query(absl::StrCat("SET idle_session_timeout = ", lease_ms,
                                        "; SET idle_in_transaction_session_timeout = ", lease_ms));
      !r.ok()) {
    return r.status();
  }
  return lock;
}

PgLeaderLock::~PgLeaderLock() {
  stop_keepalive_.Notify();
  if (keepalive_.joinable()) keepalive_.join();
  PQfinish(conn_);
}

absl::StatusOr<std::string> PgLeaderLock::Query(const std::string& sql) {
  PGresult* res = PQexec(conn_, sql.c_str());
  const ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    std::string msg = PQresultErrorMessage(res);
    if (msg.empty()) msg = PQerrorMessage(conn_);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    PQclear(res);
    return absl::UnavailableError(absl::StrCat("leader election: ", msg));
  }
  std::string value = st == PGRES_TUPLES_OK && PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "";
  PQclear(res);
  return value;
}

absl::StatusOr<int64_t> PgLeaderLock::Acquire(absl::Notification* stop,
                                              const std::function<void(const std::string&)>& on_standby) {
  std::string seen;
  for (;;) {
    auto got = Query(absl::StrCat("SELECT pg_try_advisory_lock(", pg::kLeaderLockKey, ")"));
    if (!got.ok()) return got.status();
    if (*got == "t") break;
    auto leader = Query("SELECT holder || ' (epoch ' || epoch || ')' FROM hetbench_leader WHERE id = 1");
    if (!leader.ok()) return leader.status();
    if (*leader != seen) {
      seen = *leader;
      if (on_standby) on_standby(seen);
    }
    if (stop != nullptr && stop->WaitForNotificationWithTimeout(absl::Seconds(std::max(0.01, options_.poll_seconds)))) {
      return absl::CancelledError("leader election: stopped while standing by");
    }
  }
  // Leader: a new epoch, recorded. The update waits for an open transaction
  // of the previous leader (its share lock on the row), so every write of the
  // old epoch is committed or refused before the new epoch exists.
  char* holder = PQescapeLiteral(conn_, options_.holder.c_str(), options_.holder.size());
  const std::string quoted = holder ? holder : "''";
  PQfreemem(holder);
  auto epoch = Query(
      absl::StrCat("WITH bumped AS (UPDATE hetbench_leader SET epoch = epoch + 1, holder = ", quoted,
                   ", since = now() WHERE id = 1 RETURNING epoch, holder) "
                   "INSERT INTO hetbench_leaders (epoch, holder) SELECT epoch, holder FROM bumped RETURNING epoch"));
  if (!epoch.ok()) return epoch.status();
  if (!absl::SimpleAtoi(*epoch, &epoch_))
    return absl::InternalError("leader election: the epoch bump returned nothing");
  return epoch_;
}

void PgLeaderLock::KeepAlive(std::function<void(const absl::Status&)> on_lost) {
  keepalive_ = std::thread([this, on_lost = std::move(on_lost)] {
    pthread_setname_np(pthread_self(), "hb-leader");
    const absl::Duration period = absl::Seconds(std::max(0.02, options_.lease_seconds / 4));
    while (!stop_keepalive_.WaitForNotificationWithTimeout(period)) {
      auto held =
          Query(absl::StrCat("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = "
                             "pg_backend_pid() AND objid = ",
                             pg::kLeaderLockKey, " AND granted"));
      if (!held.ok() || *held != "1") {
        on_lost(held.ok() ? absl::AbortedError("leader election: the leader lock is no longer held") : held.status());
        return;
      }
    }
  });
}

}  // namespace hetbench::server
