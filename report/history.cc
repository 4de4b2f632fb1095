#include "report/history.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/render.h"
#include "report/render/common.h"
#include "common/energy.h"
#include "common/names.h"
#include "common/stats.h"

namespace hetbench::report {

namespace {

std::string Series(const v1::Task& t) {
  const v1::RunEnvironment& e = t.result().environment();
  return absl::StrCat(DeviceKindName(t.device_kind()), " (", e.device_model().empty() ? "unknown" : e.device_model(),
                      "), ", e.executor().empty() ? "torch" : e.executor(), ", batch ", t.batch_size(),
                      e.simulated() ? ", SIMULATED" : "", ", ", e.model_fingerprint());
}

double Rate(const v1::TimingStats& s, double step_ns) {
  return step_ns > 0 && s.count() > 0 ? static_cast<double>(s.items()) / static_cast<double>(s.count()) / (step_ns * 1e-9)
                                      : 0.0;
}

}  // namespace

std::string ChangeText(const HistoryRow& r) {
  if (!r.has_change) return "first of its series";
  if (!IsChange(r.change)) return r.change.verdict;
  return absl::StrFormat("%s: time x%.3f [%.3f-%.3f]", r.change.verdict, r.change.ratio, r.change.ci_low,
                         r.change.ci_high);
}

std::vector<HistoryRow> BuildHistory(const std::vector<v1::Job>& jobs, const std::string& model, v1::DeviceKind kind,
                                     double threshold, const StepsOf& steps_of) {
  std::vector<HistoryRow> rows;
  for (const v1::Job& job : jobs) {
    std::map<std::string, size_t> row_of;  // series -> its row in this job (a job with repeats has several runs)
    for (const v1::Task& t : job.tasks()) {
      if (t.state() != v1::TASK_STATE_SUCCEEDED || render::TaskModel(job, t) != model) continue;
      if (kind != v1::DEVICE_KIND_UNSPECIFIED && t.device_kind() != kind) continue;
      if (render::FindPhase(t, v1::PHASE_TRAIN) == nullptr) continue;
      const std::string series = Series(t);
      auto [it, fresh] = row_of.try_emplace(series, rows.size());
      if (fresh) {
        HistoryRow& r = rows.emplace_back();
        r.job = &job;
        r.task = &t;
        r.series = series;
      }
      HistoryRow& r = rows[it->second];
      r.runs.push_back(&t);
      const double finished = t.finished_unix_seconds() > 0 ? t.finished_unix_seconds() : job.finished_unix_seconds();
      r.finished_unix = std::max(r.finished_unix, finished);
    }
  }
  for (HistoryRow& r : rows) {
    // Each figure the median over the row's runs (one run: its own).
    std::vector<double> p50, p25, p75, joules;
    for (const v1::Task* t : r.runs) {
      const v1::TimingStats& s = render::FindPhase(*t, v1::PHASE_TRAIN)->stats();
      p50.push_back(Rate(s, s.p50_ns()));
      p25.push_back(Rate(s, s.p75_ns()));  // the slower quartile of steps is the lower rate
      p75.push_back(Rate(s, s.p25_ns()));
      const EnergySummary e = SummarizeEnergy(t->result(), v1::PHASE_TRAIN);
      if (e.ok) {
        joules.push_back(e.joules_per_sample);
        if (r.energy_source.empty()) r.energy_source = render::SourceCell(e);
      }
    }
    r.samples_per_second_p50 = MedianInPlace(p50);
    r.p25 = MedianInPlace(p25);
    r.p75 = MedianInPlace(p75);
    r.joules_per_sample = joules.empty() ? 0 : MedianInPlace(joules);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const HistoryRow& a, const HistoryRow& b) { return a.finished_unix < b.finished_unix; });
  std::vector<const v1::Job*> all_jobs;  // where a change between runs learns the machine's run-to-run spread
  for (const v1::Job& job : jobs) all_jobs.push_back(&job);
  std::map<std::string, const HistoryRow*> previous;
  std::map<const v1::Task*, std::vector<double>> steps;  // each task's fetched once
  auto steps_for = [&](const v1::Task* t) -> const std::vector<double>& {
    auto it = steps.find(t);
    if (it == steps.end()) it = steps.emplace(t, steps_of(*t)).first;
    return it->second;
  };
  for (HistoryRow& r : rows) {
    auto prev = previous.find(r.series);
    if (prev != previous.end()) {
      r.has_change = true;
      const RunPair pair{prev->second->runs, r.runs, r.series, ""};
      std::vector<std::vector<double>> a, b;
      for (const v1::Task* t : pair.a) a.push_back(steps_for(t));
      for (const v1::Task* t : pair.b) b.push_back(steps_for(t));
      r.change = CompareRunPhase(pair, v1::PHASE_TRAIN, a, b, threshold, /*compare_anyway=*/false, all_jobs);
    }
    previous[r.series] = &r;
  }
  return rows;
}

std::string RenderHistory(const std::vector<HistoryRow>& rows, const std::string& model, double threshold,
                          const std::string& format) {
  if (format == "json") {
    nlohmann::ordered_json doc;
    doc["schema"] = "hetbench.history/v1";
    doc["model"] = model;
    doc["threshold"] = threshold;
    doc["rows"] = nlohmann::ordered_json::array();
    for (const HistoryRow& r : rows) {
      nlohmann::ordered_json j;
      j["finished"] = render::TimeString(r.finished_unix);
      j["job"] = r.job->id();
      j["task"] = r.task->id();
      j["series"] = r.series;
      j["device"] = render::DeviceLabel(*r.task, /*with_run=*/false);
      j["runs"] = r.runs.size();
      j["batch"] = r.task->batch_size();
      j["simulated"] = r.task->result().environment().simulated();
      j["train_samples_per_second_p50"] = r.samples_per_second_p50;
      j["train_samples_per_second_iqr"] = {r.p25, r.p75};
      if (r.joules_per_sample > 0) {
        j["train_joules_per_sample"] = r.joules_per_sample;
        j["energy_source"] = r.energy_source;
      }
      if (r.has_change) {
        j["versus_previous"] = {{"ratio", r.change.ratio},
                                {"ci95", {r.change.ci_low, r.change.ci_high}},
                                {"p_value", r.change.p_value},
                                {"verdict", r.change.verdict}};
        if (!r.change.note.empty()) j["versus_previous"]["note"] = r.change.note;
        if (!r.change.far_runs_note.empty()) j["versus_previous"]["far_runs"] = r.change.far_runs_note;
        if (!r.change.left_out_note.empty()) j["versus_previous"]["runs_left_out"] = r.change.left_out_note;
        if (const std::string spread = SpreadNote(r.change.spread_prior, r.change.spread); !spread.empty()) {
          j["versus_previous"]["run_spread"] = spread;
        }
      }
      doc["rows"].push_back(j);
    }
    return doc.dump(2) + "\n";
  }
  std::vector<std::vector<std::string>> cells;
  if (format == "csv") {  // one value per cell, numbers unrounded; energy in millijoules with its source apart
    for (const HistoryRow& r : rows) {
      const std::string executor = r.task->result().environment().executor();
      cells.push_back({render::TimeString(r.finished_unix), r.task->id(), render::DeviceLabel(*r.task, false),
                       executor.empty() ? "torch" : executor, absl::StrCat(r.task->batch_size()),
                       absl::StrCat(r.runs.size()),
                       render::CsvNumber(r.samples_per_second_p50), render::CsvNumber(r.p25), render::CsvNumber(r.p75),
                       r.joules_per_sample > 0 ? render::CsvNumber(r.joules_per_sample * 1e3) : "",
                       r.joules_per_sample > 0 ? r.energy_source : "", ChangeText(r)});
    }
    return render::CsvLines(
        "finished,task,device,executor,batch,runs,train_samples_per_s_p50,train_samples_per_s_p25,train_samples_per_s_p75,"
        "millijoules_per_sample,energy_source,change",
        cells);
  }
  bool one_run = false;
  std::string far_runs;  // per row: its change's runs left out (machine probe) and far from their row's median run
  for (const HistoryRow& r : rows) {
    one_run = one_run || (r.has_change && !r.change.note.empty());
    const std::string spread = SpreadNote(r.change.spread_prior, r.change.spread);
    for (const std::string* note : {&r.change.left_out_note, &r.change.far_runs_note, &spread}) {
      if (r.has_change && !note->empty()) absl::StrAppend(&far_runs, r.task->id(), ": ", *note, "\n");
    }
    cells.push_back({render::TimeString(r.finished_unix), r.task->id(), render::DeviceLabel(*r.task, false),
                     r.task->result().environment().executor().empty() ? "torch"
                                                                       : r.task->result().environment().executor(),
                     absl::StrCat(r.task->batch_size()), absl::StrCat(r.runs.size()),
                     absl::StrFormat("%.1f", r.samples_per_second_p50),
                     absl::StrFormat("%.1f-%.1f", r.p25, r.p75),
                     r.joules_per_sample > 0 ? absl::StrFormat("%.3g %s", r.joules_per_sample * 1e3, r.energy_source)
                                             : "-",
                     ChangeText(r)});
  }
  return absl::StrCat(
      "history of ", model, " (training), oldest first\n",
      FormatTable({"FINISHED", "TASK", "DEVICE", "EXECUTOR", "BATCH", "RUNS", "SAMPLES/S_P50", "P25-P75",
                   "MILLIJOULES/SAMPLE", "CHANGE"},
                  cells),
      absl::StrFormat("CHANGE: against the previous row of the same device model, executor, batch and model "
                      "fingerprint, by compare's test (runs as the unit when both rows have 2 runs or more: the 95%% "
                      "CI of the time "
                      "ratio excludes 1 and the ratio lies beyond 1 +/- %.3g; one run: the whole CI beyond it). "
                      "Figures: the median over a row's runs.\n",
                      threshold),
      one_run ? "A change between rows of one run each ignores run-to-run variance: submit with --repeats 3 to "
                "compare runs.\n"
              : "",
      far_runs);
}

}  // namespace hetbench::report
