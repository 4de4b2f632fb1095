#pragma once
/// hetbench-server assembled: job store, coordinator, gRPC services (plus
/// grpc.health.v1) and the Prometheus exposer. main() and the integration
/// tests both use it.

#include <grpcpp/resource_quota.h>
#include <grpcpp/server.h>
#include <prometheus/exposer.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "server/http/web_ui.h"
#include "server/metrics/metrics.h"
#include "server/service/coordinator.h"
#include "server/service/grpc_services.h"
#include "server/store/job_store.h"
#include "server/store/pg_leader.h"

namespace hetbench::server {

/// Half of the memory this process may use: the machine's physical memory,
/// or the cgroup v2 limit read from `cgroup_memory_max` when that is lower
/// (2 GiB assumed when neither can be read): hetbench-server's default for
/// ServerConfig::grpc_memory_bytes.
int64_t DefaultGrpcMemoryBytes(const std::string& cgroup_memory_max = "/sys/fs/cgroup/memory.max");

struct ServerConfig {
  /// gRPC address for both services. The embedded default is loopback only.
  std::string listen_address = "127.0.0.1:50051";
  /// Prometheus /metrics address; empty disables the exposer.
  std::string metrics_address = "127.0.0.1:9464";
  /// The read-only web UI (server/http); empty (the default) disables it.
  std::string http_address;
  /// The web UI's names besides loopback and its bound address (Host check).
  std::vector<std::string> http_allowed_hosts;
  /// Requests the web UI serves at once.
  int http_threads = 64;
  /// Serve the web UI as plain HTTP with tokens on a non-loopback address
  /// (refused otherwise: the token would cross the network in the clear).
  bool http_plaintext_tokens = false;
  /// The job store: a SQLite file path, or a postgresql:// URL (then this
  /// coordinator is leader or standby of the others pointed at it).
  std::string db_path = "hetbench.db";
  /// With PostgreSQL: a leader that stops answering loses leadership after
  /// this, and a standby takes over.
  double leader_lease_seconds = 10.0;
  CoordinatorOptions coordinator;
  int max_message_bytes = 16 << 20;
  /// gRPC: concurrent streams per connection, and the memory gRPC may use
  /// for its buffers (grpc::ResourceQuota) before it pushes back; 0 = no
  /// limit. gRPC shrinks every connection's flow-control window once its
  /// buffers pass a fifth of the quota, and announces each new window to
  /// the peer (a SETTINGS frame and its ack), so the quota is a bound for
  /// emergencies, not a working size: hetbench-server's default is half the
  /// memory the process may use (DefaultGrpcMemoryBytes).
  int max_concurrent_streams = 100;
  int64_t grpc_memory_bytes = 0;
  /// Samples all agent streams together may have waiting for the event loop.
  int64_t max_queued_samples = 131072;
  /// Time source of the coordinator (leases, heartbeats, timestamps); null =
  /// the real clock. Must outlive the server.
  const Clock* clock = nullptr;
  /// TLS (optionally mutual for agents) and bearer tokens; default plaintext, no tokens.
  ServerSecurity security;
};

class HetbenchServer {
 public:
  explicit HetbenchServer(ServerConfig config);
  ~HetbenchServer();

  /// Opens the store, binds both ports and starts serving. With PostgreSQL it
  /// first stands by (health NOT_SERVING, nothing else) until it is leader;
  /// CANCELLED when Shutdown comes first.
  absl::Status Start();
  /// Orderly stop: close streams with UNAVAILABLE, gRPC Shutdown with a grace
  /// period, Wait, then stop the coordinator. Idempotent.
  void Shutdown(double grace_seconds = 5.0);

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return web_ ? web_->port() : 0; }
  Coordinator& coordinator() { return *coordinator_; }
  JobStore& store() { return *store_; }
  /// With PostgreSQL, the leader epoch this coordinator writes with; else 0.
  int64_t epoch() const { return leader_ ? leader_->epoch() : 0; }
  Metrics& metrics() { return *metrics_; }

 private:
  ServerConfig config_;
  RealClock clock_;
  /// Opens the store: SQLite, or PostgreSQL after winning the election.
  absl::Status OpenStore(const std::shared_ptr<grpc::ServerCredentials>& credentials);
  /// Stands by on the listen address (health NOT_SERVING) until leader.
  absl::Status AwaitLeadership(const std::shared_ptr<grpc::ServerCredentials>& credentials);

  std::unique_ptr<PgLeaderLock> leader_;
  absl::Notification stop_standby_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorService> coordinator_service_;
  std::unique_ptr<AgentGatewayService> gateway_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<WebUi> web_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace hetbench::server
