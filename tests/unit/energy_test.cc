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

// A RAPL-like counter read every `period_ns` over [0, end_ns) whose power is
// watts(t).
SensorReadings Counter(const std::string& name, v1::PowerSource source, int64_t period_ns, int64_t end_ns,
                       double (*watts)(int64_t)) {
  SensorReadings r;
  r.name = name;
  r.source = source;
  r.series.counter = true;
  double joules = 0;
  for (int64_t t = 0; t <= end_ns; t += period_ns) {
    r.series.t_ns.push_back(t);
    r.series.joules.push_back(joules);
    r.series.watts.push_back(NAN);
    joules += watts(t) * static_cast<double>(period_ns) * 1e-9;
  }
  return r;
}

v1::LayerTiming Layer(int index, std::vector<std::tuple<v1::Phase, int64_t, int64_t, int>> windows, bool loop) {
  v1::LayerTiming l;
  l.set_index(index);
  for (const auto& [phase, start, end, passes] : windows) {
    v1::LayerWindow* w = l.add_windows();
    w->set_phase(phase);
    w->set_start_ns(start);
    w->set_end_ns(end);
    w->set_passes(passes);
    w->set_batch_size(10);
    w->set_repeated_loop(loop);
  }
  return l;
}

// Layer 0 draws 20 W in [0, 1) s, layer 1 draws 80 W in [1, 2) s, inference of layer 0 40 W in [2, 3) s.
double ThreeLevels(int64_t t) { return t < 1 * kS ? 20.0 : t < 2 * kS ? 80.0 : 40.0; }

TEST(LayerEnergyTest, LoopWindowsGiveEachLayerItsOwnEnergyPerPassAndSample) {
  google::protobuf::RepeatedPtrField<v1::LayerTiming> layers;
  *layers.Add() = Layer(0, {{v1::PHASE_TRAIN, 0, 1 * kS, 100}, {v1::PHASE_INFER, 2 * kS, 3 * kS, 400}}, true);
  *layers.Add() = Layer(1, {{v1::PHASE_TRAIN, 1 * kS, 2 * kS, 50}}, true);
  // Profiled windows are ignored once a layer has loop windows for the phase.
  layers.Mutable(1)->MergeFrom(Layer(1, {{v1::PHASE_TRAIN, 0, 1000, 1}}, false));
  const std::vector<SensorReadings> sensors = {Counter("package-0", v1::POWER_SOURCE_RAPL, kS / 1000, 3 * kS, ThreeLevels)};
  std::vector<v1::LayerEnergy> e = ComputeLayerEnergy(sensors, layers);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].layer(), 0);
  EXPECT_EQ(e[0].phase(), v1::PHASE_TRAIN);
  EXPECT_TRUE(e[0].resolved());
  EXPECT_TRUE(e[0].repeated_loop());
  EXPECT_EQ(e[0].source(), v1::POWER_SOURCE_RAPL);
  EXPECT_EQ(e[0].method(), "counter delta");
  EXPECT_NEAR(e[0].joules_per_pass(), 20.0 / 100, 1e-3);  // 20 J over 100 passes
  EXPECT_NEAR(e[0].joules_per_sample(), 0.02, 1e-4);
  EXPECT_NEAR(e[0].average_watts(), 20.0, 0.1);
  EXPECT_NEAR(e[0].coverage(), 1.0, 1e-9);
  EXPECT_EQ(e[1].phase(), v1::PHASE_INFER);
  EXPECT_NEAR(e[1].joules_per_pass(), 40.0 / 400, 1e-3);
  EXPECT_EQ(e[2].layer(), 1);
  EXPECT_NEAR(e[2].joules_per_pass(), 80.0 / 50, 1e-2);
  EXPECT_NEAR(e[2].reading_interval_seconds(), 1e-3, 1e-9);
}

TEST(LayerEnergyTest, ProfiledWindowsSumForwardAndBackwardOverTheSteps) {
  google::protobuf::RepeatedPtrField<v1::LayerTiming> layers;
  // 5 steps of layer 1 (80 W region): forward 40 ms (1 pass) + backward 60 ms (0 passes).
  std::vector<std::tuple<v1::Phase, int64_t, int64_t, int>> w;
  for (int s = 0; s < 5; ++s) {
    const int64_t t = kS + s * 150'000'000;
    w.push_back({v1::PHASE_TRAIN, t, t + 40'000'000, 1});
    w.push_back({v1::PHASE_TRAIN, t + 40'000'000, t + 100'000'000, 0});
  }
  *layers.Add() = Layer(1, w, false);
  std::vector<v1::LayerEnergy> e = ComputeLayerEnergy(
      {Counter("package-0", v1::POWER_SOURCE_RAPL, kS / 1000, 3 * kS, ThreeLevels)}, layers);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(e[0].resolved());
  EXPECT_FALSE(e[0].repeated_loop());
  EXPECT_NEAR(e[0].joules_per_pass(), 80.0 * 0.1, 0.05);  // 100 ms at 80 W per pass
  EXPECT_NEAR(e[0].window_seconds(), 0.5, 1e-9);
}

TEST(LayerEnergyTest, ASensorSlowerThanTheLayerGivesNoFigureButSaysWhy) {
  google::protobuf::RepeatedPtrField<v1::LayerTiming> layers;
  std::vector<std::tuple<v1::Phase, int64_t, int64_t, int>> w;
  for (int s = 0; s < 20; ++s) w.push_back({v1::PHASE_TRAIN, s * 10'000'000, s * 10'000'000 + 300'000, 1});
  *layers.Add() = Layer(0, w, false);
  // A 10 Hz sensor against 0.3 ms windows.
  std::vector<v1::LayerEnergy> e = ComputeLayerEnergy(
      {Counter("package-0", v1::POWER_SOURCE_RAPL, kS / 10, 3 * kS, ThreeLevels)}, layers);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_FALSE(e[0].resolved());
  EXPECT_EQ(e[0].joules_per_pass(), 0);
  EXPECT_EQ(e[0].joules_per_sample(), 0);
  EXPECT_NEAR(e[0].reading_interval_seconds(), 0.1, 1e-9);
  EXPECT_NEAR(e[0].median_window_seconds(), 3e-4, 1e-9);
  EXPECT_THAT(e[0].note(), testing::HasSubstr("power is read every 100 ms"));
  EXPECT_THAT(e[0].note(), testing::HasSubstr("--layer-energy-seconds 0.4"));
}

TEST(LayerEnergyTest, TheMostTrustedSourceIsUsedAndItsSensorsSummed) {
  google::protobuf::RepeatedPtrField<v1::LayerTiming> layers;
  *layers.Add() = Layer(0, {{v1::PHASE_TRAIN, 0, 1 * kS, 10}}, true);
  std::vector<SensorReadings> sensors = {
      Counter("modeled-cpu0", v1::POWER_SOURCE_MODELED, kS / 10, 3 * kS, ThreeLevels),
      Counter("package-0", v1::POWER_SOURCE_RAPL, kS / 100, 3 * kS, ThreeLevels),
      Counter("dram", v1::POWER_SOURCE_RAPL, kS / 100, 3 * kS, ThreeLevels)};
  std::vector<v1::LayerEnergy> e = ComputeLayerEnergy(sensors, layers);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].source(), v1::POWER_SOURCE_RAPL);
  EXPECT_EQ(e[0].sensors(), 2);
  EXPECT_NEAR(e[0].joules_per_pass(), 2 * 20.0 / 10, 1e-2);
  EXPECT_NEAR(e[0].reading_interval_seconds(), 0.01, 1e-9);
  // No readings at all: no figures.
  EXPECT_TRUE(ComputeLayerEnergy({}, layers).empty());
}

}  // namespace
}  // namespace hetbench
