#include "report/render/html_tables.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "report/render.h"
#include "report/render/common.h"
#include "report/render/serving.h"
#include "report/render/svg.h"

namespace hetbench::report::render {
namespace {

using svg::Escape;

bool IsNumber(const std::string& s, double* v) { return !s.empty() && absl::SimpleAtod(s, v); }

// A table folded under `summary`, its notes after it; nothing when the table is empty.
std::string Folded(const std::string& summary, const std::string& table, const std::string& notes = "") {
  if (table.empty()) return "";
  return absl::StrCat("<details><summary>", Escape(summary), "</summary>\n", table, notes, "</details>\n");
}

// The notes a CLI table prints below it, as paragraphs: the lines after its
// last row (FormatTable pads columns with two spaces or more; prose does not).
std::string NotesAfter(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  size_t first = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StrContains(lines[i], "  ")) first = i + 1;
  }
  std::string out;
  for (size_t i = first; i < lines.size(); ++i) absl::StrAppend(&out, "<p class=\"meta\">", Escape(lines[i]), "</p>\n");
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> ParseCsv(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, any = false;
  for (size_t i = 0; i < csv.size(); ++i) {
    const char c = csv[i];
    if (quoted) {
      if (c == '"' && i + 1 < csv.size() && csv[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::move(cell));
      cell.clear();
      any = true;
    } else if (c == '\n') {
      if (any || !cell.empty()) {
        row.push_back(std::move(cell));
        rows.push_back(std::move(row));
      }
      row.clear();
      cell.clear();
      any = false;
    } else if (c != '\r') {
      cell += c;
      any = true;
    }
  }
  if (any || !cell.empty()) {
    row.push_back(std::move(cell));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string CsvAsHtmlTable(const std::string& csv, const std::vector<HtmlColumn>& columns, const std::string& id) {
  return RowsAsHtmlTable(ParseCsv(csv), columns, id);
}

std::string RowsAsHtmlTable(const std::vector<std::vector<std::string>>& rows, const std::vector<HtmlColumn>& columns,
                            const std::string& id) {
  if (rows.size() < 2) return "";
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < rows[0].size(); ++i) index[rows[0][i]] = i;
  const auto valid = index.find("valid");
  std::string out = absl::StrCat("<table class=\"data\" id=\"", Escape(id), "\"><tr>");
  for (const HtmlColumn& c : columns) absl::StrAppend(&out, "<th>", Escape(c.header), "</th>");
  absl::StrAppend(&out, "</tr>\n");
  for (size_t r = 1; r < rows.size(); ++r) {
    const std::vector<std::string>& row = rows[r];
    const bool invalid = valid != index.end() && valid->second < row.size() && row[valid->second] == "false";
    absl::StrAppend(&out, invalid ? "<tr class=\"invalid-row\">" : "<tr>");
    for (const HtmlColumn& c : columns) {
      const auto at = index.find(c.csv);
      std::string text = at != index.end() && at->second < row.size() ? row[at->second] : "";
      double v = 0;
      const bool number = IsNumber(text, &v);
      if (number && c.decimals >= 0) text = absl::StrFormat("%.*f", c.decimals, v * c.scale);
      if (c.csv == "valid") text = text == "false" ? "INVALID" : text == "true" ? "VALID" : text;
      const char* cls = c.csv == "valid" ? (text == "INVALID" ? " class=\"invalid\"" : " class=\"valid\"")
                        : number         ? " class=\"num\""
                                         : "";
      absl::StrAppend(&out, "<td", cls, ">", text.empty() ? "-" : Escape(text), "</td>");
    }
    absl::StrAppend(&out, "</tr>\n");
  }
  return out + "</table>\n";
}

std::string HtmlTablesSection(const v1::Job& job, v1::DeviceKind baseline_kind, bool compare_mismatched) {
  std::string out;
  // The report's CSV, parsed once: the speedup table and the roofline.
  const std::vector<std::vector<std::string>> report =
      ParseCsv(RenderReport(job, OutputFormat::kCsv, compare_mismatched, baseline_kind));
  absl::StrAppend(&out, Folded("Speedup, power, energy and cost per task and phase",
                               RowsAsHtmlTable(report,
                                               {{"task_id", "task"},
                                                {"model", "model"},
                                                {"device_id", "device"},
                                                {"batch_size", "batch"},
                                                {"phase", "phase"},
                                                {"samples_per_second", "samples/s", 1, 1},
                                                {"speedup", "speedup (x)", 1, 2},
                                                {"average_watts", "power (W)", 1, 1},
                                                {"joules_per_sample", "energy (mJ/sample)", 1e3, 4},
                                                {"energy_source", "energy source"},
                                                {"usd_per_1000_samples", "cost (USD/1k samples)", 1, 6},
                                                {"valid", "verdict"}},
                                               "table-speedup"),
                               "<p class=\"meta\">Speedup is samples/s over the baseline task's (the same model "
                               "and batch on the baseline device kind). hetbench report ID prints every "
                               "column; with -o csv, as plain numbers.</p>\n"));
  {
    const std::string study_csv = RenderStudyTable(job, baseline_kind, compare_mismatched, OutputFormat::kCsv);
    absl::StrAppend(&out, Folded("The reference study's table",
                                 CsvAsHtmlTable(study_csv,
                                                {{"model", "model"},
                                                 {"device", "device"},
                                                 {"batch", "batch"},
                                                 {"train_s", "train (s)", 1, 3},
                                                 {"test_s", "test (s)", 1, 3},
                                                 {"train_vs_base", "train vs base (%)", 100, 0},
                                                 {"test_vs_base", "test vs base (%)", 100, 0},
                                                 {"test_accuracy", "accuracy", 1, 4},
                                                 {"test_mse", "MSE", 1, 4},
                                                 {"nominal_w", "nominal (W)"},
                                                 {"e_pxt_j", "E = P x T (J)", 1, 1},
                                                 {"avg_w", "measured power (W)", 1, 1},
                                                 {"energy_j", "energy (J)", 1, 1},
                                                 {"energy_source", "energy source"},
                                                 {"valid", "verdict"}},
                                                "table-study"),
                                 NotesAfter(RenderStudyTable(job, baseline_kind, compare_mismatched))));
  }
  {
    const std::string layers = RenderLayers(job, OutputFormat::kCsv, baseline_kind);
    absl::StrAppend(&out,
                    Folded("Per-layer times", CsvAsHtmlTable(layers,
                                                             {{"task_id", "task"},
                                                              {"batch_size", "batch"},
                                                              {"layer", "layer"},
                                                              {"name", "name"},
                                                              {"forward_p50_ns", "forward p50 (us)", 1e-3, 1},
                                                              {"backward_p50_ns", "backward p50 (us)", 1e-3, 1},
                                                              {"inference_p50_ns", "inference p50 (us)", 1e-3, 1},
                                                              {"forward_flops_per_sample", "MFLOP/sample", 1e-6, 3},
                                                              {"train_joules_per_sample", "train (mJ/sample)", 1e3, 4},
                                                              {"infer_joules_per_sample", "infer (mJ/sample)", 1e3, 4}},
                                                             "table-layers")));
  }
  // The roofline: the report's FLOP columns, the rows that have a FLOP count.
  std::vector<std::vector<std::string>> roof = report;
  if (!roof.empty()) {
    const auto flops = std::find(roof[0].begin(), roof[0].end(), "flops_per_sample") - roof[0].begin();
    roof.erase(std::remove_if(roof.begin() + 1, roof.end(),
                              [flops](const std::vector<std::string>& row) {
                                double v = 0;
                                return static_cast<size_t>(flops) >= row.size() || !IsNumber(row[flops], &v) || v <= 0;
                              }),
               roof.end());
  }
  {
    absl::StrAppend(&out, Folded("Roofline (every batch size)",
                                 RowsAsHtmlTable(roof,
                                                 {{"task_id", "task"},
                                                  {"model", "model"},
                                                  {"device_id", "device"},
                                                  {"batch_size", "batch"},
                                                  {"phase", "phase"},
                                                  {"flops_per_sample", "MFLOP/sample", 1e-6, 2},
                                                  {"achieved_gflops", "achieved (GFLOP/s)", 1, 2},
                                                  {"calibrated_gemm_gflops", "SGEMM peak (GFLOP/s)", 1, 1},
                                                  {"valid", "verdict"}},
                                                 "table-roofline"),
                                 NotesAfter(RenderRoofline(job))));
  }
  {
    const std::string serving = RenderServing(job, OutputFormat::kCsv);
    absl::StrAppend(&out, Folded("Serving", CsvAsHtmlTable(serving,
                                                           {{"task_id", "task"},
                                                            {"model", "model"},
                                                            {"device_id", "device"},
                                                            {"scenario", "scenario"},
                                                            {"target_qps", "target (q/s)", 1, 1},
                                                            {"achieved_qps", "achieved (q/s)", 1, 1},
                                                            {"queries_answered", "answered"},
                                                            {"latency_p50_ns", "p50 (ms)", 1e-6, 3},
                                                            {"latency_p99_ns", "p99 (ms)", 1e-6, 3},
                                                            {"latency_bound_ms", "bound (ms)"},
                                                            {"issue_delay_p99_ns", "issue delay p99 (ms)", 1e-6, 3},
                                                            {"mean_batch", "mean batch", 1, 2},
                                                            {"valid", "verdict"}},
                                                           "table-serving")));
  }
  return out;
}

}  // namespace hetbench::report::render
