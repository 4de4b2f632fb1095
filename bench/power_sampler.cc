// The power sampler's own cost: CPU time of the sampler thread per wall
// second at a given rate, with this machine's sensors (on the development VM:
// the modeled CPU sensor reading /proc/stat) and with a fake RAPL tree of
// four zones in a temporary directory. Prints the fraction of one core.
#include "agent/power/power_sampler.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/devices/cpu_discovery.h"
#include "agent/power/sensors.h"

namespace {

double Measure(hetbench::agent::SensorDiscovery sensors, double hz, double seconds, int64_t* readings) {
  hetbench::agent::PowerSampler sampler(std::move(sensors.sensors), hz);
  auto tap = sampler.Subscribe();  // the sampler only reads while a task listens
  sampler.Start();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  sampler.Stop();
  *readings = 0;
  for (size_t i = 0; i < tap->sensors(); ++i) {
    int errors = 0;
    *readings += static_cast<int64_t>(tap->Take(i, &errors).size());
  }
  return sampler.thread_cpu_seconds() / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  double hz = 10, seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--hz")) hz = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
  }
  auto cpu = hetbench::agent::DiscoverCpu("/proc", hetbench::agent::AffinityCores());
  if (!cpu.ok()) return 1;

  hetbench::agent::PowerDiscoveryConfig real;
  real.sys = std::make_shared<hetbench::agent::RealSysfsReader>();
  real.proc = std::make_shared<hetbench::agent::RealSysfsReader>("/proc");
  auto here = hetbench::agent::DiscoverPowerSensors(real, {*cpu});
  std::string names;
  for (const auto& s : here.sensors) names += s->info().name() + " ";

  const auto dir = std::filesystem::temp_directory_path() / "hetbench-bench-rapl";
  std::filesystem::remove_all(dir);
  for (int z = 0; z < 4; ++z) {
    const auto zone = dir / "sys/class/powercap" / ("intel-rapl:" + std::to_string(z));
    std::filesystem::create_directories(zone);
    std::ofstream(zone / "name") << (z < 2 ? "package-" + std::to_string(z) : std::string("dram")) << "\n";
    std::ofstream(zone / "energy_uj") << 123456789 << "\n";
    std::ofstream(zone / "max_energy_range_uj") << 262143328850LL << "\n";
  }
  hetbench::agent::PowerDiscoveryConfig fake = real;
  fake.sys = std::make_shared<hetbench::agent::RealSysfsReader>(dir.string());
  fake.nvml_library = "libnvidia-ml-absent.so.1";
  auto rapl = hetbench::agent::DiscoverPowerSensors(fake, {*cpu});

  int64_t n_here = 0, n_rapl = 0;
  const double here_frac = Measure(std::move(here), hz, seconds, &n_here);
  const double rapl_frac = Measure(std::move(rapl), hz, seconds, &n_rapl);
  std::filesystem::remove_all(dir);
  std::printf("power sampler at %.0f Hz for %.0f s\n", hz, seconds);
  std::printf("%-40s %10s %16s\n", "sensors", "readings", "share_of_a_core");
  std::printf("%-40s %10ld %15.4f%%\n", ("this machine: " + names).c_str(), static_cast<long>(n_here), here_frac * 100);
  std::printf("%-40s %10ld %15.4f%%\n", "fake RAPL tree, 4 zones", static_cast<long>(n_rapl), rapl_frac * 100);
  return 0;
}
