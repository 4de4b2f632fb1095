#include "report/render/common.h"

#include <charconv>
#include <cmath>

#include <google/protobuf/util/json_util.h>

#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"

namespace hetbench::report::render {

std::string ToJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}

std::string Ms(double ns) { return absl::StrFormat("%.3f", ns / 1e6); }

std::string CsvEscape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string CsvLines(const std::string& header, const std::vector<std::vector<std::string>>& rows) {
  std::string out = header + "\n";
  for (const auto& r : rows) {
    out += absl::StrJoin(r, ",", [](std::string* o, const std::string& s) { o->append(CsvEscape(s)); }) + "\n";
  }
  return out;
}

std::string CsvNumber(double v) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[400];  // fixed notation of the largest double needs 309 digits
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  if (ec != std::errc()) return absl::StrFormat("%.17g", v);
  return std::string(buf, end);
}

std::string TimeString(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

const v1::PhaseResult* FindPhase(const v1::Task& t, v1::Phase phase) {
  for (const auto& p : t.result().phases()) {
    if (p.phase() == phase) return &p;
  }
  return nullptr;
}

// The C++ executors are the default; another (the Python runner) is named.
std::string ExecutorSuffix(const std::string& executor) {
  return executor.empty() || executor == "torch" || executor == "statevector" || executor == "qsim" ? "" : absl::StrCat(" via ", executor);
}

std::string DeviceLabel(const v1::Task& t, bool with_run) {
  const std::string run = with_run && t.run() > 0 ? absl::StrCat(", run ", t.run()) : "";
  if (t.agent_id().empty()) {
    return absl::StrCat("(", DeviceKindName(t.target().device_kind()), ExecutorSuffix(t.target().executor()), ")",
                        run);
  }
  return absl::StrCat(t.agent_id(), "/", t.device_id(), " (", DeviceKindName(t.device_kind()),
                      ExecutorSuffix(t.executor()), ")", run);
}

std::string TaskModel(const v1::Job& job, const v1::Task& t) {
  if (!t.model().empty()) return t.model();
  return job.spec().models_size() > 0 ? job.spec().models(0) : job.spec().model();
}

// Baseline of a task's speedups: the first succeeded task of the same model,
// batch size and run (of `repeats`) on the baseline device kind, else the
// first succeeded task of that model, batch size and run.
const v1::Task* Baseline(const v1::Job& job, const v1::Task& of, v1::DeviceKind kind) {
  const v1::Task* first = nullptr;
  for (const v1::Task& t : job.tasks()) {
    if (t.state() != v1::TASK_STATE_SUCCEEDED || t.batch_size() != of.batch_size() ||
        TaskModel(job, t) != TaskModel(job, of) || t.run() != of.run()) {
      continue;
    }
    if (t.device_kind() == kind) return &t;
    if (first == nullptr) first = &t;
  }
  return first;
}

// Same model fingerprint (architecture, initial weights, data). Between two
// executors (C++ and the Python runner), whose weight and data hashes are
// computed differently, the architecture fingerprints must match instead.
bool SameFingerprint(const v1::Task& a, const v1::Task& b) {
  const v1::RunEnvironment& x = a.result().environment();
  const v1::RunEnvironment& y = b.result().environment();
  if (x.executor() != y.executor() && !x.architecture_fingerprint().empty()) {
    return x.architecture_fingerprint() == y.architecture_fingerprint();
  }
  return x.model_fingerprint() == y.model_fingerprint();
}

// A task's samples/s over its baseline's in one phase: no ratio when either
// is missing; refused when the fingerprints differ and that was not allowed.
Versus RateVsBaseline(const v1::Job& job, const v1::Task& t, v1::Phase phase, v1::DeviceKind kind,
                      bool compare_mismatched) {
  const v1::Task* base = Baseline(job, t, kind);
  const v1::PhaseResult* mine = FindPhase(t, phase);
  const v1::PhaseResult* theirs = base ? FindPhase(*base, phase) : nullptr;
  if (!mine || !theirs || theirs->stats().samples_per_second() <= 0) return {};
  if (!compare_mismatched && !SameFingerprint(t, *base)) return {std::nullopt, true};
  return {mine->stats().samples_per_second() / theirs->stats().samples_per_second(), false};
}

// Achieved GFLOP/s of a phase: FLOPs per sample x samples per second.
double AchievedGflops(const v1::Task& t, const v1::PhaseResult& p) {
  const double per_sample = p.phase() == v1::PHASE_TRAIN ? t.result().train_flops_per_sample()
                                                         : t.result().forward_flops_per_sample();
  return per_sample * p.stats().samples_per_second() / 1e9;
}

const v1::CostResult* FindCost(const v1::Task& t, v1::Phase phase) {
  for (const auto& c : t.result().cost()) {
    if (c.phase() == phase) return &c;
  }
  return nullptr;
}

// "rapl", "rapl x2", "modeled*" (* = an estimate; ! = window shorter than the sensor's update period).
std::string SourceLabel(v1::PowerSource source, int sensors, bool short_window) {
  std::string s = PowerSourceName(source);
  if (sensors > 1) absl::StrAppend(&s, " x", sensors);
  if (source == v1::POWER_SOURCE_MODELED) s += "*";
  if (short_window) s += "!";
  return s;
}

std::string SourceCell(const EnergySummary& e) { return e.ok ? SourceLabel(e.source, e.sensors, e.short_window) : "-"; }

std::string Num(double v, const char* fmt) { return absl::StrFormat(fmt, v); }

// A step percentile divided by the mean samples per step: time per sample.
double PerSampleNs(const v1::TimingStats& s, double step_ns) {
  return s.items() > 0 ? step_ns * static_cast<double>(s.count()) / static_cast<double>(s.items()) : 0.0;
}

// Test quality: accuracy for classifiers, mean squared pixel error for reconstruction models.
std::string Quality(const v1::TaskResult& r) {
  return r.test_mse() > 0 ? absl::StrFormat("mse %.4f", r.test_mse()) : absl::StrFormat("%.4f", r.test_accuracy());
}

std::string JobModels(const v1::Job& job) {
  const auto& models = job.spec().models();
  if (models.empty()) return absl::StrCat("model ", job.spec().model());
  return absl::StrCat(models.size() == 1 ? "model " : "models ", absl::StrJoin(models, ", "));
}

}  // namespace hetbench::report::render
