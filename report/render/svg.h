#pragma once
/// A small SVG chart writer for the report's plots: grouped bars with
/// whiskers, lines with a band, stacked bars, and a timeline of shaded windows
/// under a line. Every chart has a title, axis labels with units and a legend;
/// colours are the Okabe-Ito palette (distinguishable with the common colour
/// vision deficiencies). No script, no external asset: the output is a
/// complete <svg> element, readable at 800 px wide.

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace hetbench::report::svg {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

/// The i-th palette colour ("#rrggbb"), cycling.
const char* Colour(int i);
/// Text for XML content and attributes.
std::string Escape(const std::string& s);

struct Bar {
  double value = kNone;  // NaN: no bar (missing), drawn as "n/a"
  double lo = kNone, hi = kNone;  // whisker (e.g. p25-p75), optional
  std::string note;  // printed above the bar, e.g. "measured", "modeled*"
};
/// bars[series][category].
struct BarChart {
  std::string title, y_label;  // the label carries the unit
  std::vector<std::string> categories, series;
  std::vector<std::vector<Bar>> bars;
  bool log_y = false;
  /// Optional per-category ceiling drawn as a dashed line over its group
  /// (e.g. a device's calibrated peak); NaN where none.
  std::vector<double> ceilings;
  std::string ceiling_label;
  std::string footnote;
};
std::string Render(const BarChart& chart);

struct Point {
  double x = 0, y = 0;
  double lo = kNone, hi = kNone;  // band around y
};
struct Line {
  std::string name;
  std::vector<Point> points;  // by increasing x
};
struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Line> lines;
  bool log_x = false, log_y = false;
  bool x_is_time = false;  // x in unix seconds: ticks at round times, labelled as UTC dates
  std::string footnote;
};
std::string Render(const LineChart& chart);

/// Each category is one bar made of stacked segments (one per stack name);
/// segments of at least 6% of their bar print their share.
struct StackedBarChart {
  std::string title, y_label;
  std::vector<std::string> categories, stacks;
  std::vector<std::vector<double>> values;  // values[category][stack], >= 0
  bool other_last = false;  // the last stack is a remainder: drawn grey
  std::string footnote;
};
std::string Render(const StackedBarChart& chart);

/// Shaded named windows over a time axis with a line (e.g. power) above.
struct Window {
  std::string name;
  double start = 0, end = 0;
  int colour = -1;  // palette index; -1: by position
};
struct TimelineChart {
  std::string title, x_label, y_label;
  std::vector<Window> windows;
  std::vector<Line> lines;  // points without band
  std::string footnote;
};
std::string Render(const TimelineChart& chart);

/// Axis ticks: about `target` round values (1, 2, 5 x 10^k) covering [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int target);
/// A tick's text: "0.25", "1,200", "3e+06".
std::string TickText(double v);

}  // namespace hetbench::report::svg
