#pragma once
/// A validation job's verdicts (`hetbench validate`, `report` of such a
/// job): per node, per device, and per test with its figure, the ratio to
/// its SKU's baseline with the interval, the threshold and the reason.

#include <string>

#include "hetbench/v1/common.pb.h"
#include "report/render.h"

namespace hetbench::report {

/// Table (nodes, devices, then each judged device's tests and the notes),
/// CSV (one row per device and test, every figure unrounded) or JSON (the
/// job's ValidationReport).
std::string RenderValidation(const v1::Job& job, OutputFormat format);

/// The validation page (HTML report and web UI): per-node and per-device
/// tables, and per test a strip plot of every compared device's ratio to its
/// SKU's baseline against the band it must stay within, outliers marked.
/// `head` is the page's <head> and navigation (HtmlHead).
std::string RenderValidationHtml(const v1::Job& job, const std::string& head);

/// A saved baseline: its SKUs and each metric's median and spread.
std::string RenderBaseline(const v1::Baseline& baseline);

/// Two baselines side by side: per SKU and test, both medians and their ratio (b / a).
std::string RenderBaselineDiff(const v1::Baseline& a, const v1::Baseline& b);

}  // namespace hetbench::report
