#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "report/render.h"
#include "report/render/common.h"
#include "common/energy.h"
#include "common/names.h"
#include "common/spec_yaml.h"

namespace hetbench::report {

using namespace render;  // NOLINT: the shared lookups and formats of every view

std::string RenderLayerEnergy(const v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  for (const v1::Task& t : job.tasks()) {
    const v1::TaskResult& r = t.result();
    for (const v1::LayerEnergy& e : r.layer_energy()) {
      std::string name = "-";
      for (const v1::LayerTiming& l : r.layers()) {
        if (l.index() == e.layer()) name = l.name();
      }
      if (!e.assumptions().empty() && std::find(notes.begin(), notes.end(), e.assumptions()) == notes.end()) {
        notes.push_back(e.assumptions());
      }
      rows.push_back({t.id(), DeviceLabel(t), absl::StrCat(e.layer()), name, PhaseName(e.phase()),
                      e.repeated_loop() ? "loop" : "profiled",
                      SourceLabel(e.source(), e.sensors(), /*short_window=*/false),
                      e.resolved() ? Num(e.joules_per_sample() * 1e3, "%.4g") : "-",
                      e.resolved() ? Num(e.average_watts(), "%.1f") : "-",
                      e.resolved() ? Num(e.coverage() * 100, "%.0f%%") : "-",
                      absl::StrFormat("%.3g / %.3g", e.median_window_seconds() * 1e3,
                                      e.reading_interval_seconds() * 1e3),
                      e.resolved() ? "" : e.note()});
    }
  }
  if (rows.empty()) return "";
  std::string out = absl::StrCat("Per-layer energy for ", job.id(), "\n");
  absl::StrAppend(&out, FormatTable({"TASK", "DEVICE", "#", "LAYER", "PHASE", "WINDOWS", "SOURCE",
                                     "MILLIJOULES_PER_SAMPLE", "WATTS", "COVERAGE", "WINDOW/READ_MS", "NOTE"},
                                    rows));
  absl::StrAppend(&out,
                  "train = the layer's forward and backward, infer = its eval forward. WINDOWS: 'profiled' = the "
                  "timed steps, 'loop' = the layer run alone for layers.energy_seconds. WINDOW/READ_MS: median window "
                  "against the interval between power readings; a window shorter than two intervals gets no figure "
                  "('-'). '*' = modeled, not measured.\n");
  for (const std::string& n : notes) absl::StrAppend(&out, "  * ", n, "\n");
  return out;
}

std::string RenderEnergyTable(const v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  bool any_short = false, any_baseline = false;
  double probe_seconds = 0;
  for (const v1::Task& t : job.tasks()) {
    for (const v1::PhaseResult& p : t.result().phases()) {
      const EnergySummary e = SummarizeEnergy(t.result(), p.phase());
      const v1::CostResult* c = FindCost(t, p.phase());
      if (!e.ok && c == nullptr) continue;
      any_short = any_short || e.short_window;
      probe_seconds += std::max(e.probe_seconds, c ? c->probe_seconds() : 0.0);
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
  if (probe_seconds > 0) {
    absl::StrAppend(&out, "Left out of energy and cost: the machine probe's readings between steps (",
                    Num(probe_seconds, "%.2f"), " s over these phases; docs/measurement.md, \"The machine probe\")\n");
  }
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

std::string RenderStudyTable(const v1::Job& job, v1::DeviceKind baseline_kind, bool compare_mismatched,
                             OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  bool cpu_default = false, refused = false;
  // Speedup as the studies gave it: a percentage of the baseline device's
  // rate (100% = as fast as the baseline, 1200% = twelve times faster).
  auto percent = [&](const v1::Task& t, v1::Phase phase) -> std::string {
    const Versus v = RateVsBaseline(job, t, phase, baseline_kind, compare_mismatched);
    refused = refused || v.refused;
    return v.refused ? "n/a" : v.ratio ? absl::StrFormat("%.0f%%", 100 * *v.ratio) : "-";
  };
  const bool csv = format == OutputFormat::kCsv;
  // CSV: the speedup as a plain ratio ("" when refused or without a baseline).
  auto ratio = [&](const v1::Task& t, v1::Phase phase) -> std::string {
    const Versus v = RateVsBaseline(job, t, phase, baseline_kind, compare_mismatched);
    refused = refused || v.refused;
    return v.refused || !v.ratio ? "" : CsvNumber(*v.ratio);
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
    if (csv) {  // one value per cell, numbers unrounded
      rows.push_back({TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), CsvNumber(train_s),
                      CsvNumber(test_s), ratio(t, v1::PHASE_TRAIN), ratio(t, v1::PHASE_INFER),
                      t.result().test_mse() > 0 ? "" : CsvNumber(t.result().test_accuracy()),
                      t.result().test_mse() > 0 ? CsvNumber(t.result().test_mse()) : "",
                      CsvNumber(nominal), from_study ? "study" : "hetbench default",
                      CsvNumber(nominal * (train_s + test_s)), e.ok ? CsvNumber(e.average_watts) : "",
                      e.ok ? CsvNumber(e.joules) : "", e.ok ? PowerSourceName(e.source) : "",
                      e.ok ? absl::StrCat(e.sensors) : "", valid ? "true" : "false"});
      continue;
    }
    rows.push_back({TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), Num(train_s, "%.3f"),
                    Num(test_s, "%.3f"), percent(t, v1::PHASE_TRAIN), percent(t, v1::PHASE_INFER),
                    Quality(t.result()), absl::StrCat(Num(nominal, "%.0f"), from_study ? "" : "+"),
                    Num(nominal * (train_s + test_s), "%.1f"), e.ok ? Num(e.average_watts, "%.1f") : "-",
                    e.ok ? Num(e.joules, "%.1f") : "-", SourceCell(e), valid ? "yes" : "NO"});
  }
  if (format == OutputFormat::kCsv) {
    // The same cells; E=PxT is the study's nominal-watts estimate, not a measurement.
    return CsvLines("model,device,batch,train_s,test_s,train_vs_base,test_vs_base,test_accuracy,test_mse,nominal_w,"
                    "nominal_w_from,"
                    "e_pxt_j,avg_w,energy_j,energy_source,energy_sensors,valid",
                    rows);
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

}  // namespace hetbench::report
