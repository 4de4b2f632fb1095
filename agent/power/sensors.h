#pragma once
/// The power sensors hetbench knows, and how each is discovered.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/power/power_sensor.h"
#include "agent/platform/sysfs_reader.h"

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

/// A labelled estimate: nominal watts x utilisation. For CPUs utilisation is
/// measured from `proc_root`/stat between readings; for other kinds it is
/// assumed to be 1 while the sensor is read (during tasks).
std::unique_ptr<PowerSensor> MakeModeledSensor(const v1::Device& device, double nominal_watts, bool nominal_is_default,
                                               std::shared_ptr<const SysfsReader> proc_reader);

struct PowerDiscoveryConfig {
  std::shared_ptr<const SysfsReader> sys;   // reads /sys/...
  std::shared_ptr<const SysfsReader> proc;  // reads /stat etc. under /proc
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string ipmi_command;  // empty = IPMI not configured
  std::map<v1::DeviceKind, double> nominal_watts_override;
};

/// Tries every source; every device left without a measured sensor of its
/// own gets a labelled MODELED sensor. `tried` lists each source tried and why
/// it is unavailable.
SensorDiscovery DiscoverPowerSensors(const PowerDiscoveryConfig& config, const std::vector<v1::Device>& devices);

/// Whether `sensor` measures `device`: its own sensors and the node-level
/// ones; a simulated device also gets its host's measured ones (the CPU it
/// runs on), beside its own labelled model. Tasks get these readings and the
/// inventory lists them.
bool SensorMeasures(const v1::SensorInfo& sensor, const v1::Device& device);

/// Fills each device's power_sensors with the available sensors measuring it
/// (its own, the node's, and for simulated devices the host's).
void AttachSensors(const std::vector<v1::SensorInfo>& sensors, std::vector<v1::Device>* devices);

/// Parses ipmitool's DCMI output; INVALID_ARGUMENT when no reading is found.
absl::StatusOr<double> ParseIpmiPowerReading(const std::string& output);

}  // namespace hetbench::agent
