#include "report/render/serving.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "report/render/common.h"
#include "report/render/svg.h"

namespace hetbench::report {

using namespace render;  // NOLINT: the shared lookups and formats of every view

namespace {

std::string MsCell(int64_t ns) { return ns > 0 ? Ms(static_cast<double>(ns)) : "-"; }

// "multi_stream x8"; the other scenarios as they are.
std::string Scenario(const v1::ServingRun& s) {
  return s.scenario() == "multi_stream" ? absl::StrCat(s.scenario(), " x", s.samples_per_query()) : s.scenario();
}

// The generative table: per decoder task, its requests' tokens, the
// coordinator's TTFT and TPOT percentiles against the SLOs, the agent's ITL,
// token rate and goodput.
std::string RenderGenerative(const v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::Task& t : job.tasks()) {
    const v1::PhaseResult* p = FindPhase(t, v1::PHASE_SERVE);
    if (p == nullptr || !t.result().serving().has_generative()) continue;
    const v1::ServingRun& s = t.result().serving();
    const v1::GenerativeRun& g = s.generative();
    auto slo = [](double ms) { return ms > 0 ? absl::StrFormat("%g", ms) : std::string("-"); };
    rows.push_back({t.id(), DeviceLabel(t), absl::StrCat(t.batch_size()), s.scenario(),
                    absl::StrCat(s.queries_answered(), "/", s.queries_scheduled()),
                    absl::StrCat(g.prompt_tokens(), "/", g.output_tokens()), MsCell(g.ttft_p50_ns()),
                    MsCell(g.ttft_p99_ns()), slo(g.ttft_ms()), MsCell(g.tpot_p50_ns()), MsCell(g.tpot_p99_ns()),
                    slo(g.tpot_ms()), MsCell(g.itl_p50_ns()), MsCell(g.itl_p99_ns()), MsCell(s.latency_p99_ns()),
                    Num(g.output_tokens_per_second(), "%.1f"), Num(g.requests_per_second(), "%.2f"),
                    Num(g.goodput(), "%.2f"), p->valid() ? "yes" : "NO"});
  }
  if (rows.empty()) return "";
  return absl::StrCat(
      "Generative (per request; TTFT from its scheduled time, TPOT = (last token - first) / (tokens - 1), "
      "nearest-rank over every stored request; ITL every gap between two tokens; GOODPUT requests/s meeting every "
      "SLO given):\n",
      FormatTable({"TASK", "DEVICE", "MAX_RUNNING", "SCENARIO", "ANSWERED", "PROMPT/OUTPUT_TOKENS", "TTFT_P50_MS",
                   "TTFT_P99_MS", "TTFT_SLO_MS", "TPOT_P50_MS", "TPOT_P99_MS", "TPOT_SLO_MS", "ITL_P50_MS",
                   "ITL_P99_MS", "E2E_P99_MS", "OUTPUT_TOKENS_PER_S", "REQUESTS_PER_S", "GOODPUT", "VALID"},
                  rows));
}

}  // namespace

namespace {

// A row of the serving table (CSV: every figure unrounded) for a task, or
// for the union of a replicated run's replicas (`task_id` its gang's).
struct ServingRow {
  std::string task_id, model, device_id, device_label, device_kind;
  int batch_size = 0;
  const v1::ServingRun* s = nullptr;
  const v1::PhaseResult* p = nullptr;
  bool merged = false;  // the union of a replicated run's replicas
};

std::vector<std::string> CsvRow(const v1::Job& job, const ServingRow& r) {
  const v1::ServingRun& s = *r.s;
  const v1::GenerativeRun& g = s.generative();
  return {job.id(),
          r.task_id,
          r.model,
          r.device_id,
          r.device_kind,
          absl::StrCat(r.batch_size),
          s.scenario(),
          CsvNumber(s.target_qps()),
          CsvNumber(s.achieved_qps()),
          CsvNumber(s.samples_per_second()),
          absl::StrCat(s.queries_scheduled()),
          absl::StrCat(s.queries_answered()),
          absl::StrCat(s.latency_p50_ns()),
          absl::StrCat(s.latency_p90_ns()),
          absl::StrCat(s.latency_p99_ns()),
          CsvNumber(s.percentile()),
          absl::StrCat(s.latency_at_percentile_ns()),
          absl::StrCat(s.early_stopping_ns()),
          CsvNumber(s.latency_bound_ms()),
          absl::StrCat(s.over_bound()),
          absl::StrCat(s.issue_delay_p50_ns()),
          absl::StrCat(s.issue_delay_p99_ns()),
          absl::StrCat(s.issue_delay_max_ns()),
          absl::StrCat(s.batches()),
          CsvNumber(s.mean_batch()),
          absl::StrCat(s.instances()),
          r.p->valid() ? "true" : "false",
          absl::StrJoin(r.p->invalid_reasons(), "; "),
          absl::StrCat(s.samples_per_query()),
          absl::StrCat(g.ttft_p50_ns()),
          absl::StrCat(g.ttft_p90_ns()),
          absl::StrCat(g.ttft_p99_ns()),
          absl::StrCat(g.tpot_p50_ns()),
          absl::StrCat(g.tpot_p90_ns()),
          absl::StrCat(g.tpot_p99_ns()),
          absl::StrCat(g.itl_p50_ns()),
          absl::StrCat(g.itl_p99_ns()),
          absl::StrCat(g.prompt_tokens()),
          absl::StrCat(g.output_tokens()),
          CsvNumber(g.output_tokens_per_second()),
          CsvNumber(g.goodput()),
          CsvNumber(g.ttft_ms()),
          CsvNumber(g.tpot_ms()),
          absl::StrCat(std::max(1, s.replica().replicas())),
          r.merged ? std::string() : absl::StrCat(s.replica().rank())};
}

std::vector<std::string> TableRow(const ServingRow& r) {
  const v1::ServingRun& s = *r.s;
  return {r.task_id, r.model, r.device_label, absl::StrCat(r.batch_size), Scenario(s),
          s.target_qps() > 0 ? Num(s.target_qps(), "%.1f") : "-", Num(s.achieved_qps(), "%.1f"),
          absl::StrCat(s.queries_answered(), "/", s.queries_scheduled()), MsCell(s.latency_p50_ns()),
          MsCell(s.latency_p90_ns()), MsCell(s.latency_p99_ns()),
          absl::StrCat("p", absl::StrFormat("%g", s.percentile()), " ", MsCell(s.early_stopping_ns())),
          s.latency_bound_ms() > 0 ? Num(s.latency_bound_ms(), "%g") : "-",
          s.latency_bound_ms() > 0 ? absl::StrCat(s.over_bound()) : "-",
          Num(static_cast<double>(s.issue_delay_p99_ns()) * 1e-3, "%.1f"),
          s.batches() > 0 ? Num(s.mean_batch(), "%.2f") : "-", r.p->valid() ? "yes" : "NO"};
}

}  // namespace

std::string RenderServing(const v1::Job& job, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  const bool csv = format == OutputFormat::kCsv;
  for (const v1::Task& t : job.tasks()) {
    const v1::PhaseResult* p = FindPhase(t, v1::PHASE_SERVE);
    if (p == nullptr) continue;
    const v1::ServingRun& s = t.result().serving();
    const ServingRow row{t.id(), TaskModel(job, t), t.device_id(), DeviceLabel(t), DeviceKindName(t.device_kind()),
                         t.batch_size(), &s, p};
    rows.push_back(csv ? CsvRow(job, row) : TableRow(row));
    // After a replicated run's last replica: the union of its replicas.
    if (s.has_merged() && t.gang().rank() + 1 == t.gang().world_size()) {
      const v1::ReplicaMerge& m = s.merged();
      const ServingRow merged{absl::StrCat(t.gang().id(), csv ? "" : " merged"), row.model, "",
                              absl::StrCat(m.replicas(), " replicas"), row.device_kind, t.batch_size(),
                              &m.serving(), &m.phase(), true};
      rows.push_back(csv ? CsvRow(job, merged) : TableRow(merged));
    }
  }
  if (rows.empty()) return "";
  if (csv) {
    return CsvLines(
        "job_id,task_id,model,device_id,device_kind,max_batch,scenario,target_qps,achieved_qps,samples_per_second,"
        "queries_scheduled,queries_answered,latency_p50_ns,latency_p90_ns,latency_p99_ns,percentile,"
        "latency_at_percentile_ns,early_stopping_ns,latency_bound_ms,over_bound,issue_delay_p50_ns,issue_delay_p99_ns,"
        "issue_delay_max_ns,batches,mean_batch,instances,valid,invalid_reasons,samples_per_query,ttft_p50_ns,"
        "ttft_p90_ns,ttft_p99_ns,tpot_p50_ns,tpot_p90_ns,tpot_p99_ns,itl_p50_ns,itl_p99_ns,prompt_tokens,output_tokens,"
        "output_tokens_per_second,goodput_requests_per_second,ttft_slo_ms,tpot_slo_ms,replicas,replica_rank",
        rows);
  }
  std::string out = absl::StrCat(
      "Serving (latency from each query's scheduled time; nearest-rank percentiles of every query; EARLY_STOP is the "
      "reported percentile's early-stopping estimate at 99% confidence):\n",
      FormatTable(
          {"TASK", "MODEL", "DEVICE", "MAX_BATCH", "SCENARIO", "TARGET_QPS", "ACHIEVED_QPS", "ANSWERED", "P50_MS",
           "P90_MS", "P99_MS", "EARLY_STOP_MS", "BOUND_MS", "OVER_BOUND", "ISSUE_DELAY_P99_US", "MEAN_BATCH", "VALID"},
          rows));
  if (std::string g = RenderGenerative(job); !g.empty()) absl::StrAppend(&out, "\n", g);
  return out;
}

std::string ServingFooter(const v1::TaskResult& r) {
  const v1::ServingRun& s = r.serving();
  if (s.has_generative()) {
    const v1::GenerativeRun& g = s.generative();
    return absl::StrFormat(
        "; served by %s; decoder %s: %d decoding steps (mean %.2f requests each, at most %d of %d slots, %d "
        "instance%s), %d of %d requests meeting every SLO; issue delay p99 %.1f us; warm-up %.3f s, run %.3f s",
        s.compute(), g.decoder(), s.batches(), g.mean_running(), g.max_running(), s.max_batch(), s.instances(),
        s.instances() == 1 ? "" : "s", g.requests_meeting_slo(), s.queries_answered(),
        static_cast<double>(s.issue_delay_p99_ns()) * 1e-3, r.warmup_seconds(), r.evaluate_seconds());
  }
  std::string out = absl::StrFormat(
      "; served by %s: %d batches (mean %.2f of at most %d, %d instance%s, queue delay <= %g ms), issue delay p50 "
      "%.1f us, p99 %.1f us, max %.1f us; warm-up %.3f s, run %.3f s%s",
      s.compute(), s.batches(), s.mean_batch(), s.max_batch(), s.instances(), s.instances() == 1 ? "" : "s",
      s.max_queue_delay_ms(), static_cast<double>(s.issue_delay_p50_ns()) * 1e-3,
      static_cast<double>(s.issue_delay_p99_ns()) * 1e-3, static_cast<double>(s.issue_delay_max_ns()) * 1e-3,
      r.warmup_seconds(), r.evaluate_seconds(),
      s.samples_per_query() > 1 ? absl::StrFormat("; %d samples per query (multi_stream)", s.samples_per_query())
                                : std::string());
  if (s.issuer_cpu_us_per_query() > 0) {
    absl::StrAppend(&out, absl::StrFormat("; harness CPU per query: issuer %.2f us", s.issuer_cpu_us_per_query()));
    if (s.issuer_ceiling_qps() > 0) {  // the null model: its batcher's CPU is the harness's too
      absl::StrAppend(&out, absl::StrFormat(", batcher %.2f us (the null model computes nothing); the issuer's "
                                            "ceiling here %.0f queries/s at %.3f us of CPU each (all due at once)",
                                            s.batcher_cpu_us_per_query(), s.issuer_ceiling_qps(),
                                            s.issuer_ceiling_cpu_us_per_query()));
    }
  }
  if (s.replica().replicas() > 1) {
    const v1::ReplicaRun& rep = s.replica();
    absl::StrAppend(
        &out, absl::StrFormat("\n    replica %d of %d (%s): its share of one global schedule from a start agreed on "
                              "the coordinator's clock; this agent's clock offset %s (rendezvous %.2f s)",
                              rep.rank(), rep.replicas(), rep.peers(),
                              rep.clock_round_trips() > 0
                                  ? absl::StrFormat("known within %.3f ms (%d round trip%s)",
                                                    static_cast<double>(rep.clock_bound_ns()) * 1e-6,
                                                    rep.clock_round_trips(), rep.clock_round_trips() == 1 ? "" : "s")
                                  : std::string("unknown (no heartbeat echo yet; taken as 0)"),
                              rep.rendezvous_seconds()));
    if (s.has_merged()) {
      const v1::ReplicaMerge& m = s.merged();
      absl::StrAppend(&out, absl::StrFormat("; the union of its %d replicas (exact merge): p50 %s ms, p99 %s ms over %d "
                                            "queries, %s",
                                            m.replicas(), MsCell(m.serving().latency_p50_ns()),
                                            MsCell(m.serving().latency_p99_ns()), m.serving().queries_answered(),
                                            m.phase().valid() ? std::string("VALID")
                                                              : absl::StrCat("INVALID (", absl::StrJoin(
                                                                    m.phase().invalid_reasons(), "; "), ")")));
    } else {
      absl::StrAppend(&out, "; no merged figures (the other replicas have not ended, or the coordinator restarted "
                            "before they did)");
    }
  }
  if (s.steps_size() > 0) {
    std::vector<std::string> runs;
    for (const v1::ServingStep& step : s.steps()) {
      runs.push_back(absl::StrFormat("%.1f %s", step.qps(), step.valid() ? "VALID" : "INVALID"));
    }
    absl::StrAppend(&out, "\n    peak search (q/s; each run judged on the agent by the coordinator's rules): ",
                    absl::StrJoin(runs, ", "), " -> ",
                    s.peak_qps() > 0 ? absl::StrFormat("peak %.1f q/s, the rate of the final run above", s.peak_qps())
                                     : std::string("no rate tried was VALID; the final run is at the lowest"));
  }
  return out;
}

namespace {

// One curve's points: offered rate, nearest-rank latencies.
struct CurvePoint {
  double qps = 0;
  int64_t p50 = 0, p90 = 0, p99 = 0;
};

svg::LineChart Curve(const std::string& title, std::vector<CurvePoint> points, double bound_ms,
                     const std::string& note) {
  std::sort(points.begin(), points.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.qps < b.qps; });
  svg::LineChart c;
  c.title = title;
  c.x_label = "offered load (queries/s)";
  c.y_label = "latency from the scheduled time (ms)";
  const std::pair<const char*, int64_t CurvePoint::*> series[] = {
      {"p50", &CurvePoint::p50}, {"p90", &CurvePoint::p90}, {"p99", &CurvePoint::p99}};
  double lo = 0, hi = 0;
  for (const auto& [name, field] : series) {
    svg::Line line;
    line.name = name;
    for (const CurvePoint& p : points) {
      const double ms = static_cast<double>(p.*field) * 1e-6;
      line.points.push_back({p.qps, ms});
      lo = lo == 0 ? ms : std::min(lo, ms);
      hi = std::max(hi, ms);
    }
    c.lines.push_back(std::move(line));
  }
  if (bound_ms > 0) {
    c.lines.push_back(
        {absl::StrFormat("bound %g ms", bound_ms), {{points.front().qps, bound_ms}, {points.back().qps, bound_ms}}});
    hi = std::max(hi, bound_ms);
  }
  c.log_y = lo > 0 && hi / lo > 20;  // latency grows steeply near saturation
  c.footnote = note;
  return c;
}

// A decoder's TTFT and TPOT against offered load, one chart per device and
// largest batch of a rate sweep (a single task: its p50 and p99 as bars
// would say less than the table does).
void GenerativePlots(const v1::Job& job, std::vector<Plot>* out) {
  struct Point {
    double qps;
    const v1::GenerativeRun* g;
  };
  std::map<std::string, std::vector<Point>> sweeps;
  for (const v1::Task& t : job.tasks()) {
    const v1::ServingRun& s = t.result().serving();
    if (t.state() != v1::TASK_STATE_SUCCEEDED || !s.has_generative() || s.scenario() != "server") continue;
    sweeps[absl::StrCat(DeviceLabel(t), ", at most ", t.batch_size(), " running")].push_back(
        {s.target_qps(), &s.generative()});
  }
  for (auto& [key, points] : sweeps) {
    if (points.size() < 2) continue;
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.qps < b.qps; });
    svg::LineChart c;
    c.title = absl::StrCat("TTFT and TPOT against load, decoder on ", key);
    c.x_label = "offered load (requests/s)";
    c.y_label = "ms";
    const std::pair<const char*, int64_t (v1::GenerativeRun::*)() const> series[] = {
        {"TTFT p50", &v1::GenerativeRun::ttft_p50_ns},
        {"TTFT p99", &v1::GenerativeRun::ttft_p99_ns},
        {"TPOT p50", &v1::GenerativeRun::tpot_p50_ns},
        {"TPOT p99", &v1::GenerativeRun::tpot_p99_ns}};
    double lo = 0, hi = 0;
    for (const auto& [name, field] : series) {
      svg::Line line;
      line.name = name;
      for (const Point& p : points) {
        const double ms = static_cast<double>((p.g->*field)()) * 1e-6;
        line.points.push_back({p.qps, ms});
        lo = lo == 0 ? ms : std::min(lo, ms);
        hi = std::max(hi, ms);
      }
      c.lines.push_back(std::move(line));
    }
    const v1::GenerativeRun& g = *points.front().g;
    for (const auto& [name, slo] : {std::pair{"TTFT SLO", g.ttft_ms()}, std::pair{"TPOT SLO", g.tpot_ms()}}) {
      if (slo <= 0) continue;
      c.lines.push_back({absl::StrFormat("%s %g ms", name, slo),
                         {{points.front().qps, slo}, {points.back().qps, slo}}});
      hi = std::max(hi, slo);
    }
    c.log_y = lo > 0 && hi / lo > 20;
    c.footnote =
        "Each point one task: nearest-rank percentiles of every stored request (TTFT from its scheduled time).";
    out->push_back({absl::StrCat("generative-curve-", out->size()), c.title, svg::Render(c)});
  }
}

}  // namespace

void ServingPlots(const v1::Job& job, std::vector<Plot>* out) {
  // Server tasks of a rate sweep: one curve per model, device and largest batch.
  std::map<std::string, std::vector<CurvePoint>> sweeps;
  std::map<std::string, double> bounds;
  for (const v1::Task& t : job.tasks()) {
    const v1::ServingRun& s = t.result().serving();
    if (t.state() != v1::TASK_STATE_SUCCEEDED || FindPhase(t, v1::PHASE_SERVE) == nullptr) continue;
    const std::string key = absl::StrCat(TaskModel(job, t), " on ", DeviceLabel(t), ", batches <= ", t.batch_size());
    if (s.scenario() == "server") {
      sweeps[key].push_back({s.target_qps(), s.latency_p50_ns(), s.latency_p90_ns(), s.latency_p99_ns()});
      bounds[key] = s.latency_bound_ms();
    }
    if (s.steps_size() >= 2) {
      std::vector<CurvePoint> points;
      for (const v1::ServingStep& step : s.steps()) {
        points.push_back({step.qps(), step.latency_p50_ns(), 0, step.latency_p99_ns()});
      }
      svg::LineChart c =
          Curve(absl::StrCat("Peak search, ", key,
                             s.peak_qps() > 0 ? absl::StrFormat(": peak %.1f q/s", s.peak_qps()) : ": no VALID rate"),
                points, s.latency_bound_ms(),
                "Each point one run of the search (its p50 and p99 from the agent, judged by the coordinator's rules); "
                "the final run at the peak is the task's stored result.");
      c.lines.erase(c.lines.begin() + 1);  // the search keeps p50 and p99
      out->push_back({absl::StrCat("serving-peak-", t.id()), c.title, svg::Render(c)});
    }
  }
  GenerativePlots(job, out);
  for (const auto& [key, points] : sweeps) {
    if (points.size() < 2) continue;
    const svg::LineChart c = Curve(absl::StrCat("Latency against load, ", key), points, bounds[key],
                                   "Each point one task (nearest-rank percentiles of every stored query).");
    out->push_back({absl::StrCat("serving-curve-", out->size()), c.title, svg::Render(c)});
  }
}

}  // namespace hetbench::report
