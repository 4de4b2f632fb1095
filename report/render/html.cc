#include "report/render/html.h"

#include <algorithm>

#include "common/validate_spec.h"
#include "report/render/validation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/render.h"
#include "report/render/answer.h"
#include "report/render/common.h"
#include "report/render/html_tables.h"
#include "report/render/svg.h"
#include "common/names.h"
#include "common/spec_yaml.h"

namespace hetbench::report {

namespace {

using svg::Escape;

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1100px;
       color: #1a1a1a; line-height: 1.4; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; margin-top: 32px; }
.meta { color: #444; }
.banner { background: #fff3cd; border: 1px solid #e0b000; padding: 8px 12px; margin: 12px 0; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.validity td:first-child { white-space: nowrap; }
table.validity td { overflow-wrap: anywhere; }
table.env { max-width: 100%; }
table.env td, table.env code { overflow-wrap: anywhere; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 8px; overflow-x: auto; font-size: 12px; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; margin: 12px 0; }
.scroll { overflow-x: auto; }
tr.invalid-row td { background: #fdecec; }
table.data { font-size: 12px; max-width: 100%; }
table.data td, table.data th { padding: 2px 6px; }
table.data td { overflow-wrap: anywhere; }
table.data td.valid, table.data td.invalid { white-space: nowrap; }
details { margin: 8px 0; }
summary { cursor: pointer; color: #0057a3; }
.valid { color: #006d2c; font-weight: bold; }
.invalid { color: #b30000; font-weight: bold; }
code { background: #f2f2f2; padding: 1px 4px; }
nav { margin-bottom: 12px; font-size: 15px; }
nav a, td a { color: #0057a3; }
form.filter { margin: 8px 0; }
form.filter label { margin-right: 10px; }
)";

std::string Cell(const std::string& s) { return absl::StrCat("<td>", Escape(s), "</td>"); }
std::string Num(double v, const char* fmt) { return absl::StrCat("<td class=\"num\">", absl::StrFormat(fmt, v), "</td>"); }

std::string Pre(const std::string& text) { return absl::StrCat("<pre>", Escape(text), "</pre>\n"); }

// Each task's environment: what every task shares in one name/value table,
// then a row per task with only what differs (nothing repeated down a column,
// and the page stays narrow: the long values wrap).
std::string Environment(const v1::Job& job) {
  struct Column {
    std::string header;
    std::vector<std::string> cells;  // HTML of each task's cell body
  };
  std::vector<Column> cols = {{"device model", {}}, {"host", {}}, {"executor", {}},
                              {"torch", {}},        {"BLAS", {}}, {"threads", {}},
                              {"seed", {}},         {"agent", {}}, {"model fingerprint", {}},
                              {"architecture fingerprint", {}}, {"measured or simulated", {}}};
  std::vector<std::string> tasks;
  for (const v1::Task& t : job.tasks()) {
    const v1::RunEnvironment& e = t.result().environment();
    if (e.agent_version().empty() && e.model_fingerprint().empty()) continue;
    tasks.push_back(t.id());
    const std::string values[] = {
        Escape(e.device_model()), Escape(e.hostname()), Escape(e.executor()), Escape(e.torch_version()),
        Escape(e.blas()), absl::StrCat(e.threads()), absl::StrCat(e.seed()), Escape(e.agent_version()),
        absl::StrCat("<code>", Escape(e.model_fingerprint()), "</code>"),
        absl::StrCat("<code>", Escape(e.architecture_fingerprint()), "</code>"),
        Escape(e.simulated() ? absl::StrCat("SIMULATED: ", e.simulation_profile()) : "measured")};
    for (size_t i = 0; i < cols.size(); ++i) cols[i].cells.push_back(values[i]);
  }
  if (tasks.empty()) return "<p>No task has reported its environment yet.</p>\n";
  std::string shared, header = "<tr><th>task</th>";
  std::vector<const Column*> differing;
  for (const Column& c : cols) {
    if (std::all_of(c.cells.begin(), c.cells.end(), [&](const std::string& v) { return v == c.cells[0]; })) {
      absl::StrAppend(&shared, "<tr><th>", c.header, "</th><td>", c.cells[0], "</td></tr>\n");
    } else {
      absl::StrAppend(&header, "<th>", c.header, "</th>");
      differing.push_back(&c);
    }
  }
  std::string out = absl::StrCat("<table class=\"env\" id=\"env-shared\"><caption>", tasks.size() == 1 ? "The task"
                                 : "Shared by every task", "</caption>\n", shared, "</table>\n");
  if (differing.empty()) return out;
  absl::StrAppend(&out, "<table class=\"env\" id=\"env-tasks\"><caption>Differing between tasks</caption>\n",
                  header, "</tr>\n");
  for (size_t r = 0; r < tasks.size(); ++r) {
    absl::StrAppend(&out, "<tr>", Cell(tasks[r]));
    for (const Column* c : differing) absl::StrAppend(&out, "<td>", c->cells[r], "</td>");
    absl::StrAppend(&out, "</tr>\n");
  }
  return out + "</table>\n";
}

// The results: a row per task and phase with its figures and verdict (an
// INVALID row is marked as a whole), and a row for a task without phases
// saying where it is (waiting and why, running, failed and why).
std::string Results(const v1::Job& job) {
  std::string out =
      "<div class=\"scroll\"><table class=\"validity\"><tr><th>task</th><th>model</th><th>device</th><th>batch</th>"
      "<th>phase</th><th>steps</th><th>samples/s</th><th>p50 ms/step</th><th>p99 ms/step</th><th>IQR/median</th>"
      "<th>quality</th><th>verdict</th><th>reasons</th></tr>\n";
  for (const v1::Task& t : job.tasks()) {
    if (t.result().phases().empty()) {
      const std::string where = !t.pending_reason().empty() ? absl::StrCat("waiting: ", t.pending_reason())
                                : !t.error().empty()        ? t.error()
                                                            : "-";
      absl::StrAppend(&out, "<tr>", Cell(t.id()), Cell(render::TaskModel(job, t)), Cell(render::DeviceLabel(t)),
                      Num(t.batch_size(), "%.0f"), "<td colspan=\"7\">", Escape(TaskStateName(t.state())),
                      "</td><td>-</td>", Cell(where), "</tr>\n");
      continue;
    }
    for (const v1::PhaseResult& p : t.result().phases()) {
      const v1::TimingStats& s = p.stats();
      std::string reasons;
      for (const std::string& r : p.invalid_reasons()) absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", r);
      absl::StrAppend(&out, p.valid() ? "<tr>" : "<tr class=\"invalid-row\">", Cell(t.id()),
                      Cell(render::TaskModel(job, t)), Cell(render::DeviceLabel(t)), Num(t.batch_size(), "%.0f"),
                      Cell(PhaseName(p.phase())), Num(static_cast<double>(s.count()), "%.0f"),
                      Num(s.samples_per_second(), "%.1f"), Num(s.p50_ns() / 1e6, "%.3f"), Num(s.p99_ns() / 1e6, "%.3f"),
                      Num(s.p50_ns() > 0 ? s.iqr_ns() / s.p50_ns() : 0, "%.3f"),
                      Cell(p.phase() == v1::PHASE_INFER ? render::Quality(t.result()) : "-"),
                      p.valid() ? "<td class=\"valid\">VALID</td>" : "<td class=\"invalid\">INVALID</td>",
                      Cell(reasons.empty() ? "-" : reasons), "</tr>\n");
    }
  }
  return out + "</table></div>\n";
}

// Text (the effective spec), folded.
std::string Folded(const std::string& summary, const std::string& text) {
  return absl::StrCat("<details><summary>", Escape(summary), "</summary>", Pre(text), "</details>\n");
}

}  // namespace

std::string HtmlHead(const std::string& title, const WebPage& web) {
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
      web.refresh_seconds > 0 ? absl::StrCat("<meta http-equiv=\"refresh\" content=\"", web.refresh_seconds, "\">")
                              : "",
      "<title>", Escape(title), "</title><style>", kStyle, "</style></head>\n<body>\n");
  if (web.nav) {
    absl::StrAppend(&out,
                    "<nav><a href=\"/jobs\">Jobs</a> · <a href=\"/agents\">Agents</a> · "
                    "<a href=\"/compare\">Compare</a> · <a href=\"/history\">History</a> · "
                    "<a href=\"/login\">Log in / out</a></nav>\n");
  }
  return out;
}

std::string RenderHtmlReport(const v1::Job& job, const std::vector<Plot>& plots, v1::DeviceKind baseline_kind,
                             bool compare_mismatched, const WebPage& web) {
  if (IsValidate(job.spec())) {  // verdicts, not timings
    return RenderValidationHtml(job, HtmlHead(absl::StrCat("hetbench validation ", job.id()), web));
  }
  bool simulated = false;
  for (const v1::Task& t : job.tasks()) {
    simulated |= t.result().environment().simulated();
  }
  std::string out = absl::StrCat(HtmlHead(absl::StrCat("hetbench report ", job.id()), web),
      "<h1>hetbench report: <span id=\"job-id\">", Escape(job.id()), "</span></h1>\n<p class=\"meta\">", Escape(job.spec().name()), job.spec().name().empty() ? "" : " · ",
      Escape(render::JobModels(job)), " · state <b>", JobStateName(job.state()), "</b> · created ",
      render::TimeString(job.created_unix_seconds()), " · finished ", render::TimeString(job.finished_unix_seconds()),
      " · ", job.tasks_size(), " tasks</p>\n");
  if (!job.error().empty()) absl::StrAppend(&out, "<p class=\"banner\">Job error: ", Escape(job.error()), "</p>\n");
  if (web.refresh_seconds > 0) {
    absl::StrAppend(&out, "<p class=\"meta\">Live: this page reloads every ", web.refresh_seconds,
                    " s while the job runs.</p>\n");
  }
  if (simulated) {
    absl::StrAppend(&out,
                    "<p class=\"banner\">Some results come from SIMULATED devices (the fleet simulator's profiles), "
                    "not from measurements. They are labelled in every figure and table.</p>\n");
  }
  if (const std::vector<AnswerLine> answers = Answers(job); !answers.empty()) {
    absl::StrAppend(&out, "<h2>The answer</h2>\n<ul class=\"answer\">\n");
    for (const AnswerLine& a : answers) {
      absl::StrAppend(&out, "<li><b>", Escape(a.model), ", ", Escape(a.phase), "</b>: ", Escape(a.text), "</li>\n");
    }
    absl::StrAppend(&out, "</ul>\n<p class=\"meta\">From VALID phases only. A ratio's range divides the two "
                          "figures at their p25 and p75 step times, crosswise: it spans the step-to-step spread "
                          "within these runs, not run-to-run variance (compare two runs for that).</p>\n");
  }
  absl::StrAppend(&out, "<h2>Results</h2>\n<p class=\"meta\">Every measured phase with its verdict; an INVALID "
                        "row is shaded and its bars are marked INVALID in the figures below.</p>\n",
                  Results(job));
  absl::StrAppend(&out, "<h2>Figures</h2>\n");
  if (plots.empty()) absl::StrAppend(&out, "<p>No succeeded task yet: nothing to draw.</p>\n");
  absl::StrAppend(&out, "<div class=\"figures\">\n");
  for (const Plot& p : plots) {  // each figure's title is in its SVG
    absl::StrAppend(&out, "<figure id=\"plot-", Escape(p.name), "\">\n", p.svg, "</figure>\n");
  }
  absl::StrAppend(&out, "</div>\n<h2>Tables</h2>\n",
                  render::HtmlTablesSection(job, baseline_kind, compare_mismatched));
  absl::StrAppend(&out, "<h2>Environment and fingerprints</h2>\n<p>A rerun is comparable when its model fingerprint "
                        "(architecture, initial weights, data) equals these.</p>\n",
                  Environment(job));
  absl::StrAppend(&out, "<h2>Effective spec</h2>\n",
                  Folded("The spec as the coordinator ran it (defaults filled in)", JobSpecToYaml(job.spec())));
  absl::StrAppend(&out, "<h2>Rerun</h2>\n<pre id=\"rerun\">hetbench get job ", Escape(job.id()),
                  " -o yaml &gt; spec.yaml &amp;&amp; hetbench submit -f spec.yaml --wait</pre>\n",
                  "<p class=\"meta\">Written by hetbench ", Escape(HetbenchVersion()), ".</p>\n</body></html>\n");
  return out;
}

}  // namespace hetbench::report
