#pragma once
/// Turns jobs and agents into what users read: tables, CSV, JSON.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

// kWide: a table with every column (get agents -o wide: drivers, executors, sensors).
// kYaml: `get job -o yaml`, the effective spec as a file `submit -f` accepts.
enum class OutputFormat { kTable, kJson, kCsv, kWide, kYaml };
absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name);

/// The comparison report of one job: per task and phase, the timing
/// percentiles, throughput and speedup against the baseline task (the first
/// succeeded CPU task, else the first succeeded task), plus test accuracy and
/// what makes each result reproducible.
/// Speedups compare only results with equal model fingerprints (architecture,
/// initial weights, data) unless `compare_mismatched` is set.
/// Speedups compare each task with the same model and batch size on
/// `baseline_kind`.
std::string RenderReport(const v1::Job& job, OutputFormat format, bool compare_mismatched = false,
                         v1::DeviceKind baseline_kind = v1::DEVICE_KIND_CPU);

/// The reference study's table for a job: per device, training and test time,
/// nominal power and E = P x T with that nominal power (the study's method,
/// labelled so), next to the average power and energy hetbench obtained and
/// their source.
/// Per model and device: training and test time, speedup as a percentage of
/// the same model on `baseline_kind`, and test quality.
/// Table (with notes) or CSV (the same cells).
std::string RenderStudyTable(const v1::Job& job, v1::DeviceKind baseline_kind = v1::DEVICE_KIND_CPU,
                             bool compare_mismatched = false, OutputFormat format = OutputFormat::kTable);

/// Energy per task and phase: average watts, joules, joules per sample, with
/// each figure's source (measured or modeled) and coverage.
std::string RenderEnergyTable(const v1::Job& job);

/// Achieved FLOP/s per task and phase against the device's calibrated GEMM
/// rate, and each device's calibration with its BLAS kernel check.
std::string RenderRoofline(const v1::Job& job);

/// Per-layer forward, backward and inference times (p50 [p25-p75]) of every
/// task that profiled its layers; table or CSV.
/// Per-layer energy (train and infer) from the coordinator's LayerEnergy,
/// with unresolved layers shown as such; "" when the job has none.
std::string RenderLayerEnergy(const v1::Job& job);
std::string RenderLayers(const v1::Job& job, OutputFormat format, v1::DeviceKind baseline_kind = v1::DEVICE_KIND_CPU);

std::string RenderJobList(const std::vector<v1::Job>& jobs, OutputFormat format);
/// Table: state, effective spec, tasks. Json: the Job message. Yaml: the
/// effective spec alone, which `hetbench submit -f` takes to rerun the job.
/// Csv: one row per task (id, model, device, batch, state, attempt, note).
std::string RenderJob(const v1::Job& job, OutputFormat format);
std::string RenderAgents(const std::vector<v1::AgentInfo>& agents, OutputFormat format);

/// Progress lines for `--follow`: one per task, with a bar of `width` cells.
std::vector<std::string> ProgressLines(const v1::Job& job, int width);

/// A fixed-width text table; column widths fit the widest cell.
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace hetbench::report
