#include "server/validation/expand.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/validate_spec.h"
#include "server/scheduler/scheduler.h"

namespace hetbench::server {

namespace {

// The agents a target can name: its agent alone when it names one (a pinned
// target, as a scheduled revalidation's thousands are: a lookup, not a scan
// of the fleet per target), else all of them.
std::vector<const v1::Hello*> Candidates(const v1::TargetSelector& target, const std::vector<const v1::Hello*>& agents,
                                         const std::map<std::string, const v1::Hello*>& by_id) {
  if (target.agent_id().empty()) return agents;
  auto it = by_id.find(target.agent_id());
  return it == by_id.end() ? std::vector<const v1::Hello*>{} : std::vector<const v1::Hello*>{it->second};
}

std::map<std::string, const v1::Hello*> ById(const std::vector<const v1::Hello*>& agents) {
  std::map<std::string, const v1::Hello*> out;
  for (const v1::Hello* h : agents) out[h->agent_id()] = h;
  return out;
}

}  // namespace

ExpandedValidation ExpandValidation(const v1::JobSpec& spec, const std::vector<const v1::Hello*>& agents) {
  ExpandedValidation out;
  std::set<std::pair<std::string, std::string>> seen;
  const std::map<std::string, const v1::Hello*> by_id = ById(agents);
  for (const v1::TargetSelector& target : spec.targets()) {
    bool matched = false;
    const std::vector<const v1::Hello*> candidates = Candidates(target, agents, by_id);
    for (const v1::Hello* hello : candidates) {
      for (const v1::Device& device : hello->devices()) {
        if (!Matches(target, *hello, device)) continue;
        matched = true;
        if (!seen.emplace(hello->agent_id(), device.id()).second) continue;
        v1::TargetSelector pinned;
        pinned.set_device_kind(device.kind());
        pinned.set_agent_id(hello->agent_id());
        pinned.set_device_id(device.id());
        out.targets.push_back(std::move(pinned));
      }
    }
    if (matched) continue;
    // Nothing matched: say so, per agent that looked for the kind, or once.
    bool said = false;
    for (const v1::Hello* hello : candidates) {
      for (const v1::AbsentDevice& a : hello->absent()) {
        if (target.device_kind() != v1::DEVICE_KIND_UNSPECIFIED && a.kind() != target.device_kind()) continue;
        v1::DeviceVerdict d;
        d.set_agent_id(hello->agent_id());
        d.set_kind(a.kind());
        d.set_verdict(v1::VERDICT_SKIPPED);
        d.set_reason(absl::StrCat("no ", DeviceKindName(a.kind()), " device: ", a.reason()));
        out.skipped.push_back(std::move(d));
        said = true;
      }
    }
    if (!said) {
      v1::DeviceVerdict d;
      d.set_agent_id(target.agent_id());
      d.set_kind(target.device_kind());
      d.set_verdict(v1::VERDICT_SKIPPED);
      d.set_reason(agents.empty() ? "no agent is connected"
                                  : absl::StrCat("no connected agent offers a ", DescribeTarget(target)));
      out.skipped.push_back(std::move(d));
    }
  }
  out.pairs = AllReducePairs(spec.validate(), out.targets);
  return out;
}

std::vector<std::pair<size_t, size_t>> AllReducePairs(const v1::ValidateSpec& validate,
                                                      const std::vector<v1::TargetSelector>& targets) {
  // kind -> agent -> its first device of the kind (targets are in (agent, device) order per selector).
  std::map<int, std::map<std::string, size_t>> first;
  for (size_t i = 0; i < targets.size(); ++i) {
    const v1::TargetSelector& t = targets[i];
    if (RunsAllReduce(validate, t.device_kind())) first[t.device_kind()].emplace(t.agent_id(), i);
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  for (const auto& [kind, by_agent] : first) {
    std::vector<size_t> ring;
    for (const auto& [agent, index] : by_agent) ring.push_back(index);
    if (ring.size() == 2) pairs.emplace_back(ring[0], ring[1]);
    if (ring.size() < 3) continue;
    for (size_t i = 0; i < ring.size(); ++i) pairs.emplace_back(ring[i], ring[(i + 1) % ring.size()]);
  }
  return pairs;
}

namespace {

// kind|model|driver|cores: the part of a SKU the coordinator knows before the agent runs.
std::string SkuPrefix(const std::string& sku) {
  size_t pos = 0;
  for (int field = 0; field < 4 && pos != std::string::npos; ++field) pos = sku.find('|', pos + (field > 0 ? 1 : 0));
  return pos == std::string::npos ? sku : sku.substr(0, pos);
}

}  // namespace

absl::Status CheckBaselineFits(const v1::JobSpec& spec, const ExpandedValidation& expanded,
                               const std::vector<const v1::Hello*>& agents) {
  const v1::Baseline& b = spec.validate().baseline();
  if (b.skus().empty() || expanded.targets.empty()) return absl::OkStatus();
  std::set<std::string> devices;
  const std::map<std::string, const v1::Hello*> by_id = ById(agents);
  for (const v1::TargetSelector& t : expanded.targets) {
    auto it = by_id.find(t.agent_id());
    if (it == by_id.end()) continue;
    for (const v1::Device& d : it->second->devices()) {
      if (d.id() == t.device_id()) devices.insert(SkuPrefix(SkuOf(d, 0, it->second->version())));
    }
  }
  std::set<std::string> held;
  for (const v1::SkuBaseline& s : b.skus()) held.insert(SkuPrefix(s.sku()));
  for (const std::string& d : devices) {
    if (held.count(d) > 0) return absl::OkStatus();
  }
  auto list = [](const std::set<std::string>& v) {
    std::vector<std::string> out;
    for (const std::string& s : v) {
      if (out.size() == 3) {
        out.push_back(absl::StrCat("and ", v.size() - 3, " more"));
        break;
      }
      out.push_back(QuotedInput(s));
    }
    return absl::StrJoin(out, ", ");
  };
  return absl::InvalidArgumentError(absl::StrCat(
      "validate.baseline: its SKUs (", list(held), ") match none of the devices to validate (", list(devices),
      "); save a baseline of these devices (hetbench baseline save) or leave --baseline out"));
}

}  // namespace hetbench::server
