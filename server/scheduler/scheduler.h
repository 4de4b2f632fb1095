#pragma once
/// Matching tasks to devices, and the exclusive device leases that make sure
/// no device ever runs two tasks at once.

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// True when `device` of the agent that said `hello` satisfies `target`
/// (kind, agent, labels, and the executor when one is asked for).
bool Matches(const v1::TargetSelector& target, const v1::Hello& hello, const v1::Device& device);

/// The executor a task targeting `target` runs with on `device`.
std::string ExecutorFor(const v1::TargetSelector& target, const v1::Device& device);
/// Whether `device` lists `executor`.
bool CanRun(const v1::Device& device, const std::string& executor);
/// "tpu device with the python executor labelled pool=spot", for messages.
std::string DescribeTarget(const v1::TargetSelector& target);
/// A split stage's target: the stage's own, with the job target's labels
/// when the stage names none, and (for a split on one agent) its agent.
v1::TargetSelector SplitStageTarget(const v1::SplitStage& stage, const v1::TargetSelector& job_target,
                                    bool same_agent = false);

/// Devices a validation quarantined: (agent, device) -> its last verdict and
/// why (server/validation/health). Owned by the Placer.
using Quarantine = std::map<std::pair<std::string, std::string>, v1::DeviceHealth>;

/// Exclusive leases: (agent, device) -> task. Not thread-safe (event loop only).
class DeviceLeases {
 public:
  /// Takes the device for `task_id`; false if it is already leased.
  bool Acquire(const std::string& agent_id, const std::string& device_id, const std::string& task_id);
  void Release(const std::string& agent_id, const std::string& device_id);
  bool IsLeased(const std::string& agent_id, const std::string& device_id) const;
  /// The task holding the device, or "".
  std::string TaskOn(const std::string& agent_id, const std::string& device_id) const;
  /// Device ids leased on one agent.
  std::vector<std::string> LeasedDevices(const std::string& agent_id) const;
  size_t size() const { return leases_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, std::string> leases_;
};

/// The first (agent, device) in the order given that matches `target` and is
/// not leased, or nothing.
struct Placement {
  std::string agent_id;
  v1::Device device;
  const v1::Hello* hello = nullptr;  // the agent's, valid while the pass's agents are
};
/// The resource a device occupies: its "host_device" attribute (the
/// simulator on a CPU's cores, or on a GPU) or else itself. Devices on one
/// resource are leased as one: while one runs a task the others are busy.
std::string ResourceOf(const v1::Device& device);
/// The task holding `device`'s resource on `hello`'s agent ("T" or "T on
/// cpu0" when another device of the resource holds it), or "".
std::string TaskOnResource(const v1::Hello& hello, const v1::Device& device, const DeviceLeases& leases);

std::optional<Placement> PickDevice(const v1::TargetSelector& target, const std::vector<const v1::Hello*>& agents,
                                    const DeviceLeases& leases);

/// Why no device can take a task for `target` now: no agent, no agent with
/// such a device (with the reasons agents gave for the kind being absent),
/// or every matching device busy (and with what).
std::string PendingReason(const v1::TargetSelector& target, const std::vector<const v1::Hello*>& agents,
                          const DeviceLeases& leases, const Quarantine* quarantine = nullptr);

/// One scheduling pass: the cheap, serial decision of which queued task goes
/// to which free device (the binding, sending Assign, happens after the
/// commit). Built once per event-loop batch from the connected agents and the
/// leases; it lists each agent's free devices once, in the agents' order and
/// only as far as a search needs (placing a few tasks in a large, mostly idle
/// fleet lists a few agents), so placing T queued tasks costs O(T x free
/// devices) and no more, and answers pending reasons from a cache per
/// distinct target. Not thread-safe; borrows `agents`, `leases` and `resources`.
class SchedulingPass {
 public:
  /// `quarantine` (may be null): devices no task is placed on unless it
  /// names the device (targets[].device_id, as a validation's tasks do).
  /// `resources` (may be null): for each agent, ResourceOf each of its
  /// devices in order, kept from its Hello; else read from every device
  /// (its attributes map) in the pass.
  SchedulingPass(const std::vector<const v1::Hello*>& agents, const DeviceLeases& leases,
                 const Quarantine* quarantine = nullptr,
                 const std::vector<const std::vector<std::string>*>* resources = nullptr);

  /// A free device matching `target`, taken for the rest of the pass; or nothing.
  std::optional<Placement> Take(const v1::TargetSelector& target);
  /// A device for every target at once, or none (nothing taken): a gang's
  /// ranks, or a split task's stages. Each target gets its own resource;
  /// with `same_agent` all on one agent, where stages may share a device or
  /// resource (they are one task); with `distinct_agents` (and not
  /// same_agent) each on an agent of its own (a serving run's replicas).
  /// `*got`: how many targets found a device before one did not (for the
  /// pending reason).
  std::optional<std::vector<Placement>> TakeAll(const std::vector<v1::TargetSelector>& targets, bool same_agent,
                                                size_t* got = nullptr, bool distinct_agents = false);
  /// Takes, for the rest of the pass, a free device for each target that has
  /// one (the others stay missing): a waiting gang holds what it could use
  /// so later tasks of the pass do not. Returns how many were held; later
  /// reasons name `holder`.
  size_t Hold(const std::vector<v1::TargetSelector>& targets, const std::string& holder);
  /// Whether the connected agents have a device on a resource of its own for
  /// every target, busy or not: a gang that could never start holds nothing.
  bool Fits(const std::vector<v1::TargetSelector>& targets) const;
  /// Why `target` gets no device now (bounded; see PendingReason), cached per
  /// target; with holds in the pass, it says who holds free devices.
  std::string Reason(const v1::TargetSelector& target);
  /// Free devices not yet taken in this pass (lists every agent).
  size_t free_devices();

 private:
  struct Free {
    const v1::Hello* hello;
    const v1::Device* device;
    std::string_view resource;              // ResourceOf(device): the agent's kept one, or read_'s
    size_t agent_begin = 0, agent_end = 0;  // this agent's free devices: free_[agent_begin, agent_end)
    bool taken = false;
    bool quarantined = false;
  };
  /// Free, matching, and not quarantined for this target.
  bool Usable(const v1::TargetSelector& target, const Free& f) const {
    return !f.taken && (!f.quarantined || !target.device_id().empty()) && Matches(target, *f.hello, *f.device);
  }
  bool IsQuarantined(const std::string& agent_id, const std::string& device_id) const {
    return quarantine_ != nullptr && !quarantine_->empty() && quarantine_->count({agent_id, device_id}) > 0;
  }
  /// Whether free_[i] exists, listing more agents until it does or none is left.
  bool Listed(size_t i);
  /// Appends the next unlisted agent's free devices to free_; false when every agent is listed.
  bool ListNextAgent();
  const std::vector<const v1::Hello*>& agents_;
  const DeviceLeases& leases_;
  const Quarantine* quarantine_;
  const std::vector<const std::vector<std::string>*>* resources_;  // null, or one per agent
  size_t listed_ = 0;  // agents_[0, listed_) have their free devices in free_
  /// Marks free_[i] and every free device on its resource taken; returns the indices marked.
  std::vector<size_t> TakeResource(size_t i);
  std::vector<Free> free_;
  std::deque<std::string> read_;  // resources read in the pass (no kept ones); a deque: Free's views stay valid
  size_t free_left_ = 0;
  std::map<std::string, std::string> reasons_;  // by serialized target
  std::vector<std::string> holders_;            // of Hold, in order
  size_t held_ = 0;
};

}  // namespace hetbench::server
