#include "report/render/validation.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "report/render/common.h"
#include "report/render/svg.h"

namespace hetbench::report {

using namespace render;  // NOLINT: the shared lookups and formats of every view

namespace {

std::string G(double v) { return absl::StrFormat("%.4g", v); }

std::string DeviceCell(const v1::DeviceVerdict& d) {
  return d.device_id().empty() ? absl::StrCat("(", DeviceKindName(d.kind()), ")") : d.device_id();
}

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string Html(const std::string& s) { return svg::Escape(s); }

std::string VerdictCell(v1::Verdict v) {
  const char* colour = v == v1::VERDICT_FAIL       ? "#b00020"
                       : v == v1::VERDICT_DEGRADED ? "#a05a00"
                       : v == v1::VERDICT_PASS     ? "#006b3c"
                                                   : "#555";
  return absl::StrCat("<td style=\"color:", colour, ";font-weight:bold\">", VerdictName(v), "</td>");
}

constexpr int kNamedPerRow = 4;  // outliers named in a strip's row; the rest counted

// One test: every compared device's ratio to its SKU's baseline on one axis,
// a row per SKU, the band from the DEGRADED threshold to 1 shaded, outliers
// in colour with their device named.
std::string StripPlot(const std::string& test, const v1::ValidationReport& r) {
  struct Dot {
    double ratio;
    v1::Verdict verdict;
    std::string label;
    double threshold;
  };
  std::map<std::string, std::vector<Dot>> by_sku;
  double lo = 0.9, hi = 1.1;
  for (const v1::DeviceVerdict& d : r.devices()) {
    for (const v1::TestVerdict& t : d.tests()) {
      if (t.test() != test || t.baseline_median() <= 0) continue;
      by_sku[d.sku()].push_back(
          {t.ratio(), t.verdict(), absl::StrCat(d.agent_id(), "/", d.device_id()), t.threshold()});
      lo = std::min(lo, t.ratio() - 0.02);
      hi = std::max(hi, t.ratio() + 0.02);
    }
  }
  if (by_sku.empty()) return "";
  lo = std::max(lo, 0.0);
  const double width = 760, left = 220, right = 20, row = 46, top = 34;
  const double height = top + row * static_cast<double>(by_sku.size()) + 40;
  auto x = [&](double v) { return left + (v - lo) / (hi - lo) * (width - left - right); };
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\" role=\"img\">"
      "<title>%s: each device against its SKU's baseline</title>"
      "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">%s: figure / its SKU's baseline</text>",
      width, height, width, height, Html(test), left, Html(test));
  int i = 0;
  for (const auto& [sku, dots] : by_sku) {
    const double y = top + row * i + row / 2;
    const double threshold = dots.front().threshold;
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#dbeee0\"/>"
                          "<text x=\"4\" y=\"%.1f\">%s</text>",
                          x(threshold), y - row / 2 + 4, x(hi) - x(threshold), row - 8, y + 4,
                          Html(sku.size() > 34 ? sku.substr(0, 33) + "…" : sku));
    int k = 0, named = 0, unnamed = 0;
    for (const Dot& d : dots) {
      const bool out_of_band = d.verdict == v1::VERDICT_DEGRADED || d.verdict == v1::VERDICT_FAIL;
      if (out_of_band && named >= kNamedPerRow) ++unnamed;
      const double jitter = ((k++ % 5) - 2) * 4.0;
      absl::StrAppendFormat(
          &out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\"><title>%s: %.3f (%s)</title></circle>",
          x(d.ratio), y + jitter, out_of_band ? 5 : 3, out_of_band ? "#d55e00" : "#0072b2", Html(d.label), d.ratio,
          VerdictName(d.verdict));
      if (out_of_band && named < kNamedPerRow) {
        absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d55e00\">%s</text>", x(d.ratio) + 7,
                              y + jitter - 6, Html(d.label));
        ++named;
      }
    }
    if (unnamed > 0) {  // the rest are in the device table
      absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d55e00\">+%d more outliers</text>",
                            width - right - 110, y + row / 2 - 4, unnamed);
    }
    ++i;
  }
  const double axis_y = top + row * static_cast<double>(by_sku.size()) + 6;
  absl::StrAppendFormat(&out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>", left,
                        width - right, axis_y, axis_y);
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" "
                        "stroke-dasharray=\"4 3\"/>",
                        x(1), x(1), top - 4, axis_y);
  for (int t = 0; t <= 4; ++t) {
    const double v = lo + (hi - lo) * t / 4;
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f</text>", x(v), axis_y + 16, v);
  }
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">ratio to the SKU's baseline (dashed: "
                        "1.0; shaded: at or above the DEGRADED threshold)</text></svg>",
                        (left + width - right) / 2, axis_y + 32);
  return out;
}

}  // namespace

std::string RenderValidationHtml(const v1::Job& job, const std::string& head) {
  const v1::ValidationReport& r = job.validation();
  std::string out = absl::StrCat(head, "<h1>hetbench validation: <span id=\"job-id\">", Html(job.id()),
                                 "</span></h1>\n<p class=\"meta\">level ", Html(job.spec().validate().level()),
                                 " · state <b>", JobStateName(job.state()), "</b> · ", r.devices_size(), " devices on ",
                                 r.nodes_size(), " nodes</p>\n");
  if (r.simulated()) {
    absl::StrAppend(&out,
                    "<p class=\"banner\">SIMULATED devices (the fleet simulator): nothing here was measured.</p>\n");
  }
  if (!IsTerminal(job.state())) absl::StrAppend(&out, "<p>The job is still running: no verdicts yet.</p>\n");
  absl::StrAppend(
      &out,
      "<h2>Nodes</h2>\n<table id=\"nodes\"><tr><th>node</th><th>devices</th><th>verdict</th><th>worst</th></tr>\n");
  for (const v1::NodeVerdict& n : r.nodes()) {
    absl::StrAppend(&out, "<tr><td>", Html(n.agent_id()), "</td><td>", n.devices(), "</td>", VerdictCell(n.verdict()),
                    "<td>", Html(n.reason()), "</td></tr>\n");
  }
  absl::StrAppend(&out,
                  "</table>\n<h2>Devices</h2>\n<table id=\"devices\"><tr><th>node</th><th>device</th><th>kind</th>"
                  "<th>verdict</th><th>reason</th></tr>\n");
  for (const v1::DeviceVerdict& d : r.devices()) {
    absl::StrAppend(&out, "<tr><td>", Html(Dash(d.agent_id())), "</td><td>", Html(DeviceCell(d)), "</td><td>",
                    DeviceKindName(d.kind()), "</td>", VerdictCell(d.verdict()), "<td>", Html(d.reason()),
                    "</td></tr>\n");
  }
  absl::StrAppend(&out, "</table>\n<h2>Each test against its SKU</h2>\n");
  std::vector<std::string> tests;
  for (const v1::DeviceVerdict& d : r.devices()) {
    for (const v1::TestVerdict& t : d.tests()) {
      if (std::find(tests.begin(), tests.end(), t.test()) == tests.end()) tests.push_back(t.test());
    }
  }
  int drawn = 0;
  for (const std::string& t : tests) {
    const std::string svg = StripPlot(t, r);
    if (svg.empty()) continue;
    ++drawn;
    absl::StrAppend(&out, "<figure id=\"strip-", Html(t), "\">", svg, "</figure>\n");
  }
  if (drawn == 0) {
    absl::StrAppend(&out,
                    "<p>No figure was compared with a baseline (a fleet baseline needs 3 devices of a SKU; "
                    "or pass a saved one with --baseline).</p>\n");
  }
  absl::StrAppend(&out, "<h2>Every test</h2>\n<pre>", Html(RenderValidation(job, OutputFormat::kTable)), "</pre>\n",
                  "<p class=\"meta\">Written by hetbench ", Html(HetbenchVersion()), ".</p>\n</body></html>\n");
  return out;
}

std::string RenderValidation(const v1::Job& job, OutputFormat format) {
  const v1::ValidationReport& r = job.validation();
  if (format == OutputFormat::kJson) {
    v1::Job only;
    only.set_id(job.id());
    only.set_state(job.state());
    *only.mutable_validation() = r;
    *only.mutable_spec()->mutable_validate() = job.spec().validate();
    only.mutable_spec()->mutable_validate()->clear_baseline();
    return ToJson(only);
  }
  if (format == OutputFormat::kCsv) {
    std::vector<std::vector<std::string>> rows;
    for (const v1::DeviceVerdict& d : r.devices()) {
      if (d.tests().empty()) {
        rows.push_back({job.id(), d.agent_id(), d.device_id(), DeviceKindName(d.kind()), d.sku(),
                        VerdictName(d.verdict()), "", "", "", "", "", "", "", "", "", "", d.reason(),
                        d.simulated() ? "simulated" : "measured"});
      }
      for (const v1::TestVerdict& t : d.tests()) {
        const bool compared = t.baseline_median() > 0;
        rows.push_back({job.id(), d.agent_id(), d.device_id(), DeviceKindName(d.kind()), d.sku(),
                        VerdictName(d.verdict()), t.test(), VerdictName(t.verdict()), t.unit(),
                        t.value() > 0 ? CsvNumber(t.value()) : "", compared ? CsvNumber(t.baseline_median()) : "",
                        compared ? CsvNumber(t.baseline_spread()) : "", compared ? CsvNumber(t.ratio()) : "",
                        compared ? CsvNumber(t.ratio_low()) : "", compared ? CsvNumber(t.ratio_high()) : "",
                        compared ? CsvNumber(t.threshold()) : "", t.reason(),
                        d.simulated() ? "simulated" : "measured"});
      }
    }
    return CsvLines(
        "job,agent,device,kind,sku,device_verdict,test,test_verdict,unit,value,baseline_median,baseline_spread,"
        "ratio,ratio_low,ratio_high,threshold,reason,source",
        rows);
  }
  std::string out;
  const v1::ValidateSpec& v = job.spec().validate();
  int judged = 0;
  for (const v1::DeviceVerdict& d : r.devices()) judged += d.task_id().empty() ? 0 : 1;
  absl::StrAppend(&out, "validation ", job.id(), " (", v.level(), "; ", judged, judged == 1 ? " device" : " devices",
                  " on ", r.nodes_size(), r.nodes_size() == 1 ? " node; " : " nodes; ",
                  r.simulated() ? "SIMULATED devices: nothing was measured" : "measured", ")\n");
  if (!IsTerminal(job.state())) absl::StrAppend(&out, "the job is ", JobStateName(job.state()), ": no verdicts yet\n");
  std::vector<std::vector<std::string>> nodes;
  for (const v1::NodeVerdict& n : r.nodes()) {
    nodes.push_back({n.agent_id(), absl::StrCat(n.devices()), VerdictName(n.verdict()), n.reason()});
  }
  if (!nodes.empty()) absl::StrAppend(&out, "\n", FormatTable({"NODE", "DEVICES", "VERDICT", "WORST"}, nodes));
  std::vector<std::vector<std::string>> devices;
  for (const v1::DeviceVerdict& d : r.devices()) {
    devices.push_back(
        {Dash(d.agent_id()), DeviceCell(d), DeviceKindName(d.kind()), VerdictName(d.verdict()), d.reason()});
  }
  if (!devices.empty()) {
    absl::StrAppend(&out, "\n", FormatTable({"NODE", "DEVICE", "KIND", "VERDICT", "REASON"}, devices));
  }
  for (const v1::DeviceVerdict& d : r.devices()) {
    if (d.tests().empty()) continue;
    absl::StrAppend(&out, "\n", Dash(d.agent_id()), "/", DeviceCell(d), " ", VerdictName(d.verdict()),
                    d.simulated() ? " (simulated)" : "", "  sku ", d.sku(), "\n");
    std::vector<std::vector<std::string>> rows;
    for (const v1::TestVerdict& t : d.tests()) {
      const bool compared = t.baseline_median() > 0;
      rows.push_back({t.test(), t.value() > 0 ? G(t.value()) : "-", Dash(t.unit()),
                      compared ? absl::StrFormat("%.3f", t.ratio()) : "-",
                      compared ? absl::StrFormat("%.3f-%.3f", t.ratio_low(), t.ratio_high()) : "-",
                      compared ? absl::StrFormat("%.3f", t.threshold()) : "-", VerdictName(t.verdict()),
                      compared ? t.baseline_source() : t.reason()});
    }
    absl::StrAppend(&out,
                    FormatTable({"TEST", "VALUE", "UNIT", "RATIO", "INTERVAL", "DEGRADED<", "VERDICT", "NOTE"}, rows));
    for (const v1::TestVerdict& t : d.tests()) {
      if (t.verdict() == v1::VERDICT_FAIL || t.verdict() == v1::VERDICT_DEGRADED) {
        absl::StrAppend(&out, "  ", t.test(), ": ", t.reason(), "\n");
      }
    }
  }
  for (const std::string& n : r.notes()) absl::StrAppend(&out, "\nnote: ", n, "\n");
  absl::StrAppend(&out, "\nthresholds: a test is DEGRADED when its figure is below its SKU's baseline by more than ",
                  G(100 * v.min_effect()), "% and ", G(v.spread_multiple()), " robust spreads (floor ",
                  G(100 * v.spread_floor()), "% of the median), with its ", G(100 * v.confidence()),
                  "% interval below the baseline; a device when ", v.min_degraded_tests(),
                  " of its tests are; time box ", G(v.time_box_seconds()), " s per test; docs/validation.md\n");
  return out;
}

std::string RenderBaseline(const v1::Baseline& b) {
  std::string out = absl::StrCat("baseline ", b.name().empty() ? "(unnamed)" : b.name(), " v", b.version(), " from ",
                                 Dash(b.source_job_id()), ", schema ", b.schema(), "\n");
  for (const v1::SkuBaseline& s : b.skus()) {
    absl::StrAppend(&out, "\nsku ", s.sku(), " (", s.devices(), s.devices() == 1 ? " device" : " devices",
                    s.simulated() ? ", simulated" : "", s.loss_bits_size() > 0 ? ", train_mlp fingerprint" : "", ")\n");
    std::vector<std::vector<std::string>> rows;
    for (const v1::MetricBaseline& m : s.metrics()) {
      rows.push_back({m.test(), G(m.median()), G(m.spread()), Dash(m.unit()), absl::StrCat(m.devices()),
                      absl::StrCat(std::max(m.runs(), 1))});
    }
    absl::StrAppend(&out, FormatTable({"TEST", "MEDIAN", "SPREAD", "UNIT", "DEVICES", "RUNS"}, rows));
  }
  return out;
}

std::string RenderBaselineDiff(const v1::Baseline& a, const v1::Baseline& b) {
  std::map<std::pair<std::string, std::string>, std::pair<const v1::MetricBaseline*, const v1::MetricBaseline*>> both;
  for (const v1::SkuBaseline& s : a.skus()) {
    for (const v1::MetricBaseline& m : s.metrics()) both[{s.sku(), m.test()}].first = &m;
  }
  for (const v1::SkuBaseline& s : b.skus()) {
    for (const v1::MetricBaseline& m : s.metrics()) both[{s.sku(), m.test()}].second = &m;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, pair] : both) {
    const auto& [ma, mb] = pair;
    rows.push_back(
        {key.first, key.second, ma ? G(ma->median()) : "-", mb ? G(mb->median()) : "-",
         ma && mb && ma->median() > 0 ? absl::StrFormat("%.3f", mb->median() / ma->median()) : "-",
         ma && mb ? absl::StrFormat("%.3f", std::max(ma->spread() / ma->median(), mb->spread() / mb->median())) : "-",
         Dash(ma ? ma->unit() : mb->unit())});
  }
  return absl::StrCat("a: ", Dash(a.name()), " v", a.version(), " (", Dash(a.source_job_id()), ")  b: ", Dash(b.name()),
                      " v", b.version(), " (", Dash(b.source_job_id()), ")\n",
                      FormatTable({"SKU", "TEST", "A_MEDIAN", "B_MEDIAN", "B/A", "REL_SPREAD", "UNIT"}, rows));
}

}  // namespace hetbench::report
