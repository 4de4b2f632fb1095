#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/energy.h"
#include "common/names.h"
#include "common/spec_yaml.h"
#include "common/validate_spec.h"
#include "report/render.h"
#include "report/render/common.h"
#include "report/render/parallel.h"
#include "report/render/serving.h"
#include "report/render/validation.h"

namespace hetbench::report {

using namespace render;  // NOLINT: the shared lookups and formats of every view

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv") return OutputFormat::kCsv;
  if (name == "wide") return OutputFormat::kWide;
  if (name == "yaml") return OutputFormat::kYaml;
  return absl::InvalidArgumentError(absl::StrCat("-o ", name, ": unknown format; use table, wide, json, csv or yaml"));
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

namespace {

// SPEEDUP cells against the baseline kind; remembers whether any was refused
// (fingerprints differ), which the report then explains.
class Speedups {
 public:
  Speedups(const v1::Job& job, v1::DeviceKind baseline_kind, bool compare_mismatched)
      : job_(job), baseline_kind_(baseline_kind), compare_mismatched_(compare_mismatched) {}
  std::string operator()(const v1::Task& t, v1::Phase phase) {
    const Versus v = RateVsBaseline(job_, t, phase, baseline_kind_, compare_mismatched_);
    refused_ = refused_ || v.refused;
    return v.refused ? "n/a" : v.ratio ? absl::StrFormat("%.2fx", *v.ratio) : "-";
  }
  bool refused() const { return refused_; }
  /// The same as a plain number for CSV ("" when refused or without a baseline).
  std::string Csv(const v1::Task& t, v1::Phase phase) {
    const Versus v = RateVsBaseline(job_, t, phase, baseline_kind_, compare_mismatched_);
    refused_ = refused_ || v.refused;
    return v.refused || !v.ratio ? "" : CsvNumber(*v.ratio);
  }

 private:
  const v1::Job& job_;
  const v1::DeviceKind baseline_kind_;
  const bool compare_mismatched_;
  bool refused_ = false;
};

// One CSV row per task and phase, every figure unrounded.
std::string ReportCsv(const v1::Job& job, Speedups& speedup) {
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
                                               "energy_probe_seconds",
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
                          CsvNumber(s.p25_ns()),
                          CsvNumber(s.p50_ns()),
                          CsvNumber(s.p75_ns()),
                          CsvNumber(s.p90_ns()),
                          CsvNumber(s.p99_ns()),
                          CsvNumber(s.mean_ns()),
                          CsvNumber(s.stddev_ns()),
                          CsvNumber(s.iqr_ns()),
                          CsvNumber(s.min_ns()),
                          CsvNumber(s.max_ns()),
                          CsvNumber(PerSampleNs(s, s.p25_ns())),
                          CsvNumber(PerSampleNs(s, s.p50_ns())),
                          CsvNumber(PerSampleNs(s, s.p75_ns())),
                          CsvNumber(s.samples_per_second()),
                          speedup.Csv(t, p.phase()),
                          CsvNumber(r.test_accuracy()),
                          CsvNumber(r.test_mse()),
                          p.valid() ? "true" : "false",
                          absl::StrJoin(p.invalid_reasons(), "; "),
                          r.environment().model_fingerprint(),
                          e.ok ? PowerSourceName(e.source) : "",
                          absl::StrCat(e.sensors),
                          CsvNumber(e.average_watts),
                          CsvNumber(e.joules),
                          CsvNumber(e.joules_per_sample),
                          CsvNumber(e.coverage),
                          e.short_window ? "true" : "false",
                          CsvNumber(e.probe_seconds),
                          e.has_baseline ? CsvNumber(e.net_joules) : "",
                          c ? CsvNumber(c->usd_per_hour()) : "",
                          c ? CsvNumber(c->usd_per_1000_samples()) : "",
                          c ? CsvNumber(c->usd_per_epoch()) : "",
                          c ? CsvNumber(c->electricity_usd_per_1000_samples()) : "",
                          CsvNumber(flops_per_sample),
                          CsvNumber(AchievedGflops(t, p)),
                          CsvNumber(r.calibration().gemm_gflops()),
                          r.environment().blas()});
    }
  }
  return CsvLines(absl::StrJoin(csv_header, ","), csv_rows);
}

// The line under the tables for one task: its state, what ran and how.
void AppendTaskFooter(const v1::Task& t, std::string& out) {
  const v1::TaskResult& r = t.result();
  absl::StrAppend(&out, t.id(), ": ", TaskStateName(t.state()));
  if (!t.error().empty()) absl::StrAppend(&out, " (", t.error(), ")");
  if (r.partial()) absl::StrAppend(&out, " PARTIAL: stopped before its end; the phases hold what was measured until then");
  if (r.has_serving() && (t.state() == v1::TASK_STATE_SUCCEEDED || !r.phases().empty())) {
    absl::StrAppend(&out, ServingFooter(r), "\n");
    return;
  }
  if (t.state() == v1::TASK_STATE_SUCCEEDED || !r.phases().empty()) {
    const v1::RunEnvironment& e = r.environment();
    if (!r.input_note().empty()) absl::StrAppend(&out, " [", r.input_note(), "]");
    if (r.qpu().qubits() > 0) {
      const v1::QpuRun& q = r.qpu();
      absl::StrAppendFormat(&out, " [simulated: %d qubits, %s, %d gates in %d passes per circuit, state %.1f MiB%s]",
                            q.qubits(), q.precision(), q.gates_per_circuit(), q.passes_per_circuit(),
                            static_cast<double>(q.state_bytes()) / (1 << 20),
                            q.gradient_method().empty() ? "" : ", gradients: " + q.gradient_method());
      if (!q.backend().empty()) {
        absl::StrAppend(&out, " [", q.backend(), " backend",
                        q.kernel_isa().empty() ? "" : absl::StrCat(", ", q.kernel_isa(), " kernels"),
                        q.fused_block_qubits() > 0 ? absl::StrCat(", blocks of <= ", q.fused_block_qubits(), " qubits")
                                                   : "",
                        "]");
      }
    }
    absl::StrAppendFormat(&out,
                          "; %s after %.2f epochs (%d steps incl. warm-up), final loss %.4f; "
                          "phases: data load %.2f s, preprocess %.3f s, warm-up %.3f s, train %.3f s, evaluate %.3f s"
                          "\n    %s, %d threads, torch %s, BLAS %s\n    fingerprint %s, "
                          "%d samples stored, attempt %d",
                          // A task that evaluated nothing (cancelled in training) has no quality figure.
                          FindPhase(t, v1::PHASE_INFER) == nullptr ? std::string("no test evaluation")
                          : r.test_mse() > 0 ? absl::StrCat("test mse ", Num(r.test_mse(), "%.4f"))
                                             : absl::StrCat("test accuracy ", Num(r.test_accuracy(), "%.4f")),
                          r.epochs_seen(), r.train_steps_total(), r.final_train_loss(), r.data_load_seconds(),
                          r.preprocess_seconds(), r.warmup_seconds(), r.train_seconds(), r.evaluate_seconds(),
                          e.device_model(), e.threads(), e.torch_version(), e.blas(), e.model_fingerprint(),
                          r.samples_stored(), t.attempt());
    if (!e.threads_note().empty()) absl::StrAppend(&out, "\n    threads: ", e.threads_note());
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

}  // namespace

std::string RenderReport(const v1::Job& job, OutputFormat format, bool compare_mismatched,
                         v1::DeviceKind baseline_kind) {
  if (format == OutputFormat::kJson) return ToJson(job);
  if (IsValidate(job.spec())) return RenderValidation(job, format);  // verdicts, not timings
  Speedups speedup(job, baseline_kind, compare_mismatched);
  if (format == OutputFormat::kCsv) return ReportCsv(job, speedup);
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
      if (p.phase() == v1::PHASE_SERVE) {  // latencies: nearest-rank, and the rate over the run's window
        const v1::ServingRun& sv = t.result().serving();
        rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), PhaseName(p.phase()),
                        absl::StrCat(s.count()), Ms(static_cast<double>(sv.latency_p50_ns())),
                        Ms(static_cast<double>(sv.latency_p90_ns())), Ms(static_cast<double>(sv.latency_p99_ns())),
                        Ms(s.mean_ns()), Ms(s.stddev_ns()), Ms(s.iqr_ns()), "-",
                        absl::StrFormat("%.1f", sv.samples_per_second()), "-", "-", p.valid() ? "yes" : "NO"});
        continue;
      }
      if (p.phase() == v1::PHASE_TTFT || p.phase() == v1::PHASE_TPOT) {  // per request: the exact percentiles
        const v1::GenerativeRun& g = t.result().serving().generative();
        const bool ttft = p.phase() == v1::PHASE_TTFT;
        rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), PhaseName(p.phase()),
                        absl::StrCat(s.count()), Ms(static_cast<double>(ttft ? g.ttft_p50_ns() : g.tpot_p50_ns())),
                        Ms(static_cast<double>(ttft ? g.ttft_p90_ns() : g.tpot_p90_ns())),
                        Ms(static_cast<double>(ttft ? g.ttft_p99_ns() : g.tpot_p99_ns())), Ms(s.mean_ns()),
                        Ms(s.stddev_ns()), Ms(s.iqr_ns()), "-", "-", "-", "-", p.valid() ? "yes" : "NO"});
        continue;
      }
      rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), PhaseName(p.phase()),
                      absl::StrCat(s.count()), Ms(s.p50_ns()), Ms(s.p90_ns()), Ms(s.p99_ns()), Ms(s.mean_ns()),
                      Ms(s.stddev_ns()), Ms(s.iqr_ns()), Num(PerSampleNs(s, s.p50_ns()) / 1e3, "%.2f"),
                      absl::StrFormat("%.1f", s.samples_per_second()), speedup(t, p.phase()),
                      p.phase() == v1::PHASE_INFER ? Quality(t.result()) : "-", p.valid() ? "yes" : "NO"});
    }
  }
  std::string out = absl::StrCat("Job ", job.id(), " \"", job.spec().name(), "\": ", JobModels(job), " on ",
                                 job.spec().dataset(), ", seed ", job.spec().seed(), " -- ", JobStateName(job.state()),
                                 "\n");
  if (!job.error().empty()) absl::StrAppend(&out, "error: ", job.error(), "\n");
  absl::StrAppend(&out, "\n", FormatTable(header, rows), "\n");
  absl::StrAppend(&out, "SPEEDUP is samples/s relative to the same model and batch size on the baseline (",
                  DeviceKindName(baseline_kind), ", else the first result).\n");
  if (speedup.refused()) {
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
  if (std::string s = RenderServing(job, OutputFormat::kTable); !s.empty()) absl::StrAppend(&out, "\n", s);
  absl::StrAppend(&out, "\n", RenderEnergyTable(job));
  absl::StrAppend(&out, "\n", RenderRoofline(job));
  if (std::string s = RenderScaling(job, OutputFormat::kTable); !s.empty()) absl::StrAppend(&out, "\n", s);
  if (std::string s = RenderSplit(job, OutputFormat::kTable); !s.empty()) absl::StrAppend(&out, "\n", s);
  if (std::any_of(job.tasks().begin(), job.tasks().end(), [](const v1::Task& t) { return t.result().layers_size() > 0; })) {
    absl::StrAppend(&out, "\n", RenderLayers(job, OutputFormat::kTable, baseline_kind));
  }
  for (const v1::Task& t : job.tasks()) AppendTaskFooter(t, out);
  // The one command that reruns it; a rerun compares when its fingerprints match the ones above.
  absl::StrAppend(&out, "\nRerun: hetbench get job ", job.id(),
                  " -o yaml > spec.yaml && hetbench submit -f spec.yaml --wait  (comparable when the fingerprints "
                  "above match; then hetbench compare ",
                  job.id(), " NEW_JOB)\n");
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

namespace {
// A layer's resolved energy per sample, or "" (unknown or too short to resolve).
std::string LayerJoulesCell(const v1::TaskResult& r, int32_t layer, v1::Phase phase) {
  for (const v1::LayerEnergy& e : r.layer_energy()) {
    if (e.layer() == layer && e.phase() == phase && e.resolved()) return CsvNumber(e.joules_per_sample());
  }
  return "";
}
}  // namespace

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
                        CsvNumber(l.forward().p25_ns()), CsvNumber(l.forward().p50_ns()),
                        CsvNumber(l.forward().p75_ns()), absl::StrCat(l.backward().count()),
                        CsvNumber(l.backward().p25_ns()), CsvNumber(l.backward().p50_ns()),
                        CsvNumber(l.backward().p75_ns()), CsvNumber(l.inference().p25_ns()),
                        CsvNumber(l.inference().p50_ns()), CsvNumber(l.inference().p75_ns()),
                        CsvNumber(l.forward_flops_per_sample()),
                        LayerJoulesCell(r, l.index(), v1::PHASE_TRAIN), LayerJoulesCell(r, l.index(), v1::PHASE_INFER)});
        rows.back().push_back(l.optimizer().count() > 0 ? CsvNumber(l.optimizer().p50_ns()) : "");
        continue;
      }
      rows.push_back(
          {t.id(), DeviceLabel(t), absl::StrCat(t.batch_size()), absl::StrCat(l.index()), l.name(),
           absl::StrFormat("%s [%s-%s]", Ms(l.forward().p50_ns()), Ms(l.forward().p25_ns()), Ms(l.forward().p75_ns())),
           l.backward().count() > 0 ? absl::StrFormat("%s [%s-%s]", Ms(l.backward().p50_ns()),
                                                      Ms(l.backward().p25_ns()), Ms(l.backward().p75_ns()))
                                    : "-",
           l.optimizer().count() > 0 ? Ms(l.optimizer().p50_ns()) : "-",
           absl::StrFormat("%s [%s-%s]", Ms(l.inference().p50_ns()), Ms(l.inference().p25_ns()),
                           Ms(l.inference().p75_ns())),
           total > 0 ? Num(100 * own / total, "%.1f%%") : "-", Num(l.forward_flops_per_sample() / 1e6, "%.3f"), vs});
    }
  }
  if (format == OutputFormat::kCsv) {
    return CsvLines(
        "job_id,task_id,model,agent_id,device_id,device_kind,batch_size,layer,name,forward_p25_ns,forward_p50_ns,"
        "forward_p75_ns,backward_count,backward_p25_ns,backward_p50_ns,backward_p75_ns,inference_p25_ns,"
        "inference_p50_ns,inference_p75_ns,forward_flops_per_sample,train_joules_per_sample,infer_joules_per_sample,"
        "optimizer_p50_ns",
        rows);
  }
  if (rows.empty()) return "No per-layer timings in this job (submit with --layers, or layers: {enabled: true}).\n";
  std::string out = absl::StrCat("Per-layer times for ", job.id(), " (p50 [p25-p75] ms per batch)\n");
  absl::StrAppend(&out,
                  FormatTable({"TASK", "DEVICE", "BATCH", "#", "LAYER", "FORWARD_MS", "BACKWARD_MS", "OPTIMIZER_MS",
                               "INFERENCE_MS", "TRAIN_SHARE", "MFLOP_PER_SAMPLE", "INFER_SPEEDUP"},
                              rows));
  absl::StrAppend(&out,
                  "Each layer is timed with a device synchronisation before and after it. BACKWARD is its share of "
                  "the backward pass (gradient of its output to gradient of its input), OPTIMIZER of the optimizer "
                  "step (its parameters alone); '-' where it has none. INFER_SPEEDUP compares with the same layer on ",
                  DeviceKindName(baseline_kind), ".\n");
  if (std::string e = RenderLayerEnergy(job); !e.empty()) absl::StrAppend(&out, "\n", e);
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
  if (format == OutputFormat::kYaml) return JobSpecToYaml(job.spec());
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
  if (format == OutputFormat::kCsv) return CsvLines("task,model,device,batch,state,attempt,note", rows);
  std::string out = absl::StrCat("id: ", job.id(), "\nstate: ", JobStateName(job.state()),
                                 "\ncreated: ", TimeString(job.created_unix_seconds()),
                                 "\nfinished: ", TimeString(job.finished_unix_seconds()), "\n");
  if (!job.error().empty()) absl::StrAppend(&out, "error: ", job.error(), "\n");
  absl::StrAppend(&out, "spec (effective, defaults filled in):\n");
  for (absl::string_view line : absl::StrSplit(JobSpecToYaml(job.spec()), '\n')) {
    if (!line.empty()) absl::StrAppend(&out, "  ", line, "\n");
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
    // The agent's labels, which targets select on (`targets[].labels`), sorted.
    const std::map<std::string, std::string> sorted(a.labels().begin(), a.labels().end());
    std::vector<std::string> pairs;
    for (const auto& [k, v] : sorted) pairs.push_back(absl::StrCat(k, "=", v));
    const std::string labels = pairs.empty() ? "-" : absl::StrJoin(pairs, ",");
    for (const v1::Device& d : a.devices()) {
      const bool busy =
          std::find(a.busy_device_ids().begin(), a.busy_device_ids().end(), d.id()) != a.busy_device_ids().end();
      const std::string executors = d.executors().empty() ? "torch" : absl::StrJoin(d.executors(), ",");
      std::vector<std::string> row = {a.agent_id(), d.id(), DeviceKindName(d.kind()), d.model(),
                                      absl::StrCat(d.cores()),
                                      absl::StrFormat("%.1f", static_cast<double>(d.memory_bytes()) / (1 << 30)),
                                      executors, labels};
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
      for (const v1::DeviceHealth& h : a.health()) {
        if (h.device_id() == d.id() && h.quarantined()) state += ", QUARANTINED";
      }
      row.insert(row.end(), {state, a.version()});
      rows.push_back(std::move(row));
    }
  }
  std::vector<std::string> header = {"AGENT", "DEVICE", "KIND", "MODEL", "CORES", "MEM_GIB", "EXECUTORS", "LABELS"};
  if (wide) header.insert(header.end(), {"DRIVER", "POWER_SENSORS", "ISA", "DETAILS"});
  header.insert(header.end(), {"STATE", "VERSION"});
  if (format == OutputFormat::kCsv) {
    return CsvLines(
        "agent,device,kind,model,cores,mem_gib,executors,labels,driver,power_sensors,isa,details,state,version", rows);
  }
  std::string out = FormatTable(header, rows);
  // Kinds each agent looked for and did not offer, with the reason.
  std::vector<std::vector<std::string>> absent;
  for (const v1::AgentInfo& a : agents) {
    for (const v1::AbsentDevice& d : a.absent()) absent.push_back({a.agent_id(), DeviceKindName(d.kind()), d.reason()});
  }
  if (!absent.empty()) absl::StrAppend(&out, "\nnot offered:\n", FormatTable({"AGENT", "KIND", "WHY"}, absent));
  // Devices whose last validation did not pass (hetbench validate).
  std::vector<std::vector<std::string>> health;
  for (const v1::AgentInfo& a : agents) {
    for (const v1::DeviceHealth& h : a.health()) {
      health.push_back({a.agent_id(), h.device_id(), VerdictName(h.verdict()), h.quarantined() ? "yes" : "no",
                        h.job_id(), h.reason().size() > 120 ? h.reason().substr(0, 117) + "..." : h.reason()});
    }
  }
  if (!health.empty()) {
    absl::StrAppend(&out, "\nlast validation did not pass:\n",
                    FormatTable({"AGENT", "DEVICE", "VERDICT", "QUARANTINED", "JOB", "WHY"}, health));
  }
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
                                    std::string(filled, '#'), std::string(width - filled, '.'), frac * 100, what));
  }
  return lines;
}

}  // namespace hetbench::report
