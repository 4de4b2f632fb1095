// GPU (fake NVML), TPU (fixture tree) and BlueField DPU (fixture trees)
// discovery, and the honest "absent" answers on this VM.
#include "agent/devices/accelerators.h"
#include "agent/power/sensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "agent/devices/cpu_discovery.h"
#include "agent/devices/cuda.h"
#include "agent/executors/torch_executor.h"

namespace hetbench::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFixtures = HETBENCH_FIXTURES;

TEST(GpuDiscoveryTest, FakeNvmlGpuIsOfferedWithItsInventory) {
  setenv("FAKE_NVML_GPUS", "2", 1);
  Discovered d = DiscoverGpus(FAKE_NVML_LIBRARY, /*cuda_devices=*/2, "");
  unsetenv("FAKE_NVML_GPUS");
  ASSERT_EQ(d.devices.size(), 2u);
  EXPECT_TRUE(d.absent.empty());
  const v1::Device& g = d.devices[1];
  EXPECT_EQ(g.id(), "gpu1");
  EXPECT_EQ(g.kind(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(g.model(), "Fake GPU 1");
  EXPECT_EQ(g.memory_bytes(), int64_t{81920} << 20);
  EXPECT_EQ(g.driver(), "NVIDIA 535.104.05");
  EXPECT_EQ(g.attributes().at("uuid"), "GPU-fa4e0000-0000-4000-8000-000000000001");
  EXPECT_EQ(g.attributes().at("power_limit_watts"), "400");
  EXPECT_EQ(g.attributes().at("compute_capability"), "8.0");
  EXPECT_EQ(g.attributes().at("cuda_index"), "1");
  EXPECT_THAT(g.executors(), ElementsAre("torch"));
}

TEST(GpuDiscoveryTest, GpuLibTorchCannotUseIsAbsentWithTheReason) {
  Discovered d = DiscoverGpus(FAKE_NVML_LIBRARY, /*cuda_devices=*/0, "this agent was built against a CPU-only LibTorch");
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.absent.size(), 1u);
  EXPECT_EQ(d.absent[0].kind(), v1::DEVICE_KIND_GPU);
  EXPECT_THAT(d.absent[0].reason(), HasSubstr("gpu0 \"Fake GPU 0\" GPU-fa4e"));
  EXPECT_THAT(d.absent[0].reason(), HasSubstr("CPU-only LibTorch"));
}

TEST(GpuDiscoveryTest, NoDriverAndNoGpuAreAbsent) {
  Discovered none = DiscoverGpus("libnvidia-ml-not-here.so.1", 0, "");
  ASSERT_EQ(none.absent.size(), 1u);
  EXPECT_THAT(none.absent[0].reason(), HasSubstr("cannot load libnvidia-ml-not-here.so.1"));
  setenv("FAKE_NVML_GPUS", "0", 1);
  Discovered zero = DiscoverGpus(FAKE_NVML_LIBRARY, 0, "");
  unsetenv("FAKE_NVML_GPUS");
  ASSERT_EQ(zero.absent.size(), 1u);
  EXPECT_THAT(zero.absent[0].reason(), HasSubstr("reports no GPU"));
  setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  Discovered broken = DiscoverGpus(FAKE_NVML_LIBRARY, 0, "");
  unsetenv("FAKE_NVML_FAIL_INIT");
  ASSERT_EQ(broken.absent.size(), 1u);
  EXPECT_THAT(broken.absent[0].reason(), HasSubstr("nvmlInit_v2: Driver Not Loaded"));
}

// The GPU path is compiled in exactly when the LibTorch found by CMake has
// CUDA (libtorch_cuda beside libtorch), and cleanly excluded otherwise: a GPU
// task then fails with the reason instead of running on the CPU.
TEST(CudaBuildTest, CompiledInExactlyWhenLibTorchHasCuda) {
  EXPECT_EQ(CudaCompiledIn(), HETBENCH_TEST_TORCH_HAS_CUDA != 0);
  if (CudaCompiledIn()) GTEST_SKIP() << "CUDA LibTorch: the exclusion below does not apply";
  EXPECT_EQ(CudaDeviceCount(), 0);
  EXPECT_EQ(CudaPeakMemoryBytes(0), -1);
  EXPECT_THAT(CudaUnavailableReason(), HasSubstr("CPU-only LibTorch"));

  TorchExecutorConfig config;
  config.data_dir = HETBENCH_DATA_DIR;
  config.calibrate = false;
  TorchExecutor executor(config);
  v1::Assign task;
  task.set_model("mlp");
  task.set_batch_size(32);
  task.mutable_spec()->add_models("mlp");
  v1::Device gpu;
  gpu.set_id("gpu0");
  gpu.set_kind(v1::DEVICE_KIND_GPU);
  (*gpu.mutable_attributes())["cuda_index"] = "0";
  TaskControl control(16, 0);
  auto result = executor.Run(task, gpu, &control);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("cannot run on gpu0"));
  EXPECT_EQ(control.samples.published(), 0u);
}

TEST(TpuDiscoveryTest, FixtureTpuVmIsOfferedToThePythonRunnerWithXla) {
  RealSysfsReader root(kFixtures + "/tpu-vm");
  v1::RunnerProbe probe;
  probe.set_torch_version("2.1.0");
  probe.set_xla_available(true);
  probe.set_xla_device("xla:0 (TPU)");
  Discovered d = DiscoverTpus(root, {{"TPU_ACCELERATOR_TYPE", "v4-8"}, {"HOME", "/root"}}, probe, true);
  ASSERT_EQ(d.devices.size(), 1u);
  const v1::Device& t = d.devices[0];
  EXPECT_EQ(t.id(), "tpu0");
  EXPECT_EQ(t.kind(), v1::DEVICE_KIND_TPU);
  EXPECT_EQ(t.model(), "Cloud TPU v4-8");
  EXPECT_EQ(t.cores(), 4);  // /dev/accel0..3
  EXPECT_THAT(t.executors(), ElementsAre("python"));
  EXPECT_THAT(t.attributes().at("found"), HasSubstr("/dev/accel0"));
  EXPECT_THAT(t.attributes().at("found"), HasSubstr("2 Google (1ae0) PCI functions"));
  EXPECT_EQ(t.attributes().at("environment"), "TPU_ACCELERATOR_TYPE=v4-8");
}

TEST(TpuDiscoveryTest, ChipsWithoutTorchXlaAreAbsentWithTheReason) {
  RealSysfsReader root(kFixtures + "/tpu-vm");
  v1::RunnerProbe probe;
  probe.set_torch_version("1.13.0");
  Discovered d = DiscoverTpus(root, {}, probe, true);
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.absent.size(), 1u);
  EXPECT_THAT(d.absent[0].reason(), HasSubstr("Cloud TPU (4 chips) found"));
  EXPECT_THAT(d.absent[0].reason(), HasSubstr("no torch_xla"));
  Discovered off = DiscoverTpus(root, {}, probe, false);
  EXPECT_THAT(off.absent[0].reason(), HasSubstr("runner is off"));
}

TEST(TpuDiscoveryTest, ThisVmHasNoTpu) {
  RealSysfsReader root;
  v1::RunnerProbe probe;
  probe.set_xla_available(true);  // even with torch_xla there is no chip
  Discovered d = DiscoverTpus(root, {{"PATH", "/usr/bin"}}, probe, true);
  EXPECT_TRUE(d.devices.empty());
  ASSERT_EQ(d.absent.size(), 1u);
  EXPECT_EQ(d.absent[0].reason(), "no /dev/accel* device, no Google (1ae0) PCI function, no TPU_* environment");
  Discovered env_only = DiscoverTpus(root, {{"TPU_NAME", "my-tpu"}}, probe, true);
  EXPECT_THAT(env_only.absent[0].reason(), HasSubstr("TPU environment set but no chip: TPU_NAME=my-tpu"));
}

TEST(BlueFieldTest, ArmCoresOfAFixtureBlueFieldBecomeADpu) {
  RealSysfsReader root(kFixtures + "/bluefield-arm");
  auto cpu = DiscoverCpu(kFixtures + "/bluefield-arm/proc", 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  BlueField bf = DetectBlueField(root, cpu->attributes().contains("cpu_implementer"));
  EXPECT_TRUE(bf.on_arm_cores);
  EXPECT_EQ(bf.generation, "BlueField-2");
  EXPECT_TRUE(bf.host_side.empty());
  ASSERT_EQ(bf.evidence.size(), 4u);
  EXPECT_THAT(bf.evidence[0], HasSubstr("/sys/class/dmi/id/product_name = \"BlueField-2 DPU"));
  EXPECT_EQ(bf.evidence[2], "mlxbf drivers: mlxbf-bootctl, mlxbf-tmfifo");
  EXPECT_THAT(bf.evidence[3], HasSubstr("0000:03:00.0 (15b3:a2d6 BlueField-2)"));
  Discovered found;
  ApplyBlueField(bf, &*cpu, &found);
  EXPECT_TRUE(found.absent.empty());
  EXPECT_EQ(cpu->id(), "dpu0");
  EXPECT_EQ(cpu->kind(), v1::DEVICE_KIND_DPU);
  EXPECT_EQ(cpu->model(), "BlueField-2 DPU: ARM Cortex-A72");
  EXPECT_EQ(cpu->cores(), 8);
  EXPECT_THAT(cpu->driver(), HasSubstr("mlxbf-bootctl"));
}

TEST(BlueFieldTest, ABlueFieldSeenFromTheHostIsNotADpuHere) {
  RealSysfsReader root(kFixtures + "/bluefield-host");
  auto cpu = DiscoverCpu(kFixtures + "/bluefield-host/proc", 0);
  ASSERT_TRUE(cpu.ok());
  BlueField bf = DetectBlueField(root, cpu->attributes().contains("cpu_implementer"));
  EXPECT_FALSE(bf.on_arm_cores);
  EXPECT_EQ(bf.host_side, "PCI 0000:af:00.0 (15b3:a2d6 BlueField-2)");
  Discovered found;
  ApplyBlueField(bf, &*cpu, &found);
  EXPECT_EQ(cpu->kind(), v1::DEVICE_KIND_CPU);
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_THAT(found.absent[0].reason(), HasSubstr("but this agent runs on the host"));
}

TEST(BlueFieldTest, ThisVmIsNotABlueField) {
  RealSysfsReader root;
  auto cpu = DiscoverCpu("/proc", 0);
  ASSERT_TRUE(cpu.ok());
  BlueField bf = DetectBlueField(root, cpu->attributes().contains("cpu_implementer"));
  EXPECT_FALSE(bf.on_arm_cores);
  EXPECT_TRUE(bf.evidence.empty());
  Discovered found;
  ApplyBlueField(bf, &*cpu, &found);
  EXPECT_EQ(cpu->id(), "cpu0");
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_THAT(found.absent[0].reason(), HasSubstr("not a BlueField"));
}

TEST(AttachSensorsTest, DevicesListTheirOwnTheNodesAndTheirHostsMeasuredSensors) {
  std::vector<v1::Device> devices(3);
  devices[0].set_id("cpu0");
  devices[1].set_id("gpu0");
  devices[2].set_id("qpu0");
  (*devices[2].mutable_attributes())["host_device"] = "cpu0";
  auto sensor = [](const std::string& name, const std::string& device, v1::PowerSource source, bool available) {
    v1::SensorInfo s;
    s.set_name(name);
    s.set_device_id(device);
    s.set_source(source);
    s.set_available(available);
    return s;
  };
  AttachSensors({sensor("rapl:package-0", "cpu0", v1::POWER_SOURCE_RAPL, true),
                 sensor("nvml:gpu0", "gpu0", v1::POWER_SOURCE_NVML, true),
                 sensor("ipmi", "", v1::POWER_SOURCE_IPMI, true),
                 sensor("hwmon", "", v1::POWER_SOURCE_HWMON, false),
                 sensor("modeled:qpu0", "qpu0", v1::POWER_SOURCE_MODELED, true)},
                &devices);
  EXPECT_THAT(devices[0].power_sensors(), ElementsAre("rapl:package-0", "ipmi"));
  EXPECT_THAT(devices[1].power_sensors(), ElementsAre("nvml:gpu0", "ipmi"));
  EXPECT_THAT(devices[2].power_sensors(), ElementsAre("rapl:package-0", "ipmi", "modeled:qpu0"));
}

}  // namespace
}  // namespace hetbench::agent
