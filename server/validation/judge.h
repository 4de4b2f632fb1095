#pragma once
/// The coordinator's verdicts on a validation job (docs/validation.md): each
/// device's figures against its SKU's baseline, silent data corruption by
/// the plurality of loss fingerprints, per device and per node. A pure
/// function of the job: the same results give the same verdicts every time
/// (nothing is resampled; devices are judged in (agent, device) order).

#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"
#include "server/validation/robust.h"

namespace hetbench::server {

/// What an agent's validation result may hold (it is untrusted input,
/// checked at the edge): at most 64 tests, 10,000 values and 4,096
/// fingerprint steps each, finite values, strings of at most 1,024 bytes.
/// Empty when it is fine, else the problem naming the field.
std::string CheckValidationRun(const v1::ValidationRun& run);


/// Judges every task of a validation job that ended. Devices already in
/// job.validation() (those the coordinator found absent at submit, SKIPPED
/// with their reason) are kept. A metric is compared with the spec's saved
/// baseline where it holds the SKU and test, else with what this job's
/// devices of the SKU measured (at least kMinFleetDevices of them; with
/// fewer the figure is reported and not compared, said so). The report's
/// `baselines` are always this job's own (what `hetbench baseline save`
/// keeps): per SKU and test the median of the devices' medians and a robust
/// spread: the larger of 1.4826 x MAD over the devices, the median of the
/// devices' own spreads over their repetitions, and spread_floor x median.
inline constexpr int kMinFleetDevices = 3;
v1::ValidationReport JudgeValidation(const v1::Job& job);

}  // namespace hetbench::server
