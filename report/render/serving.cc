#include "report/render/serving.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "report/render/common.h"

namespace hetbench::report {

using namespace render;  // NOLINT: the shared lookups and formats of every view

namespace {

std::string MsCell(int64_t ns) { return ns > 0 ? Ms(static_cast<double>(ns)) : "-"; }

}  // namespace

std::string RenderServing(const v1::Job& job, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  const bool csv = format == OutputFormat::kCsv;
  for (const v1::Task& t : job.tasks()) {
    const v1::PhaseResult* p = FindPhase(t, v1::PHASE_SERVE);
    if (p == nullptr) continue;
    const v1::ServingRun& s = t.result().serving();
    const std::string pct = absl::StrFormat("%g", s.percentile());
    if (csv) {
      rows.push_back({job.id(), t.id(), TaskModel(job, t), t.device_id(), DeviceKindName(t.device_kind()),
                      absl::StrCat(t.batch_size()), s.scenario(), absl::StrCat(s.target_qps()),
                      absl::StrCat(s.achieved_qps()), absl::StrCat(s.samples_per_second()),
                      absl::StrCat(s.queries_scheduled()), absl::StrCat(s.queries_answered()),
                      absl::StrCat(s.latency_p50_ns()), absl::StrCat(s.latency_p90_ns()),
                      absl::StrCat(s.latency_p99_ns()), pct, absl::StrCat(s.latency_at_percentile_ns()),
                      absl::StrCat(s.early_stopping_ns()), absl::StrCat(s.latency_bound_ms()),
                      absl::StrCat(s.over_bound()), absl::StrCat(s.issue_delay_p50_ns()),
                      absl::StrCat(s.issue_delay_p99_ns()), absl::StrCat(s.issue_delay_max_ns()),
                      absl::StrCat(s.batches()), absl::StrCat(s.mean_batch()), absl::StrCat(s.instances()),
                      p->valid() ? "true" : "false", absl::StrJoin(p->invalid_reasons(), "; ")});
      continue;
    }
    rows.push_back({t.id(), TaskModel(job, t), DeviceLabel(t), absl::StrCat(t.batch_size()), s.scenario(),
                    s.target_qps() > 0 ? Num(s.target_qps(), "%.1f") : "-", Num(s.achieved_qps(), "%.1f"),
                    absl::StrCat(s.queries_answered(), "/", s.queries_scheduled()), MsCell(s.latency_p50_ns()),
                    MsCell(s.latency_p90_ns()), MsCell(s.latency_p99_ns()),
                    absl::StrCat("p", pct, " ", MsCell(s.early_stopping_ns())),
                    s.latency_bound_ms() > 0 ? Num(s.latency_bound_ms(), "%g") : "-",
                    s.latency_bound_ms() > 0 ? absl::StrCat(s.over_bound()) : "-",
                    Num(static_cast<double>(s.issue_delay_p99_ns()) * 1e-3, "%.1f"), Num(s.mean_batch(), "%.2f"),
                    p->valid() ? "yes" : "NO"});
  }
  if (rows.empty()) return "";
  if (csv) {
    return CsvLines(
        "job_id,task_id,model,device_id,device_kind,max_batch,scenario,target_qps,achieved_qps,samples_per_second,"
        "queries_scheduled,queries_answered,latency_p50_ns,latency_p90_ns,latency_p99_ns,percentile,"
        "latency_at_percentile_ns,early_stopping_ns,latency_bound_ms,over_bound,issue_delay_p50_ns,issue_delay_p99_ns,"
        "issue_delay_max_ns,batches,mean_batch,instances,valid,invalid_reasons",
        rows);
  }
  return absl::StrCat(
      "Serving (latency from each query's scheduled time; nearest-rank percentiles of every query; EARLY_STOP is the "
      "reported percentile's early-stopping estimate at 99% confidence):\n",
      FormatTable({"TASK", "MODEL", "DEVICE", "MAX_BATCH", "SCENARIO", "TARGET_QPS", "ACHIEVED_QPS", "ANSWERED",
                   "P50_MS", "P90_MS", "P99_MS", "EARLY_STOP_MS", "BOUND_MS", "OVER_BOUND", "ISSUE_DELAY_P99_US",
                   "MEAN_BATCH", "VALID"},
                  rows));
}

std::string ServingFooter(const v1::TaskResult& r) {
  const v1::ServingRun& s = r.serving();
  return absl::StrFormat(
      "; served by %s: %d batches (mean %.2f of at most %d, %d instance%s, queue delay <= %g ms), issue delay p50 "
      "%.1f us, p99 %.1f us, max %.1f us; warm-up %.3f s, run %.3f s",
      s.compute(), s.batches(), s.mean_batch(), s.max_batch(), s.instances(), s.instances() == 1 ? "" : "s",
      s.max_queue_delay_ms(), static_cast<double>(s.issue_delay_p50_ns()) * 1e-3,
      static_cast<double>(s.issue_delay_p99_ns()) * 1e-3, static_cast<double>(s.issue_delay_max_ns()) * 1e-3,
      r.warmup_seconds(), r.evaluate_seconds());
}

}  // namespace hetbench::report
