#pragma once
// What the PostgreSQL store's integration tests share: a fresh database per
// test (on the server tests/testing/postgres.h starts), stores opened on it,
// and SQL run beside them on connections of their own.

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/store/pg_job_store.h"
#include "tests/testing/postgres.h"

namespace hetbench::server {

inline v1::Job MakeJob(int number) {
  v1::Job job;
  job.set_id(absl::StrFormat("job-%06d", number));
  job.set_state(v1::JOB_STATE_QUEUED);
  job.mutable_spec()->add_models("mlp");
  v1::Task* t = job.add_tasks();
  t->set_id(job.id() + "-t0");
  t->set_job_id(job.id());
  t->set_state(v1::TASK_STATE_QUEUED);
  return job;
}

inline std::unique_ptr<PgJobStore> Store(const std::string& url, int64_t epoch,
                                         std::function<void(const absl::Status&)> on,
                                         PgStoreOptions::BatchWrites writes = PgStoreOptions{}.batch_writes) {
  PgStoreOptions o;
  o.url = url;
  o.epoch = epoch;
  o.on_fenced = std::move(on);
  o.batch_writes = writes;
  auto store = PgJobStore::Open(o);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// Runs SQL on a connection of its own; the error message, or "" when it worked.
inline std::string Sql(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  std::string err = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? "" : PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(c);
  return err;
}

// The first value of a one-row query on a connection of its own; "" when none.
inline std::string SqlValue(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  PGresult* r = PQexec(c, sql.c_str());
  std::string value = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(c);
  return value;
}

// The schema version the database records.
inline std::string StoredSchemaVersion(const std::string& url) {
  return SqlValue(url, "SELECT value FROM hetbench_meta WHERE key = 'schema_version'");
}

// `ddl` run and the schema version set back to `version`, as a coordinator
// of that version left the database (the next open converts it); "" when done.
inline std::string AsOlderSchema(const std::string& url, const std::string& ddl, int version) {
  return Sql(url, absl::StrCat(ddl, "; UPDATE hetbench_meta SET value = '", version, "' WHERE key = 'schema_version'"));
}

// Each test on a database of its own.
class PgDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = testing::FreshTestDatabase();
    ASSERT_TRUE(url.ok()) << url.status();
    url_ = *url;
  }
  std::string url_;
};

}  // namespace hetbench::server
