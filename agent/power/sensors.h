#pragma once
/// The power sensors hetbench knows, and how each is discovered.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/power/power_sensor.h"
#include "agent/power/sysfs_reader.h"

namespace hetbench::agent {

/// Linux powercap RAPL: package and DRAM zones under /sys/class/powercap,
/// `energy_uj` unwrapped at `max_energy_range_uj`. All zones are attributed
/// to `cpu_device_id`.
SensorDiscovery DiscoverRapl(std::shared_ptr<const SysfsReader> reader, const std::string& cpu_device_id);

/// /sys/class/hwmon/hwmon*/power*_input (microwatts) and energy*_input
/// (microjoules). Attributed to the whole node (device id "").
SensorDiscovery DiscoverHwmon(std::shared_ptr<const SysfsReader> reader);

/// NVML loaded at run time from `library` (default libnvidia-ml.so.1): one
/// sensor per GPU, "gpu<index>", preferring the total-energy counter and
/// falling back to power usage.
SensorDiscovery DiscoverNvml(const std::string& library);

/// `command` (e.g. "ipmitool dcmi power reading") run per reading; parses
/// "Instantaneous power reading: N Watts". Node-level. Empty = not configured.
SensorDiscovery DiscoverIpmi(const std::string& command);

/// Nominal watts per device kind: the study's figures (GPU 400, TPU 300,
/// DPU 75, QPU 50) and a hetbench default for CPUs (150), overridable.
std::map<v1::DeviceKind, double> DefaultNominalWatts();

/// A labelled estimate: nominal watts x utilisation. For CPUs utilisation is
/// measured from `proc_root`/stat between readings; for other kinds it is
/// assumed to be 1 while the sensor is read (during tasks).
std::unique_ptr<PowerSensor> MakeModeledSensor(const v1::Device& device, double nominal_watts, bool nominal_is_default,
                                               std::shared_ptr<const SysfsReader> proc_reader);

/// Parses ipmitool's DCMI output; INVALID_ARGUMENT when no reading is found.
absl::StatusOr<double> ParseIpmiPowerReading(const std::string& output);

}  // namespace hetbench::agent
