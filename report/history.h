#pragma once
/// `hetbench history --model M`: one model's results over time, oldest
/// first: a row per job and series (device model, executor, batch size,
/// model fingerprint) holding that job's runs of it (several with
/// `repeats`), and a change point wherever a row differs from the previous
/// row of its series by compare's test (report/compare.h: runs as the unit
/// when both rows have 2 runs or more).

#include <functional>
#include <string>
#include <vector>

#include "report/compare.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

struct HistoryRow {
  const v1::Job* job = nullptr;
  const v1::Task* task = nullptr;       // its first run
  std::vector<const v1::Task*> runs;    // every run of the series in the job (repeats), task first
  std::string series;  // what makes runs comparable: device kind (model), executor, batch, fingerprint
  double finished_unix = 0;                             // its last run's end
  double samples_per_second_p50 = 0, p25 = 0, p75 = 0;  // train, from the step percentiles (median over runs)
  double joules_per_sample = 0;                         // train, median over runs; 0 when none
  std::string energy_source;                            // "rapl", "modeled*", ...
  bool has_change = false;                              // compared with the previous run of its series
  StepComparison change;
};

/// Per-step times per sample of a task's training phase (fetched on demand).
using StepsOf = std::function<std::vector<double>(const v1::Task&)>;

/// The rows of `model` (and `kind` unless DEVICE_KIND_UNSPECIFIED) in `jobs`,
/// oldest first; each compared with the previous row of its series.
std::vector<HistoryRow> BuildHistory(const std::vector<v1::Job>& jobs, const std::string& model, v1::DeviceKind kind,
                                     double threshold, const StepsOf& steps_of);

/// The change column of a row: "first of its series", a verdict that is no
/// change ("no change", "too few steps", "not comparable: run B train
/// INVALID (...)"), or "slower: time x1.083 [1.041-1.120]".
std::string ChangeText(const HistoryRow& row);

/// Table, CSV or JSON (schema hetbench.history/v1, report/schemas/history.v1.json).
std::string RenderHistory(const std::vector<HistoryRow>& rows, const std::string& model, double threshold,
                          const std::string& format);

}  // namespace hetbench::report
