#pragma once
/// Turns jobs and agents into what users read: tables, CSV, JSON.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::client {

enum class OutputFormat { kTable, kJson, kCsv };
absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name);

/// The comparison report of one job: per task and phase, the timing
/// percentiles, throughput and speedup against the baseline task (the first
/// succeeded CPU task, else the first succeeded task), plus test accuracy and
/// what makes each result reproducible.
/// Speedups compare only results with equal model fingerprints (architecture,
/// initial weights, data) unless `compare_mismatched` is set.
std::string RenderReport(const v1::Job& job, OutputFormat format, bool compare_mismatched = false);

/// The reference study's table for a job: per device, training and test time,
/// nominal power and E = P x T with that nominal power (the study's method,
/// labelled so), next to the average power and energy hetbench obtained and
/// their source.
std::string RenderStudyTable(const v1::Job& job);

std::string RenderJobList(const std::vector<v1::Job>& jobs, OutputFormat format);
std::string RenderJob(const v1::Job& job, OutputFormat format);
std::string RenderAgents(const std::vector<v1::AgentInfo>& agents, OutputFormat format);

/// Progress lines for `--follow`: one per task, with a bar of `width` cells.
std::vector<std::string> ProgressLines(const v1::Job& job, int width);

/// A fixed-width text table; column widths fit the widest cell.
std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

}  // namespace hetbench::client
