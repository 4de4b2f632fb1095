#include "server/validation/expand.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "server/scheduler/scheduler.h"

namespace hetbench::server {

ExpandedValidation ExpandValidation(const v1::JobSpec& spec, const std::vector<const v1::Hello*>& agents) {
  ExpandedValidation out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const v1::TargetSelector& target : spec.targets()) {
    bool matched = false;
    for (const v1::Hello* hello : agents) {
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
    for (const v1::Hello* hello : agents) {
      if (!target.agent_id().empty() && target.agent_id() != hello->agent_id()) continue;
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
  return out;
}

}  // namespace hetbench::server
