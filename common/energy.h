#pragma once
/// Energy of a time window from power readings: counter delta where the
/// sensor has a cumulative counter, otherwise trapezoid integration of power.

#include <cstdint>
#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench {

/// Readings of one sensor, in time order. `joules` is used when `counter`,
/// else `watts`; entries that are NaN are ignored.
struct PowerSeries {
  std::vector<int64_t> t_ns;
  std::vector<double> watts;
  std::vector<double> joules;
  bool counter = false;
  double update_period_seconds = 0;
};

struct WindowEnergy {
  bool ok = false;    // false: no reading near the window
  double joules = 0;  // over the whole window (see coverage)
  double average_watts = 0;
  double window_seconds = 0;
  double coverage = 0;        // fraction of the window between the first and last usable reading
  bool short_window = false;  // window shorter than the sensor's update period
  std::string method;         // "counter delta" or "trapezoid of power"
};

/// Energy in [start_ns, end_ns]. Values at the window edges are linearly
/// interpolated between neighbouring readings. When readings cover only part
/// of the window, the average power of the covered part is applied to the
/// whole window and `coverage` says how much was covered.
WindowEnergy EnergyInWindow(const PowerSeries& series, int64_t start_ns, int64_t end_ns);

}  // namespace hetbench

namespace hetbench {

/// Trust order of sources for a headline figure: NVML, RAPL, hwmon, IPMI,
/// then MODELED. Lower is preferred.
int SourceRank(v1::PowerSource source);

/// The headline energy of one phase of a task: the sensors of the most
/// trusted source present, summed (e.g. RAPL package-0 + package-1 + dram).
struct EnergySummary {
  bool ok = false;
  v1::PowerSource source = v1::POWER_SOURCE_UNSPECIFIED;
  int sensors = 0;
  double joules = 0;
  double net_joules = 0;
  bool has_baseline = false;
  double average_watts = 0;
  double joules_per_sample = 0;
  double coverage = 1;  // the lowest coverage among the summed sensors
  bool short_window = false;
  double probe_seconds = 0;  // machine-probe readings left out of the window (EnergyResult.probe_seconds)
  std::string assumptions;
};
EnergySummary SummarizeEnergy(const v1::TaskResult& result, v1::Phase phase);

/// One sensor's readings as the coordinator holds them for a task.
struct SensorReadings {
  std::string name;
  v1::PowerSource source = v1::POWER_SOURCE_UNSPECIFIED;
  std::string assumptions;  // MODELED: what the estimate assumes
  PowerSeries series;
};

/// How often a sensor's readings change: the median spacing of its readings,
/// or its update period when that is longer; 0 with fewer than 2 readings.
double ReadingIntervalSeconds(const PowerSeries& series);

/// Per-layer energy of each layer and phase (train = forward + backward,
/// infer) from the layers' windows: the sensors of the most trusted source
/// present, summed, over the repeat-loop windows when the layer has them,
/// else over its profiled windows. A group whose median window is shorter
/// than twice the slowest sensor's reading interval is not resolved: it gets
/// no joules and a note that says so, never an interpolated guess.
std::vector<v1::LayerEnergy> ComputeLayerEnergy(const std::vector<SensorReadings>& sensors,
                                                const google::protobuf::RepeatedPtrField<v1::LayerTiming>& layers);

/// Nominal device power: the reference study's figures (GPU 400 W, TPU 300 W,
/// DPU 75 W, QPU 50 W) and, for CPUs, which the study did not list, a
/// hetbench default of 150 W. `from_study` tells which.
double NominalWatts(v1::DeviceKind kind, bool* from_study = nullptr);

/// Lower-case source name: rapl, nvml, hwmon, ipmi, modeled.
std::string PowerSourceName(v1::PowerSource source);

}  // namespace hetbench
