#include "agent/devices/cpu_discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::agent {
namespace {

const std::string kFixtures = HETBENCH_FIXTURES;

TEST(CpuDiscoveryTest, XeonModelCoresIsaAndMemory) {
  auto d = DiscoverCpu(kFixtures + "/proc-xeon", 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->id(), "cpu0");
  EXPECT_EQ(d->kind(), v1::DEVICE_KIND_CPU);
  EXPECT_EQ(d->model(), "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz");
  EXPECT_EQ(d->cores(), 4);
  EXPECT_EQ(d->memory_bytes(), 16384000LL * 1024);
  std::vector<std::string> flags(d->isa_flags().begin(), d->isa_flags().end());
  EXPECT_EQ(flags, (std::vector<std::string>{"avx", "avx2", "avx512_vnni", "avx512bw", "avx512f", "avx512vl", "fma",
                                             "sse4_2"}));
}

TEST(CpuDiscoveryTest, AffinityCapsTheCores) {
  auto d = DiscoverCpu(kFixtures + "/proc-xeon", 2);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cores(), 2);
}

TEST(CpuDiscoveryTest, ArmCoresAreNamedFromImplementerAndPart) {
  auto d = DiscoverCpu(kFixtures + "/proc-bluefield", 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->model(), "ARM Cortex-A72");
  EXPECT_EQ(d->cores(), 8);
  std::vector<std::string> flags(d->isa_flags().begin(), d->isa_flags().end());
  EXPECT_EQ(flags, std::vector<std::string>{"asimd"});
}

TEST(CpuDiscoveryTest, MissingProcIsAClearError) {
  auto d = DiscoverCpu(kFixtures + "/no-such-proc", 0);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), ::testing::HasSubstr("cpuinfo: cannot be read"));
}

TEST(CpuDiscoveryTest, ThisMachineHasAtLeastOneCore) {
  auto d = DiscoverCpu("/proc", AffinityCores());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GE(d->cores(), 1);
  EXPECT_GT(d->memory_bytes(), 0);
}

}  // namespace
}  // namespace hetbench::agent
