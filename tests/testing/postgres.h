#pragma once
// A real PostgreSQL server for tests (Debian's postgresql package): initdb
// into a fresh directory, started on a Unix socket there, stopped (and the
// directory removed) on destruction. As root (CI) the server runs as the
// unprivileged `postgres` user through runuser, since PostgreSQL refuses root.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hetbench::testing {

class PostgresServer {
 public:
  /// initdb + pg_ctl start; fsync off unless `durable` (benchmarks).
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start(bool durable = false);
  ~PostgresServer();

  /// Creates database `name` and returns its URL.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name) const;
  /// postgresql://postgres@/DB?host=SOCKETDIR&port=PORT
  std::string Url(const std::string& database) const;
  /// Runs one SQL statement on `database` through psql; its output, trimmed.
  absl::StatusOr<std::string> Psql(const std::string& database, const std::string& sql) const;
  const std::string& dir() const { return dir_; }

 private:
  PostgresServer() = default;
  std::string dir_;
  std::string bin_;
  bool as_postgres_ = false;
  bool started_ = false;
};

/// One server for this test process, started at first use and stopped at
/// exit; a fresh database per call, so tests never see each other's rows.
absl::StatusOr<std::string> FreshTestDatabase();

}  // namespace hetbench::testing
