#include "client/render.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <ctime>

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

std::string DeviceLabel(const v1::Task& t) {
  if (t.agent_id().empty()) return absl::StrCat("(", DeviceKindName(t.target().device_kind()), ")");
  return absl::StrCat(t.agent_id(), "/", t.device_id(), " (", DeviceKindName(t.device_kind()), ")");
}

// Baseline for speedups: first succeeded CPU task, else the first succeeded task.
const v1::Task* Baseline(const v1::Job& job) {
  const v1::Task* first = nullptr;
  for (const v1::Task& t : job.tasks()) {
    if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
    if (t.device_kind() == v1::DEVICE_KIND_CPU) return &t;
    if (first == nullptr) first = &t;
  }
  return first;
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

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name) {
  if (name == "table") return OutputFormat::kTable;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError(absl::StrCat("-o ", name, ": unknown format; use table, json or csv"));
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

std::string RenderReport(const v1::Job& job, OutputFormat format, bool compare_mismatched) {
  if (format == OutputFormat::kJson) return ToJson(job);
  const v1::Task* base = Baseline(job);
  bool refused = false;
  auto speedup = [&](const v1::Task& t, v1::Phase phase) -> std::string {
    const v1::PhaseResult* mine = FindPhase(t, phase);
    const v1::PhaseResult* theirs = base ? FindPhase(*base, phase) : nullptr;
    if (!mine || !theirs || theirs->stats().samples_per_second() <= 0) return "-";
    if (!compare_mismatched &&
        t.result().environment().model_fingerprint() != base->result().environment().model_fingerprint()) {
      refused = true;
      return "n/a";
    }
    return absl::StrFormat("%.2fx", mine->stats().samples_per_second() / theirs->stats().samples_per_second());
  };
  const std::vector<std::string> header = {"TASK",          "DEVICE",    "BATCH",    "PHASE",
                                           "STEPS",         "P50_MS",    "P90_MS",   "P99_MS",
                                           "MEAN_MS",       "STDDEV_MS", "IQR_MS",   "P50_US_PER_SAMPLE",
                                           "SAMPLES_PER_S", "SPEEDUP",   "ACCURACY", "VALID"};
  std::vector<std::vector<std::string>> rows;
  for (const v1::Task& t : job.tasks()) {
    if (t.result().phases().empty()) {
      rows.push_back({t.id(), DeviceLabel(t), absl::StrCat(t.batch_size()), "-", "-", "-", "-", "-", "-", "-", "-", "-",
                      "-", "-", TaskStateName(t.state()), "-"});
      continue;
    }
    for (const v1::PhaseResult& p : t.result().phases()) {
      const v1::TimingStats& s = p.stats();
      rows.push_back({t.id(), DeviceLabel(t), absl::StrCat(t.batch_size()), PhaseName(p.phase()),
                      absl::StrCat(s.count()), Ms(s.p50_ns()), Ms(s.p90_ns()), Ms(s.p99_ns()), Ms(s.mean_ns()),
                      Ms(s.stddev_ns()), Ms(s.iqr_ns()), Num(PerSampleNs(s, s.p50_ns()) / 1e3, "%.2f"),
                      absl::StrFormat("%.1f", s.samples_per_second()), speedup(t, p.phase()),
                      p.phase() == v1::PHASE_INFER ? Quality(t.result()) : "-", p.valid() ? "yes" : "NO"});
    }
  }
  if (format == OutputFormat::kCsv) {
    const std::vector<std::string> csv_header = {"job_id",
                                                 "task_id",
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
                                                 "electricity_usd_per_1000_samples"};
    std::vector<std::vector<std::string>> csv_rows;
    for (const v1::Task& t : job.tasks()) {
      for (const v1::PhaseResult& p : t.result().phases()) {
        const v1::TimingStats& s = p.stats();
        const EnergySummary e = SummarizeEnergy(t.result(), p.phase());
        const v1::CostResult* c = FindCost(t, p.phase());
        const v1::TaskResult& r = t.result();
        csv_rows.push_back({job.id(),
                            t.id(),
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
                            c ? absl::StrCat(c->electricity_usd_per_1000_samples()) : ""});
      }
    }
    return CsvLines(absl::StrJoin(csv_header, ","), csv_rows);
  }
  std::string out =
      absl::StrCat("Job ", job.id(), " \"", job.spec().name(), "\": model ", job.spec().model(), " on ",
                   job.spec().dataset(), ", seed ", job.spec().seed(), " -- ", JobStateName(job.state()), "\n");
  if (!job.error().empty()) absl::StrAppend(&out, "error: ", job.error(), "\n");
  absl::StrAppend(&out, "\n", FormatTable(header, rows), "\n");
  if (base) absl::StrAppend(&out, "SPEEDUP is samples/s relative to ", base->id(), ".\n");
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
  for (const v1::Task& t : job.tasks()) {
    const v1::TaskResult& r = t.result();
    absl::StrAppend(&out, t.id(), ": ", TaskStateName(t.state()));
    if (!t.error().empty()) absl::StrAppend(&out, " (", t.error(), ")");
    if (t.state() == v1::TASK_STATE_SUCCEEDED || !r.phases().empty()) {
      const v1::RunEnvironment& e = r.environment();
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

std::string RenderStudyTable(const v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  bool cpu_default = false;
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
    rows.push_back({DeviceLabel(t), absl::StrCat(t.batch_size()), Num(train_s, "%.3f"), Num(test_s, "%.3f"),
                    absl::StrCat(Num(nominal, "%.0f"), from_study ? "" : "+"),
                    Num(nominal * (train_s + test_s), "%.1f"), e.ok ? Num(e.average_watts, "%.1f") : "-",
                    e.ok ? Num(e.joules, "%.1f") : "-", SourceCell(e)});
  }
  std::string out = absl::StrCat("Study table for ", job.id(), " (model ", job.spec().model(), ")\n");
  absl::StrAppend(
      &out, FormatTable({"DEVICE", "BATCH", "TRAIN_S", "TEST_S", "NOMINAL_W", "E=PxT_J", "AVG_W", "ENERGY_J", "SOURCE"},
                        rows));
  absl::StrAppend(&out, "E=PxT_J is the study's method: nominal watts x (train + test seconds), not a measurement.\n");
  if (cpu_default) absl::StrAppend(&out, "+ the study gave no CPU figure: 150 W is hetbench's default.\n");
  absl::StrAppend(&out, "AVG_W and ENERGY_J are hetbench's, over the same windows, from SOURCE (* = modeled).\n");
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
    rows.push_back({j.id(), j.spec().name(), j.spec().model(), JobStateName(j.state()),
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
    rows.push_back({t.id(), DeviceLabel(t), absl::StrCat(t.batch_size()), TaskStateName(t.state()),
                    absl::StrCat(t.attempt()), t.error().empty() ? "-" : t.error()});
  }
  absl::StrAppend(&out, "tasks:\n", FormatTable({"TASK", "DEVICE", "BATCH", "STATE", "ATTEMPT", "NOTE"}, rows));
  return out;
}

std::string RenderAgents(const std::vector<v1::AgentInfo>& agents, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    v1::ListAgentsResponse r;
    for (const auto& a : agents) *r.add_agents() = a;
    return ToJson(r);
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::AgentInfo& a : agents) {
    for (const v1::Device& d : a.devices()) {
      const bool busy =
          std::find(a.busy_device_ids().begin(), a.busy_device_ids().end(), d.id()) != a.busy_device_ids().end();
      rows.push_back({a.agent_id(), d.id(), DeviceKindName(d.kind()), d.model(), absl::StrCat(d.cores()),
                      absl::StrFormat("%.1f", static_cast<double>(d.memory_bytes()) / (1 << 30)),
                      absl::StrJoin(d.isa_flags(), " "), busy ? "busy" : "idle", a.version()});
    }
  }
  const std::vector<std::string> header = {"AGENT",   "DEVICE", "KIND",  "MODEL",  "CORES",
                                           "MEM_GIB", "ISA",    "STATE", "VERSION"};
  if (format == OutputFormat::kCsv) return CsvLines("agent,device,kind,model,cores,mem_gib,isa,state,version", rows);
  return FormatTable(header, rows);
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
    lines.push_back(absl::StrFormat("%-16s b=%-5d [%s%s] %3.0f%% %s", t.id(), t.batch_size(), std::string(filled, '#'),
                                    std::string(width - filled, '.'), frac * 100, what));
  }
  return lines;
}

}  // namespace hetbench::client
