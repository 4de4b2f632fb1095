#pragma once
/// JobStore on SQLite in WAL mode with synchronous=FULL, so a commit survives
/// a crash of the process or the machine.

#include <sqlite3.h>

#include <memory>
#include <string>

#include "server/store/job_store.h"

namespace hetbench::server {

class SqliteJobStore final : public JobStore {
 public:
  /// Opens (creating if needed) the database at `path`; ":memory:" for tests.
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(const std::string& path);
  ~SqliteJobStore() override;

  absl::Status Begin() override;
  absl::Status Commit() override;
  absl::Status Rollback() override;
  absl::Status PutJob(const v1::Job& job) override;
  absl::StatusOr<std::vector<v1::Job>> LoadJobs() override;
  absl::StatusOr<bool> PutSampleBatch(const v1::SampleBatch& batch) override;
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt) override;
  absl::StatusOr<bool> PutPowerBatch(const v1::PowerBatch& batch) override;
  absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt) override;

  /// Runs PRAGMA integrity_check; OK when SQLite answers "ok".
  absl::Status CheckIntegrity();

 private:
  explicit SqliteJobStore(sqlite3* db) : db_(db) {}
  absl::Status Exec(const char* sql);
  absl::Status Error(const char* what) const;
  template <typename Message>
  absl::StatusOr<std::vector<Message>> LoadBlobs(sqlite3_stmt* stmt, const std::string& task_id, int attempt,
                                                 const char* what);

  sqlite3* db_;
  sqlite3_stmt* put_job_ = nullptr;
  sqlite3_stmt* put_batch_ = nullptr;
  sqlite3_stmt* load_batches_ = nullptr;
  sqlite3_stmt* put_power_ = nullptr;
  sqlite3_stmt* load_power_ = nullptr;
};

}  // namespace hetbench::server
