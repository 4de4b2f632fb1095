#include "client/render.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <ctime>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/energy.h"
#include "common/names.h"
#include "common/spec_yaml.h"

namespace hetbench::client {

namespace {

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
  return executor.empty() || executor == "torch" || executor == "qsim" ? "" : absl::StrCat(" via ", executor);
}

std::string DeviceLabel(const v1::Task& t) {
  if (t.agent_id().empty()) {
    return absl::StrCat("(", DeviceKindName(t.target().device_kind()), ExecutorSuffix(t.target().executor()), ")");
  }
  return absl::StrCat(t.agent_id(), "/", t.device_id(), " (", DeviceKindName(t.device_kind()),
                      ExecutorSuffix(t.executor()), ")");
}

std::string TaskModel(const v1::Job& job, const v1::Task& t) {
  if (!t.model().empty()) return t.model();
  return job.spec().models_size() > 0 ? job.spec().models(0) : job.spec().model();
}

// Baseline of a task's speedups: the first succeeded task of the same model
// and batch size on the baseline device kind, else the first succeeded task
// of that model and batch size.
const v1::Task* Baseline(const v1::Job& job, const v1::Task& of, v1::DeviceKind kind) {
  const v1::Task* first = nullptr;
  for (const v1::Task& t : job.tasks()) {
    if (t.state() != v1::TASK_STATE_SUCCEEDED || t.batch_size() != of.batch_size() ||
        TaskModel(job, t) != TaskModel(job, of)) {
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
struct Versus {
  std::optional<double> ratio;
  bool refused = false;
};
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
std::string SourceCell(const EnergySummary& e) {
  if (!e.ok) return "-";
  std::string s = PowerSourceName(e.source);
  if (e.sensors > 1) absl::StrAppend(&s, " x", e.sensors);
  if (e.source == v1::POWER_SOURCE_MODELED) s += "*";
  if (e.short_window) s += "!";
  return s;
}

std::string Num(double v, const char* fmt) { return absl::StrFormat(fmt, v); }

// A step percentile divided by the mean samples per step: time per sample.
double PerSampleNs(const v1::TimingStats& s, double step_ns) {
  return s.items() > 0 ? step_ns * static_cast<double>(s.count()) / static_cast<double>(s.items()) : 0.0;
}

// Test quality: accuracy for classifiers, mean squared pixel error for reconstruction models.
std::string Quality(const v1::TaskResult& r) {
  return r.test_mse() > 0 ? absl::StrFormat("mse %.4f", r.test_mse()) : absl::StrFormat("%.4f", r.test_accuracy());
}

}  // namespace

std::string RenderEnergyTable(const v1::Job& job);

namespace {

std::string JobModels(const v1::Job& job) {
  const auto& models = job.spec().models();
  if (models.empty()) return absl::StrCat("model ", job.spec().model());
  return absl::StrCat(models.size() == 1 ? "model " : "models ", absl::StrJoin(models, ", "));
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv") return OutputFormat::kCsv;
  if (name == "wide") return OutputFormat::kWide;
  return absl::InvalidArgumentError(absl::StrCat("-o ", name, ": unknown format; use table, wide, json or csv"));
}

std::string FormatTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      s += cells[c];
      if (c + 1 < cells.size()) s += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    return s + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string RenderReport(const v1::Job& job, OutputFormat format, bool compare_mismatched,
                         v1::DeviceKind baseline_kind) {
  if (format == OutputFormat::kJson) return ToJson(job);
  bool refused = false;
  auto speedup = [&](const v1::Task& t, v1::Phase phase) -> std::string {
    const Versus v = RateVsBaseline(job, t, phase, baseline_kind, compare_mismatched);
    refused = refused || v.refused;
    return v.refused ? "n/a" : v.ratio ? absl::StrFormat("%.2fx", *v.ratio) : "-";
  };
  const std::vector<std::string> header = {"TASK",          "MODEL",     "DEVICE",   "BATCH",    "PHASE",
                                           "STEPS",         "P50_MS",    "P90_MS",   "P99_MS",
                                           "MEAN_MS",       "STDDEV_MS", "IQR_MS",   "P50_US_PER_SAMPLE",
                                           "SAMPLES_PER_S", "SPEEDUP",   "ACCURACY", "VALID"};
  std::vector<std::vector<std::string>> rows;
  for (const v1::Task& t : job.tasks()) {
    if (t.result().phases().empty()) {
      rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), "-", "-", "-", "-", "-",
                      "-", "-", "-", "-", "-", "-", TaskStateName(t.state()), "-"});
      continue;
    }
    for (const v1::PhaseResult& p : t.result().phases()) {
      const v1::TimingStats& s = p.stats();
      rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), PhaseName(p.phase()),
                      absl::StrCat(s.count()), Ms(s.p50_ns()), Ms(s.p90_ns()), Ms(s.p99_ns()), Ms(s.mean_ns()),
                      Ms(s.stddev_ns()), Ms(s.iqr_ns()), Num(PerSampleNs(s, s.p50_ns()) / 1e3, "%.2f"),
                      absl::StrFormat("%.1f", s.samples_per_second()), speedup(t, p.phase()),
                      p.phase() == v1::PHASE_INFER ? Quality(t.result()) : "-", p.valid() ? "yes" : "NO"});
    }
  }
  if (format == OutputFormat::kCsv) {
    const std::vector<std::string> csv_header = {"job_id",
                                                 "task_id",
                                                 "model",
                                                 "agent_id",
                                                 "device_id",
                                                 "device_kind",
                                                 "batch_size",
                                                 "state",
                                                 "phase",
                                                 "steps",
                                                 "items",
                                                 "p25_ns",
                                                 "p50_ns",
                                                 "p75_ns",
                                                 "p90_ns",
                                                 "p99_ns",
                                                 "mean_ns",
                                                 "stddev_ns",
                                                 "iqr_ns",
                                                 "min_ns",
                                                 "max_ns",
                                                 "p25_ns_per_sample",
                                                 "p50_ns_per_sample",
                                                 "p75_ns_per_sample",
                                                 "samples_per_second",
                                                 "speedup",
                                                 "test_accuracy",
                                                 "test_mse",
                                                 "valid",
                                                 "invalid_reasons",
                                                 "model_fingerprint",
                                                 "energy_source",
                                                 "energy_sensors",
                                                 "average_watts",
                                                 "energy_joules",
                                                 "joules_per_sample",
                                                 "energy_coverage",
                                                 "energy_short_window",
                                                 "net_energy_joules",
                                                 "usd_per_hour",
                                                 "usd_per_1000_samples",
                                                 "usd_per_epoch",
                                                 "electricity_usd_per_1000_samples",
                                                 "flops_per_sample",
                                                 "achieved_gflops",
                                                 "calibrated_gemm_gflops",
                                                 "blas"};
    std::vector<std::vector<std::string>> csv_rows;
    for (const v1::Task& t : job.tasks()) {
      for (const v1::PhaseResult& p : t.result().phases()) {
        const v1::TimingStats& s = p.stats();
        const EnergySummary e = SummarizeEnergy(t.result(), p.phase());
        const v1::CostResult* c = FindCost(t, p.phase());
        const v1::TaskResult& r = t.result();
        const double flops_per_sample =
            p.phase() == v1::PHASE_TRAIN ? r.train_flops_per_sample() : r.forward_flops_per_sample();
        csv_rows.push_back({job.id(),
                            t.id(),
                            TaskModel(job, t),
                            t.agent_id(),
                            t.device_id(),
                            DeviceKindName(t.device_kind()),
                            absl::StrCat(t.batch_size()),
                            TaskStateName(t.state()),
                            PhaseName(p.phase()),
                            absl::StrCat(s.count()),
                            absl::StrCat(s.items()),
                            absl::StrCat(s.p25_ns()),
                            absl::StrCat(s.p50_ns()),
                            absl::StrCat(s.p75_ns()),
                            absl::StrCat(s.p90_ns()),
                            absl::StrCat(s.p99_ns()),
                            absl::StrCat(s.mean_ns()),
                            absl::StrCat(s.stddev_ns()),
                            absl::StrCat(s.iqr_ns()),
                            absl::StrCat(s.min_ns()),
                            absl::StrCat(s.max_ns()),
                            absl::StrCat(PerSampleNs(s, s.p25_ns())),
                            absl::StrCat(PerSampleNs(s, s.p50_ns())),
                            absl::StrCat(PerSampleNs(s, s.p75_ns())),
                            absl::StrCat(s.samples_per_second()),
                            speedup(t, p.phase()),
                            absl::StrCat(r.test_accuracy()),
                            absl::StrCat(r.test_mse()),
                            p.valid() ? "true" : "false",
                            absl::StrJoin(p.invalid_reasons(), "; "),
                            r.environment().model_fingerprint(),
                            e.ok ? PowerSourceName(e.source) : "",
                            absl::StrCat(e.sensors),
                            absl::StrCat(e.average_watts),
                            absl::StrCat(e.joules),
                            absl::StrCat(e.joules_per_sample),
                            absl::StrCat(e.coverage),
                            e.short_window ? "true" : "false",
                            e.has_baseline ? absl::StrCat(e.net_joules) : "",
                            c ? absl::StrCat(c->usd_per_hour()) : "",
                            c ? absl::StrCat(c->usd_per_1000_samples()) : "",
                            c ? absl::StrCat(c->usd_per_epoch()) : "",
                            c ? absl::StrCat(c->electricity_usd_per_1000_samples()) : "",
                            absl::StrCat(flops_per_sample),
                            absl::StrCat(AchievedGflops(t, p)),
                            absl::StrCat(r.calibration().gemm_gflops()),
                            r.environment().blas()});
      }
    }
    return CsvLines(absl::StrJoin(csv_header, ","), csv_rows);
  }
  std::string out = absl::StrCat("Job ", job.id(), " \"", job.spec().name(), "\": ", JobModels(job), " on ",
                                 job.spec().dataset(), ", seed ", job.spec().seed(), " -- ", JobStateName(job.state()),
                                 "\n");
  if (!job.error().empty()) absl::StrAppend(&out, "error: ", job.error(), "\n");
  absl::StrAppend(&out, "\n", FormatTable(header, rows), "\n");
  absl::StrAppend(&out, "SPEEDUP is samples/s relative to the same model and batch size on the baseline (",
                  DeviceKindName(baseline_kind), ", else the first result).\n");
  if (refused) {
    absl::StrAppend(&out,
                    "n/a: model fingerprints differ from the baseline's (architecture, initial weights or data); "
                    "compare anyway with --compare-anyway.\n");
  }
  for (const v1::Task& t : job.tasks()) {
    for (const v1::PhaseResult& p : t.result().phases()) {
      if (!p.valid()) {
        absl::StrAppend(&out, "INVALID ", t.id(), " ", PhaseName(p.phase()), ": ",
                        absl::StrJoin(p.invalid_reasons(), "; "), "\n");
      }
    }
  }
  absl::StrAppend(&out, "\n", RenderEnergyTable(job));
  absl::StrAppend(&out, "\n", RenderRoofline(job));
  if (std::any_of(job.tasks().begin(), job.tasks().end(), [](const v1::Task& t) { return t.result().layers_size() > 0; })) {
    absl::StrAppend(&out, "\n", RenderLayers(job, OutputFormat::kTable, baseline_kind));
  }
  for (const v1::Task& t : job.tasks()) {
    const v1::TaskResult& r = t.result();
    absl::StrAppend(&out, t.id(), ": ", TaskStateName(t.state()));
    if (!t.error().empty()) absl::StrAppend(&out, " (", t.error(), ")");
    if (r.partial()) absl::StrAppend(&out, " PARTIAL: stopped before its end; the phases hold what was measured until then");
    if (t.state() == v1::TASK_STATE_SUCCEEDED || !r.phases().empty()) {
      const v1::RunEnvironment& e = r.environment();
      if (!r.input_note().empty()) absl::StrAppend(&out, " [", r.input_note(), "]");
      if (r.qpu().qubits() > 0) {
        const v1::QpuRun& q = r.qpu();
        absl::StrAppendFormat(&out, " [simulated: %d qubits, %s, %d gates in %d passes per circuit, state %.1f MiB%s]",
                              q.qubits(), q.precision(), q.gates_per_circuit(), q.passes_per_circuit(),
                              static_cast<double>(q.state_bytes()) / (1 << 20),
                              q.gradient_method().empty() ? "" : ", gradients: " + q.gradient_method());
      }
      absl::StrAppendFormat(&out,
                            "; test %s %s after %.2f epochs (%d steps incl. warm-up), final loss %.4f; "
                            "phases: data load %.2f s, preprocess %.3f s, warm-up %.3f s, train %.3f s, evaluate %.3f s"
                            "\n    %s, %d threads, torch %s, BLAS %s\n    fingerprint %s, "
                            "%d samples stored, attempt %d",
                            r.test_mse() > 0 ? "mse" : "accuracy",
                            r.test_mse() > 0 ? Num(r.test_mse(), "%.4f") : Num(r.test_accuracy(), "%.4f"),
                            r.epochs_seen(), r.train_steps_total(), r.final_train_loss(), r.data_load_seconds(),
                            r.preprocess_seconds(), r.warmup_seconds(), r.train_seconds(), r.evaluate_seconds(),
                            e.device_model(), e.threads(), e.torch_version(), e.blas(), e.model_fingerprint(),
                            r.samples_stored(), t.attempt());
      if (!e.executor().empty()) {
        absl::StrAppend(&out, "\n    executor ", e.executor(), " on ", e.torch_device().empty() ? "cpu" : e.torch_device(),
                        ", architecture ", e.architecture_fingerprint());
      }
      if (r.device_memory_peak_bytes() > 0) {
        absl::StrAppendFormat(&out, ", device memory peak %.1f MiB",
                              static_cast<double>(r.device_memory_peak_bytes()) / (1 << 20));
      }
    }
    out += "\n";
  }
  return out;
}

std::string RenderEnergyTable(const v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  bool any_short = false, any_baseline = false;
  for (const v1::Task& t : job.tasks()) {
    for (const v1::PhaseResult& p : t.result().phases()) {
      const EnergySummary e = SummarizeEnergy(t.result(), p.phase());
      const v1::CostResult* c = FindCost(t, p.phase());
      if (!e.ok && c == nullptr) continue;
      any_short = any_short || e.short_window;
      any_baseline = any_baseline || e.has_baseline;
      if (!e.assumptions.empty() && std::find(notes.begin(), notes.end(), e.assumptions) == notes.end()) {
        notes.push_back(e.assumptions);
      }
      rows.push_back({t.id(), PhaseName(p.phase()), SourceCell(e), e.ok ? Num(e.average_watts, "%.1f") : "-",
                      e.ok ? Num(e.joules, "%.2f") : "-", e.ok ? Num(e.joules_per_sample * 1e3, "%.4f") : "-",
                      e.ok ? Num(e.coverage * 100, "%.0f%%") : "-", e.has_baseline ? Num(e.net_joules, "%.2f") : "-",
                      c && c->usd_per_hour() > 0 ? Num(c->usd_per_1000_samples(), "%.3g") : "-",
                      c && c->usd_per_epoch() > 0 ? Num(c->usd_per_epoch(), "%.3g") : "-",
                      c && c->electricity_usd() > 0 ? Num(c->electricity_usd_per_1000_samples(), "%.3g") : "-"});
    }
  }
  if (rows.empty()) return "No power readings or cost rates for this job.\n";
  std::string out = FormatTable({"TASK", "PHASE", "SOURCE", "AVG_W", "ENERGY_J", "J_PER_1K_SAMPLES", "COVERAGE",
                                 "NET_J", "USD_PER_1K", "USD_PER_EPOCH", "ELEC_USD_PER_1K"},
                                rows);
  for (const std::string& n : notes) absl::StrAppend(&out, "* ", n, "\n");
  if (any_short) absl::StrAppend(&out, "! window shorter than the sensor's update period: not exact\n");
  if (any_baseline) absl::StrAppend(&out, "NET_J = energy minus the idle baseline measured before the task\n");
  absl::StrAppend(&out,
                  "Energy per window of each phase: counter delta or trapezoid of sampled power; "
                  "J_PER_1K_SAMPLES is joules per 1,000 samples; costs in USD.\n");
  for (const v1::Task& t : job.tasks()) {
    for (const auto& c : t.result().cost()) {
      if (c.usd_per_hour() > 0) {
        absl::StrAppend(&out, "Cost rate of ", t.id(), ": ", Num(c.usd_per_hour(), "%.4g"), " USD/h (", c.rate_source(),
                        ")\n");
        break;
      }
    }
  }
  return out;
}

std::string RenderStudyTable(const v1::Job& job, v1::DeviceKind baseline_kind, bool compare_mismatched) {
  std::vector<std::vector<std::string>> rows;
  bool cpu_default = false, refused = false;
  // Speedup as the studies gave it: a percentage of the baseline device's
  // rate (100% = as fast as the baseline, 1200% = twelve times faster).
  auto percent = [&](const v1::Task& t, v1::Phase phase) -> std::string {
    const Versus v = RateVsBaseline(job, t, phase, baseline_kind, compare_mismatched);
    refused = refused || v.refused;
    return v.refused ? "n/a" : v.ratio ? absl::StrFormat("%.0f%%", 100 * *v.ratio) : "-";
  };
  for (const v1::Task& t : job.tasks()) {
    const v1::PhaseResult* train = FindPhase(t, v1::PHASE_TRAIN);
    const v1::PhaseResult* infer = FindPhase(t, v1::PHASE_INFER);
    if (train == nullptr && infer == nullptr) continue;
    const double train_s = train ? train->stats().window_seconds() : 0;
    const double test_s = infer ? infer->stats().window_seconds() : 0;
    bool from_study = false;
    const double nominal = NominalWatts(t.device_kind(), &from_study);
    cpu_default = cpu_default || !from_study;
    const EnergySummary e = SummarizeEnergy(t.result(), v1::PHASE_UNSPECIFIED);
    const bool valid = (!train || train->valid()) && (!infer || infer->valid());
    rows.push_back({TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), Num(train_s, "%.3f"),
                    Num(test_s, "%.3f"), percent(t, v1::PHASE_TRAIN), percent(t, v1::PHASE_INFER),
                    Quality(t.result()), absl::StrCat(Num(nominal, "%.0f"), from_study ? "" : "+"),
                    Num(nominal * (train_s + test_s), "%.1f"), e.ok ? Num(e.average_watts, "%.1f") : "-",
                    e.ok ? Num(e.joules, "%.1f") : "-", SourceCell(e), valid ? "yes" : "NO"});
  }
  std::string out = absl::StrCat("Study table for ", job.id(), " (", JobModels(job), ")\n");
  absl::StrAppend(&out, FormatTable({"MODEL", "DEVICE", "BATCH", "TRAIN_S", "TEST_S", "TRAIN_VS_BASE", "TEST_VS_BASE",
                                     "QUALITY", "NOMINAL_W", "E=PxT_J", "AVG_W", "ENERGY_J", "SOURCE", "VALID"},
                                    rows));
  absl::StrAppend(&out, "TRAIN_S and TEST_S are the measured windows (training after warm-up; the test set). ",
                  "*_VS_BASE is samples/s as a percentage of the same model and batch size on ",
                  DeviceKindName(baseline_kind), " (100% = as fast).\n");
  absl::StrAppend(&out, "QUALITY is test accuracy (or reconstruction MSE) after the run.\n");
  if (refused) absl::StrAppend(&out, "n/a: model fingerprints differ; compare anyway with --compare-anyway.\n");
  absl::StrAppend(&out, "E=PxT_J is the study's method: nominal watts x (train + test seconds), not a measurement.\n");
  if (cpu_default) absl::StrAppend(&out, "+ the study gave no CPU figure: 150 W is hetbench's default.\n");
  absl::StrAppend(&out, "AVG_W and ENERGY_J are hetbench's, over the same windows, from SOURCE (* = modeled).\n");
  return out;
}

std::string RenderRoofline(const v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> devices;
  for (const v1::Task& t : job.tasks()) {
    const v1::TaskResult& r = t.result();
    if (r.forward_flops_per_sample() <= 0) continue;
    const v1::Calibration& cal = r.calibration();
    const std::string device = absl::StrCat(t.agent_id(), "/", t.device_id());
    if (cal.gemm_gflops() > 0 && std::find(devices.begin(), devices.end(), device) == devices.end()) {
      devices.push_back(device);
    }
    for (const v1::PhaseResult& p : r.phases()) {
      const double achieved = AchievedGflops(t, p);
      const double per_sample =
          p.phase() == v1::PHASE_TRAIN ? r.train_flops_per_sample() : r.forward_flops_per_sample();
      rows.push_back({t.id(), TaskModel(job, t), PhaseName(p.phase()), Num(per_sample / 1e6, "%.2f"),
                      Num(achieved, "%.2f"), cal.gemm_gflops() > 0 ? Num(cal.gemm_gflops(), "%.1f") : "-",
                      cal.gemm_gflops() > 0 ? Num(100 * achieved / cal.gemm_gflops(), "%.1f%%") : "-"});
    }
  }
  if (rows.empty()) return "";
  std::string out = FormatTable(
      {"TASK", "MODEL", "PHASE", "MFLOP_PER_SAMPLE", "ACHIEVED_GFLOPS", "PEAK_GEMM_GFLOPS", "OF_PEAK"}, rows);
  absl::StrAppend(&out,
                  "FLOPs per sample are counted by LibTorch's profiler over one inference forward (matrix products, "
                  "convolutions); training counts 3x forward. PEAK is the device's calibrated SGEMM rate.\n");
  for (const std::string& device : devices) {
    for (const v1::Task& t : job.tasks()) {
      if (absl::StrCat(t.agent_id(), "/", t.device_id()) != device || t.result().calibration().gemm_gflops() <= 0) {
        continue;
      }
      const v1::Calibration& c = t.result().calibration();
      absl::StrAppendFormat(&out,
                            "Calibration of %s: SGEMM %d^3 %.1f GFLOP/s, memory copy %.1f GB/s (%.1f s); BLAS %s; "
                            "kernel check: %s\n",
                            device, c.gemm_size(), c.gemm_gflops(), c.memory_gbytes_per_second(), c.seconds(), c.blas(),
                            c.blas_check().empty() ? "-" : c.blas_check());
      break;
    }
  }
  return out;
}

std::string RenderLayers(const v1::Job& job, OutputFormat format, v1::DeviceKind baseline_kind) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  for (const v1::Task& t : job.tasks()) {
    const v1::TaskResult& r = t.result();
    if (r.layers_size() == 0) continue;
    const v1::Task* base = Baseline(job, t, baseline_kind);
    const bool compare = base && base != &t && base->result().layers_size() == r.layers_size() && SameFingerprint(t, *base);
    double total = 0;
    for (const auto& l : r.layers()) total += l.forward().p50_ns() + l.backward().p50_ns();
    for (const v1::LayerTiming& l : r.layers()) {
      const double own = l.forward().p50_ns() + l.backward().p50_ns();
      std::string vs = "-";
      if (compare) {
        const v1::LayerTiming& b = base->result().layers(l.index());
        if (l.inference().p50_ns() > 0) vs = Num(b.inference().p50_ns() / l.inference().p50_ns(), "%.2fx");
      }
      if (format == OutputFormat::kCsv) {
        rows.push_back({job.id(), t.id(), TaskModel(job, t), t.agent_id(), t.device_id(),
                        DeviceKindName(t.device_kind()), absl::StrCat(t.batch_size()), absl::StrCat(l.index()), l.name(),
                        absl::StrCat(l.forward().p25_ns()), absl::StrCat(l.forward().p50_ns()),
                        absl::StrCat(l.forward().p75_ns()), absl::StrCat(l.backward().count()),
                        absl::StrCat(l.backward().p25_ns()), absl::StrCat(l.backward().p50_ns()),
                        absl::StrCat(l.backward().p75_ns()), absl::StrCat(l.inference().p25_ns()),
                        absl::StrCat(l.inference().p50_ns()), absl::StrCat(l.inference().p75_ns()),
                        absl::StrCat(l.forward_flops_per_sample())});
        continue;
      }
      rows.push_back(
          {t.id(), DeviceLabel(t), absl::StrCat(t.batch_size()), absl::StrCat(l.index()), l.name(),
           absl::StrFormat("%s [%s-%s]", Ms(l.forward().p50_ns()), Ms(l.forward().p25_ns()), Ms(l.forward().p75_ns())),
           l.backward().count() > 0 ? absl::StrFormat("%s [%s-%s]", Ms(l.backward().p50_ns()),
                                                      Ms(l.backward().p25_ns()), Ms(l.backward().p75_ns()))
                                    : "-",
           absl::StrFormat("%s [%s-%s]", Ms(l.inference().p50_ns()), Ms(l.inference().p25_ns()),
                           Ms(l.inference().p75_ns())),
           total > 0 ? Num(100 * own / total, "%.1f%%") : "-", Num(l.forward_flops_per_sample() / 1e6, "%.3f"), vs});
    }
  }
  if (format == OutputFormat::kCsv) {
    return CsvLines(
        "job_id,task_id,model,agent_id,device_id,device_kind,batch_size,layer,name,forward_p25_ns,forward_p50_ns,"
        "forward_p75_ns,backward_count,backward_p25_ns,backward_p50_ns,backward_p75_ns,inference_p25_ns,"
        "inference_p50_ns,inference_p75_ns,forward_flops_per_sample",
        rows);
  }
  if (rows.empty()) return "No per-layer timings in this job (submit with --layers, or layers: {enabled: true}).\n";
  std::string out = absl::StrCat("Per-layer times for ", job.id(), " (p50 [p25-p75] ms per batch)\n");
  absl::StrAppend(&out, FormatTable({"TASK", "DEVICE", "BATCH", "#", "LAYER", "FORWARD_MS", "BACKWARD_MS",
                                     "INFERENCE_MS", "TRAIN_SHARE", "MFLOP_PER_SAMPLE", "INFER_SPEEDUP"},
                                    rows));
  absl::StrAppend(&out,
                  "Each layer is timed with a device synchronisation before and after it. BACKWARD is its share of "
                  "the backward pass (gradient of its output to gradient of its input); '-' where it has none. "
                  "INFER_SPEEDUP compares with the same layer on ",
                  DeviceKindName(baseline_kind), ".\n");
  return out;
}

std::string RenderJobList(const std::vector<v1::Job>& jobs, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    v1::ListJobsResponse r;
    for (const auto& j : jobs) *r.add_jobs() = j;
    return ToJson(r);
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& j : jobs) {
    int done = 0;
    for (const auto& t : j.tasks()) done += IsTerminal(t.state()) ? 1 : 0;
    rows.push_back({j.id(), j.spec().name(),
                    j.spec().models().empty() ? j.spec().model() : absl::StrJoin(j.spec().models(), "+"),
                    JobStateName(j.state()),
                    absl::StrCat(done, "/", j.tasks_size()), TimeString(j.created_unix_seconds())});
  }
  const std::vector<std::string> header = {"ID", "NAME", "MODEL", "STATE", "TASKS", "CREATED"};
  if (format == OutputFormat::kCsv) return CsvLines("id,name,model,state,tasks,created", rows);
  return FormatTable(header, rows);
}

std::string RenderJob(const v1::Job& job, OutputFormat format) {
  if (format == OutputFormat::kJson) return ToJson(job);
  std::string out = absl::StrCat("id: ", job.id(), "\nstate: ", JobStateName(job.state()),
                                 "\ncreated: ", TimeString(job.created_unix_seconds()),
                                 "\nfinished: ", TimeString(job.finished_unix_seconds()), "\n");
  if (!job.error().empty()) absl::StrAppend(&out, "error: ", job.error(), "\n");
  absl::StrAppend(&out, "spec (effective, defaults filled in):\n");
  for (absl::string_view line : absl::StrSplit(JobSpecToYaml(job.spec()), '\n')) {
    if (!line.empty()) absl::StrAppend(&out, "  ", line, "\n");
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Task& t : job.tasks()) {
    std::string note = t.error();
    if (t.state() == v1::TASK_STATE_QUEUED && !t.pending_reason().empty()) {
      note = note.empty() ? t.pending_reason() : absl::StrCat(t.pending_reason(), "; before: ", note);
    }
    if (t.resumes() > 0) {
      const std::string resumed = absl::StrCat("resumed after ", t.resumes(), " broken stream(s)");
      note = note.empty() ? resumed : absl::StrCat(note, "; ", resumed);
    }
    rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), TaskStateName(t.state()),
                    absl::StrCat(t.attempt()), note.empty() ? "-" : note});
  }
  absl::StrAppend(&out, "tasks:\n",
                  FormatTable({"TASK", "MODEL", "DEVICE", "BATCH", "STATE", "ATTEMPT", "NOTE"}, rows));
  return out;
}

std::string RenderAgents(const std::vector<v1::AgentInfo>& agents, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    v1::ListAgentsResponse r;
    for (const auto& a : agents) *r.add_agents() = a;
    return ToJson(r);
  }
  const bool wide = format == OutputFormat::kWide || format == OutputFormat::kCsv;
  std::vector<std::vector<std::string>> rows;
  for (const v1::AgentInfo& a : agents) {
    for (const v1::Device& d : a.devices()) {
      const bool busy =
          std::find(a.busy_device_ids().begin(), a.busy_device_ids().end(), d.id()) != a.busy_device_ids().end();
      const std::string executors = d.executors().empty() ? "torch" : absl::StrJoin(d.executors(), ",");
      std::vector<std::string> row = {a.agent_id(), d.id(), DeviceKindName(d.kind()), d.model(),
                                      absl::StrCat(d.cores()),
                                      absl::StrFormat("%.1f", static_cast<double>(d.memory_bytes()) / (1 << 30)),
                                      executors};
      if (wide) {
        std::vector<std::string> details;
        for (const char* key : {"uuid", "compute_capability", "power_limit_watts", "python_runner", "bluefield",
                                "found", "blas"}) {
          if (auto it = d.attributes().find(key); it != d.attributes().end()) {
            details.push_back(absl::StrCat(key, "=", it->second));
          }
        }
        row.insert(row.end(), {d.driver().empty() ? "-" : d.driver(),
                               d.power_sensors().empty() ? "-" : absl::StrJoin(d.power_sensors(), ","),
                               absl::StrJoin(d.isa_flags(), " "), absl::StrJoin(details, "; ")});
      }
      std::string state = busy ? "busy" : "idle";
      if (a.resume_deadline_unix_seconds() > 0) state += ", disconnected";
      row.insert(row.end(), {state, a.version()});
      rows.push_back(std::move(row));
    }
  }
  std::vector<std::string> header = {"AGENT", "DEVICE", "KIND", "MODEL", "CORES", "MEM_GIB", "EXECUTORS"};
  if (wide) header.insert(header.end(), {"DRIVER", "POWER_SENSORS", "ISA", "DETAILS"});
  header.insert(header.end(), {"STATE", "VERSION"});
  if (format == OutputFormat::kCsv) {
    return CsvLines("agent,device,kind,model,cores,mem_gib,executors,driver,power_sensors,isa,details,state,version",
                    rows);
  }
  std::string out = FormatTable(header, rows);
  // Kinds each agent looked for and did not offer, with the reason.
  std::vector<std::vector<std::string>> absent;
  for (const v1::AgentInfo& a : agents) {
    for (const v1::AbsentDevice& d : a.absent()) absent.push_back({a.agent_id(), DeviceKindName(d.kind()), d.reason()});
  }
  if (!absent.empty()) absl::StrAppend(&out, "\nnot offered:\n", FormatTable({"AGENT", "KIND", "WHY"}, absent));
  // Agents whose stream ended while they ran tasks: the tasks wait for them.
  std::vector<std::vector<std::string>> away;
  for (const v1::AgentInfo& a : agents) {
    if (a.resume_deadline_unix_seconds() <= 0) continue;
    away.push_back({a.agent_id(), a.busy_device_ids().empty() ? "-" : absl::StrJoin(a.busy_device_ids(), ","),
                    TimeString(a.resume_deadline_unix_seconds()), a.disconnect_reason()});
  }
  if (!away.empty()) {
    absl::StrAppend(&out, "\ndisconnected; their running tasks are re-queued unless they resume by the deadline:\n",
                    FormatTable({"AGENT", "DEVICES", "DEADLINE", "WHY"}, away));
  }
  return out;
}

std::vector<std::string> ProgressLines(const v1::Job& job, int width) {
  std::vector<std::string> lines;
  for (const v1::Task& t : job.tasks()) {
    double frac = 0;
    std::string what;
    if (t.state() == v1::TASK_STATE_RUNNING && t.total_steps() > 0) {
      frac = std::min(1.0, static_cast<double>(t.step()) / static_cast<double>(t.total_steps()));
      what = absl::StrCat(PhaseName(t.phase()), " ", t.step(), "/", t.total_steps());
    } else if (t.state() == v1::TASK_STATE_RUNNING) {
      what = "starting";
    } else {
      what = TaskStateName(t.state());
      if (t.state() == v1::TASK_STATE_SUCCEEDED) frac = 1.0;
      if (t.state() == v1::TASK_STATE_QUEUED && !t.error().empty()) what += " (" + t.error() + ")";
    }
    const int filled = static_cast<int>(frac * width + 0.5);
    lines.push_back(absl::StrFormat("%-16s %-11s b=%-5d [%s%s] %3.0f%% %s", t.id(), TaskModel(job, t), t.batch_size(),
                                    std::string(filled, '#'),
                                    std::string(width - filled, '.'), frac * 100, what));
  }
  return lines;
}

}  // namespace hetbench::client
