#pragma once
/// What every view of a job shares: lookups (phase, baseline, cost), labels
/// and number formats. Internal to the client's renderers.

#include <google/protobuf/message.h>

#include <optional>
#include <string>
#include <vector>

#include "common/energy.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report::render {

/// The message as indented JSON with the proto field names, defaults included.
std::string ToJson(const google::protobuf::Message& m);
/// Nanoseconds as milliseconds, 3 decimals.
std::string Ms(double ns);
std::string CsvEscape(const std::string& s);
std::string CsvLines(const std::string& header, const std::vector<std::vector<std::string>>& rows);
/// A number as a spreadsheet reads it: plain decimal notation (never
/// 2.38505e+07), every digit it needs to read back exactly; "" for NaN.
std::string CsvNumber(double v);
/// "2026-11-22 10:00:00Z", or "-" for 0.
std::string TimeString(double unix_seconds);
const v1::PhaseResult* FindPhase(const v1::Task& t, v1::Phase phase);
/// The C++ executors are the default; another (the Python runner) is named.
std::string ExecutorSuffix(const std::string& executor);
/// "agent/device (kind[ via executor])", or "(kind)" before assignment;
/// ", run 2" after it for a run of a job with `repeats`.
std::string DeviceLabel(const v1::Task& t, bool with_run = true);
std::string TaskModel(const v1::Job& job, const v1::Task& t);
/// Baseline of a task's speedups: the first succeeded task of the same model,
/// batch size and run on the baseline device kind, else the first succeeded
/// task of that model, batch size and run.
const v1::Task* Baseline(const v1::Job& job, const v1::Task& of, v1::DeviceKind kind);
/// Same model fingerprint (architecture, initial weights, data). Between two
/// executors, whose weight and data hashes differ, the architecture
/// fingerprints must match instead.
bool SameFingerprint(const v1::Task& a, const v1::Task& b);
/// A task's samples/s over its baseline's in one phase: no ratio when either
/// is missing; refused when the fingerprints differ and that was not allowed.
struct Versus {
  std::optional<double> ratio;
  bool refused = false;
};
Versus RateVsBaseline(const v1::Job& job, const v1::Task& t, v1::Phase phase, v1::DeviceKind kind,
                      bool compare_mismatched);
/// Achieved GFLOP/s of a phase: FLOPs per sample x samples per second.
double AchievedGflops(const v1::Task& t, const v1::PhaseResult& p);
const v1::CostResult* FindCost(const v1::Task& t, v1::Phase phase);
/// "rapl", "rapl x2", "modeled*" (* = an estimate; ! = window shorter than
/// the sensor's update period).
std::string SourceLabel(v1::PowerSource source, int sensors, bool short_window);
/// SourceLabel of a phase's headline energy; "-" when it has none.
std::string SourceCell(const EnergySummary& e);
std::string Num(double v, const char* fmt);
/// A step percentile divided by the mean samples per step: time per sample.
double PerSampleNs(const v1::TimingStats& s, double step_ns);
/// Accuracy for classifiers, mean squared pixel error for reconstruction models.
std::string Quality(const v1::TaskResult& r);
/// "model mlp" or "models mlp, cnn".
std::string JobModels(const v1::Job& job);

}  // namespace hetbench::report::render
