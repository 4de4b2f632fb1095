// What a task's energy and cost leave out: the machine probe's readings
// between steps (server/ingest/energy_cost.cc).

#include "server/ingest/energy_cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hetbench::server {
namespace {

constexpr int64_t kMs = 1'000'000;

// A RAPL counter read every 10 ms from 0 to 5 s: 100 W, except 300 W while
// the probe runs (2,000-2,100 ms), as its SGEMM loads both cores.
v1::PowerBatch Rapl() {
  v1::PowerBatch b;
  b.mutable_sensor()->set_name("rapl:package-0");
  b.mutable_sensor()->set_source(v1::POWER_SOURCE_RAPL);
  b.mutable_sensor()->set_has_energy_counter(true);
  b.mutable_sensor()->set_update_period_seconds(0.001);
  double joules = 0;
  for (int64_t ms = 0; ms <= 5000; ms += 10) {
    b.add_t_ns(ms * kMs);
    b.add_joules(joules);
    b.add_watts(NAN);
    joules += (ms >= 2000 && ms < 2100 ? 300.0 : 100.0) * 0.010;
  }
  return b;
}

// Training from 1 s to 3 s (200 samples, steps from 1,050 to 2,950 ms), with
// a probe reading before step 0 (1,000-1,050 ms: in the phase's window, not
// between steps) and one before step 3 (2,000-2,100 ms, between steps).
v1::Task TrainedTask(int64_t reading_ns) {
  v1::Task task;
  task.set_device_kind(v1::DEVICE_KIND_CPU);
  v1::TaskResult* r = task.mutable_result();
  v1::PhaseResult* p = r->add_phases();
  p->set_phase(v1::PHASE_TRAIN);
  p->mutable_stats()->set_items(200);
  p->mutable_stats()->set_window_seconds(1.9);
  v1::PhaseWindow* w = r->add_windows();
  w->set_phase(v1::PHASE_TRAIN);
  w->set_start_ns(1000 * kMs);
  w->set_end_ns(3000 * kMs);
  for (auto [step, at_ms, duration_ms] : {std::tuple{0, 1000, 50}, std::tuple{3, 2000, 100}}) {
    v1::ProbeReading* reading = r->mutable_machine_probe()->add_during();
    reading->set_phase(v1::PHASE_TRAIN);
    reading->set_step(step);
    reading->set_median_ns(150'000);
    reading->set_at_ns(at_ms * kMs);
    reading->set_duration_ns(reading_ns < 0 ? duration_ms * kMs : reading_ns);
  }
  return task;
}

v1::JobSpec CostPerSecond() {
  v1::JobSpec spec;
  (*spec.mutable_cost()->mutable_usd_per_hour())["cpu"] = 3.6;  // 0.001 USD per second
  return spec;
}

const v1::EnergyResult& Train(const v1::Task& task) {
  for (const v1::EnergyResult& e : task.result().energy()) {
    if (e.phase() == v1::PHASE_TRAIN) return e;
  }
  ADD_FAILURE() << "no train energy";
  static const v1::EnergyResult none;
  return none;
}

TEST(EnergyCostTest, TheProbesReadingsAreLeftOutOfThePhasesEnergyAndPaidTime) {
  v1::Task task = TrainedTask(/*reading_ns=*/-1);
  ComputeEnergyAndCost(CostPerSecond(), v1::Hello(), {Rapl()}, &task);
  const v1::EnergyResult& e = Train(task);
  // 2 s: 100 W x 1.9 s + 300 W x 0.1 s = 220 J, of which the readings took
  // 100 W x 0.05 s + 300 W x 0.1 s = 35 J over 0.15 s.
  EXPECT_NEAR(e.probe_seconds(), 0.15, 1e-9);
  EXPECT_NEAR(e.energy_joules(), 185.0, 1e-6);
  EXPECT_NEAR(e.window_seconds(), 1.85, 1e-9);
  EXPECT_NEAR(e.average_watts(), 100.0, 1e-6);
  EXPECT_NEAR(e.joules_per_sample(), 185.0 / 200, 1e-9);

  ASSERT_EQ(task.result().cost_size(), 1);
  const v1::CostResult& c = task.result().cost(0);
  // Paid: the steps' 1.9 s less the reading between them (0.1 s); the one
  // before step 0 lies outside the steps' window.
  EXPECT_NEAR(c.probe_seconds(), 0.1, 1e-9);
  EXPECT_NEAR(c.usd_per_1000_samples(), 0.001 * 1.8 / 200 * 1000, 1e-12);
}

TEST(EnergyCostTest, ReadingsWithoutADurationLeaveTheWindowWhole) {
  // Results stored before readings carried their duration.
  v1::Task task = TrainedTask(/*reading_ns=*/0);
  ComputeEnergyAndCost(CostPerSecond(), v1::Hello(), {Rapl()}, &task);
  const v1::EnergyResult& e = Train(task);
  EXPECT_EQ(e.probe_seconds(), 0);
  EXPECT_NEAR(e.energy_joules(), 220.0, 1e-6);
  EXPECT_NEAR(e.window_seconds(), 2.0, 1e-9);
  ASSERT_EQ(task.result().cost_size(), 1);
  EXPECT_EQ(task.result().cost(0).probe_seconds(), 0);
  EXPECT_NEAR(task.result().cost(0).usd_per_1000_samples(), 0.001 * 1.9 / 200 * 1000, 1e-12);
}

}  // namespace
}  // namespace hetbench::server
