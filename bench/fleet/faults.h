#pragma once
/// Known faults the fleet simulator injects into a share of its devices
/// (`bench_fleet --mode validate --degrade ...`), and what a validation of a
/// simulated device measures: figures drawn from its kind's profile with a
/// persistent per-device offset and per-repetition noise, changed by its
/// fault. The bench knows each device's fault (the same hash the agents
/// use), so recall and false positives are counted, not guessed. Every
/// figure is simulated and says so.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/fleet/sim_fleet.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::fleet {

enum class Fault { kNone, kSlow5, kSlow10, kSlow30, kPowerCap, kNoisy, kWrong, kHang, kSlowLink };

/// Every fault, for reports.
const std::vector<Fault>& AllFaults();
/// "none", "slow5", "slow10", "slow30", "powercap", "noisy", "wrong", "hang", "slowlink" (the node's link at
/// 0.8 of its siblings': only its all-reduce pairs see it).
std::string FaultName(Fault f);

/// Shares of devices per fault, e.g. "slow5=0.02,wrong=0.01"; the rest are healthy.
struct Degrade {
  std::vector<std::pair<Fault, double>> shares;
};
/// Errors name the entry and the fix; the shares must add up to at most 1.
absl::StatusOr<Degrade> ParseDegrade(const std::string& text);

/// The fault of one device: a hash of (agent, device) against the shares, so
/// the agents and the bench agree without talking.
Fault FaultOf(const Degrade& d, const std::string& agent_id, const std::string& device_id);

/// The noise model, stated in docs/validation.md: devices of one kind differ
/// by a persistent offset of sd kDeviceSpread; each repetition adds noise of
/// sd profile.jitter / 3 (x4 on a noisy device).
inline constexpr double kDeviceSpread = 0.005;

/// What the validation suite measures on a simulated device with `fault`
/// (its figures, fingerprints, a hang ended at the time box). `rng_seed`
/// makes each run's repetition noise differ.
v1::ValidationRun SimulatedValidation(const v1::Assign& assign, v1::DeviceKind kind, const Profile& profile,
                                      const std::string& agent_id, const std::string& sku, Fault fault,
                                      uint64_t rng_seed);

/// What one rank of a simulated all-reduce pair measures: the pair's figure
/// (a 12.5 GB/s link, a persistent per-pair offset, repetition noise) at the
/// slower end's link; a hung end TIMED_OUT, its partner FAILED.
v1::ValidationRun SimulatedAllReduce(const v1::Assign& assign, const std::string& sku, Fault fault, Fault peer_fault,
                                     uint64_t rng_seed);

/// A judged validation job against the faults injected: per fault the
/// devices flagged (DEGRADED or FAIL) of those that had it, false positives
/// (each printed to stderr with its reason), wrong results FAILed, hangs
/// ended by their box, the same results judged again in another order, and
/// the faults missed by kind, as RESULT-line fields.
std::string TallyAgainstFaults(const v1::Job& job, const Degrade& degrade);

}  // namespace hetbench::fleet
