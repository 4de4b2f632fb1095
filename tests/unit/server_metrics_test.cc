// HetbenchServer's /metrics endpoint, scraped over a real socket; its gRPC
// memory limit.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/server.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::server {
namespace {

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(ServerMetricsTest, ExposesHetbenchFamiliesOnItsOwnPort) {
  testing::TempDir dir("hetbench-metrics");
  ServerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.metrics_address = "127.0.0.1:0";
  config.db_path = dir.path() + "/jobs.db";
  HetbenchServer server(config);
  absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_GT(server.metrics_port(), 0);
  EXPECT_NE(server.metrics_port(), server.grpc_port());
  const std::string body = HttpGet(server.metrics_port(), "/metrics");
  EXPECT_THAT(body, ::testing::HasSubstr("hetbench_build_info{"));
  EXPECT_THAT(body, ::testing::HasSubstr("hetbench_jobs{state=\"queued\"} 0"));
  EXPECT_THAT(body, ::testing::HasSubstr("hetbench_agents_connected{device_kind=\"cpu\"} 0"));
  server.Shutdown(0.5);
}

// gRPC narrows every connection's flow-control window once its buffers pass
// a fifth of the quota (and tells each peer in a SETTINGS frame): at 5,000
// agents a 1 GiB quota sat there. The default is half the memory the process
// may use: the machine's, or its container's limit when lower.
TEST(ServerConfigTest, TheDefaultGrpcMemoryLimitIsHalfTheMemoryTheProcessMayUse) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t total_kib = 0;
  while (meminfo >> key >> total_kib >> unit && key != "MemTotal:") {
  }
  ASSERT_EQ(key, "MemTotal:");
  const double half = static_cast<double>(total_kib) * 1024 / 2;
  testing::TempDir dir("hetbench-cgroup");
  const std::string no_limit = dir.path() + "/no-limit", limit = dir.path() + "/limit";
  std::ofstream(no_limit) << "max\n";
  std::ofstream(limit) << (int64_t{1} << 30) << "\n";
  EXPECT_NEAR(static_cast<double>(DefaultGrpcMemoryBytes(no_limit)), half, half * 0.01);
  EXPECT_NEAR(static_cast<double>(DefaultGrpcMemoryBytes(dir.path() + "/absent")), half, half * 0.01);
  EXPECT_EQ(DefaultGrpcMemoryBytes(limit), int64_t{512} << 20) << "a container's limit below the machine's memory";
  EXPECT_EQ(ServerConfig{}.grpc_memory_bytes, 0) << "embedded servers (tests) set no limit unless asked";
}

TEST(ServerConfigTest, AServerWithAGrpcMemoryLimitServes) {
  testing::TempDir dir("hetbench-quota");
  ServerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.db_path = dir.path() + "/jobs.db";
  config.grpc_memory_bytes = int64_t{64} << 20;
  HetbenchServer server(config);
  absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_GT(server.grpc_port(), 0);
  server.Shutdown(0.5);
}

}  // namespace
}  // namespace hetbench::server

namespace hetbench::server {
namespace {

// Series of `family` whose labels include agent=`agent`.
int SeriesFor(Metrics& m, const std::string& family, const std::string& agent) {
  int n = 0;
  for (const auto& f : m.registry()->Collect()) {
    if (f.name != family) continue;
    for (const auto& metric : f.metric) {
      for (const auto& l : metric.label) n += (l.name == "agent" && l.value == agent) ? 1 : 0;
    }
  }
  return n;
}

TEST(MetricsTest, ValidationSeriesExistOnlyForDevicesThatDidNotPass) {
  Metrics m;
  v1::DeviceVerdict d;
  d.set_agent_id("a1");
  d.set_device_id("cpu0");
  d.set_verdict(v1::VERDICT_DEGRADED);
  for (const char* test : {"matmul", "memory_bandwidth"}) {
    v1::TestVerdict* t = d.add_tests();
    t->set_test(test);
    t->set_baseline_median(100);
    t->set_ratio(0.9);
  }
  d.add_tests()->set_test("power_sensor");  // not compared: no series
  m.SetValidationRatios(d);
  m.SetValidationRatios(d);  // judged again: replaced, not added
  EXPECT_EQ(SeriesFor(m, "hetbench_validation_ratio", "a1"), 2);
  v1::DeviceHealth h;
  h.set_device_id("cpu0");
  h.set_verdict(v1::VERDICT_DEGRADED);
  m.SetDeviceHealth({{{"a1", "cpu0"}, h}});
  EXPECT_EQ(SeriesFor(m, "hetbench_device_health", "a1"), 1);
  d.set_verdict(v1::VERDICT_PASS);
  m.SetValidationRatios(d);
  m.SetDeviceHealth({});
  EXPECT_EQ(SeriesFor(m, "hetbench_validation_ratio", "a1"), 0);
  EXPECT_EQ(SeriesFor(m, "hetbench_device_health", "a1"), 0);
}

TEST(MetricsTest, AnAgentsPowerGaugesGoAwayWithItAndReconnectsDoNotDuplicate) {
  Metrics m;
  v1::SensorInfo modeled;
  modeled.set_source(v1::POWER_SOURCE_MODELED);
  modeled.set_available(true);
  v1::SensorInfo rapl;
  rapl.set_source(v1::POWER_SOURCE_RAPL);
  std::vector<std::pair<std::string, v1::SensorInfo>> sensors = {{"cpu", modeled}, {"node", rapl}};
  m.SetSensorsUp("a1", sensors);
  m.SetSensorsUp("a1", sensors);  // a reconnect announces the same sensors
  m.SetPower("a1", "cpu", v1::POWER_SOURCE_MODELED, 120);
  m.AddEnergy("a1", "cpu", v1::POWER_SOURCE_MODELED, 5);
  m.SetSensorsUp("a2", sensors);
  EXPECT_EQ(SeriesFor(m, "hetbench_power_sensor_up", "a1"), 2);
  EXPECT_EQ(SeriesFor(m, "hetbench_device_power_watts", "a1"), 1);
  m.ForgetAgent("a1");
  EXPECT_EQ(SeriesFor(m, "hetbench_power_sensor_up", "a1"), 0);
  EXPECT_EQ(SeriesFor(m, "hetbench_device_power_watts", "a1"), 0);
  // A forgotten agent's counters go too: series are bounded by the agents known now
  // (Prometheus's rate() treats a series that ends as ended, not as a reset).
  EXPECT_EQ(SeriesFor(m, "hetbench_device_energy_joules_total", "a1"), 0);
  EXPECT_EQ(SeriesFor(m, "hetbench_power_sensor_up", "a2"), 2);
}

}  // namespace
}  // namespace hetbench::server

namespace hetbench::server {
namespace {

// The batched step histogram counts exactly what per-sample Observe would.
TEST(MetricsTest, BatchedStepCountsMatchPerSampleObservation) {
  google::protobuf::RepeatedField<int64_t> durations;
  // Up, repeated, and back down: the bucket of the previous step is tried first.
  for (int64_t ns : {50'000LL, 100'000LL, 100'000LL, 100'001LL, 2'000'000LL, 2'000'000LL, 7'000'000'000LL,
                     20'000'000'000LL, 20'000'000'000LL, 100'000LL, 99'999LL, 1LL}) {
    durations.Add(ns);
  }
  Metrics m;
  m.ObserveSteps("mlp", v1::DEVICE_KIND_CPU, v1::PHASE_TRAIN, Metrics::CountSteps(durations));

  prometheus::Histogram reference(
      {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  for (int64_t ns : durations) reference.Observe(static_cast<double>(ns) * 1e-9);
  const auto want = reference.Collect().histogram;

  for (const auto& f : m.registry()->Collect()) {
    if (f.name != "hetbench_step_duration_seconds") continue;
    ASSERT_EQ(f.metric.size(), 1u);
    const auto& got = f.metric[0].histogram;
    EXPECT_EQ(got.sample_count, want.sample_count);
    EXPECT_DOUBLE_EQ(got.sample_sum, want.sample_sum);
    ASSERT_EQ(got.bucket.size(), want.bucket.size());
    for (size_t i = 0; i < got.bucket.size(); ++i) {
      EXPECT_EQ(got.bucket[i].cumulative_count, want.bucket[i].cumulative_count) << "bucket " << i;
    }
    return;
  }
  FAIL() << "hetbench_step_duration_seconds not exported";
}

}  // namespace
}  // namespace hetbench::server
