#pragma once
/// `hetbench report ID --html FILE`: one self-contained page (inline SVG and
/// CSS, no script, no network asset) with the job's figures, its tables, each
/// task's environment and fingerprints, the validity verdicts with their
/// reasons, the study table, and the command that reruns the job.

#include <string>
#include <vector>

#include "client/render/plots.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::client {

std::string RenderHtmlReport(const v1::Job& job, const std::vector<Plot>& plots,
                             v1::DeviceKind baseline_kind = v1::DEVICE_KIND_CPU, bool compare_mismatched = false);

}  // namespace hetbench::client
