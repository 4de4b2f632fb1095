#pragma once
/// Power sensors: each reads cumulative energy (joules) or instantaneous power
/// (watts) of one device or of the whole node.

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

struct PowerReading {
  double watts = NAN;   // instantaneous or short-average power; NaN when the sensor has none
  double joules = NAN;  // cumulative energy since the sensor was created, unwrapped; NaN when none
};

/// Thread-compatible: one thread (the sampler) calls Read() at a time.
class PowerSensor {
 public:
  virtual ~PowerSensor() = default;
  /// Name, source, device, period, counter-or-power. `available` is true.
  virtual const v1::SensorInfo& info() const = 0;
  /// One reading now. Errors name the file or call that failed.
  virtual absl::StatusOr<PowerReading> Read() = 0;
  /// What a MODELED figure assumes; empty for measured sensors.
  virtual std::string assumptions() const { return ""; }
};

/// The outcome of looking for sensors: those that work, and one line per
/// sensor tried (available or not, with the reason).
struct SensorDiscovery {
  std::vector<std::unique_ptr<PowerSensor>> sensors;
  std::vector<v1::SensorInfo> tried;
  void Add(std::unique_ptr<PowerSensor> s) {
    tried.push_back(s->info());
    sensors.push_back(std::move(s));
  }
  void Unavailable(const std::string& name, v1::PowerSource source, const std::string& why) {
    v1::SensorInfo info;
    info.set_name(name);
    info.set_source(source);
    info.set_available(false);
    info.set_detail(why);
    tried.push_back(std::move(info));
  }
  void Merge(SensorDiscovery other) {
    for (auto& s : other.sensors) sensors.push_back(std::move(s));
    for (auto& t : other.tried) tried.push_back(std::move(t));
  }
};

}  // namespace hetbench::agent
