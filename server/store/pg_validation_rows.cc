// PgJobStore's fleet-validation rows: device health and versioned baselines
// (their statements are prepared with the others in pg_job_store.cc).
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/store/pg_columns.h"
#include "server/store/pg_job_store.h"

namespace hetbench::server {

using pg::GetBytes;
using pg::GetInt;
using pg::ParseColumn;

absl::Status PgJobStore::PutDeviceHealth(const std::string& agent_id, const v1::DeviceHealth& health) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  Params p;
  p.Text(agent_id).Text(health.device_id()).Int(options_.epoch);
  if (health.verdict() == v1::VERDICT_PASS) return Run("clear_health", p, PGRES_COMMAND_OK).status();
  p.Bytes(health.SerializeAsString());
  return Run("put_health", p, PGRES_COMMAND_OK).status();
}

absl::StatusOr<std::vector<std::pair<std::string, v1::DeviceHealth>>> PgJobStore::LoadDeviceHealth() {
  auto res = Run("load_health", Params(), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  std::vector<std::pair<std::string, v1::DeviceHealth>> out;
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    v1::DeviceHealth h;
    if (!ParseColumn(res->get(), r, 1, &h)) return absl::DataLossError("job store: a device_health row does not parse");
    out.emplace_back(std::string(GetBytes(res->get(), r, 0)), std::move(h));
  }
  return out;
}

absl::Status PgJobStore::PutBaseline(const v1::Baseline& baseline) {
  if (auto s = EnsureWriting(); !s.ok()) return s;
  Params p;
  p.Text(baseline.name())
      .Int(baseline.version())
      .Real(baseline.created_unix_seconds())
      .Int(options_.epoch)
      .Bytes(baseline.SerializeAsString());
  auto res = Run("put_baseline", p, PGRES_COMMAND_OK);
  if (!res.ok() && absl::StrContains(res.status().message(), "duplicate key")) {
    return absl::AlreadyExistsError(absl::StrCat("baseline ", baseline.name(), " v", baseline.version(), " exists"));
  }
  return res.status();
}

absl::StatusOr<int> PgJobStore::LatestBaselineVersion(const std::string& name) {
  auto res = Run("latest_baseline", Params().Text(name), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  return static_cast<int>(GetInt(res->get(), 0, 0));
}

absl::StatusOr<std::optional<v1::Baseline>> PgJobStore::GetBaseline(const std::string& name, int version) {
  auto res = Run("get_baseline", Params().Text(name).Int(version), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  if (PQntuples(res->get()) == 0) return std::optional<v1::Baseline>();
  v1::Baseline b;
  if (!ParseColumn(res->get(), 0, 0, &b)) return absl::DataLossError("job store: a baseline does not parse");
  return std::optional<v1::Baseline>(std::move(b));
}

absl::StatusOr<std::vector<v1::Baseline>> PgJobStore::ListBaselines(const std::string& name, int limit) {
  auto res = Run("list_baselines", Params().Text(name).Int(limit), PGRES_TUPLES_OK);
  if (!res.ok()) return res.status();
  std::vector<v1::Baseline> out;
  for (int r = 0; r < PQntuples(res->get()); ++r) {
    v1::Baseline b;
    if (!ParseColumn(res->get(), r, 0, &b)) return absl::DataLossError("job store: a baseline does not parse");
    b.clear_skus();
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace hetbench::server
