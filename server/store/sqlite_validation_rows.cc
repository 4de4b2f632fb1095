// SqliteJobStore's fleet-validation rows: device health and versioned baselines.
#include "absl/strings/str_cat.h"
#include "server/store/sqlite_job_store.h"
#include "server/store/sqlite_schema.h"

namespace hetbench::server {

using sqlite::BindBlob;
using sqlite::BindText;
using sqlite::ColumnText;
using sqlite::Stmt;

absl::Status SqliteJobStore::PutDeviceHealth(const std::string& agent_id, const v1::DeviceHealth& health) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  const bool clear = health.verdict() == v1::VERDICT_PASS;
  Stmt stmt(db_, clear ? "DELETE FROM device_health WHERE agent_id = ? AND device_id = ?"
                       : "INSERT OR REPLACE INTO device_health (agent_id, device_id, health) VALUES (?, ?, ?)");
  if (!stmt.ok()) return Error("device health");
  BindText(stmt.get(), 1, agent_id);
  BindText(stmt.get(), 2, health.device_id());
  if (!clear) BindBlob(stmt.get(), 3, health.SerializeAsString());
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Failed(Error("store device health"));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, v1::DeviceHealth>>> SqliteJobStore::LoadDeviceHealth() {
  Stmt stmt(db_, "SELECT agent_id, health FROM device_health ORDER BY agent_id, device_id");
  if (!stmt.ok()) return Error("device health");
  std::vector<std::pair<std::string, v1::DeviceHealth>> out;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    v1::DeviceHealth h;
    if (!h.ParseFromArray(sqlite3_column_blob(stmt.get(), 1), sqlite3_column_bytes(stmt.get(), 1))) {
      return absl::DataLossError("job store: a device_health row does not parse");
    }
    out.emplace_back(ColumnText(stmt.get(), 0), std::move(h));
  }
  if (rc != SQLITE_DONE) return Error("device health");
  return out;
}

absl::Status SqliteJobStore::PutBaseline(const v1::Baseline& baseline) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  Stmt stmt(db_, "INSERT INTO baselines (name, version, created_unix_seconds, baseline) VALUES (?, ?, ?, ?)");
  if (!stmt.ok()) return Error("baseline");
  BindText(stmt.get(), 1, baseline.name());
  sqlite3_bind_int(stmt.get(), 2, baseline.version());
  sqlite3_bind_double(stmt.get(), 3, baseline.created_unix_seconds());
  BindBlob(stmt.get(), 4, baseline.SerializeAsString());
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_CONSTRAINT) {
    return absl::AlreadyExistsError(absl::StrCat("baseline ", baseline.name(), " v", baseline.version(), " exists"));
  }
  if (rc != SQLITE_DONE) return Failed(Error("store baseline"));
  return absl::OkStatus();
}

absl::StatusOr<int> SqliteJobStore::LatestBaselineVersion(const std::string& name) {
  Stmt stmt(db_, "SELECT COALESCE(MAX(version), 0) FROM baselines WHERE name = ?");
  if (!stmt.ok()) return Error("baseline version");
  BindText(stmt.get(), 1, name);
  if (sqlite3_step(stmt.get()) != SQLITE_ROW) return Error("baseline version");
  return sqlite3_column_int(stmt.get(), 0);
}

absl::StatusOr<std::optional<v1::Baseline>> SqliteJobStore::GetBaseline(const std::string& name, int version) {
  Stmt stmt(db_, version > 0 ? "SELECT baseline FROM baselines WHERE name = ? AND version = ?"
                             : "SELECT baseline FROM baselines WHERE name = ? ORDER BY version DESC LIMIT 1");
  if (!stmt.ok()) return Error("baseline");
  BindText(stmt.get(), 1, name);
  if (version > 0) sqlite3_bind_int(stmt.get(), 2, version);
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) return std::optional<v1::Baseline>();
  if (rc != SQLITE_ROW) return Error("baseline");
  v1::Baseline b;
  if (!b.ParseFromArray(sqlite3_column_blob(stmt.get(), 0), sqlite3_column_bytes(stmt.get(), 0))) {
    return absl::DataLossError("job store: a baseline does not parse");
  }
  return std::optional<v1::Baseline>(std::move(b));
}

absl::StatusOr<std::vector<v1::Baseline>> SqliteJobStore::ListBaselines(const std::string& name, int limit) {
  Stmt stmt(db_, name.empty() ? "SELECT baseline FROM baselines ORDER BY created_unix_seconds DESC, name, version "
                                "DESC LIMIT ?"
                              : "SELECT baseline FROM baselines WHERE name = ? ORDER BY version DESC LIMIT ?");
  if (!stmt.ok()) return Error("baselines");
  int i = 1;
  if (!name.empty()) BindText(stmt.get(), i++, name);
  sqlite3_bind_int(stmt.get(), i, limit);
  std::vector<v1::Baseline> out;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    v1::Baseline b;
    if (!b.ParseFromArray(sqlite3_column_blob(stmt.get(), 0), sqlite3_column_bytes(stmt.get(), 0))) {
      return absl::DataLossError("job store: a baseline does not parse");
    }
    b.clear_skus();
    out.push_back(std::move(b));
  }
  if (rc != SQLITE_DONE) return Error("baselines");
  return out;
}

}  // namespace hetbench::server
