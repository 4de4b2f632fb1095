#pragma once
/// The coordinator's read-only web UI (`--http-listen`, off by default): jobs
/// (filtered, paged), one job (the CLI's HTML report, reloading while it
/// runs), agents and their devices, a comparison of two jobs, one model's
/// history. Served by cpp-httplib on threads of its own; every page asks the
/// coordinator through the same calls the gRPC API makes (reads after commit,
/// raw samples from the StoreReader), so it never touches the loop's state.
/// Who may read it (web_access.h): a Host header not among its names gets
/// 421 (DNS rebinding); with bearer tokens configured every request needs a
/// client token, as `Authorization: Bearer ...` or the session cookie the
/// login form (/login) sets; refused ones get 401 or 403. With a TLS
/// certificate it serves HTTPS; without one and with tokens, it warns that
/// a token would cross the network in the clear. Its thread pool
/// (`threads`) bounds how many slow connections it takes to starve it.

#include <memory>
#include <string>
#include <thread>

#include <vector>

#include "absl/status/status.h"
#include "common/security.h"
#include "server/http/web_access.h"
#include "server/service/coordinator.h"

namespace httplib {
class Server;
}

namespace hetbench::server {

struct WebUiOptions {
  std::string address;                     // "127.0.0.1:8080"; port 0 = any
  std::string tls_cert, tls_key;           // PEM files: HTTPS (the gRPC port's, by default)
  std::vector<std::string> allowed_hosts;  // names besides loopback and the bound address
  int threads = 64;                        // requests served at once (slow clients included)
  bool plaintext_tokens = false;           // allow plain HTTP with tokens on a non-loopback address
};

class WebUi {
 public:
  WebUi(Coordinator* coordinator, const Authorizer* auth, WebUiOptions options);
  ~WebUi();
  /// Binds options.address and serves.
  absl::Status Start();
  bool tls() const { return !options_.tls_cert.empty(); }
  int port() const { return port_; }
  /// Stops accepting and joins the server's thread. Idempotent.
  void Stop();

 private:
  void Routes();
  /// GET and POST /login, POST /logout.
  void LoginRoutes();
  /// Every page of one task's samples or power readings, through the coordinator's reader.
  absl::StatusOr<v1::TaskData> AllPages(const v1::Task& t, v1::GetTaskDataRequest::Kind kind);
  /// The jobs `filter` lists, each whole (tasks with results; GetJob), appended to `out`; a job that
  /// cannot be read is skipped.
  absl::Status ListedJobs(const JobFilter& filter, std::vector<v1::Job>* out);
  /// The newest 100 succeeded jobs of each model `a` ran, when it has repeats: where a comparison by runs
  /// learns the machine's run-to-run spread (report/run_spread.h).
  absl::StatusOr<std::vector<v1::Job>> OtherJobs(const v1::Job& a);

  Coordinator* const coordinator_;
  const Authorizer* const auth_;
  const WebUiOptions options_;
  std::unique_ptr<WebAccess> access_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace hetbench::server
