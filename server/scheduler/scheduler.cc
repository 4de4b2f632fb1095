#include "server/scheduler/scheduler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/names.h"

namespace hetbench::server {

std::string ExecutorFor(const v1::TargetSelector& target, const v1::Device& device) {
  return target.executor().empty() ? DefaultExecutor(device) : target.executor();
}

bool CanRun(const v1::Device& device, const std::string& executor) {
  if (device.executors_size() == 0) return executor == DefaultExecutor(device);
  return std::find(device.executors().begin(), device.executors().end(), executor) != device.executors().end();
}

bool Matches(const v1::TargetSelector& target, const v1::Hello& hello, const v1::Device& device) {
  if (target.device_kind() != v1::DEVICE_KIND_UNSPECIFIED && target.device_kind() != device.kind()) return false;
  if (!target.agent_id().empty() && target.agent_id() != hello.agent_id()) return false;
  if (!target.device_id().empty() && target.device_id() != device.id()) return false;
  for (const auto& [key, value] : target.labels()) {
    auto it = hello.labels().find(key);
    if (it == hello.labels().end() || it->second != value) return false;
  }
  return target.executor().empty() || CanRun(device, target.executor());
}

v1::TargetSelector SplitStageTarget(const v1::SplitStage& stage, const v1::TargetSelector& job_target,
                                    bool same_agent) {
  v1::TargetSelector t = stage.target();
  if (same_agent && t.agent_id().empty()) t.set_agent_id(job_target.agent_id());
  if (t.labels().empty()) *t.mutable_labels() = job_target.labels();
  return t;
}

std::string DescribeTarget(const v1::TargetSelector& target) {
  std::string out = target.device_kind() == v1::DEVICE_KIND_UNSPECIFIED
                        ? "device"
                        : absl::StrCat(DeviceKindName(target.device_kind()), " device");
  if (!target.executor().empty()) absl::StrAppend(&out, " with the ", target.executor(), " executor");
  if (!target.device_id().empty()) absl::StrAppend(&out, " ", target.device_id());
  if (!target.agent_id().empty()) absl::StrAppend(&out, " on agent ", target.agent_id());
  if (!target.labels().empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : target.labels()) kv.push_back(absl::StrCat(k, "=", v));
    std::sort(kv.begin(), kv.end());
    absl::StrAppend(&out, " labelled ", absl::StrJoin(kv, ","));
  }
  return out;
}

std::string ResourceOf(const v1::Device& device) {
  const auto it = device.attributes().find("host_device");
  return it == device.attributes().end() || it->second.empty() ? device.id() : it->second;
}

std::string TaskOnResource(const v1::Hello& hello, const v1::Device& device, const DeviceLeases& leases) {
  const std::string resource = ResourceOf(device);
  for (const v1::Device& d : hello.devices()) {
    if (ResourceOf(d) != resource) continue;
    std::string task = leases.TaskOn(hello.agent_id(), d.id());
    if (!task.empty()) return d.id() == device.id() ? task : absl::StrCat(task, " on ", d.id());
  }
  return "";
}

namespace {
// The resources of `hello` that some leased device holds: found from the
// agent's leases (one ordered lookup, usually nothing), not a lookup per
// device, since every scheduling pass asks it of every connected agent.
// `kept`, when not null, is ResourceOf each of hello's devices.
std::vector<std::string> BusyResources(const v1::Hello& hello, const DeviceLeases& leases,
                                       const std::vector<std::string>* kept = nullptr) {
  std::vector<std::string> busy;
  for (const std::string& device_id : leases.LeasedDevices(hello.agent_id())) {
    for (int d = 0; d < hello.devices_size(); ++d) {
      if (hello.devices(d).id() == device_id) {
        busy.push_back(kept != nullptr ? (*kept)[static_cast<size_t>(d)] : ResourceOf(hello.devices(d)));
        break;
      }
    }
  }
  return busy;
}
bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

std::string PendingReason(const v1::TargetSelector& target, const std::vector<const v1::Hello*>& agents,
                          const DeviceLeases& leases, const Quarantine* quarantine) {
  // Bounded whatever the fleet's size: a count, one example, at most
  // kMaxReasons reasons and how many more there were.
  constexpr size_t kMaxReasons = 3;
  if (agents.empty()) return absl::StrCat("waiting for a ", DescribeTarget(target), ": no agent is connected");
  int64_t busy = 0, quarantined = 0;
  std::string example, quarantined_example;
  for (const v1::Hello* hello : agents) {
    for (const v1::Device& device : hello->devices()) {
      if (Matches(target, *hello, device)) {
        if (quarantine != nullptr && target.device_id().empty()) {
          const auto q = quarantine->find({hello->agent_id(), device.id()});
          if (q != quarantine->end()) {
            if (quarantined++ == 0) {
              quarantined_example =
                  absl::StrCat(hello->agent_id(), "/", device.id(), " (", VerdictName(q->second.verdict()), " in ",
                               q->second.job_id(), ": ", q->second.reason().substr(0, 160), ")");
            }
            continue;
          }
        }
        if (busy++ == 0) {
          example = absl::StrCat(hello->agent_id(), "/", device.id(), " (", TaskOnResource(*hello, device, leases), ")");
        }
      }
    }
  }
  const std::string q_note =
      quarantined == 0 ? ""
                       : absl::StrCat(quarantined == 1 ? "; 1 matching device is" : absl::StrCat("; ", quarantined, " matching devices are"),
                                      " quarantined until a validation passes, e.g. ", quarantined_example);
  if (busy == 1) return absl::StrCat("waiting: the one matching device is busy: ", example, q_note);
  if (busy > 1) return absl::StrCat("waiting: ", busy, " matching devices busy, e.g. ", example, q_note);
  if (quarantined > 0) {
    return absl::StrCat("waiting: ", quarantined == 1 ? "the one matching device is" : absl::StrCat("all ", quarantined, " matching devices are"),
                        " quarantined until a validation passes, e.g. ", quarantined_example);
  }
  std::string out = absl::StrCat("no connected agent offers a ", DescribeTarget(target));
  // Say why, from what the agents reported about the kind.
  std::vector<std::string> why;
  size_t more = 0;
  auto add = [&](std::string reason) {
    if (why.size() < kMaxReasons) {
      why.push_back(std::move(reason));
    } else {
      ++more;
    }
  };
  for (const v1::Hello* hello : agents) {
    for (const v1::AbsentDevice& a : hello->absent()) {
      if (target.device_kind() != v1::DEVICE_KIND_UNSPECIFIED && a.kind() == target.device_kind()) {
        add(absl::StrCat(hello->agent_id(), ": ", a.reason()));
      }
    }
    if (!target.executor().empty() && target.device_kind() != v1::DEVICE_KIND_UNSPECIFIED) {
      for (const v1::Device& device : hello->devices()) {
        if (device.kind() == target.device_kind() && !CanRun(device, target.executor())) {
          add(absl::StrCat(hello->agent_id(), "/", device.id(), " runs only ", absl::StrJoin(device.executors(), ", ")));
        }
      }
    }
  }
  if (more > 0) why.push_back(absl::StrCat("and ", more, " more"));
  if (!why.empty()) absl::StrAppend(&out, " (", absl::StrJoin(why, "; "), ")");
  return out;
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

std::string DeviceLeases::TaskOn(const std::string& agent_id, const std::string& device_id) const {
  auto it = leases_.find({agent_id, device_id});
  return it == leases_.end() ? "" : it->second;
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
    const std::vector<std::string> busy = BusyResources(*hello, leases);
    for (const v1::Device& device : hello->devices()) {
      if (Matches(target, *hello, device) && !Contains(busy, ResourceOf(device))) {
        return Placement{hello->agent_id(), device, hello};
      }
    }
  }
  return std::nullopt;
}

SchedulingPass::SchedulingPass(const std::vector<const v1::Hello*>& agents, const DeviceLeases& leases,
                               const Quarantine* quarantine,
                               const std::vector<const std::vector<std::string>*>* resources)
    : agents_(agents),
      leases_(leases),
      quarantine_(quarantine),
      resources_(resources != nullptr && resources->size() == agents.size() ? resources : nullptr) {}

bool SchedulingPass::ListNextAgent() {
  if (listed_ == agents_.size()) return false;
  const size_t a = listed_++;
  const v1::Hello* hello = agents_[a];
  const std::vector<std::string>* kept = resources_ == nullptr ? nullptr : (*resources_)[a];
  if (kept != nullptr && kept->size() != static_cast<size_t>(hello->devices_size())) kept = nullptr;
  const std::vector<std::string> busy = BusyResources(*hello, leases_, kept);
  const size_t begin = free_.size();
  for (int d = 0; d < hello->devices_size(); ++d) {
    const v1::Device& device = hello->devices(d);
    const std::string& resource =
        kept != nullptr ? (*kept)[static_cast<size_t>(d)] : read_.emplace_back(ResourceOf(device));
    if (Contains(busy, resource)) continue;
    free_.push_back(Free{hello, &device, resource});
    free_.back().quarantined = IsQuarantined(hello->agent_id(), device.id());
  }
  for (size_t i = begin; i < free_.size(); ++i) free_[i].agent_begin = begin, free_[i].agent_end = free_.size();
  free_left_ += free_.size() - begin;
  return true;
}

bool SchedulingPass::Listed(size_t i) {
  while (i >= free_.size()) {
    if (!ListNextAgent()) return false;
  }
  return true;
}

size_t SchedulingPass::free_devices() {
  while (ListNextAgent()) {
  }
  return free_left_;
}

std::vector<size_t> SchedulingPass::TakeResource(size_t index) {
  // The device and every other one on its resource (a CPU and the simulator on its cores).
  const Free& f = free_[index];
  std::vector<size_t> marked;
  for (size_t i = f.agent_begin; i < f.agent_end; ++i) {
    if (!free_[i].taken && free_[i].resource == f.resource) {
      free_[i].taken = true;
      --free_left_;
      marked.push_back(i);
    }
  }
  return marked;
}

std::optional<Placement> SchedulingPass::Take(const v1::TargetSelector& target) {
  if (free_left_ == 0 && listed_ == agents_.size()) return std::nullopt;
  for (size_t i = 0; Listed(i); ++i) {
    const Free& f = free_[i];
    if (Usable(target, f)) {
      TakeResource(i);
      return Placement{f.hello->agent_id(), *f.device, f.hello};
    }
  }
  return std::nullopt;
}

size_t SchedulingPass::Hold(const std::vector<v1::TargetSelector>& targets, const std::string& holder) {
  size_t held = 0;
  for (const v1::TargetSelector& target : targets) {
    if (Take(target)) ++held;  // taken for the pass, never leased
  }
  if (held > 0) {
    holders_.push_back(holder);
    held_ += held;
  }
  return held;
}

bool SchedulingPass::Fits(const std::vector<v1::TargetSelector>& targets) const {
  std::set<std::pair<std::string, std::string>> used;  // (agent, resource)
  for (const v1::TargetSelector& target : targets) {
    bool found = false;
    for (const v1::Hello* hello : agents_) {
      for (const v1::Device& device : hello->devices()) {
        if (found || !Matches(target, *hello, device)) continue;
        if (target.device_id().empty() && IsQuarantined(hello->agent_id(), device.id())) continue;
        found = used.emplace(hello->agent_id(), ResourceOf(device)).second;
      }
    }
    if (!found) return false;
  }
  return true;
}

std::optional<std::vector<Placement>> SchedulingPass::TakeAll(const std::vector<v1::TargetSelector>& targets,
                                                              bool same_agent, size_t* got, bool distinct_agents) {
  if (got != nullptr) *got = 0;
  if (!same_agent) {
    // Distinct resources on any agents: take one by one, give back on failure.
    std::vector<size_t> marked;
    std::vector<Placement> out;
    for (const v1::TargetSelector& target : targets) {
      bool found = false;
      for (size_t i = 0; !found && Listed(i); ++i) {
        const auto on_agent = [&](const Placement& p) { return p.agent_id == free_[i].hello->agent_id(); };
        if (distinct_agents && std::any_of(out.begin(), out.end(), on_agent)) continue;
        if (Usable(target, free_[i])) {
          for (size_t m : TakeResource(i)) marked.push_back(m);
          out.push_back(Placement{free_[i].hello->agent_id(), *free_[i].device, free_[i].hello});
          found = true;
        }
      }
      if (!found) {
        for (size_t m : marked) free_[m].taken = false;
        free_left_ += marked.size();
        return std::nullopt;
      }
      if (got != nullptr) ++*got;
    }
    return out;
  }
  // One agent: the first whose free devices match every stage (a device may serve several).
  size_t best = 0;
  for (size_t begin = 0; Listed(begin); begin = free_[begin].agent_end) {
    const size_t end = free_[begin].agent_end;
    std::vector<size_t> chosen;
    for (const v1::TargetSelector& target : targets) {
      size_t i = begin;
      while (i < end && !Usable(target, free_[i])) ++i;
      if (i == end) break;
      chosen.push_back(i);
    }
    best = std::max(best, chosen.size());
    if (chosen.size() != targets.size()) continue;
    std::vector<Placement> out;
    for (size_t i : chosen) out.push_back(Placement{free_[i].hello->agent_id(), *free_[i].device, free_[i].hello});
    for (size_t i : chosen) TakeResource(i);  // already-taken ones mark nothing
    if (got != nullptr) *got = targets.size();
    return out;
  }
  if (got != nullptr) *got = best;
  return std::nullopt;
}

std::string SchedulingPass::Reason(const v1::TargetSelector& target) {
  // Leases taken during this pass are not in `leases_` yet, so the reason
  // speaks of the state at the start of the pass; the next pass refreshes it.
  const std::string key = target.SerializeAsString();
  auto it = reasons_.find(key);
  if (it == reasons_.end()) it = reasons_.emplace(key, PendingReason(target, agents_, leases_, quarantine_)).first;
  if (holders_.empty()) return it->second;
  return absl::StrCat(it->second, "; ", held_, " free device", held_ == 1 ? " is" : "s are", " held for ",
                      absl::StrJoin(holders_, ", "), " (waiting longest)");
}

}  // namespace hetbench::server
