#pragma once
/// The coordinator's read-only web UI (`--http-listen`, off by default): jobs
/// (filtered, paged), one job (the CLI's HTML report, reloading while it
/// runs), agents and their devices, a comparison of two jobs, one model's
/// history. Served by cpp-httplib on threads of its own; every page asks the
/// coordinator through the same calls the gRPC API makes (reads after commit,
/// raw samples from the StoreReader), so it never touches the loop's state.
/// With bearer tokens configured, every request needs a client token
/// (`Authorization: Bearer ...`); refused ones get 401 or 403.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/security.h"
#include "server/service/coordinator.h"

namespace httplib {
class Server;
}

namespace hetbench::server {

class WebUi {
 public:
  WebUi(Coordinator* coordinator, const Authorizer* auth);
  ~WebUi();
  /// Binds `address` ("127.0.0.1:8080"; port 0 = any) and serves.
  absl::Status Start(const std::string& address);
  int port() const { return port_; }
  /// Stops accepting and joins the server's thread. Idempotent.
  void Stop();

 private:
  void Routes();
  /// Every page of one task's samples or power readings, through the coordinator's reader.
  absl::StatusOr<v1::TaskData> AllPages(const v1::Task& t, v1::GetTaskDataRequest::Kind kind);

  Coordinator* const coordinator_;
  const Authorizer* const auth_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace hetbench::server
