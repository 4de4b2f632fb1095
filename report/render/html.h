#pragma once
/// `hetbench report ID --html FILE`: one self-contained page (inline SVG and
/// CSS, no script, no network asset) with the job's figures, its tables, each
/// task's environment and fingerprints, the validity verdicts with their
/// reasons, the study table, and the command that reruns the job.

#include <string>
#include <vector>

#include "report/render/plots.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

/// As a page of the coordinator's web UI: its navigation, and a refresh while the job runs.
struct WebPage {
  bool nav = false;
  int refresh_seconds = 0;  // > 0: the browser reloads the page (no script)
};

std::string RenderHtmlReport(const v1::Job& job, const std::vector<Plot>& plots,
                             v1::DeviceKind baseline_kind = v1::DEVICE_KIND_CPU, bool compare_mismatched = false,
                             const WebPage& web = {});

/// The <head> (title, the report's CSS, an optional refresh) and, with `nav`,
/// the web UI's links; RenderHtmlReport and the web UI's pages share it.
std::string HtmlHead(const std::string& title, const WebPage& web);

}  // namespace hetbench::report
