#include "server/store/job_rows.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/names.h"

namespace hetbench::server {

int64_t JobNumber(const std::string& job_id) {
  int64_t n = 0;
  if (job_id.rfind("job-", 0) != 0 || !absl::SimpleAtoi(job_id.substr(4), &n) || n < 0) return 0;
  return n;
}

std::optional<std::pair<std::string, int>> SplitTaskId(const std::string& task_id) {
  const size_t t = task_id.rfind("-t");
  int index = 0;
  if (t == std::string::npos || !absl::SimpleAtoi(task_id.substr(t + 2), &index) || index < 0) return std::nullopt;
  std::string job_id = task_id.substr(0, t);
  if (JobNumber(job_id) == 0) return std::nullopt;
  return std::make_pair(std::move(job_id), index);
}

std::string HeaderBlob(const v1::Job& job) {
  v1::Job header;
  header.set_id(job.id());
  *header.mutable_spec() = job.spec();
  header.set_state(job.state());
  header.set_created_unix_seconds(job.created_unix_seconds());
  header.set_finished_unix_seconds(job.finished_unix_seconds());
  header.set_error(job.error());
  *header.mutable_validation() = job.validation();
  return header.SerializeAsString();
}

std::string ModelsKey(const v1::JobSpec& spec) {
  std::vector<std::string> models(spec.models().begin(), spec.models().end());
  return absl::StrCat(",", absl::StrJoin(models, ","), ",");
}

std::string KindsKey(const v1::JobSpec& spec) {
  std::vector<std::string> kinds;
  for (const v1::TargetSelector& t : spec.targets()) {
    kinds.push_back(t.device_kind() == v1::DEVICE_KIND_UNSPECIFIED ? "any" : DeviceKindName(t.device_kind()));
  }
  return absl::StrCat(",", absl::StrJoin(kinds, ","), ",");
}

}  // namespace hetbench::server
