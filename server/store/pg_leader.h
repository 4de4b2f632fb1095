#pragma once
/// Leader election between coordinators sharing one PostgreSQL database.
///
/// The leader holds a session advisory lock on a connection of its own. The
/// session ends, releasing the lock, when the process dies (its socket
/// closes) or stops answering: the session's idle_session_timeout is the
/// lease, and the leader runs a query on it every quarter lease. A new
/// leader bumps the epoch in hetbench_leader; the job store writes with it
/// and the database refuses writes of an older epoch (pg_job_store.h).

#include <libpq-fe.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"

namespace hetbench::server {

struct PgLeaderOptions {
  std::string url;
  /// Who this coordinator is, as standbys and operators see it ("host:port pid N").
  std::string holder;
  /// A leader that stops answering loses the lock after this.
  double lease_seconds = 10.0;
  /// How often a standby tries to take the lock.
  double poll_seconds = 0.2;
};

class PgLeaderLock {
 public:
  static absl::StatusOr<std::unique_ptr<PgLeaderLock>> Connect(PgLeaderOptions options);
  /// Stops the keepalive and closes the session (the lock goes with it).
  ~PgLeaderLock();

  /// Blocks until this process holds the lock, then bumps the epoch and
  /// returns it. `on_standby(leader)` runs whenever the leader seen changes.
  /// CANCELLED once `stop` is notified.
  absl::StatusOr<int64_t> Acquire(absl::Notification* stop, const std::function<void(const std::string&)>& on_standby);
  /// After Acquire: keeps the session alive; `on_lost` runs once, on the
  /// keepalive thread, when the session fails (the lock is gone).
  void KeepAlive(std::function<void(const absl::Status&)> on_lost);

  int64_t epoch() const { return epoch_; }
  /// The session's server process id (tests end it with pg_terminate_backend).
  int backend_pid() const { return PQbackendPID(conn_); }

 private:
  explicit PgLeaderLock(PgLeaderOptions options) : options_(std::move(options)) {}
  absl::StatusOr<std::string> Query(const std::string& sql);

  PgLeaderOptions options_;
  PGconn* conn_ = nullptr;
  int64_t epoch_ = 0;
  absl::Notification stop_keepalive_;
  std::thread keepalive_;
};

}  // namespace hetbench::server
