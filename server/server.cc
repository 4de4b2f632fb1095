#include "server/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace hetbench::server {

HetbenchServer::HetbenchServer(ServerConfig config) : config_(std::move(config)) {}

HetbenchServer::~HetbenchServer() { Shutdown(0.5); }

absl::Status HetbenchServer::Start() {
  auto store = SqliteJobStore::Open(config_.db_path);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  metrics_ = std::make_unique<Metrics>();
  coordinator_ = std::make_unique<Coordinator>(store_.get(), metrics_.get(), &clock_, config_.coordinator);
  if (auto s = coordinator_->Start(); !s.ok()) return s;

  coordinator_service_ = std::make_unique<CoordinatorService>(coordinator_.get(), metrics_.get());
  gateway_service_ = std::make_unique<AgentGatewayService>(coordinator_.get(), metrics_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen_address, grpc::InsecureServerCredentials(), &grpc_port_);
  builder.RegisterService(coordinator_service_.get());
  builder.RegisterService(gateway_service_.get());
  builder.SetMaxReceiveMessageSize(config_.max_message_bytes);
  builder.SetMaxSendMessageSize(config_.max_message_bytes);
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
  LogInfo("server", "serving gRPC on port ", grpc_port_, ", /metrics on port ", metrics_port_, ", store ",
          config_.db_path);
  return absl::OkStatus();
}

void HetbenchServer::Shutdown(double grace_seconds) {
  if (shut_down_ || coordinator_ == nullptr) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    coordinator_->CloseStreams();
    auto deadline =
        std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
    server_->Shutdown(deadline);
    server_->Wait();
  }
  coordinator_->Stop();
  exposer_.reset();
  LogInfo("server", "stopped");
}

}  // namespace hetbench::server
