#include "energy.h"

#include <algorithm>
#include <cmath>

namespace hetbench {

namespace {

struct Point {
  double t;  // seconds
  double v;
};

// Linear interpolation of the piecewise-linear curve through `p` at time t
// (p sorted, t within [p.front().t, p.back().t]).
double At(const std::vector<Point>& p, double t) {
  auto it = std::lower_bound(p.begin(), p.end(), t, [](const Point& a, double x) { return a.t < x; });
  if (it == p.begin()) return it->v;
  if (it == p.end()) return p.back().v;
  const Point& b = *it;
  const Point& a = *(it - 1);
  if (b.t == a.t) return b.v;
  return a.v + (b.v - a.v) * (t - a.t) / (b.t - a.t);
}

}  // namespace

WindowEnergy EnergyInWindow(const PowerSeries& s, int64_t start_ns, int64_t end_ns) {
  WindowEnergy out;
  out.method = s.counter ? "counter delta" : "trapezoid of power";
  out.window_seconds = static_cast<double>(end_ns - start_ns) * 1e-9;
  out.short_window = out.window_seconds < s.update_period_seconds;
  if (end_ns <= start_ns) return out;

  const std::vector<double>& values = s.counter ? s.joules : s.watts;
  std::vector<Point> p;
  for (size_t i = 0; i < s.t_ns.size() && i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;
    p.push_back({static_cast<double>(s.t_ns[i]) * 1e-9, values[i]});
  }
  if (p.empty()) return out;
  std::stable_sort(p.begin(), p.end(), [](const Point& a, const Point& b) { return a.t < b.t; });

  const double ws = static_cast<double>(start_ns) * 1e-9, we = static_cast<double>(end_ns) * 1e-9;
  const double cs = std::max(ws, p.front().t), ce = std::min(we, p.back().t);
  if (ce <= cs) return out;  // no reading inside or around the window
  const double covered = ce - cs;
  out.coverage = covered / (we - ws);

  double covered_joules = 0;
  if (s.counter) {
    covered_joules = At(p, ce) - At(p, cs);
  } else {
    // Trapezoids over [cs, ce], with interpolated end points.
    double prev_t = cs, prev_v = At(p, cs);
    for (const Point& q : p) {
      if (q.t <= cs) continue;
      if (q.t >= ce) break;
      covered_joules += 0.5 * (prev_v + q.v) * (q.t - prev_t);
      prev_t = q.t;
      prev_v = q.v;
    }
    covered_joules += 0.5 * (prev_v + At(p, ce)) * (ce - prev_t);
  }
  out.average_watts = covered_joules / covered;
  out.joules = out.average_watts * (we - ws);
  out.ok = true;
  return out;
}

}  // namespace hetbench

namespace hetbench {

int SourceRank(v1::PowerSource source) {
  switch (source) {
    case v1::POWER_SOURCE_NVML:
      return 0;
    case v1::POWER_SOURCE_RAPL:
      return 1;
    case v1::POWER_SOURCE_HWMON:
      return 2;
    case v1::POWER_SOURCE_IPMI:
      return 3;
    case v1::POWER_SOURCE_MODELED:
      return 4;
    default:
      return 5;
  }
}

EnergySummary SummarizeEnergy(const v1::TaskResult& result, v1::Phase phase) {
  EnergySummary out;
  int best = 5;
  for (const v1::EnergyResult& e : result.energy()) {
    if (e.phase() == phase) best = std::min(best, SourceRank(e.source()));
  }
  for (const v1::EnergyResult& e : result.energy()) {
    if (e.phase() != phase || SourceRank(e.source()) != best) continue;
    out.ok = true;
    out.source = e.source();
    ++out.sensors;
    out.joules += e.energy_joules();
    out.net_joules += e.net_energy_joules();
    out.has_baseline = out.has_baseline || e.idle_watts() > 0;
    out.average_watts += e.average_watts();
    out.joules_per_sample += e.joules_per_sample();
    out.coverage = std::min(out.coverage, e.coverage());
    out.short_window = out.short_window || e.short_window();
    if (!e.assumptions().empty() && out.assumptions.find(e.assumptions()) == std::string::npos) {
      out.assumptions += (out.assumptions.empty() ? "" : "; ") + e.assumptions();
    }
  }
  if (!out.ok) out.coverage = 0;
  return out;
}

double NominalWatts(v1::DeviceKind kind, bool* from_study) {
  if (from_study != nullptr) *from_study = kind != v1::DEVICE_KIND_CPU;
  switch (kind) {
    case v1::DEVICE_KIND_GPU:
      return 400;
    case v1::DEVICE_KIND_TPU:
      return 300;
    case v1::DEVICE_KIND_DPU:
      return 75;
    case v1::DEVICE_KIND_QPU_SIM:
      return 50;
    default:
      return 150;
  }
}

std::string PowerSourceName(v1::PowerSource source) {
  switch (source) {
    case v1::POWER_SOURCE_RAPL:
      return "rapl";
    case v1::POWER_SOURCE_NVML:
      return "nvml";
    case v1::POWER_SOURCE_HWMON:
      return "hwmon";
    case v1::POWER_SOURCE_IPMI:
      return "ipmi";
    case v1::POWER_SOURCE_MODELED:
      return "modeled";
    default:
      return "unknown";
  }
}

}  // namespace hetbench
