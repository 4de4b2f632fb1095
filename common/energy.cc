#include "energy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

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
    out.probe_seconds = std::max(out.probe_seconds, e.probe_seconds());
    if (!e.assumptions().empty() && out.assumptions.find(e.assumptions()) == std::string::npos) {
      out.assumptions += (out.assumptions.empty() ? "" : "; ") + e.assumptions();
    }
  }
  if (!out.ok) out.coverage = 0;
  return out;
}

double ReadingIntervalSeconds(const PowerSeries& series) {
  std::vector<int64_t> t;
  const std::vector<double>& values = series.counter ? series.joules : series.watts;
  for (size_t i = 0; i < series.t_ns.size() && i < values.size(); ++i) {
    if (!std::isnan(values[i])) t.push_back(series.t_ns[i]);
  }
  if (t.size() < 2) return 0;
  std::sort(t.begin(), t.end());
  std::vector<int64_t> gaps;
  gaps.reserve(t.size() - 1);
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<ptrdiff_t>(gaps.size() / 2), gaps.end());
  const double median = static_cast<double>(gaps[gaps.size() / 2]) * 1e-9;
  return std::max(median, series.update_period_seconds);
}

std::vector<v1::LayerEnergy> ComputeLayerEnergy(const std::vector<SensorReadings>& sensors,
                                                const google::protobuf::RepeatedPtrField<v1::LayerTiming>& layers) {
  std::vector<v1::LayerEnergy> out;
  // Each sensor's reading interval once (it sorts the readings); the most
  // trusted source among sensors with at least two readings.
  std::vector<double> intervals;
  intervals.reserve(sensors.size());
  int best = 5;
  for (const SensorReadings& s : sensors) {
    intervals.push_back(ReadingIntervalSeconds(s.series));
    if (intervals.back() > 0) best = std::min(best, SourceRank(s.source));
  }
  std::vector<const SensorReadings*> used;
  double interval = 0;
  for (size_t i = 0; i < sensors.size(); ++i) {
    if (intervals[i] <= 0 || SourceRank(sensors[i].source) != best) continue;
    used.push_back(&sensors[i]);
    interval = std::max(interval, intervals[i]);
  }
  if (used.empty()) return out;

  for (const v1::LayerTiming& layer : layers) {
    for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER}) {
      bool looped = false;
      for (const v1::LayerWindow& w : layer.windows()) looped = looped || (w.phase() == phase && w.repeated_loop());
      std::vector<const v1::LayerWindow*> windows;
      for (const v1::LayerWindow& w : layer.windows()) {
        if (w.phase() == phase && w.repeated_loop() == looped && w.end_ns() > w.start_ns()) windows.push_back(&w);
      }
      if (windows.empty()) continue;
      v1::LayerEnergy& e = out.emplace_back();
      e.set_layer(layer.index());
      e.set_phase(phase);
      e.set_source(used.front()->source);
      e.set_sensors(static_cast<int32_t>(used.size()));
      e.set_repeated_loop(looped);
      e.set_reading_interval_seconds(interval);
      std::vector<int64_t> lengths;
      int64_t passes = 0, batch = 0;
      double window_seconds = 0;
      for (const v1::LayerWindow* w : windows) {
        lengths.push_back(w->end_ns() - w->start_ns());
        passes += w->passes();
        batch = std::max<int64_t>(batch, w->batch_size());
        window_seconds += static_cast<double>(w->end_ns() - w->start_ns()) * 1e-9;
      }
      std::nth_element(lengths.begin(), lengths.begin() + static_cast<ptrdiff_t>(lengths.size() / 2), lengths.end());
      const double median = static_cast<double>(lengths[lengths.size() / 2]) * 1e-9;
      e.set_median_window_seconds(median);
      e.set_window_seconds(window_seconds);
      if (median < 2 * interval || passes <= 0) {
        e.set_resolved(false);
        e.set_note(absl::StrFormat(
            "power is read every %.3g ms and this layer's windows last %.3g ms: too short for a figure%s",
            interval * 1e3, median * 1e3,
            looped ? "; raise layers.energy_seconds"
                   : absl::StrFormat("; --layer-energy-seconds %.2g runs each layer alone long enough",
                                     std::max(0.1, 4 * interval))));
        continue;
      }
      double joules = 0, coverage = 1;
      std::string method, assumptions;
      for (const SensorReadings* s : used) {
        double sensor_joules = 0, covered_seconds = 0;
        for (const v1::LayerWindow* w : windows) {
          const WindowEnergy we = EnergyInWindow(s->series, w->start_ns(), w->end_ns());
          if (!we.ok) continue;
          sensor_joules += we.joules;
          covered_seconds += we.coverage * we.window_seconds;
          method = we.method;
        }
        joules += sensor_joules;
        coverage = std::min(coverage, window_seconds > 0 ? covered_seconds / window_seconds : 0.0);
        if (!s->assumptions.empty() && assumptions.find(s->assumptions) == std::string::npos) {
          assumptions += (assumptions.empty() ? "" : "; ") + s->assumptions;
        }
      }
      e.set_resolved(coverage > 0);
      if (coverage <= 0) {
        e.set_note("no power reading within or around this layer's windows");
        continue;
      }
      e.set_method(method);
      e.set_assumptions(assumptions);
      e.set_coverage(coverage);
      e.set_joules_per_pass(joules / static_cast<double>(passes));
      if (batch > 0) e.set_joules_per_sample(e.joules_per_pass() / static_cast<double>(batch));
      e.set_average_watts(joules / window_seconds);
    }
  }
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
