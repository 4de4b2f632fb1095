#pragma once
/// Serving results: per task, the scenario, the load offered and achieved,
/// the nearest-rank latencies against the bound with the early-stopping
/// estimate, how well the issuer kept up, and the verdict.

#include <string>
#include <vector>

#include "hetbench/v1/coordinator.pb.h"
#include "report/render.h"
#include "report/render/plots.h"

namespace hetbench::report {

/// "serving" table (or CSV: every figure unrounded, ns), "" when no task served.
std::string RenderServing(const v1::Job& job, OutputFormat format);

/// The footer line of a serving task: what answered, the batches it ran,
/// the issuer's delay, the warm-up, a peak search's runs (no training or
/// test-set figures).
std::string ServingFooter(const v1::TaskResult& r);

/// Latency against offered load (p50, p90, p99 and the bound) per model,
/// device and largest batch: the server tasks of a rate sweep, or a peak
/// search's runs with the peak marked. Left out where there are fewer than
/// two rates.
void ServingPlots(const v1::Job& job, std::vector<Plot>* out);

}  // namespace hetbench::report
