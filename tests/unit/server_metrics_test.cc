// HetbenchServer's /metrics endpoint, scraped over a real socket.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

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
  EXPECT_EQ(SeriesFor(m, "hetbench_device_energy_joules_total", "a1"), 1);  // counters keep their history
  EXPECT_EQ(SeriesFor(m, "hetbench_power_sensor_up", "a2"), 2);
}

}  // namespace
}  // namespace hetbench::server
