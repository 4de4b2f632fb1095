// HetbenchServer's /metrics endpoint, scraped over a real socket.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "server/server.h"

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
  std::string tmpl = (std::filesystem::temp_directory_path() / "hetbench-metrics-XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  ServerConfig config;
  config.listen_address = "127.0.0.1:0";
  config.metrics_address = "127.0.0.1:0";
  config.db_path = dir + "/jobs.db";
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
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetbench::server
