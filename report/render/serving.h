#pragma once
/// Serving results: per task, the scenario, the load offered and achieved,
/// the nearest-rank latencies against the bound with the early-stopping
/// estimate, how well the issuer kept up, and the verdict.

#include <string>

#include "hetbench/v1/coordinator.pb.h"
#include "report/render.h"

namespace hetbench::report {

/// "serving" table (or CSV: every figure unrounded, ns), "" when no task served.
std::string RenderServing(const v1::Job& job, OutputFormat format);

/// The footer line of a serving task: what answered, the batches it ran,
/// the issuer's delay, the warm-up (no training or test-set figures).
std::string ServingFooter(const v1::TaskResult& r);

}  // namespace hetbench::report
