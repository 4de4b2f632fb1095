#include "server/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "server/store/pg_job_store.h"
#include "server/store/sqlite_job_store.h"

namespace hetbench::server {

int64_t DefaultGrpcMemoryBytes(const std::string& cgroup_memory_max) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t memory = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{2} << 30;
  // In a container the machine's memory is not the process's: a cgroup v2
  // limit ("max" when there is none) bounds it.
  std::ifstream limit(cgroup_memory_max);
  int64_t cgroup_bytes = 0;
  if (limit >> cgroup_bytes && cgroup_bytes > 0) memory = std::min(memory, cgroup_bytes);
  return memory / 2;
}

HetbenchServer::HetbenchServer(ServerConfig config) : config_(std::move(config)) {}

HetbenchServer::~HetbenchServer() { Shutdown(0.5); }

absl::Status HetbenchServer::Start() {
  // Security first: a bad certificate or token file stops the start before anything is opened.
  auto credentials = MakeServerCredentials(config_.security);
  if (!credentials.ok()) return credentials.status();
  TokenTable tokens;
  if (!config_.security.token_file.empty()) {
    auto loaded = TokenTable::Load(config_.security.token_file);
    if (!loaded.ok()) return loaded.status();
    tokens = *std::move(loaded);
  }
  const size_t agent_tokens = tokens.count(Role::kAgent), client_tokens = tokens.count(Role::kClient);
  authorizer_ = std::make_unique<Authorizer>(std::move(tokens), config_.security.require_agent_cert);
  if (auto s = OpenStore(*credentials); !s.ok()) return s;
  metrics_ = std::make_unique<Metrics>();
  const Clock* clock = config_.clock != nullptr ? config_.clock : &clock_;
  coordinator_ = std::make_unique<Coordinator>(store_.get(), metrics_.get(), clock, config_.coordinator);
  if (auto s = coordinator_->Start(); !s.ok()) return s;

  coordinator_service_ = std::make_unique<CoordinatorService>(coordinator_.get(), metrics_.get(), authorizer_.get());
  gateway_service_ = std::make_unique<AgentGatewayService>(coordinator_.get(), metrics_.get(), authorizer_.get(),
                                                           config_.max_queued_samples);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen_address, *credentials, &grpc_port_);
  builder.RegisterService(coordinator_service_.get());
  builder.RegisterService(gateway_service_.get());
  builder.SetMaxReceiveMessageSize(config_.max_message_bytes);
  builder.SetMaxSendMessageSize(config_.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, config_.max_concurrent_streams);
  grpc::ResourceQuota quota("hetbench-server");
  if (config_.grpc_memory_bytes > 0) {
    quota.Resize(static_cast<size_t>(config_.grpc_memory_bytes));
    builder.SetResourceQuota(quota);
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || grpc_port_ == 0) {
    coordinator_->Stop();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.listen_address,
                                               ": address in use or invalid; choose another with --listen"));
  }
  if (!config_.metrics_address.empty()) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(config_.metrics_address);
      exposer_->RegisterCollectable(metrics_->registry());
      auto ports = exposer_->GetListeningPorts();
      metrics_port_ = ports.empty() ? 0 : ports.front();
    } catch (const std::exception& e) {
      Shutdown(0);
      return absl::UnavailableError(absl::StrCat("cannot serve /metrics on ", config_.metrics_address, ": ", e.what(),
                                                 "; choose another with --metrics-listen"));
    }
  }
  if (!config_.http_address.empty()) {
    WebUiOptions web{config_.http_address, config_.security.tls_cert, config_.security.tls_key,
                     config_.http_allowed_hosts, config_.http_threads, config_.http_plaintext_tokens};
    web_ = std::make_unique<WebUi>(coordinator_.get(), authorizer_.get(), std::move(web));
    if (absl::Status s = web_->Start(); !s.ok()) {
      web_.reset();
      Shutdown(0);
      return s;
    }
  }
  LogInfo("server", "serving gRPC on port ", grpc_port_, ", /metrics on port ", metrics_port_, ", store ",
          RedactDbUrl(config_.db_path), leader_ ? absl::StrCat(" (leader, epoch ", leader_->epoch(), ")") : "");
  // What protects the API, never the secrets themselves.
  LogInfo("server", config_.security.tls_cert.empty() ? "plaintext gRPC (no --tls-cert)" : "TLS",
          config_.security.tls_client_ca.empty() ? "" : ", client certificates verified",
          config_.security.require_agent_cert ? " and required of agents" : "",
          config_.security.token_file.empty()
              ? "; no bearer tokens (--token-file): any caller may use both APIs"
              : absl::StrCat("; bearer tokens: ", agent_tokens, " agent, ", client_tokens, " client"));
  if (config_.security.tls_cert.empty() && !config_.security.token_file.empty() &&
      !absl::StartsWith(config_.listen_address, "127.") && !absl::StartsWith(config_.listen_address, "localhost:") &&
      !absl::StartsWith(config_.listen_address, "[::1]")) {
    LogWarning("server", "bearer tokens over plaintext gRPC on ", config_.listen_address,
               ": anyone on the path can read them; add --tls-cert/--tls-key");
  }
  return absl::OkStatus();
}

namespace {

// "host:port" with another port (a standby's picked port kept by the leader).
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : absl::StrCat(address.substr(0, colon + 1), port);
}

// A deposed leader must not acknowledge anything more: it leaves at once,
// and its supervisor (systemd, Kubernetes) restarts it as a standby.
[[noreturn]] void StepDown(const absl::Status& why) {
  LogError("server", "deposed: ", why.ToString(),
           "; exiting so that the supervisor restarts this coordinator as a "
           "standby");
  std::_Exit(75);
}

}  // namespace

absl::Status HetbenchServer::OpenStore(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  if (!IsPostgresUrl(config_.db_path)) {
    auto store = SqliteJobStore::Open(config_.db_path);
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    return absl::OkStatus();
  }
  if (auto s = AwaitLeadership(credentials); !s.ok()) return s;
  PgStoreOptions options;
  options.url = config_.db_path;
  options.epoch = leader_->epoch();
  options.idle_transaction_seconds = config_.leader_lease_seconds;
  options.on_fenced = StepDown;
  auto store = PgJobStore::Open(options);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  leader_->KeepAlive(StepDown);
  return absl::OkStatus();
}

absl::Status HetbenchServer::AwaitLeadership(const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  PgLeaderOptions options;
  options.url = config_.db_path;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  options.lease_seconds = config_.leader_lease_seconds;
  // The standby answers health checks only (NOT_SERVING): load balancers
  // and readiness probes send nothing else its way.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config_.listen_address, credentials, &port);
  // gRPC starts a server only with a service of its own: the agent gateway's
  // base class, whose every method answers UNIMPLEMENTED.
  v1::AgentGateway::CallbackService unimplemented;
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> standby = builder.BuildAndStart();
  if (standby == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.listen_address,
                                               ": address in use or invalid; choose another with --listen"));
  }
  standby->GetHealthCheckService()->SetServingStatus(false);
  options.holder = absl::StrCat(host, " ", WithPort(config_.listen_address, port), " pid ", getpid());
  auto lock = PgLeaderLock::Connect(options);
  if (!lock.ok()) return lock.status();
  leader_ = std::move(*lock);
  LogInfo("server", "standing by on port ", port, " (health NOT_SERVING) for leadership of ",
          RedactDbUrl(config_.db_path));
  auto epoch = leader_->Acquire(&stop_standby_, [](const std::string& leader) {
    LogInfo("server", "standby of ", leader.empty() ? "nobody yet" : leader);
  });
  standby->Shutdown(std::chrono::system_clock::now());
  standby->Wait();
  if (!epoch.ok()) return epoch.status();
  LogInfo("server", "leader with epoch ", *epoch, " (", options.holder, ")");
  config_.listen_address = WithPort(config_.listen_address, port);
  return absl::OkStatus();
}

void HetbenchServer::Shutdown(double grace_seconds) {
  if (!stop_standby_.HasBeenNotified()) stop_standby_.Notify();
  if (shut_down_ || coordinator_ == nullptr) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    coordinator_->CloseStreams();
    auto deadline =
        std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
    server_->Shutdown(deadline);
    server_->Wait();
  }
  if (web_) web_->Stop();  // its pages wait on the coordinator: stopped first
  coordinator_->Stop();
  exposer_.reset();
  LogInfo("server", "stopped");
}

}  // namespace hetbench::server
