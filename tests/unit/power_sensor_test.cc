// Every PowerSensor passes one contract suite; each source also has tests of
// its own failure modes. Everything runs against fakes: a fake sysfs tree in
// a temporary directory, a fake NVML library built by the tests, a fake
// ipmitool script, a fake /proc/stat.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "agent/power/power_sampler.h"
#include "agent/power/sensors.h"
#include "agent/platform/sysfs_reader.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

/// A directory tree standing in for /sys or /proc.
class FakeSysfsTree {
 public:
  FakeSysfsTree() : dir_("hetbench-sysfs"), root_(dir_.path()) {}
  void Write(const std::string& path, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << content;
  }
  void Remove(const std::string& path) { std::filesystem::remove_all(root_ + path); }
  std::shared_ptr<const SysfsReader> reader() const { return std::make_shared<RealSysfsReader>(root_); }
  const std::string& root() const { return root_; }

 private:
  hetbench::testing::TempDir dir_;
  std::string root_;
};

/// Returns PERMISSION_DENIED for paths ending in `suffix` (root reads anything,
/// so chmod cannot stand in for a root-only file in tests run as root).
class DenyingReader final : public SysfsReader {
 public:
  DenyingReader(std::shared_ptr<const SysfsReader> inner, std::string suffix)
      : inner_(std::move(inner)), suffix_(std::move(suffix)) {}
  absl::StatusOr<std::string> ReadFile(const std::string& path) const override {
    if (path.size() >= suffix_.size() && path.compare(path.size() - suffix_.size(), suffix_.size(), suffix_) == 0) {
      return absl::PermissionDeniedError(path + ": Permission denied");
    }
    return inner_->ReadFile(path);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) const override {
    return inner_->ListDir(path);
  }

 private:
  std::shared_ptr<const SysfsReader> inner_;
  std::string suffix_;
};

void WriteRaplZone(FakeSysfsTree& t, const std::string& zone, const std::string& name, int64_t energy_uj,
                   int64_t range_uj) {
  const std::string dir = "/sys/class/powercap/" + zone;
  t.Write(dir + "/name", name + "\n");
  t.Write(dir + "/energy_uj", std::to_string(energy_uj) + "\n");
  t.Write(dir + "/max_energy_range_uj", std::to_string(range_uj) + "\n");
}

void WriteProcStat(FakeSysfsTree& t, int64_t busy, int64_t idle) {
  // user nice system idle iowait irq softirq steal
  t.Write("/proc/stat",
          "cpu  " + std::to_string(busy) + " 0 0 " + std::to_string(idle) + " 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n");
}

v1::Device Cpu() {
  v1::Device d;
  d.set_id("cpu0");
  d.set_kind(v1::DEVICE_KIND_CPU);
  return d;
}

// ------------------------------------------------------------ contract suite

/// A working sensor plus what keeps its fakes alive, and a way to make time pass.
struct SensorUnderTest {
  std::shared_ptr<FakeSysfsTree> tree;
  std::unique_ptr<PowerSensor> sensor;
  std::function<void(int)> advance = [](int) {};  // the hardware does work between reads
  std::function<void()> break_source;             // make the next reads fail
  std::function<void()> repair = [] {};
};

struct ContractCase {
  std::string name;
  std::function<SensorUnderTest()> make;
};

void PrintTo(const ContractCase& c, std::ostream* os) { *os << c.name; }

class PowerSensorContract : public ::testing::TestWithParam<ContractCase> {};

TEST_P(PowerSensorContract, DescribesItselfAndReadsPlausibleMonotonicValues) {
  SensorUnderTest s = GetParam().make();
  ASSERT_NE(s.sensor, nullptr);
  const v1::SensorInfo& info = s.sensor->info();
  EXPECT_FALSE(info.name().empty());
  EXPECT_NE(info.source(), v1::POWER_SOURCE_UNSPECIFIED);
  EXPECT_TRUE(info.available());
  EXPECT_GT(info.update_period_seconds(), 0);
  EXPECT_FALSE(info.detail().empty());
  EXPECT_EQ(info.source() == v1::POWER_SOURCE_MODELED, !s.sensor->assumptions().empty());
  double last_joules = -1;
  for (int i = 0; i < 5; ++i) {
    auto r = s.sensor->Read();
    ASSERT_TRUE(r.ok()) << r.status();
    if (info.has_energy_counter()) {
      ASSERT_FALSE(std::isnan(r->joules));
      EXPECT_TRUE(std::isnan(r->watts));
      EXPECT_GE(r->joules, 0);
      if (i == 0) EXPECT_EQ(r->joules, 0) << "a counter starts at 0 when the sensor is created";
      EXPECT_GE(r->joules, last_joules);
      last_joules = r->joules;
    } else {
      ASSERT_FALSE(std::isnan(r->watts));
      EXPECT_TRUE(std::isnan(r->joules));
      EXPECT_GE(r->watts, 0);
      EXPECT_LT(r->watts, 100000);
    }
    s.advance(i);
  }
  if (info.has_energy_counter()) EXPECT_GT(last_joules, 0) << "energy was spent between reads";
}

TEST_P(PowerSensorContract, ABrokenSourceIsAnErrorNamingWhatFailedNotACrash) {
  SensorUnderTest s = GetParam().make();
  ASSERT_TRUE(s.sensor->Read().ok());
  ASSERT_TRUE(s.break_source);
  s.break_source();
  auto r = s.sensor->Read();
  s.repair();
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.status().message().empty());
}

SensorUnderTest MakeRapl() {
  SensorUnderTest s;
  s.tree = std::make_shared<FakeSysfsTree>();
  WriteRaplZone(*s.tree, "intel-rapl:0", "package-0", 1'000'000, 262'143'328'850);
  SensorDiscovery d = DiscoverRapl(s.tree->reader(), "cpu0");
  s.sensor = std::move(d.sensors.at(0));
  auto tree = s.tree;
  s.advance = [tree](int i) {
    WriteRaplZone(*tree, "intel-rapl:0", "package-0", 1'000'000 + (i + 1) * 5'000'000, 262'143'328'850);
  };
  s.break_source = [tree] { tree->Remove("/sys"); };
  return s;
}

SensorUnderTest MakeHwmonPower() {
  SensorUnderTest s;
  s.tree = std::make_shared<FakeSysfsTree>();
  s.tree->Write("/sys/class/hwmon/hwmon0/name", "mlxbf_pwr\n");
  s.tree->Write("/sys/class/hwmon/hwmon0/power1_input", "42500000\n");
  s.sensor = std::move(DiscoverHwmon(s.tree->reader()).sensors.at(0));
  auto tree = s.tree;
  s.break_source = [tree] { tree->Write("/sys/class/hwmon/hwmon0/power1_input", "not a number\n"); };
  return s;
}

SensorUnderTest MakeHwmonEnergy() {
  SensorUnderTest s;
  s.tree = std::make_shared<FakeSysfsTree>();
  s.tree->Write("/sys/class/hwmon/hwmon1/name", "amd_energy\n");
  s.tree->Write("/sys/class/hwmon/hwmon1/energy1_input", "7000000\n");
  s.sensor = std::move(DiscoverHwmon(s.tree->reader()).sensors.at(0));
  auto tree = s.tree;
  s.advance = [tree](int i) {
    tree->Write("/sys/class/hwmon/hwmon1/energy1_input", std::to_string(7000000 + (i + 1) * 1000000) + "\n");
  };
  s.break_source = [tree] { tree->Remove("/sys/class/hwmon/hwmon1/energy1_input"); };
  return s;
}

SensorUnderTest MakeNvml(bool energy) {
  if (energy) {
    unsetenv("FAKE_NVML_NO_ENERGY");
  } else {
    setenv("FAKE_NVML_NO_ENERGY", "1", 1);
  }
  SensorUnderTest s;
  SensorDiscovery d = DiscoverNvml(FAKE_NVML_LIBRARY);
  unsetenv("FAKE_NVML_NO_ENERGY");
  s.sensor = std::move(d.sensors.at(0));
  s.break_source = [] { setenv("FAKE_NVML_FAIL_READS", "1", 1); };
  s.repair = [] { unsetenv("FAKE_NVML_FAIL_READS"); };
  return s;
}

SensorUnderTest MakeIpmi() {
  SensorUnderTest s;
  s.sensor = std::move(DiscoverIpmi(std::string(HETBENCH_FIXTURES) + "/fake-ipmitool").sensors.at(0));
  s.break_source = [] { setenv("FAKE_IPMI_FAIL", "1", 1); };
  s.repair = [] { unsetenv("FAKE_IPMI_FAIL"); };
  return s;
}

SensorUnderTest MakeModeled() {
  SensorUnderTest s;
  s.tree = std::make_shared<FakeSysfsTree>();
  WriteProcStat(*s.tree, 1000, 1000);
  s.sensor = MakeModeledSensor(Cpu(), 150, true, std::make_shared<RealSysfsReader>(s.tree->root() + "/proc"));
  auto tree = s.tree;
  s.advance = [tree](int i) { WriteProcStat(*tree, 1000 + (i + 1) * 30, 1000 + (i + 1) * 70); };
  s.break_source = [tree] { tree->Remove("/proc"); };
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllSensors, PowerSensorContract,
                         ::testing::Values(ContractCase{"rapl", MakeRapl}, ContractCase{"hwmon_power", MakeHwmonPower},
                                           ContractCase{"hwmon_energy", MakeHwmonEnergy},
                                           ContractCase{"nvml_energy", [] { return MakeNvml(true); }},
                                           ContractCase{"nvml_power", [] { return MakeNvml(false); }},
                                           ContractCase{"ipmi", MakeIpmi}, ContractCase{"modeled", MakeModeled}),
                         [](const ::testing::TestParamInfo<ContractCase>& info) { return info.param.name; });

// ------------------------------------------------------------ RAPL

TEST(RaplTest, CounterWrapAroundIsUnwrapped) {
  FakeSysfsTree t;
  WriteRaplZone(t, "intel-rapl:0", "package-0", 900, 999);
  SensorDiscovery d = DiscoverRapl(t.reader(), "cpu0");
  ASSERT_EQ(d.sensors.size(), 1u);
  PowerSensor& s = *d.sensors[0];
  EXPECT_DOUBLE_EQ(s.Read()->joules, 0);
  WriteRaplZone(t, "intel-rapl:0", "package-0", 990, 999);
  EXPECT_NEAR(s.Read()->joules, 90e-6, 1e-12);
  WriteRaplZone(t, "intel-rapl:0", "package-0", 10, 999);  // passed 999 and restarted at 0
  EXPECT_NEAR(s.Read()->joules, 110e-6, 1e-12);            // 90 + (999 - 990) + 1 + 10
  WriteRaplZone(t, "intel-rapl:0", "package-0", 500, 999);
  EXPECT_NEAR(s.Read()->joules, 600e-6, 1e-12);
}

TEST(RaplTest, PackagesAndDramAreSensorsCoreSubzonesAreNot) {
  FakeSysfsTree t;
  WriteRaplZone(t, "intel-rapl:0", "package-0", 1, 1000);
  WriteRaplZone(t, "intel-rapl:0:0", "core", 1, 1000);
  WriteRaplZone(t, "intel-rapl:0:1", "dram", 1, 1000);
  WriteRaplZone(t, "intel-rapl:1", "package-1", 1, 1000);
  SensorDiscovery d = DiscoverRapl(t.reader(), "cpu0");
  std::vector<std::string> names;
  for (const auto& s : d.sensors) {
    names.push_back(s->info().name());
    EXPECT_EQ(s->info().device_id(), "cpu0");
    EXPECT_TRUE(s->info().has_energy_counter());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"rapl:package-0", "rapl:dram", "rapl:package-1"}));
}

TEST(RaplTest, RootOnlyCounterSaysSoAndHowToFixIt) {
  FakeSysfsTree t;
  WriteRaplZone(t, "intel-rapl:0", "package-0", 1, 1000);
  SensorDiscovery d = DiscoverRapl(std::make_shared<DenyingReader>(t.reader(), "energy_uj"), "cpu0");
  EXPECT_TRUE(d.sensors.empty());
  ASSERT_EQ(d.tried.size(), 1u);
  EXPECT_FALSE(d.tried[0].available());
  EXPECT_THAT(d.tried[0].detail(), HasSubstr("not readable (root-only since Linux 5.10)"));
}

TEST(RaplTest, MissingGarbageAndAbsentAreReportedNotFatal) {
  FakeSysfsTree t;
  SensorDiscovery none = DiscoverRapl(t.reader(), "cpu0");
  ASSERT_EQ(none.tried.size(), 1u);
  EXPECT_THAT(none.tried[0].detail(), HasSubstr("/sys/class/powercap is not present"));

  WriteRaplZone(t, "intel-rapl:0", "package-0", 1, 1000);
  t.Write("/sys/class/powercap/intel-rapl:0/energy_uj", "lots\n");
  SensorDiscovery garbage = DiscoverRapl(t.reader(), "cpu0");
  EXPECT_TRUE(garbage.sensors.empty());
  EXPECT_THAT(garbage.tried[0].detail(), HasSubstr("not an integer"));

  WriteRaplZone(t, "intel-rapl:0", "package-0", 1, 1000);
  t.Remove("/sys/class/powercap/intel-rapl:0/max_energy_range_uj");
  SensorDiscovery no_range = DiscoverRapl(t.reader(), "cpu0");
  EXPECT_THAT(no_range.tried[0].detail(), HasSubstr("cannot unwrap"));
}

// ------------------------------------------------------------ hwmon

TEST(HwmonTest, PowerInMicrowattsWithLabelAndAveragingInterval) {
  FakeSysfsTree t;
  t.Write("/sys/class/hwmon/hwmon3/name", "mlxbf_pwr\n");
  t.Write("/sys/class/hwmon/hwmon3/power1_input", "61250000\n");
  t.Write("/sys/class/hwmon/hwmon3/power1_label", "SoC\n");
  t.Write("/sys/class/hwmon/hwmon3/power1_average_interval", "500\n");
  t.Write("/sys/class/hwmon/hwmon3/temp1_input", "45000\n");
  SensorDiscovery d = DiscoverHwmon(t.reader());
  ASSERT_EQ(d.sensors.size(), 1u);
  EXPECT_EQ(d.sensors[0]->info().name(), "hwmon:mlxbf_pwr/SoC");
  EXPECT_DOUBLE_EQ(d.sensors[0]->info().update_period_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(d.sensors[0]->Read()->watts, 61.25);
  t.Write("/sys/class/hwmon/hwmon3/power1_input", "garbage\n");
  EXPECT_FALSE(d.sensors[0]->Read().ok());
}

TEST(HwmonTest, NoPowerInputsIsExplained) {
  FakeSysfsTree t;
  t.Write("/sys/class/hwmon/hwmon0/temp1_input", "45000\n");
  SensorDiscovery d = DiscoverHwmon(t.reader());
  EXPECT_TRUE(d.sensors.empty());
  EXPECT_THAT(d.tried.at(0).detail(), HasSubstr("no power or energy input"));
}

// ------------------------------------------------------------ NVML

TEST(NvmlTest, EnergyCounterIsPreferredAndEveryGpuGetsASensor) {
  setenv("FAKE_NVML_GPUS", "2", 1);
  SensorDiscovery d = DiscoverNvml(FAKE_NVML_LIBRARY);
  unsetenv("FAKE_NVML_GPUS");
  ASSERT_EQ(d.sensors.size(), 2u);
  EXPECT_EQ(d.sensors[1]->info().device_id(), "gpu1");
  EXPECT_TRUE(d.sensors[0]->info().has_energy_counter());
  EXPECT_THAT(d.sensors[0]->info().detail(), HasSubstr("Fake GPU 0: nvmlDeviceGetTotalEnergyConsumption"));
  // The fake counter grows 25 J per call; the first read is the zero point.
  EXPECT_DOUBLE_EQ(d.sensors[0]->Read()->joules, 0);
  EXPECT_DOUBLE_EQ(d.sensors[0]->Read()->joules, 25.0);
}

TEST(NvmlTest, FallsBackToPowerUsageWithoutTheCounter) {
  SensorUnderTest s = MakeNvml(false);
  EXPECT_FALSE(s.sensor->info().has_energy_counter());
  EXPECT_DOUBLE_EQ(s.sensor->Read()->watts, 250.0);
}

TEST(NvmlTest, MissingLibraryAndFailedInitAreReportedAbsent) {
  SensorDiscovery missing = DiscoverNvml("libnvidia-ml-that-does-not-exist.so.1");
  EXPECT_TRUE(missing.sensors.empty());
  EXPECT_THAT(missing.tried.at(0).detail(), HasSubstr("no NVIDIA driver on this node"));
  setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  SensorDiscovery failed = DiscoverNvml(FAKE_NVML_LIBRARY);
  unsetenv("FAKE_NVML_FAIL_INIT");
  EXPECT_TRUE(failed.sensors.empty());
  EXPECT_THAT(failed.tried.at(0).detail(), HasSubstr("nvmlInit_v2: Driver Not Loaded"));
  // A library that is not NVML at all names the first entry point it lacks.
  SensorDiscovery wrong = DiscoverNvml("libm.so.6");
  EXPECT_TRUE(wrong.sensors.empty());
  EXPECT_THAT(wrong.tried.at(0).detail(), HasSubstr("NVML library lacks nvmlInit_v2"));
}

// ------------------------------------------------------------ IPMI

TEST(IpmiTest, ParsesTheDcmiReadingAndRefusesOtherOutput) {
  EXPECT_DOUBLE_EQ(*ParseIpmiPowerReading("    Instantaneous power reading:   220 Watts\n"), 220.0);
  EXPECT_FALSE(ParseIpmiPowerReading("Could not open device at /dev/ipmi0").ok());
  setenv("FAKE_IPMI_WATTS", "187", 1);
  SensorUnderTest s = MakeIpmi();
  EXPECT_DOUBLE_EQ(s.sensor->Read()->watts, 187.0);
  unsetenv("FAKE_IPMI_WATTS");
  SensorDiscovery off = DiscoverIpmi("");
  EXPECT_THAT(off.tried.at(0).detail(), HasSubstr("not configured"));
  SensorDiscovery broken = DiscoverIpmi("false");
  EXPECT_TRUE(broken.sensors.empty());
  EXPECT_THAT(broken.tried.at(0).detail(), HasSubstr("exited with status"));
}

// ------------------------------------------------------------ modeled

TEST(ModeledTest, NominalTimesMeasuredCpuUtilisationAndLabelled) {
  SensorUnderTest s = MakeModeled();             // /proc/stat: busy 1000, idle 1000
  WriteProcStat(*s.tree, 1000 + 30, 1000 + 70);  // 30% busy since construction
  EXPECT_NEAR(s.sensor->Read()->watts, 150 * 0.3, 1e-9);
  WriteProcStat(*s.tree, 1030 + 100, 1070);  // 100% busy since the last read
  EXPECT_NEAR(s.sensor->Read()->watts, 150.0, 1e-9);
  EXPECT_THAT(s.sensor->assumptions(), HasSubstr("MODELED, not measured: 150 W nominal for cpu"));
  EXPECT_EQ(s.sensor->info().source(), v1::POWER_SOURCE_MODELED);
}

TEST(ModeledTest, NonCpuKindsUseTheStudysFigureAtFullUtilisation) {
  FakeSysfsTree t;
  v1::Device gpu;
  gpu.set_id("gpu0");
  gpu.set_kind(v1::DEVICE_KIND_GPU);
  auto s = MakeModeledSensor(gpu, 400, true, t.reader());
  EXPECT_DOUBLE_EQ(s->Read()->watts, 400.0);
  EXPECT_THAT(s->assumptions(), HasSubstr("the reference study's nominal figure"));
  EXPECT_THAT(s->assumptions(), HasSubstr("utilisation assumed 1.0"));
}

// ------------------------------------------------------------ discovery and sampler

TEST(PowerDiscoveryTest, WithoutAnySensorTheCpuIsModeledAndEveryAbsenceExplained) {
  FakeSysfsTree t;
  WriteProcStat(t, 1, 1);
  PowerDiscoveryConfig config;
  config.sys = t.reader();
  config.proc = std::make_shared<RealSysfsReader>(t.root() + "/proc");
  config.nvml_library = "libnvidia-ml-absent.so.1";
  SensorDiscovery d = DiscoverPowerSensors(config, {Cpu()});
  ASSERT_EQ(d.sensors.size(), 1u);
  EXPECT_EQ(d.sensors[0]->info().source(), v1::POWER_SOURCE_MODELED);
  std::vector<std::string> tried;
  for (const auto& i : d.tried) tried.push_back(i.name() + (i.available() ? "+" : "-"));
  EXPECT_EQ(tried, (std::vector<std::string>{"nvml-", "rapl-", "hwmon-", "ipmi-", "modeled:cpu0+"}));
}

TEST(PowerDiscoveryTest, AMeasuredCpuSensorReplacesTheModel) {
  FakeSysfsTree t;
  WriteRaplZone(t, "intel-rapl:0", "package-0", 5, 1000);
  PowerDiscoveryConfig config;
  config.sys = t.reader();
  config.proc = t.reader();
  config.nvml_library = "libnvidia-ml-absent.so.1";
  config.nominal_watts_override[v1::DEVICE_KIND_CPU] = 205;
  SensorDiscovery d = DiscoverPowerSensors(config, {Cpu()});
  ASSERT_EQ(d.sensors.size(), 1u);
  EXPECT_EQ(d.sensors[0]->info().source(), v1::POWER_SOURCE_RAPL);
}

TEST(PowerSamplerTest, ReadNowFeedsEveryTapAndTimestampsAreSteady) {
  std::vector<std::unique_ptr<PowerSensor>> sensors;
  sensors.push_back(MakeRapl().sensor);  // keeps reading the same file tree: values may repeat
  FakeSysfsTree t;
  WriteProcStat(t, 10, 10);
  sensors.push_back(MakeModeledSensor(Cpu(), 150, true, std::make_shared<RealSysfsReader>(t.root() + "/proc")));
  PowerSampler sampler(std::move(sensors), 10);
  auto a = sampler.Subscribe();
  sampler.ReadNow();
  auto b = sampler.Subscribe();
  sampler.ReadNow();
  int errors = 0;
  std::vector<TimedReading> ra = a->Take(1, &errors);
  std::vector<TimedReading> rb = b->Take(1, &errors);
  ASSERT_EQ(ra.size(), 2u);
  ASSERT_EQ(rb.size(), 1u);  // subscribed after the first read
  EXPECT_LT(ra[0].t_ns, ra[1].t_ns);
  EXPECT_EQ(ra[1].t_ns, rb[0].t_ns);
  sampler.Unsubscribe(a);
  sampler.ReadNow();
  EXPECT_TRUE(a->Take(1, &errors).empty());
  EXPECT_EQ(b->Take(1, &errors).size(), 1u);
}

TEST(PowerSamplerTest, PeriodicReadsReachASubscribedTap) {
  FakeSysfsTree t;
  WriteProcStat(t, 10, 10);
  std::vector<std::unique_ptr<PowerSensor>> sensors;
  sensors.push_back(MakeModeledSensor(Cpu(), 150, true, std::make_shared<RealSysfsReader>(t.root() + "/proc")));
  PowerSampler sampler(std::move(sensors), 50);
  auto tap = sampler.Subscribe();
  sampler.Start();
  std::vector<TimedReading> got;
  hetbench::testing::WaitFor(
      [&] {
        int errors = 0;
        for (auto& r : tap->Take(0, &errors)) got.push_back(r);
        return got.size() >= 5;
      },
      absl::Seconds(10));
  sampler.Stop();
  ASSERT_GE(got.size(), 5u);
  for (size_t i = 1; i < got.size(); ++i) EXPECT_LT(got[i - 1].t_ns, got[i].t_ns);
  EXPECT_GT(sampler.ticks(), 0);
}

}  // namespace
}  // namespace hetbench::agent
