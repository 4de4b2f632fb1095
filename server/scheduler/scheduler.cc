#include "server/scheduler/scheduler.h"

namespace hetbench::server {

bool Matches(const v1::TargetSelector& target, const v1::Hello& hello, const v1::Device& device) {
  if (target.device_kind() != v1::DEVICE_KIND_UNSPECIFIED && target.device_kind() != device.kind()) return false;
  if (!target.agent_id().empty() && target.agent_id() != hello.agent_id()) return false;
  for (const auto& [key, value] : target.labels()) {
    auto it = hello.labels().find(key);
    if (it == hello.labels().end() || it->second != value) return false;
  }
  return true;
}

bool DeviceLeases::Acquire(const std::string& agent_id, const std::string& device_id, const std::string& task_id) {
  return leases_.emplace(std::make_pair(agent_id, device_id), task_id).second;
}

void DeviceLeases::Release(const std::string& agent_id, const std::string& device_id) {
  leases_.erase({agent_id, device_id});
}

bool DeviceLeases::IsLeased(const std::string& agent_id, const std::string& device_id) const {
  return leases_.count({agent_id, device_id}) > 0;
}

std::vector<std::string> DeviceLeases::ReleaseAgent(const std::string& agent_id) {
  std::vector<std::string> tasks;
  for (auto it = leases_.lower_bound({agent_id, ""}); it != leases_.end() && it->first.first == agent_id;) {
    tasks.push_back(it->second);
    it = leases_.erase(it);
  }
  return tasks;
}

std::vector<std::string> DeviceLeases::LeasedDevices(const std::string& agent_id) const {
  std::vector<std::string> out;
  for (auto it = leases_.lower_bound({agent_id, ""}); it != leases_.end() && it->first.first == agent_id; ++it) {
    out.push_back(it->first.second);
  }
  return out;
}

std::optional<Placement> PickDevice(const v1::TargetSelector& target, const std::vector<const v1::Hello*>& agents,
                                    const DeviceLeases& leases) {
  for (const v1::Hello* hello : agents) {
    for (const v1::Device& device : hello->devices()) {
      if (Matches(target, *hello, device) && !leases.IsLeased(hello->agent_id(), device.id())) {
        return Placement{hello->agent_id(), device};
      }
    }
  }
  return std::nullopt;
}

}  // namespace hetbench::server
