#pragma once
/// The report's figures, drawn from a job (and, for the phase timelines, the
/// power readings its tasks stored) with the SVG writer in svg.h:
///  - device comparison: samples/s, time per sample, energy per sample and
///    cost per 1,000 samples, one bar per device and executor, p25-p75
///    whiskers, the energy source (measured or modeled*) on every energy bar;
///  - batch-size curves: time per sample p50 with the p25-p75 band per device;
///  - per-layer stacked bars per device (forward, backward, inference) with
///    each layer's share;
///  - a phase timeline per task beside its power trace (the first 12 tasks);
///  - roofline: achieved GFLOP/s against the device's calibrated GEMM peak.

#include <map>
#include <string>
#include <vector>

#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

struct Plot {
  std::string name;   // file stem, e.g. "compare-train-samples-per-second"
  std::string title;  // the figure's title
  std::string svg;    // a complete <svg> element
};

/// Power readings by task id (the stored attempt's), for the timelines.
using PowerTraces = std::map<std::string, std::vector<v1::PowerBatch>>;

/// The tasks that get a phase timeline, in task order: those with results and
/// phase windows, the first 12 of them. Fetch power readings for these.
std::vector<const v1::Task*> TimelineTasks(const v1::Job& job);

/// Stored sample batches by task id (the stored attempt's), for the
/// step-time-over-the-run figure.
using StepTraces = std::map<std::string, std::vector<v1::SampleBatch>>;

/// The tasks whose steps are drawn over the run: the first 6 timeline tasks
/// that stored samples. Fetch their sample batches.
std::vector<const v1::Task*> StepTraceTasks(const v1::Job& job);

/// Every figure the job's results support, in report order; a figure that
/// has no data (no layers profiled, one batch size) is left out.
std::vector<Plot> JobPlots(const v1::Job& job, const PowerTraces& power = {}, const StepTraces& steps = {});

}  // namespace hetbench::report
