#include "report/render/svg.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace hetbench::report::svg {

namespace {

// Okabe & Ito (2008), black last; yellow after the darker ones.
constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#F0E442", "#000000"};

constexpr double kWidth = 800;
constexpr double kLeft = 84, kRight = 24, kTop = 48;

bool Finite(double v) { return std::isfinite(v); }

// Relative luminance (0 black .. 1 white) of "#rrggbb", sRGB weights without gamma.
double Luminance(const std::string& hex) {
  if (hex.size() != 7 || hex[0] != '#') return 0;
  auto channel = [&hex](int i) { return std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16) / 255.0; };
  return 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
}

std::string F(double v) { return absl::StrFormat("%.1f", v); }

// A value axis: linear from 0 (bars) or from the data, or log10.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  std::vector<std::string> tick_labels;  // when set: the ticks' text (dates), else TickText
  // Pixel range: `from` at lo, `to` at hi.
  double from = 0, to = 1;
  double Map(double v) const {
    double t;
    if (log) {
      t = (std::log10(std::max(v, lo)) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    } else {
      t = (v - lo) / (hi - lo);
    }
    return from + (to - from) * t;
  }
};

Axis MakeAxis(std::vector<double> values, bool log, bool from_zero) {
  Axis a;
  values.erase(std::remove_if(values.begin(), values.end(), [&](double v) { return !Finite(v) || (log && v <= 0); }),
               values.end());
  if (values.empty()) values = {log ? 1.0 : 0.0, log ? 10.0 : 1.0};
  double lo = *std::min_element(values.begin(), values.end());
  double hi = *std::max_element(values.begin(), values.end());
  a.log = log;
  if (log) {
    a.lo = std::pow(10.0, std::floor(std::log10(lo)));
    a.hi = std::pow(10.0, std::ceil(std::log10(hi)));
    if (a.hi <= a.lo) a.hi = a.lo * 10;
    for (double t = a.lo; t <= a.hi * 1.0001; t *= 10) a.ticks.push_back(t);
    return a;
  }
  if (from_zero) lo = std::min(lo, 0.0);
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 0.1);
  a.ticks = NiceTicks(lo, hi, 6);
  a.lo = std::min(lo, a.ticks.front());
  a.hi = std::max(hi, a.ticks.back());
  return a;
}

// A time axis over unix seconds: ticks at a round step (minutes to weeks)
// labelled in UTC, "HH:MM" within one day, "MM-DD HH:MM" within a week,
// else "YYYY-MM-DD"; `suffix` gets the date the "HH:MM" labels fall on.
Axis MakeTimeAxis(const std::vector<double>& xs, std::string* suffix) {
  Axis a;
  double lo = xs.empty() ? 0 : *std::min_element(xs.begin(), xs.end());
  double hi = xs.empty() ? 60 : *std::max_element(xs.begin(), xs.end());
  if (hi - lo < 60) {
    lo -= 30;
    hi += 30;
  }
  static constexpr double kSteps[] = {60,    120,   300,    600,    900,    1800,    3600,     7200,     10800,
                                      21600, 43200, 86400,  172800, 604800, 1209600, 2592000, 7776000, 31536000};
  double step = kSteps[std::size(kSteps) - 1];
  for (double s : kSteps) {
    if ((hi - lo) / s <= 6) {
      step = s;
      break;
    }
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-6; t += step) a.ticks.push_back(t);
  if (a.ticks.empty()) a.ticks.push_back(lo);
  a.lo = std::min(lo, a.ticks.front());
  a.hi = std::max(hi, a.ticks.back());
  const absl::TimeZone utc = absl::UTCTimeZone();
  const auto day = [&](double t) { return absl::FormatTime("%Y-%m-%d", absl::FromUnixSeconds(static_cast<int64_t>(t)), utc); };
  const char* format = hi - lo <= 86400 && day(lo) == day(hi) ? "%H:%M"
                       : hi - lo <= 7 * 86400 ? "%m-%d %H:%M"
                                               : "%Y-%m-%d";
  for (double t : a.ticks) {
    a.tick_labels.push_back(absl::FormatTime(format, absl::FromUnixSeconds(static_cast<int64_t>(t)), utc));
  }
  *suffix = std::string(format) == "%H:%M" ? absl::StrCat(" (UTC, ", day(lo), ")") : " (UTC)";
  return a;
}

// Legend entries in rows under the plot; returns the rows' height.
struct LegendEntry {
  std::string name;
  std::string colour;
  double opacity = 1;
};
int LegendRows(const std::vector<LegendEntry>& entries) {
  double x = kLeft;
  int rows = entries.empty() ? 0 : 1;
  for (const auto& e : entries) {
    const double w = 28 + 7.2 * static_cast<double>(e.name.size());
    if (x + w > kWidth - kRight && x > kLeft) {
      ++rows;
      x = kLeft;
    }
    x += w;
  }
  return rows;
}
void DrawLegend(std::string* out, const std::vector<LegendEntry>& entries, double y) {
  double x = kLeft;
  for (const auto& e : entries) {
    const double w = 28 + 7.2 * static_cast<double>(e.name.size());
    if (x + w > kWidth - kRight && x > kLeft) {
      y += 18;
      x = kLeft;
    }
    absl::StrAppend(out, "<rect x=\"", F(x), "\" y=\"", F(y - 10), "\" width=\"14\" height=\"12\" fill=\"", e.colour,
                    "\" fill-opacity=\"", absl::StrFormat("%.2f", e.opacity), "\" stroke=\"#333\" stroke-width=\"0.5\"/>",
                    "<text x=\"", F(x + 19), "\" y=\"", F(y), "\" font-size=\"12\">", Escape(e.name), "</text>\n");
    x += w;
  }
}

// The frame every chart shares: the svg element, title, value-axis ticks and
// grid, axis labels. `bottom` is the plot area's lower edge.
std::string Open(double height, const std::string& title) {
  return absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", F(kWidth), "\" height=\"", F(height),
                      "\" viewBox=\"0 0 ", F(kWidth), " ", F(height),
                      "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" role=\"img\">\n<title>",
                      Escape(title), "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n",
                      "<text x=\"", F(kWidth / 2), "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">",
                      Escape(title), "</text>\n");
}

void DrawYAxis(std::string* out, const Axis& y, double bottom, const std::string& label) {
  for (double t : y.ticks) {
    const double py = y.Map(t);
    absl::StrAppend(out, "<line x1=\"", F(kLeft), "\" x2=\"", F(kWidth - kRight), "\" y1=\"", F(py), "\" y2=\"", F(py),
                    "\" stroke=\"#dddddd\" stroke-width=\"1\"/>", "<text x=\"", F(kLeft - 6), "\" y=\"", F(py + 4),
                    "\" text-anchor=\"end\" font-size=\"11\">", TickText(t), "</text>\n");
  }
  absl::StrAppend(out, "<line x1=\"", F(kLeft), "\" x2=\"", F(kLeft), "\" y1=\"", F(kTop), "\" y2=\"", F(bottom),
                  "\" stroke=\"#333\"/>", "<line x1=\"", F(kLeft), "\" x2=\"", F(kWidth - kRight), "\" y1=\"",
                  F(bottom), "\" y2=\"", F(bottom), "\" stroke=\"#333\"/>\n");
  const double mid = (kTop + bottom) / 2;
  absl::StrAppend(out, "<text x=\"18\" y=\"", F(mid), "\" transform=\"rotate(-90 18 ", F(mid),
                  ")\" text-anchor=\"middle\" font-size=\"13\">", Escape(label), "</text>\n");
}

// A numeric x axis under the plot: ticks, their values, the label.
void DrawXAxis(std::string* out, const Axis& x, double bottom, const std::string& label) {
  for (size_t i = 0; i < x.ticks.size(); ++i) {
    const double t = x.ticks[i];
    const double px = x.Map(t);
    absl::StrAppend(out, "<line x1=\"", F(px), "\" x2=\"", F(px), "\" y1=\"", F(bottom), "\" y2=\"", F(bottom + 5),
                    "\" stroke=\"#333\"/><text x=\"", F(px), "\" y=\"", F(bottom + 18),
                    "\" text-anchor=\"middle\" font-size=\"11\">",
                    i < x.tick_labels.size() ? Escape(x.tick_labels[i]) : TickText(t), "</text>\n");
  }
  absl::StrAppend(out, "<text x=\"", F((kLeft + kWidth - kRight) / 2), "\" y=\"", F(bottom + 38),
                  "\" text-anchor=\"middle\" font-size=\"13\">", Escape(label), "</text>\n");
}

// A footnote's lines: words wrapped to the plot's width (11 px text).
std::vector<std::string> FootnoteLines(const std::string& footnote) {
  constexpr size_t kChars = 112;
  std::vector<std::string> lines;
  std::string line;
  size_t at = 0;
  while (at < footnote.size()) {
    size_t end = footnote.find(' ', at);
    if (end == std::string::npos) end = footnote.size();
    const std::string word = footnote.substr(at, end - at);
    if (!line.empty() && line.size() + 1 + word.size() > kChars) {
      lines.push_back(line);
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
    at = end + 1;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}
double FootnoteHeight(const std::string& footnote) {
  return footnote.empty() ? 4 : 6 + 14.0 * static_cast<double>(FootnoteLines(footnote).size());
}
// Drawn upwards from the chart's bottom edge `height`.
void DrawFootnote(std::string* out, const std::string& footnote, double height) {
  const std::vector<std::string> lines = FootnoteLines(footnote);
  double y = height - 8 - 14.0 * static_cast<double>(lines.size() > 0 ? lines.size() - 1 : 0);
  for (const std::string& line : lines) {
    absl::StrAppend(out, "<text class=\"footnote\" x=\"", F(kLeft), "\" y=\"", F(y),
                    "\" font-size=\"11\" fill=\"#444\">", Escape(line), "</text>\n");
    y += 14;
  }
}

// Category labels under a band of groups; rotated when they do not fit.
double CategoryLabels(std::string* out, const std::vector<std::string>& categories, double group_width,
                      double bottom) {
  size_t longest = 0;
  for (const auto& c : categories) longest = std::max(longest, c.size());
  const bool rotate = 6.6 * static_cast<double>(longest) > group_width * 0.95;
  for (size_t i = 0; i < categories.size(); ++i) {
    const double cx = kLeft + group_width * (static_cast<double>(i) + 0.5);
    if (rotate) {
      absl::StrAppend(out, "<text x=\"", F(cx), "\" y=\"", F(bottom + 14), "\" transform=\"rotate(-25 ", F(cx), " ",
                      F(bottom + 14), ")\" text-anchor=\"end\" font-size=\"11\">", Escape(categories[i]), "</text>\n");
    } else {
      absl::StrAppend(out, "<text x=\"", F(cx), "\" y=\"", F(bottom + 16), "\" text-anchor=\"middle\" font-size=\"11\">",
                      Escape(categories[i]), "</text>\n");
    }
  }
  return rotate ? 16 + 6.6 * 0.45 * static_cast<double>(std::min<size_t>(longest, 48)) : 24;
}

}  // namespace

const char* Colour(int i) {
  const int n = static_cast<int>(std::size(kPalette));
  return kPalette[((i % n) + n) % n];
}

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  // k x step, rounded to 12 digits: 3 x 0.2 is the tick 0.6, not 0.6000000000000001.
  for (auto k = static_cast<int64_t>(std::floor(lo / step)); ticks.size() <= 50; ++k) {
    const double t = std::stod(absl::StrFormat("%.12g", static_cast<double>(k) * step));
    ticks.push_back(t == 0 ? 0.0 : t);
    if (t >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::string TickText(double v) {
  const double a = std::abs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) return absl::StrFormat("%.3g", v);
  if (a >= 1000) {
    std::string digits = absl::StrFormat("%.0f", std::abs(v));
    std::string out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return v < 0 ? "-" + out : out;
  }
  return absl::StrFormat("%.4g", v);
}

std::string Render(const BarChart& c) {
  std::vector<LegendEntry> legend;
  for (size_t s = 0; s < c.series.size(); ++s) legend.push_back({c.series[s], Colour(static_cast<int>(s))});
  bool any_ceiling = false;
  for (double v : c.ceilings) any_ceiling |= Finite(v);
  if (any_ceiling) legend.push_back({c.ceiling_label, "#555555", 0.25});
  const double plot_h = 280;
  const double bottom = kTop + plot_h;
  const double group_w = (kWidth - kLeft - kRight) / static_cast<double>(std::max<size_t>(1, c.categories.size()));
  std::string body;
  const double label_h = CategoryLabels(&body, c.categories, group_w, bottom);
  const double legend_y = bottom + label_h + 18;
  const double height = legend_y + 18.0 * LegendRows(legend) + FootnoteHeight(c.footnote);

  std::vector<double> values;
  for (const auto& row : c.bars) {
    for (const Bar& b : row) {
      for (double v : {b.value, b.lo, b.hi}) values.push_back(v);
    }
  }
  for (double v : c.ceilings) values.push_back(v);
  Axis y = MakeAxis(values, c.log_y, /*from_zero=*/true);
  y.from = bottom;
  y.to = kTop;

  std::string out = Open(height, c.title);
  DrawYAxis(&out, y, bottom, c.y_label);
  const size_t ns = std::max<size_t>(1, c.series.size());
  const double bar_w = group_w * 0.8 / static_cast<double>(ns);
  for (size_t s = 0; s < c.bars.size(); ++s) {
    for (size_t k = 0; k < c.bars[s].size() && k < c.categories.size(); ++k) {
      const Bar& b = c.bars[s][k];
      const double x = kLeft + group_w * (static_cast<double>(k) + 0.1) + bar_w * static_cast<double>(s);
      if (!Finite(b.value) || (c.log_y && b.value <= 0)) {
        absl::StrAppend(&out, "<text x=\"", F(x + bar_w / 2), "\" y=\"", F(bottom - 4),
                        "\" text-anchor=\"middle\" font-size=\"9\" fill=\"#666\">n/a</text>\n");
        continue;
      }
      const double top = y.Map(b.value);
      const double base = c.log_y ? bottom : y.Map(0);
      absl::StrAppend(&out, "<rect class=\"bar\" x=\"", F(x + 1), "\" y=\"", F(std::min(top, base)), "\" width=\"",
                      F(std::max(1.0, bar_w - 2)), "\" height=\"", F(std::max(0.5, std::abs(base - top))),
                      "\" fill=\"", Colour(static_cast<int>(s)), "\"><title>", Escape(c.series[s]), " · ",
                      Escape(c.categories[k]), ": ", TickText(b.value), "</title></rect>\n");
      double label_y = top;
      if (Finite(b.lo) && Finite(b.hi)) {
        const double cx = x + bar_w / 2, y1 = y.Map(b.lo), y2 = y.Map(b.hi);
        absl::StrAppend(&out, "<path d=\"M", F(cx), " ", F(y1), "V", F(y2), "M", F(cx - 4), " ", F(y1), "H", F(cx + 4),
                        "M", F(cx - 4), " ", F(y2), "H", F(cx + 4), "\" stroke=\"#222\" stroke-width=\"1.2\"/>\n");
        label_y = std::min(label_y, y2);
      }
      if (!b.note.empty()) {
        absl::StrAppend(&out, "<text x=\"", F(x + bar_w / 2), "\" y=\"", F(label_y - 4),
                        "\" text-anchor=\"middle\" font-size=\"9\">", Escape(b.note), "</text>\n");
      }
    }
  }
  for (size_t k = 0; k < c.ceilings.size() && k < c.categories.size(); ++k) {
    if (!Finite(c.ceilings[k])) continue;
    const double py = y.Map(c.ceilings[k]);
    const double x = kLeft + group_w * static_cast<double>(k);
    absl::StrAppend(&out, "<line x1=\"", F(x + group_w * 0.05), "\" x2=\"", F(x + group_w * 0.95), "\" y1=\"", F(py),
                    "\" y2=\"", F(py), "\" stroke=\"#555\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n");
  }
  out += body;
  DrawLegend(&out, legend, legend_y);
  DrawFootnote(&out, c.footnote, height);
  return out + "</svg>\n";
}

std::string Render(const LineChart& c) {
  std::vector<LegendEntry> legend;
  std::vector<double> xs, ys;
  for (size_t i = 0; i < c.lines.size(); ++i) {
    legend.push_back({c.lines[i].name, Colour(static_cast<int>(i))});
    for (const Point& p : c.lines[i].points) {
      xs.push_back(p.x);
      for (double v : {p.y, p.lo, p.hi}) ys.push_back(v);
    }
  }
  const double plot_h = 280;
  const double bottom = kTop + plot_h;
  const double legend_y = bottom + 54;
  const double height = legend_y + 18.0 * LegendRows(legend) + FootnoteHeight(c.footnote);
  Axis y = MakeAxis(ys, c.log_y, /*from_zero=*/!c.log_y);
  y.from = bottom;
  y.to = kTop;
  Axis x;
  std::string x_suffix;
  if (c.log_x) {
    std::set<double> distinct;
    for (double v : xs) {
      if (v > 0) distinct.insert(v);
    }
    if (distinct.empty()) distinct = {1, 10};
    x.log = true;
    x.lo = *distinct.begin();
    x.hi = *distinct.rbegin();
    if (x.hi <= x.lo) {
      x.lo /= 2;
      x.hi *= 2;
    }
    x.ticks.assign(distinct.begin(), distinct.end());
    while (x.ticks.size() > 12) {  // every other one
      std::vector<double> half;
      for (size_t i = 0; i < x.ticks.size(); i += 2) half.push_back(x.ticks[i]);
      x.ticks = half;
    }
  } else if (c.x_is_time) {
    x = MakeTimeAxis(xs, &x_suffix);
  } else {
    x = MakeAxis(xs, false, false);
  }
  const double pad = 16;
  x.from = kLeft + pad;
  x.to = kWidth - kRight - pad;

  std::string out = Open(height, c.title);
  DrawYAxis(&out, y, bottom, c.y_label);
  DrawXAxis(&out, x, bottom, c.x_label + x_suffix);
  for (size_t i = 0; i < c.lines.size(); ++i) {
    const Line& l = c.lines[i];
    const char* colour = Colour(static_cast<int>(i));
    bool band = !l.points.empty();
    for (const Point& p : l.points) band &= Finite(p.lo) && Finite(p.hi);
    if (band) {
      std::string d = "M";
      for (size_t k = 0; k < l.points.size(); ++k) {
        absl::StrAppend(&d, k ? " L" : "", F(x.Map(l.points[k].x)), " ", F(y.Map(l.points[k].hi)));
      }
      for (size_t k = l.points.size(); k-- > 0;) {
        absl::StrAppend(&d, " L", F(x.Map(l.points[k].x)), " ", F(y.Map(l.points[k].lo)));
      }
      absl::StrAppend(&out, "<path class=\"band\" d=\"", d, " Z\" fill=\"", colour, "\" fill-opacity=\"0.18\"/>\n");
    }
    std::string d;
    for (size_t k = 0; k < l.points.size(); ++k) {
      absl::StrAppend(&d, k ? " L" : "M", F(x.Map(l.points[k].x)), " ", F(y.Map(l.points[k].y)));
    }
    if (!d.empty()) {
      absl::StrAppend(&out, "<path class=\"line\" d=\"", d, "\" fill=\"none\" stroke=\"", colour,
                      "\" stroke-width=\"2.2\"/>\n");
    }
    for (const Point& p : l.points) {
      absl::StrAppend(&out, "<circle cx=\"", F(x.Map(p.x)), "\" cy=\"", F(y.Map(p.y)), "\" r=\"3.5\" fill=\"", colour,
                      "\"><title>", Escape(l.name), ": ",
                      c.x_is_time ? absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixSeconds(static_cast<int64_t>(p.x)),
                                                     absl::UTCTimeZone())
                                  : TickText(p.x),
                      " → ", TickText(p.y), "</title></circle>\n");
    }
  }
  DrawLegend(&out, legend, legend_y);
  DrawFootnote(&out, c.footnote, height);
  return out + "</svg>\n";
}

std::string Render(const StackedBarChart& c) {
  auto colour = [&c](size_t s) -> std::string {
    return c.other_last && s + 1 == c.stacks.size() ? "#999999" : Colour(static_cast<int>(s));
  };
  std::vector<LegendEntry> legend;
  for (size_t s = 0; s < c.stacks.size(); ++s) legend.push_back({c.stacks[s], colour(s)});
  const double plot_h = 280;
  const double bottom = kTop + plot_h;
  const double group_w = (kWidth - kLeft - kRight) / static_cast<double>(std::max<size_t>(1, c.categories.size()));
  std::string labels;
  const double label_h = CategoryLabels(&labels, c.categories, group_w, bottom);
  const double legend_y = bottom + label_h + 18;
  const double height = legend_y + 18.0 * LegendRows(legend) + FootnoteHeight(c.footnote);
  std::vector<double> totals = {0};
  for (const auto& row : c.values) {
    double t = 0;
    for (double v : row) t += Finite(v) ? std::max(0.0, v) : 0;
    totals.push_back(t);
  }
  Axis y = MakeAxis(totals, false, true);
  y.from = bottom;
  y.to = kTop;
  std::string out = Open(height, c.title);
  DrawYAxis(&out, y, bottom, c.y_label);
  for (size_t k = 0; k < c.values.size() && k < c.categories.size(); ++k) {
    const double x = kLeft + group_w * (static_cast<double>(k) + 0.2), w = group_w * 0.6;
    const double total = totals[k + 1];
    double acc = 0;
    for (size_t s = 0; s < c.values[k].size(); ++s) {
      const double v = Finite(c.values[k][s]) ? std::max(0.0, c.values[k][s]) : 0;
      if (v <= 0) continue;
      const double y1 = y.Map(acc), y2 = y.Map(acc + v);
      absl::StrAppend(&out, "<rect class=\"segment\" x=\"", F(x), "\" y=\"", F(y2), "\" width=\"", F(w), "\" height=\"",
                      F(std::max(0.5, y1 - y2)), "\" fill=\"", colour(s),
                      "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>", Escape(c.categories[k]), " · ",
                      Escape(c.stacks[s]), ": ", TickText(v), "</title></rect>\n");
      const double share = total > 0 ? v / total : 0;
      if (share >= 0.06 && y1 - y2 >= 11) {
        // Dark text on light fills, white on dark ones.
        const bool light = Luminance(colour(s)) > 0.5;
        absl::StrAppend(&out, "<text x=\"", F(x + w / 2), "\" y=\"", F((y1 + y2) / 2 + 4),
                        "\" text-anchor=\"middle\" font-size=\"10\" fill=\"", light ? "#000" : "#fff", "\">",
                        absl::StrFormat("%.0f%%", share * 100), "</text>\n");
      }
      acc += v;
    }
  }
  out += labels;
  DrawLegend(&out, legend, legend_y);
  DrawFootnote(&out, c.footnote, height);
  return out + "</svg>\n";
}

std::string Render(const TimelineChart& c) {
  std::vector<LegendEntry> legend;
  std::vector<double> xs, ys;
  auto window_colour = [&c](size_t w) {
    return Colour(c.windows[w].colour >= 0 ? c.windows[w].colour : static_cast<int>(w) + 1);
  };
  for (size_t w = 0; w < c.windows.size(); ++w) {
    // One legend entry per name (a name may shade several windows).
    bool seen = false;
    for (size_t v = 0; v < w; ++v) seen |= c.windows[v].name == c.windows[w].name;
    if (!seen) legend.push_back({c.windows[w].name, window_colour(w), 0.25});
    xs.push_back(c.windows[w].start);
    xs.push_back(c.windows[w].end);
  }
  for (size_t i = 0; i < c.lines.size(); ++i) {
    legend.push_back({c.lines[i].name, i == 0 ? "#000000" : Colour(static_cast<int>(i) + 4)});
    for (const Point& p : c.lines[i].points) {
      xs.push_back(p.x);
      ys.push_back(p.y);
    }
  }
  const double plot_h = 260;
  const double bottom = kTop + plot_h;
  const double legend_y = bottom + 54;
  const double height = legend_y + 18.0 * LegendRows(legend) + FootnoteHeight(c.footnote);
  Axis y = MakeAxis(ys, false, true);
  y.from = bottom;
  y.to = kTop;
  Axis x = MakeAxis(xs, false, true);
  x.from = kLeft;
  x.to = kWidth - kRight;
  std::string out = Open(height, c.title);
  for (size_t w = 0; w < c.windows.size(); ++w) {
    const double x1 = x.Map(c.windows[w].start), x2 = x.Map(c.windows[w].end);
    absl::StrAppend(&out, "<rect class=\"window\" x=\"", F(x1), "\" y=\"", F(kTop), "\" width=\"",
                    F(std::max(1.0, x2 - x1)), "\" height=\"", F(plot_h), "\" fill=\"", window_colour(w),
                    "\" fill-opacity=\"0.25\"><title>", Escape(c.windows[w].name), ": ", TickText(c.windows[w].start),
                    " to ", TickText(c.windows[w].end), "</title></rect>\n");
  }
  DrawYAxis(&out, y, bottom, c.y_label);
  DrawXAxis(&out, x, bottom, c.x_label);
  for (size_t i = 0; i < c.lines.size(); ++i) {
    std::string d;
    for (size_t k = 0; k < c.lines[i].points.size(); ++k) {
      const Point& p = c.lines[i].points[k];
      absl::StrAppend(&d, k ? " L" : "M", F(x.Map(p.x)), " ", F(y.Map(p.y)));
    }
    if (!d.empty()) {
      absl::StrAppend(&out, "<path class=\"line\" d=\"", d, "\" fill=\"none\" stroke=\"",
                      i == 0 ? "#000000" : Colour(static_cast<int>(i) + 4), "\" stroke-width=\"1.6\"/>\n");
    }
  }
  DrawLegend(&out, legend, legend_y);
  DrawFootnote(&out, c.footnote, height);
  return out + "</svg>\n";
}

}  // namespace hetbench::report::svg
