#include "report/render/web.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "report/render/common.h"
#include "report/render/html.h"
#include "report/render/svg.h"
#include "common/names.h"

namespace hetbench::report {

namespace {

using svg::Escape;

std::string Page(const std::string& title, const std::string& body) {
  return absl::StrCat(HtmlHead(title, WebPage{true, 0}), "<h1>", Escape(title), "</h1>\n", body,
                      "<p class=\"meta\">hetbench ", Escape(HetbenchVersion()), " · read-only</p>\n</body></html>\n");
}

std::string Td(const std::string& text) { return absl::StrCat("<td>", Escape(text), "</td>"); }
std::string Link(const std::string& href, const std::string& text) {
  return absl::StrCat("<a href=\"", Escape(href), "\">", Escape(text), "</a>");
}

std::string Select(const std::string& name, const std::string& value, const std::vector<std::string>& options) {
  std::string out = absl::StrCat("<select name=\"", name, "\"><option value=\"\">any</option>");
  for (const std::string& o : options) {
    absl::StrAppend(&out, "<option", o == value ? " selected" : "", ">", Escape(o), "</option>");
  }
  return out + "</select>";
}

}  // namespace

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (v.empty()) continue;
    absl::StrAppend(&out, out.empty() ? "" : "&", k, "=");
    for (unsigned char c : v) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
        out += static_cast<char>(c);
      } else {
        absl::StrAppend(&out, absl::StrFormat("%%%02X", c));
      }
    }
  }
  return out;
}

std::string RenderJobsPage(const std::vector<v1::Job>& jobs, const JobsFilter& f, const std::string& next) {
  std::string body = absl::StrCat(
      "<form class=\"filter\" method=\"get\" action=\"/jobs\"><label>state ",
      Select("state", f.state, {"queued", "running", "succeeded", "failed", "cancelled"}), "</label><label>model ",
      "<input name=\"model\" size=\"12\" value=\"", Escape(f.model), "\"></label><label>device kind ",
      Select("kind", f.kind, {"cpu", "gpu", "tpu", "dpu", "qpu-sim"}), "</label><button>Filter</button></form>\n");
  absl::StrAppend(&body, "<table id=\"jobs\"><tr><th>job</th><th>name</th><th>models</th><th>state</th><th>tasks "
                         "done</th><th>created</th><th>finished</th></tr>\n");
  for (const v1::Job& j : jobs) {
    int done = 0;
    for (const v1::Task& t : j.tasks()) done += IsTerminal(t.state()) ? 1 : 0;
    absl::StrAppend(&body, "<tr><td>", Link("/jobs/" + j.id(), j.id()), "</td>", Td(j.spec().name()),
                    Td(j.spec().models().empty() ? j.spec().model() : absl::StrJoin(j.spec().models(), ", ")),
                    Td(JobStateName(j.state())), Td(absl::StrCat(done, "/", j.tasks_size())),
                    Td(render::TimeString(j.created_unix_seconds())),
                    Td(render::TimeString(j.finished_unix_seconds())), "</tr>\n");
  }
  absl::StrAppend(&body, "</table>\n");
  if (jobs.empty()) absl::StrAppend(&body, "<p>No job matches.</p>\n");
  if (!next.empty()) {
    absl::StrAppend(&body, "<p>", Link("/jobs?" + QueryString({{"state", f.state}, {"model", f.model},
                                                               {"kind", f.kind}, {"page_token", next}}),
                                       "Older jobs →"),
                    "</p>\n");
  }
  return Page("Jobs", body);
}

std::string RenderAgentsPage(const std::vector<v1::AgentInfo>& agents) {
  std::string body =
      "<table id=\"agents\"><tr><th>agent</th><th>host</th><th>version</th><th>device</th><th>kind</th>"
      "<th>model</th><th>cores</th><th>executors</th><th>power sensors</th><th>state</th></tr>\n";
  for (const v1::AgentInfo& a : agents) {
    const bool away = a.resume_deadline_unix_seconds() > 0;
    for (const v1::Device& d : a.devices()) {
      const bool busy = std::find(a.busy_device_ids().begin(), a.busy_device_ids().end(), d.id()) !=
                        a.busy_device_ids().end();
      std::string health;
      for (const v1::DeviceHealth& h : a.health()) {
        if (h.device_id() == d.id()) {
          health = absl::StrCat(", ", h.quarantined() ? "QUARANTINED " : "", VerdictName(h.verdict()), " in ",
                                h.job_id(), ": ", h.reason().substr(0, 160));
        }
      }
      absl::StrAppend(&body, "<tr>", Td(a.agent_id()), Td(a.hostname()), Td(a.version()), Td(d.id()),
                      Td(absl::StrCat(DeviceKindName(d.kind()), d.simulated() ? " (SIMULATED)" : "")), Td(d.model()),
                      Td(absl::StrCat(d.cores())), Td(absl::StrJoin(d.executors(), ", ")),
                      Td(d.power_sensors().empty() ? "-" : absl::StrJoin(d.power_sensors(), ", ")),
                      Td(absl::StrCat(busy ? "busy" : "idle", away ? ", disconnected" : "", health)), "</tr>\n");
    }
    if (a.devices().empty()) {
      absl::StrAppend(&body, "<tr>", Td(a.agent_id()), Td(a.hostname()), Td(a.version()),
                      "<td colspan=\"6\">devices unknown until it reconnects</td>",
                      Td(away ? absl::StrCat("disconnected: ", a.disconnect_reason()) : "connected"), "</tr>\n");
    }
  }
  absl::StrAppend(&body, "</table>\n");
  if (agents.empty()) absl::StrAppend(&body, "<p>No agent is connected.</p>\n");
  absl::StrAppend(&body, "<h2>Device kinds not offered, and why</h2>\n<table id=\"absent\"><tr><th>agent</th>"
                         "<th>kind</th><th>reason</th></tr>\n");
  for (const v1::AgentInfo& a : agents) {
    for (const v1::AbsentDevice& d : a.absent()) {
      absl::StrAppend(&body, "<tr>", Td(a.agent_id()), Td(DeviceKindName(d.kind())), Td(d.reason()), "</tr>\n");
    }
  }
  absl::StrAppend(&body, "</table>\n");
  return Page("Agents", body);
}

std::string RenderComparePage(const v1::Job* a, const v1::Job* b, const std::vector<PairResult>& results,
                              const std::vector<std::string>& unpaired, double threshold) {
  std::string body = absl::StrCat(
      "<form class=\"filter\" method=\"get\" action=\"/compare\"><label>job A <input name=\"a\" size=\"12\" value=\"",
      a ? Escape(a->id()) : "", "\"></label><label>job B <input name=\"b\" size=\"12\" value=\"",
      b ? Escape(b->id()) : "", "\"></label><label>threshold <input name=\"threshold\" size=\"5\" value=\"",
      absl::StrFormat("%g%%", threshold * 100), "\"></label><button>Compare</button></form>\n");
  if (a == nullptr || b == nullptr) return Page("Compare two jobs", body);
  absl::StrAppend(&body, "<table id=\"comparison\"><tr><th>pair</th><th>tasks</th><th>runs A/B</th><th>phase</th>"
                         "<th>statistic</th><th>A ms/sample</th><th>B ms/sample</th><th>B/A</th><th>95% CI</th><th>p</th>"
                         "<th>verdict</th></tr>\n");
  bool one_run = false;
  for (const PairResult& r : results) {
    const std::string tasks = absl::StrCat(r.pair.a[0]->id(), r.pair.a.size() > 1 ? " ..." : "", " / ",
                                           r.pair.b[0]->id(), r.pair.b.size() > 1 ? " ..." : "");
    if (!r.pair.refused.empty()) {
      absl::StrAppend(&body, "<tr>", Td(r.pair.key), Td(tasks), "<td colspan=\"9\">refused: ", Escape(r.pair.refused),
                      "</td></tr>\n");
      continue;
    }
    const StepComparison& c = r.result;
    one_run = one_run || !c.note.empty();
    absl::StrAppend(&body, "<tr>", Td(r.pair.key), Td(tasks), Td(absl::StrCat(c.runs_a, "/", c.runs_b)),
                    Td(PhaseName(r.phase)), Td(StatisticName(c.quantile)),
                    Td(absl::StrFormat("%.4f", c.stat_a_ns / 1e6)), Td(absl::StrFormat("%.4f", c.stat_b_ns / 1e6)),
                    Td(absl::StrFormat("%.3f", c.ratio)), Td(absl::StrFormat("%.3f-%.3f", c.ci_low, c.ci_high)),
                    Td(absl::StrFormat("%.2g", c.p_value)),
                    absl::StrCat("<td class=\"", c.verdict == "slower" ? "invalid" : c.verdict == "faster" ? "valid" : "",
                                 "\">", Escape(c.verdict), c.note.empty() ? "" : " *", "</td>"),
                    "</tr>\n");
  }
  absl::StrAppend(&body, "</table>\n");
  if (one_run) {
    absl::StrAppend(&body,
                    "<p>* a side of one run: the verdict ignores run-to-run variance, which on a busy machine can exceed "
                    "the threshold. Submit with <code>--repeats 3</code> to compare runs.</p>\n");
  }
  for (const PairResult& r : results) {
    if (const std::string far = RunNotesLine(r); !far.empty()) {
      absl::StrAppend(&body, "<p class=\"far-runs\">", Escape(far), "</p>\n");
    }
  }
  for (const std::string& u : unpaired) absl::StrAppend(&body, "<p>unpaired: ", Escape(u), "</p>\n");
  absl::StrAppend(&body, "<p class=\"meta\">",
                  Escape(absl::StrFormat(
                      "B/A: time per sample of %s over %s (median; a serving phase's reported percentile). With 2 or "
                      "more runs a side (repeats): the geometric mean of the runs' statistics, 95%% CI Student's t on "
                      "the runs' degrees of freedom with a hierarchical bootstrap's standard error (the sides' "
                      "variances pooled when all runs were on one agent and device; runs that took turns there "
                      "compared couple by couple, each couple's difference the unit; a run whose machine probe, read "
                      "during it, moved beyond %g%% cut to its steps in one state; runs whose machine probe lay "
                      "beyond %g%% of the comparison's median reading left out, and runs more than %g%% from their "
                      "side's median run, with 3 runs or more a side, named below); with one run a "
                      "side: percentile bootstrap over the steps of both runs, p two-sided Mann-Whitney U. "
                      "slower/faster with runs when the CI excludes 1 and B/A lies beyond 1 +/- %.3g; with one run a "
                      "side when the whole CI lies beyond it.",
                      b->id(), a->id(), kProbeBeyond * 100, kProbeBeyond * 100, kFarRunBeyond * 100, threshold)),
                  "</p>\n");
  return Page(absl::StrCat("Compare ", a->id(), " with ", b->id()), body);
}

std::string RenderHistoryPage(const std::vector<HistoryRow>& rows, const std::string& model, const std::string& kind,
                              double threshold) {
  std::string body = absl::StrCat(
      "<form class=\"filter\" method=\"get\" action=\"/history\"><label>model <input name=\"model\" size=\"12\" "
      "value=\"",
      Escape(model), "\"></label><label>device kind ", Select("kind", kind, {"cpu", "gpu", "tpu", "dpu", "qpu-sim"}),
      "</label><button>Show</button></form>\n");
  if (model.empty()) return Page("History", body);
  if (!rows.empty()) {
    // Samples/s p50 (band p25-p75) against the time each run finished, one line per series.
    svg::LineChart chart;
    chart.title = absl::StrCat("Training throughput of ", model, " over time");
    chart.x_is_time = true;
    chart.x_label = "run finished";
    chart.y_label = "samples/s (p50 step)";
    chart.footnote = "band: p25-p75 steps; one line per device model, executor, batch and fingerprint";
    std::map<std::string, size_t> line_of;
    for (const HistoryRow& r : rows) {
      auto it = line_of.find(r.series);
      if (it == line_of.end()) {
        it = line_of.emplace(r.series, chart.lines.size()).first;
        const std::string name = r.series.substr(0, r.series.rfind(", "));  // without the fingerprint
        chart.lines.push_back({name, {}});
      }
      chart.lines[it->second].points.push_back(
          {r.finished_unix, r.samples_per_second_p50, r.p25, r.p75});
    }
    absl::StrAppend(&body, "<figure id=\"plot-history\">", svg::Render(chart), "</figure>\n");
  }
  absl::StrAppend(&body, "<table id=\"history\"><tr><th>finished</th><th>task</th><th>device</th><th>batch</th>"
                         "<th>runs</th><th>samples/s p50</th><th>p25-p75</th><th>mJ/sample</th><th>change</th></tr>\n");
  for (const HistoryRow& r : rows) {
    const std::string change = ChangeText(r);
    absl::StrAppend(&body, "<tr>", Td(render::TimeString(r.finished_unix)),
                    "<td>", Link("/jobs/" + r.job->id(), r.task->id()), "</td>", Td(render::DeviceLabel(*r.task, false)),
                    Td(absl::StrCat(r.task->batch_size())), Td(absl::StrCat(r.runs.size())),
                    Td(absl::StrFormat("%.1f", r.samples_per_second_p50)),
                    Td(absl::StrFormat("%.1f-%.1f", r.p25, r.p75)),
                    Td(r.joules_per_sample > 0 ? absl::StrFormat("%.3g %s", r.joules_per_sample * 1e3, r.energy_source)
                                               : "-"),
                    Td(change), "</tr>\n");
  }
  absl::StrAppend(&body, "</table>\n");
  if (rows.empty()) absl::StrAppend(&body, "<p>No succeeded ", Escape(model), " task.</p>\n");
  absl::StrAppend(&body, "<p class=\"meta\">", absl::StrFormat("change: against the previous row of its series by "
                                                               "compare's test at a threshold of %.3g (runs as the "
                                                               "unit when both rows have 2 or more; one run a side "
                                                               "ignores run-to-run variance). Figures: the median over "
                                                               "a row's runs.",
                                                               threshold),
                  "</p>\n");
  return Page(absl::StrCat("History of ", model), body);
}

std::string RenderLoginPage(bool tokens_on, bool plain_http, const std::string& error) {
  if (!tokens_on) {
    return Page("Log in", absl::StrCat("<p>This coordinator has no bearer tokens: its pages are open. ",
                                       Link("/jobs", "Jobs"), "</p>\n"));
  }
  std::string body;
  if (!error.empty()) absl::StrAppend(&body, "<p class=\"banner\">", Escape(error), "</p>\n");
  if (plain_http) {
    absl::StrAppend(&body,
                    "<p class=\"banner\">This page is plain HTTP: the token you type crosses the network in the "
                    "clear unless you reached it over loopback (an SSH tunnel, say). Start the coordinator with "
                    "--tls-cert and --tls-key to serve it over HTTPS.</p>\n");
  }
  absl::StrAppend(&body,
                  "<form method=\"post\" action=\"/login\"><label>Client token <input type=\"password\" "
                  "name=\"token\" autocomplete=\"current-password\" autofocus required></label> "
                  "<button type=\"submit\">Log in</button></form>\n"
                  "<p>A client token from the coordinator's --token-file. The browser keeps a session cookie "
                  "(HttpOnly, SameSite=Strict), never the token. Scripts may send Authorization: Bearer TOKEN "
                  "instead.</p>\n"
                  "<form method=\"post\" action=\"/logout\"><button type=\"submit\">Log out</button> (ends this "
                  "browser's session)</form>\n");
  return Page("Log in", body);
}

std::string RenderErrorPage(int http_status, const std::string& message) {
  return Page(absl::StrCat("Error ", http_status),
              absl::StrCat("<p class=\"banner\">", Escape(message), "</p>\n",
                           http_status == 401 ? absl::StrCat("<p>", Link("/login", "Log in"), "</p>\n") : ""));
}

}  // namespace hetbench::report
