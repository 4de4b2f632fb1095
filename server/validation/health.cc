#include "server/validation/health.h"

namespace hetbench::server {

std::vector<std::pair<std::string, v1::DeviceHealth>> HealthChanges(const v1::Job& job, double now_unix) {
  std::vector<std::pair<std::string, v1::DeviceHealth>> out;
  const bool degraded_too = job.spec().validate().quarantine_degraded();
  for (const v1::DeviceVerdict& d : job.validation().devices()) {
    if (d.task_id().empty() || d.device_id().empty() || d.agent_id().empty()) continue;  // found absent: nothing ran
    if (d.verdict() != v1::VERDICT_PASS && d.verdict() != v1::VERDICT_FAIL && d.verdict() != v1::VERDICT_DEGRADED) {
      continue;
    }
    v1::DeviceHealth h;
    h.set_device_id(d.device_id());
    h.set_verdict(d.verdict());
    h.set_job_id(job.id());
    h.set_reason(d.reason());
    h.set_unix_seconds(now_unix);
    h.set_quarantined(d.verdict() == v1::VERDICT_FAIL || (d.verdict() == v1::VERDICT_DEGRADED && degraded_too));
    out.emplace_back(d.agent_id(), std::move(h));
  }
  return out;
}

}  // namespace hetbench::server
