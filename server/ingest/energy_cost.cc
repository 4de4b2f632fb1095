#include "server/ingest/energy_cost.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/energy.h"
#include "common/names.h"

namespace hetbench::server {

namespace {

struct SensorSeries {
  v1::SensorInfo info;
  std::string assumptions;
  PowerSeries series;
};

// The device's cost rate and where it came from; rate 0 = unknown.
std::pair<double, std::string> CostRate(const v1::JobSpec& spec, const v1::Hello& agent, const v1::Task& task) {
  const auto& rates = spec.cost().usd_per_hour();
  for (const auto& [key, value] : agent.labels()) {
    const std::string label_key = absl::StrCat("label:", key, "=", value);
    if (auto it = rates.find(label_key); it != rates.end()) {
      return {it->second, absl::StrCat("job cost.usd_per_hour[", label_key, "]")};
    }
  }
  const std::string kind = DeviceKindName(task.device_kind());
  if (auto it = rates.find(kind); it != rates.end()) {
    return {it->second, absl::StrCat("job cost.usd_per_hour[", kind, "]")};
  }
  for (const v1::Device& d : agent.devices()) {
    if (d.id() != task.device_id()) continue;
    auto it = d.attributes().find("cost_usd_per_hour");
    double rate = 0;
    if (it != d.attributes().end() && absl::SimpleAtod(it->second, &rate) && rate > 0) {
      return {rate, absl::StrCat("agent ", agent.agent_id(), " config")};
    }
  }
  return {0, ""};
}

// A machine-probe reading the agent took between steps: its own time on
// the task's clock (MachineProbe.during).
struct ProbeSpan {
  v1::Phase phase;
  int64_t step, start_ns, end_ns;
};

std::vector<ProbeSpan> ProbeSpans(const v1::TaskResult& result) {
  std::vector<ProbeSpan> out;
  for (const v1::ProbeReading& r : result.machine_probe().during()) {
    if (r.duration_ns() > 0) out.push_back({r.phase(), r.step(), r.at_ns(), r.at_ns() + r.duration_ns()});
  }
  return out;
}

// The window's energy without the probe readings inside it: their time out
// of the window, their energy (over each reading's own span, or at the
// window's average power where the readings do not reach it) out of the joules.
void LeaveOutProbe(const PowerSeries& series, const std::vector<ProbeSpan>& spans, const v1::PhaseWindow& w,
                   WindowEnergy* e, double* probe_seconds) {
  double seconds = 0, joules = 0;
  for (const ProbeSpan& p : spans) {
    const int64_t lo = std::max(p.start_ns, w.start_ns()), hi = std::min(p.end_ns, w.end_ns());
    if (hi <= lo) continue;
    const double s = static_cast<double>(hi - lo) * 1e-9;
    const WindowEnergy pe = EnergyInWindow(series, lo, hi);
    seconds += s;
    joules += pe.ok ? pe.joules : e->average_watts * s;
  }
  *probe_seconds = seconds;
  if (seconds <= 0 || seconds >= e->window_seconds) return;
  e->joules -= joules;
  e->window_seconds -= seconds;
  e->average_watts = e->joules / e->window_seconds;
}

// Cost per phase: the rate over the phase's paid time, and the electricity.
void AddCosts(const v1::JobSpec& spec, const v1::Hello& agent, std::map<v1::Phase, int64_t>& items,
              std::map<v1::Phase, double>& phase_seconds, const std::vector<ProbeSpan>& probe_spans, v1::Task* task) {
  v1::TaskResult* result = task->mutable_result();
  // A reading before a phase's step k > 0 lies between its first and last
  // step, inside the timing window the phase is paid for.
  std::map<v1::Phase, double> probe_paid_seconds;
  for (const ProbeSpan& p : probe_spans) {
    if (p.step > 0) probe_paid_seconds[p.phase] += static_cast<double>(p.end_ns - p.start_ns) * 1e-9;
  }
  const auto [rate, rate_source] = CostRate(spec, agent, *task);
  const double price_per_joule = spec.cost().electricity_usd_per_kwh() / 3.6e6;
  for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER, v1::PHASE_SERVE}) {
    const int64_t n = items[phase];
    const double probe_seconds = probe_paid_seconds[phase];
    const double seconds = phase_seconds[phase] - (probe_seconds < phase_seconds[phase] ? probe_seconds : 0);
    if (n <= 0 || seconds <= 0 || (rate <= 0 && price_per_joule <= 0)) continue;
    v1::CostResult* c = result->add_cost();
    c->set_phase(phase);
    c->set_usd_per_hour(rate);
    c->set_probe_seconds(probe_seconds < phase_seconds[phase] ? probe_seconds : 0);
    c->set_rate_source(rate > 0 ? rate_source : "no rate: set cost.usd_per_hour or the agent's --cost-usd-per-hour");
    // The device is held for the phase's wall window, so that is what is paid
    // for, less the machine probe's readings (hetbench's, not the model's).
    const double usd = rate * seconds / 3600.0;
    c->set_usd_per_1000_samples(usd / static_cast<double>(n) * 1000.0);
    if (phase == v1::PHASE_TRAIN && result->dataset_train_size() > 0) {
      c->set_usd_per_epoch(usd * static_cast<double>(result->dataset_train_size()) / static_cast<double>(n));
    }
    EnergySummary e = SummarizeEnergy(*result, phase);
    if (e.ok && price_per_joule > 0) {
      c->set_electricity_usd(e.joules * price_per_joule);
      c->set_electricity_usd_per_1000_samples(e.joules * price_per_joule / static_cast<double>(n) * 1000.0);
    }
  }
}

}  // namespace

void ComputeEnergyAndCost(const v1::JobSpec& spec, const v1::Hello& agent, const std::vector<v1::PowerBatch>& batches,
                          v1::Task* task) {
  v1::TaskResult* result = task->mutable_result();
  result->clear_energy();
  result->clear_cost();
  result->clear_layer_energy();

  std::map<std::string, SensorSeries> by_sensor;
  int64_t readings = 0;
  for (const v1::PowerBatch& b : batches) {
    SensorSeries& s = by_sensor[b.sensor().name()];
    s.info = b.sensor();
    s.assumptions = b.assumptions();
    s.series.counter = b.sensor().has_energy_counter();
    s.series.update_period_seconds = b.sensor().update_period_seconds();
    for (int i = 0; i < b.t_ns_size(); ++i) {
      s.series.t_ns.push_back(b.t_ns(i));
      s.series.watts.push_back(i < b.watts_size() ? b.watts(i) : NAN);
      s.series.joules.push_back(i < b.joules_size() ? b.joules(i) : NAN);
    }
    readings += b.t_ns_size();
  }
  result->set_power_readings_stored(readings);

  // Windows: idle, train, infer from the agent; the whole task spans train..infer.
  std::map<v1::Phase, v1::PhaseWindow> windows;
  for (const v1::PhaseWindow& w : result->windows()) windows[w.phase()] = w;
  v1::PhaseWindow whole;
  whole.set_phase(v1::PHASE_UNSPECIFIED);
  bool have_whole = false;
  for (const auto& [phase, w] : windows) {
    if (phase == v1::PHASE_IDLE) continue;
    whole.set_start_ns(have_whole ? std::min(whole.start_ns(), w.start_ns()) : w.start_ns());
    whole.set_end_ns(have_whole ? std::max(whole.end_ns(), w.end_ns()) : w.end_ns());
    have_whole = true;
  }
  if (have_whole) windows[v1::PHASE_UNSPECIFIED] = whole;

  std::map<v1::Phase, int64_t> items;
  std::map<v1::Phase, double> phase_seconds;
  for (const v1::PhaseResult& p : result->phases()) {
    items[p.phase()] = p.stats().items();
    items[v1::PHASE_UNSPECIFIED] += p.stats().items();
    phase_seconds[p.phase()] = p.stats().window_seconds();
  }
  const std::vector<ProbeSpan> probe_spans = ProbeSpans(*result);

  for (const auto& [name, s] : by_sensor) {
    double idle_watts = 0;
    if (auto it = windows.find(v1::PHASE_IDLE); it != windows.end()) {
      WindowEnergy idle = EnergyInWindow(s.series, it->second.start_ns(), it->second.end_ns());
      if (idle.ok) idle_watts = idle.average_watts;
    }
    for (const auto& [phase, w] : windows) {
      WindowEnergy e = EnergyInWindow(s.series, w.start_ns(), w.end_ns());
      if (!e.ok) continue;
      double probe_seconds = 0;
      if (phase != v1::PHASE_IDLE) LeaveOutProbe(s.series, probe_spans, w, &e, &probe_seconds);
      v1::EnergyResult* r = result->add_energy();
      r->set_phase(phase);
      r->set_sensor(name);
      r->set_source(s.info.source());
      r->set_method(e.method);
      r->set_energy_joules(e.joules);
      r->set_average_watts(e.average_watts);
      r->set_window_seconds(e.window_seconds);
      r->set_coverage(e.coverage);
      r->set_short_window(e.short_window);
      r->set_update_period_seconds(s.info.update_period_seconds());
      r->set_assumptions(s.assumptions);
      r->set_probe_seconds(probe_seconds);
      if (items[phase] > 0) r->set_joules_per_sample(e.joules / static_cast<double>(items[phase]));
      if (idle_watts > 0 && phase != v1::PHASE_IDLE) {
        r->set_idle_watts(idle_watts);
        r->set_net_energy_joules(e.joules - idle_watts * e.window_seconds);
      }
    }
  }

  if (!result->layers().empty()) {
    std::vector<SensorReadings> readings_by_sensor;
    for (const auto& [name, s] : by_sensor) {
      readings_by_sensor.push_back({name, s.info.source(), s.assumptions, s.series});
    }
    for (v1::LayerEnergy& e : ComputeLayerEnergy(readings_by_sensor, result->layers())) {
      *result->add_layer_energy() = std::move(e);
    }
  }

  AddCosts(spec, agent, items, phase_seconds, probe_spans, task);
}

}  // namespace hetbench::server
