#include "common/energy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace hetbench {
namespace {

constexpr int64_t kS = 1'000'000'000;

// Power P(t) sampled at `hz` over [0, seconds].
PowerSeries Sampled(double (*p)(double), double seconds, double hz) {
  PowerSeries s;
  s.update_period_seconds = 1.0 / hz;
  const int n = static_cast<int>(seconds * hz);
  for (int i = 0; i <= n; ++i) {
    const double t = i / hz;
    s.t_ns.push_back(static_cast<int64_t>(std::llround(t * 1e9)));
    s.watts.push_back(p(t));
    s.joules.push_back(NAN);
  }
  return s;
}

TEST(EnergyTest, RampIntegratesWithinHalfAPercentAt10Hz) {
  // P(t) = 100 + 20 t over [0, 10] s: exact integral 1000 + 1000 = 2000 J.
  PowerSeries s = Sampled([](double t) { return 100.0 + 20.0 * t; }, 10, 10);
  WindowEnergy e = EnergyInWindow(s, 0, 10 * kS);
  ASSERT_TRUE(e.ok);
  EXPECT_NEAR(e.joules, 2000.0, 2000.0 * 0.005);
  EXPECT_NEAR(e.average_watts, 200.0, 1.0);
  EXPECT_DOUBLE_EQ(e.coverage, 1.0);
  EXPECT_EQ(e.method, "trapezoid of power");
  // A window that does not fall on sample times: [2.25, 7.55] s.
  // Exact: 100*5.3 + 10*(7.55^2 - 2.25^2) = 530 + 519.4 = 1049.4 J.
  WindowEnergy mid = EnergyInWindow(s, 2'250'000'000, 7'550'000'000);
  EXPECT_NEAR(mid.joules, 1049.4, 1049.4 * 0.005);
}

TEST(EnergyTest, CurvedPowerAt10HzStaysWithinHalfAPercent) {
  // P(t) = 200 + 50 sin(t): exact integral over [0, 10] = 2000 + 50 (1 - cos 10).
  PowerSeries s = Sampled([](double t) { return 200.0 + 50.0 * std::sin(t); }, 10, 10);
  const double exact = 2000.0 + 50.0 * (1.0 - std::cos(10.0));
  EXPECT_NEAR(EnergyInWindow(s, 0, 10 * kS).joules, exact, exact * 0.005);
}

TEST(EnergyTest, CounterDeltaInterpolatesAtTheWindowEdges) {
  PowerSeries s;
  s.counter = true;
  s.update_period_seconds = 0.001;
  // 50 W steady: 50 J per second, read once a second.
  for (int i = 0; i <= 4; ++i) {
    s.t_ns.push_back(i * kS);
    s.joules.push_back(50.0 * i);
    s.watts.push_back(NAN);
  }
  WindowEnergy e = EnergyInWindow(s, kS / 2, 3 * kS + kS / 2);  // 3 s
  ASSERT_TRUE(e.ok);
  EXPECT_DOUBLE_EQ(e.joules, 150.0);
  EXPECT_DOUBLE_EQ(e.average_watts, 50.0);
  EXPECT_EQ(e.method, "counter delta");
}

TEST(EnergyTest, PartialCoverageIsReportedAndExtrapolatedFromTheCoveredPart) {
  PowerSeries s = Sampled([](double) { return 100.0; }, 2, 10);  // readings over [0, 2] s only
  WindowEnergy e = EnergyInWindow(s, kS, 5 * kS);                // 4 s window, 1 s covered
  ASSERT_TRUE(e.ok);
  EXPECT_NEAR(e.coverage, 0.25, 1e-9);
  EXPECT_NEAR(e.joules, 400.0, 1e-6);
}

TEST(EnergyTest, ShortWindowIsFlaggedAndNoReadingsIsNotOk) {
  PowerSeries s = Sampled([](double) { return 10.0; }, 5, 1);  // a 1 s sensor
  EXPECT_TRUE(EnergyInWindow(s, kS, kS + kS / 10).short_window);
  EXPECT_FALSE(EnergyInWindow(s, 2 * kS, 4 * kS).short_window);
  EXPECT_FALSE(EnergyInWindow(s, 10 * kS, 11 * kS).ok);  // after the last reading
  EXPECT_FALSE(EnergyInWindow(PowerSeries{}, 0, kS).ok);
}

TEST(EnergyTest, SummaryPrefersMeasuredSourcesAndSumsTheirSensors) {
  v1::TaskResult r;
  auto add = [&](v1::PowerSource src, const std::string& name, double joules) {
    v1::EnergyResult* e = r.add_energy();
    e->set_phase(v1::PHASE_TRAIN);
    e->set_source(src);
    e->set_sensor(name);
    e->set_energy_joules(joules);
    e->set_average_watts(joules / 2);
    e->set_coverage(1.0);
  };
  add(v1::POWER_SOURCE_MODELED, "modeled:cpu0", 300);
  add(v1::POWER_SOURCE_RAPL, "rapl:package-0", 100);
  add(v1::POWER_SOURCE_RAPL, "rapl:dram", 20);
  EnergySummary s = SummarizeEnergy(r, v1::PHASE_TRAIN);
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.source, v1::POWER_SOURCE_RAPL);
  EXPECT_EQ(s.sensors, 2);
  EXPECT_DOUBLE_EQ(s.joules, 120);
  EXPECT_FALSE(SummarizeEnergy(r, v1::PHASE_INFER).ok);
}

TEST(EnergyTest, NominalWattsAreTheStudysFiguresAndALabelledCpuDefault) {
  bool from_study = false;
  EXPECT_EQ(NominalWatts(v1::DEVICE_KIND_GPU, &from_study), 400);
  EXPECT_TRUE(from_study);
  EXPECT_EQ(NominalWatts(v1::DEVICE_KIND_TPU), 300);
  EXPECT_EQ(NominalWatts(v1::DEVICE_KIND_DPU), 75);
  EXPECT_EQ(NominalWatts(v1::DEVICE_KIND_QPU_SIM), 50);
  EXPECT_EQ(NominalWatts(v1::DEVICE_KIND_CPU, &from_study), 150);
  EXPECT_FALSE(from_study);
}

}  // namespace
}  // namespace hetbench
