#pragma once
// A SQLite store for tests that write batches: job-000001 running with one task.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/store_rows.h"

namespace hetbench::testing {

/// Opens `path` and stores job-000001, RUNNING, with one task (job-000001-t0).
inline absl::StatusOr<std::unique_ptr<server::SqliteJobStore>> StoreWithRunningJob(const std::string& path) {
  auto store = server::SqliteJobStore::Open(path);
  if (!store.ok()) return store.status();
  if (auto s = (*store)->Begin(); !s.ok()) return s;
  if (auto s = (*store)->InsertJob(MakeJob(1, v1::JOB_STATE_RUNNING, 1), ""); !s.ok()) return s;
  if (auto s = (*store)->Commit(); !s.ok()) return s;
  return store;
}

}  // namespace hetbench::testing
