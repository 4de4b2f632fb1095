#include "agent/power/sensors.h"

#include "agent/platform/nvml.h"

#include <dlfcn.h>

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/energy.h"
#include "common/names.h"

namespace hetbench::agent {

namespace {

v1::SensorInfo Info(const std::string& name, v1::PowerSource source, const std::string& device_id,
                    const std::string& detail, double period, bool counter) {
  v1::SensorInfo i;
  i.set_name(name);
  i.set_source(source);
  i.set_device_id(device_id);
  i.set_available(true);
  i.set_detail(detail);
  i.set_update_period_seconds(period);
  i.set_has_energy_counter(counter);
  return i;
}

// ------------------------------------------------------------------ RAPL

class RaplSensor final : public PowerSensor {
 public:
  RaplSensor(std::shared_ptr<const SysfsReader> reader, std::string zone, v1::SensorInfo info, int64_t range_uj)
      : reader_(std::move(reader)), zone_(std::move(zone)), info_(std::move(info)), range_uj_(range_uj) {}
  const v1::SensorInfo& info() const override { return info_; }
  absl::StatusOr<PowerReading> Read() override {
    auto raw = ReadInt(*reader_, zone_ + "/energy_uj");
    if (!raw.ok()) return raw.status();
    if (!have_last_) {
      first_uj_ = *raw;
      have_last_ = true;
    } else if (*raw < last_uj_) {
      // The counter passed max_energy_range_uj and restarted from 0.
      wrapped_uj_ += range_uj_ + 1;
    }
    last_uj_ = *raw;
    PowerReading r;
    r.joules = static_cast<double>(*raw + wrapped_uj_ - first_uj_) * 1e-6;
    return r;
  }

 private:
  std::shared_ptr<const SysfsReader> reader_;
  std::string zone_;
  v1::SensorInfo info_;
  int64_t range_uj_;
  bool have_last_ = false;
  int64_t first_uj_ = 0, last_uj_ = 0, wrapped_uj_ = 0;
};

// ------------------------------------------------------------------ hwmon

class HwmonSensor final : public PowerSensor {
 public:
  HwmonSensor(std::shared_ptr<const SysfsReader> reader, std::string file, v1::SensorInfo info)
      : reader_(std::move(reader)), file_(std::move(file)), info_(std::move(info)) {}
  const v1::SensorInfo& info() const override { return info_; }
  absl::StatusOr<PowerReading> Read() override {
    auto v = ReadInt(*reader_, file_);
    if (!v.ok()) return v.status();
    PowerReading r;
    if (info_.has_energy_counter()) {
      if (!have_first_) {
        first_ = *v;
        have_first_ = true;
      }
      if (*v < last_) offset_ += last_;  // a reset (driver reload): keep the total monotonic
      last_ = *v;
      r.joules = static_cast<double>(*v + offset_ - first_) * 1e-6;
    } else {
      r.watts = static_cast<double>(*v) * 1e-6;
    }
    return r;
  }

 private:
  std::shared_ptr<const SysfsReader> reader_;
  std::string file_;
  v1::SensorInfo info_;
  bool have_first_ = false;
  int64_t first_ = 0, last_ = 0, offset_ = 0;
};

// ------------------------------------------------------------------ NVML

class NvmlSensor final : public PowerSensor {
 public:
  NvmlSensor(std::shared_ptr<NvmlLibrary> lib, NvmlDevice dev, v1::SensorInfo info)
      : lib_(std::move(lib)), dev_(dev), info_(std::move(info)) {}
  const v1::SensorInfo& info() const override { return info_; }
  absl::StatusOr<PowerReading> Read() override {
    PowerReading r;
    if (info_.has_energy_counter()) {
      unsigned long long mj = 0;
      if (NvmlReturn e = lib_->total_energy_(dev_, &mj); e != kNvmlSuccess) {
        return absl::UnavailableError(absl::StrCat("nvmlDeviceGetTotalEnergyConsumption: ", lib_->Error(e)));
      }
      if (!have_first_) {
        first_mj_ = mj;
        have_first_ = true;
      }
      r.joules = static_cast<double>(mj - first_mj_) * 1e-3;
    } else {
      unsigned mw = 0;
      if (NvmlReturn e = lib_->power_usage_(dev_, &mw); e != kNvmlSuccess) {
        return absl::UnavailableError(absl::StrCat("nvmlDeviceGetPowerUsage: ", lib_->Error(e)));
      }
      r.watts = static_cast<double>(mw) * 1e-3;
    }
    return r;
  }

 private:
  std::shared_ptr<NvmlLibrary> lib_;
  NvmlDevice dev_;
  v1::SensorInfo info_;
  bool have_first_ = false;
  unsigned long long first_mj_ = 0;
};

// ------------------------------------------------------------------ IPMI

absl::StatusOr<std::string> RunCommand(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return absl::UnavailableError(absl::StrCat("cannot run '", command, "'"));
  std::string out;
  char buf[1024];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0 && out.size() < 65536) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("'", command, "' exited with status ", rc, ": ", absl::StripAsciiWhitespace(out).substr(0, 200)));
  }
  return out;
}

class IpmiSensor final : public PowerSensor {
 public:
  IpmiSensor(std::string command, v1::SensorInfo info) : command_(std::move(command)), info_(std::move(info)) {}
  const v1::SensorInfo& info() const override { return info_; }
  absl::StatusOr<PowerReading> Read() override {
    auto out = RunCommand(command_);
    if (!out.ok()) return out.status();
    auto watts = ParseIpmiPowerReading(*out);
    if (!watts.ok()) return watts.status();
    PowerReading r;
    r.watts = *watts;
    return r;
  }

 private:
  std::string command_;
  v1::SensorInfo info_;
};

// ------------------------------------------------------------------ modeled

class ModeledSensor final : public PowerSensor {
 public:
  ModeledSensor(v1::SensorInfo info, double nominal_watts, std::string assumptions,
                std::shared_ptr<const SysfsReader> proc, bool measure_cpu)
      : info_(std::move(info)),
        nominal_watts_(nominal_watts),
        assumptions_(std::move(assumptions)),
        proc_(std::move(proc)),
        measure_cpu_(measure_cpu) {
    if (measure_cpu_) (void)CpuTimes(&last_busy_, &last_total_);
  }
  const v1::SensorInfo& info() const override { return info_; }
  std::string assumptions() const override { return assumptions_; }
  absl::StatusOr<PowerReading> Read() override {
    double utilisation = 1.0;
    if (measure_cpu_) {
      int64_t busy = 0, total = 0;
      if (auto s = CpuTimes(&busy, &total); !s.ok()) return s;
      const int64_t d_total = total - last_total_;
      utilisation = d_total > 0 ? static_cast<double>(busy - last_busy_) / static_cast<double>(d_total) : last_util_;
      last_busy_ = busy;
      last_total_ = total;
      last_util_ = utilisation;
    }
    PowerReading r;
    r.watts = nominal_watts_ * std::clamp(utilisation, 0.0, 1.0);
    return r;
  }

 private:
  // Busy and total jiffies over all CPUs from the first line of /proc/stat.
  absl::Status CpuTimes(int64_t* busy, int64_t* total) const {
    auto text = proc_->ReadFile("/stat");
    if (!text.ok()) return text.status();
    std::vector<std::string> f = absl::StrSplit(text->substr(0, text->find('\n')), ' ', absl::SkipEmpty());
    if (f.size() < 5 || f[0] != "cpu") return absl::DataLossError("/proc/stat: no aggregate cpu line");
    int64_t sum = 0, idle = 0;
    for (size_t i = 1; i < f.size() && i <= 8; ++i) {  // user nice system idle iowait irq softirq steal
      int64_t v = 0;
      if (!absl::SimpleAtoi(f[i], &v)) return absl::DataLossError("/proc/stat: bad number");
      sum += v;
      if (i == 4 || i == 5) idle += v;
    }
    *busy = sum - idle;
    *total = sum;
    return absl::OkStatus();
  }

  v1::SensorInfo info_;
  double nominal_watts_;
  std::string assumptions_;
  std::shared_ptr<const SysfsReader> proc_;
  bool measure_cpu_;
  int64_t last_busy_ = 0, last_total_ = 0;
  double last_util_ = 0;
};

}  // namespace

absl::StatusOr<double> ParseIpmiPowerReading(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    const auto pos = line.find("Instantaneous power reading:");
    if (pos == absl::string_view::npos) continue;
    std::vector<std::string> words =
        absl::StrSplit(line.substr(pos + sizeof("Instantaneous power reading:") - 1), ' ', absl::SkipEmpty());
    double watts = 0;
    if (!words.empty() && absl::SimpleAtod(words[0], &watts) && watts >= 0) return watts;
  }
  return absl::InvalidArgumentError("no 'Instantaneous power reading: N Watts' line in the IPMI output");
}

SensorDiscovery DiscoverRapl(std::shared_ptr<const SysfsReader> reader, const std::string& cpu_device_id) {
  SensorDiscovery out;
  const std::string base = "/sys/class/powercap";
  auto entries = reader->ListDir(base);
  if (!entries.ok()) {
    out.Unavailable("rapl", v1::POWER_SOURCE_RAPL,
                    absl::StrCat(base, " is not present: no powercap driver (typical in VMs and on non-x86 CPUs)"));
    return out;
  }
  int zones = 0;
  for (const std::string& e : *entries) {
    if (!absl::StartsWith(e, "intel-rapl:")) continue;
    const std::string zone = absl::StrCat(base, "/", e);
    auto name = reader->ReadFile(zone + "/name");
    if (!name.ok()) continue;
    const std::string zone_name(absl::StripAsciiWhitespace(*name));
    // Packages and DRAM are disjoint; core/uncore subzones are inside a package.
    if (!absl::StartsWith(zone_name, "package") && zone_name != "dram") continue;
    ++zones;
    const std::string sensor = absl::StrCat("rapl:", zone_name);
    auto energy = ReadInt(*reader, zone + "/energy_uj");
    if (!energy.ok()) {
      const bool denied = energy.status().code() == absl::StatusCode::kPermissionDenied;
      out.Unavailable(sensor, v1::POWER_SOURCE_RAPL,
                      denied ? absl::StrCat(zone,
                                            "/energy_uj is not readable (root-only since Linux 5.10): run the "
                                            "agent as root or grant it read access")
                             : absl::StrCat("not readable: ", energy.status().message()));
      continue;
    }
    auto range = ReadInt(*reader, zone + "/max_energy_range_uj");
    if (!range.ok() || *range <= 0) {
      out.Unavailable(sensor, v1::POWER_SOURCE_RAPL,
                      absl::StrCat(zone, "/max_energy_range_uj missing or invalid: cannot unwrap the counter"));
      continue;
    }
    out.Add(std::make_unique<RaplSensor>(reader, zone,
                                         Info(sensor, v1::POWER_SOURCE_RAPL, cpu_device_id,
                                              absl::StrCat(zone, "/energy_uj, wraps at ", *range, " uJ"), 0.001, true),
                                         *range));
  }
  if (zones == 0) {
    out.Unavailable("rapl", v1::POWER_SOURCE_RAPL, absl::StrCat(base, " has no intel-rapl package or dram zone"));
  }
  return out;
}

SensorDiscovery DiscoverHwmon(std::shared_ptr<const SysfsReader> reader) {
  SensorDiscovery out;
  const std::string base = "/sys/class/hwmon";
  auto entries = reader->ListDir(base);
  if (!entries.ok()) {
    out.Unavailable("hwmon", v1::POWER_SOURCE_HWMON, absl::StrCat(base, " is not present"));
    return out;
  }
  int found = 0;
  for (const std::string& e : *entries) {
    const std::string dir = absl::StrCat(base, "/", e);
    auto files = reader->ListDir(dir);
    if (!files.ok()) continue;
    auto chip = reader->ReadFile(dir + "/name");
    const std::string chip_name = chip.ok() ? std::string(absl::StripAsciiWhitespace(*chip)) : e;
    for (const std::string& f : *files) {
      const bool power = absl::StartsWith(f, "power") && absl::EndsWith(f, "_input");
      const bool energy = absl::StartsWith(f, "energy") && absl::EndsWith(f, "_input");
      if (!power && !energy) continue;
      ++found;
      const std::string channel = f.substr(0, f.size() - std::string("_input").size());
      auto label = reader->ReadFile(absl::StrCat(dir, "/", channel, "_label"));
      const std::string sensor = absl::StrCat("hwmon:", chip_name, "/",
                                              label.ok() ? std::string(absl::StripAsciiWhitespace(*label)) : channel);
      auto probe = ReadInt(*reader, absl::StrCat(dir, "/", f));
      if (!probe.ok()) {
        out.Unavailable(sensor, v1::POWER_SOURCE_HWMON, absl::StrCat("not readable: ", probe.status().message()));
        continue;
      }
      double period = 0.1;
      if (auto interval = ReadInt(*reader, absl::StrCat(dir, "/", channel, "_average_interval")); interval.ok()) {
        period = std::max(0.001, static_cast<double>(*interval) * 1e-3);
      }
      out.Add(
          std::make_unique<HwmonSensor>(reader, absl::StrCat(dir, "/", f),
                                        Info(sensor, v1::POWER_SOURCE_HWMON, "",
                                             absl::StrCat(dir, "/", f, energy ? " (uJ)" : " (uW)"), period, energy)));
    }
  }
  if (found == 0) out.Unavailable("hwmon", v1::POWER_SOURCE_HWMON, absl::StrCat(base, " has no power or energy input"));
  return out;
}

SensorDiscovery DiscoverNvml(const std::string& library) {
  SensorDiscovery out;
  auto lib = NvmlLibrary::Load(library);
  if (!lib.ok()) {
    out.Unavailable("nvml", v1::POWER_SOURCE_NVML, std::string(lib.status().message()));
    return out;
  }
  unsigned count = 0;
  if (NvmlReturn e = (*lib)->count_(&count); e != kNvmlSuccess) {
    out.Unavailable("nvml", v1::POWER_SOURCE_NVML, absl::StrCat("nvmlDeviceGetCount_v2: ", (*lib)->Error(e)));
    return out;
  }
  if (count == 0) out.Unavailable("nvml", v1::POWER_SOURCE_NVML, "NVML reports no GPU");
  for (unsigned i = 0; i < count; ++i) {
    const std::string device_id = absl::StrCat("gpu", i);
    const std::string sensor = absl::StrCat("nvml:", device_id);
    NvmlDevice dev = nullptr;
    if (NvmlReturn e = (*lib)->handle_by_index_(i, &dev); e != kNvmlSuccess) {
      out.Unavailable(sensor, v1::POWER_SOURCE_NVML, absl::StrCat("nvmlDeviceGetHandleByIndex_v2: ", (*lib)->Error(e)));
      continue;
    }
    char name[96] = {0};
    (void)(*lib)->name_(dev, name, sizeof(name));
    unsigned long long mj = 0;
    const bool counter = (*lib)->total_energy_ != nullptr && (*lib)->total_energy_(dev, &mj) == kNvmlSuccess;
    unsigned mw = 0;
    if (!counter && (*lib)->power_usage_(dev, &mw) != kNvmlSuccess) {
      out.Unavailable(sensor, v1::POWER_SOURCE_NVML, absl::StrCat(name, ": neither energy counter nor power usage"));
      continue;
    }
    // NVML refreshes the energy counter about every 20 ms and the power
    // reading about every 100 ms on current GPUs (not queryable).
    out.Add(std::make_unique<NvmlSensor>(*lib, dev,
                                         Info(sensor, v1::POWER_SOURCE_NVML, device_id,
                                              absl::StrCat(name, counter ? ": nvmlDeviceGetTotalEnergyConsumption (mJ)"
                                                                         : ": nvmlDeviceGetPowerUsage (mW)"),
                                              counter ? 0.02 : 0.1, counter)));
  }
  return out;
}

SensorDiscovery DiscoverIpmi(const std::string& command) {
  SensorDiscovery out;
  if (command.empty()) {
    out.Unavailable("ipmi", v1::POWER_SOURCE_IPMI, "not configured (--ipmi-command)");
    return out;
  }
  auto first = RunCommand(command);
  absl::StatusOr<double> watts = first.ok() ? ParseIpmiPowerReading(*first) : absl::StatusOr<double>(first.status());
  if (!watts.ok()) {
    out.Unavailable("ipmi", v1::POWER_SOURCE_IPMI, std::string(watts.status().message()));
    return out;
  }
  // BMCs refresh DCMI power about once a second.
  out.Add(std::make_unique<IpmiSensor>(
      command, Info("ipmi:dcmi", v1::POWER_SOURCE_IPMI, "", absl::StrCat("'", command, "' (whole node)"), 1.0, false)));
  return out;
}

std::unique_ptr<PowerSensor> MakeModeledSensor(const v1::Device& device, double nominal_watts, bool nominal_is_default,
                                               std::shared_ptr<const SysfsReader> proc_reader) {
  const bool cpu_like = device.kind() == v1::DEVICE_KIND_CPU || device.kind() == v1::DEVICE_KIND_DPU ||
                        device.kind() == v1::DEVICE_KIND_QPU_SIM;
  std::string origin;
  if (!nominal_is_default) {
    origin = "from agent config";
  } else if (device.kind() == v1::DEVICE_KIND_CPU) {
    origin = "hetbench default for a server CPU, not a measurement";
  } else {
    origin = "the reference study's nominal figure";
  }
  const std::string assumptions = absl::StrFormat(
      "MODELED, not measured: %.0f W nominal for %s (%s) x %s", nominal_watts, DeviceKindName(device.kind()), origin,
      cpu_like ? "host CPU utilisation from /proc/stat between readings" : "utilisation assumed 1.0 while a task runs");
  v1::SensorInfo info =
      Info(absl::StrCat("modeled:", device.id()), v1::POWER_SOURCE_MODELED, device.id(), assumptions, 0.1, false);
  return std::make_unique<ModeledSensor>(std::move(info), nominal_watts, assumptions, std::move(proc_reader), cpu_like);
}

bool SensorMeasures(const v1::SensorInfo& sensor, const v1::Device& device) {
  if (sensor.device_id().empty() || sensor.device_id() == device.id()) return true;
  const auto host = device.attributes().find("host_device");
  return host != device.attributes().end() && sensor.device_id() == host->second &&
         sensor.source() != v1::POWER_SOURCE_MODELED;
}

SensorDiscovery DiscoverPowerSensors(const PowerDiscoveryConfig& config, const std::vector<v1::Device>& devices) {
  SensorDiscovery out;
  std::string cpu_id = "cpu0";
  for (const v1::Device& d : devices) {
    if (d.kind() == v1::DEVICE_KIND_CPU) {
      cpu_id = d.id();
      break;
    }
  }
  out.Merge(DiscoverNvml(config.nvml_library));
  out.Merge(DiscoverRapl(config.sys, cpu_id));
  out.Merge(DiscoverHwmon(config.sys));
  out.Merge(DiscoverIpmi(config.ipmi_command));
  for (const v1::Device& d : devices) {
    bool measured = false;
    for (const auto& s : out.sensors) measured = measured || s->info().device_id() == d.id();
    if (measured) continue;
    auto it = config.nominal_watts_override.find(d.kind());
    const bool is_default = it == config.nominal_watts_override.end();
    out.Add(MakeModeledSensor(d, is_default ? NominalWatts(d.kind()) : it->second, is_default, config.proc));
  }
  return out;
}

void AttachSensors(const std::vector<v1::SensorInfo>& sensors, std::vector<v1::Device>* devices) {
  for (v1::Device& d : *devices) {
    d.clear_power_sensors();
    for (const v1::SensorInfo& s : sensors) {
      if (s.available() && SensorMeasures(s, d)) d.add_power_sensors(s.name());
    }
  }
}

}  // namespace hetbench::agent
