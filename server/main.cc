// hetbench-server: parses flags, builds a ServerConfig, runs until SIGTERM/SIGINT.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/names.h"
#include "server/server.h"

namespace {

// --revalidate-every DURATION: "30m", "6h", "1h30m"; 0 = never.
void SetRevalidateEvery(const std::string& text, hetbench::server::ServerConfig* config) {
  absl::Duration every;
  if (!absl::ParseDuration(text, &every) || every < absl::ZeroDuration() || every > absl::Hours(24 * 90)) {
    throw CLI::ValidationError("--revalidate-every", "give a duration from 0 to 2160h, e.g. 30m, 6h or 1h30m (0 = never)");
  }
  config->coordinator.revalidate_every_seconds = absl::ToDoubleSeconds(every);
}

// The web UI's flags (server/http).
void AddWebUiFlags(CLI::App& app, hetbench::server::ServerConfig* config) {
  app.add_option("--http-listen", config->http_address,
                 "read-only web UI address, e.g. 127.0.0.1:8080 (port 0 = any); empty (default) disables it");
  app.add_option("--http-allowed-host", config->http_allowed_hosts,
                 "a name (NAME or NAME:PORT) the web UI answers to besides loopback and its address; others get 421 "
                 "(a guard against DNS rebinding). Repeatable");
  app.add_flag("--http-plaintext-tokens", config->http_plaintext_tokens,
               "serve the web UI as plain HTTP with bearer tokens on a non-loopback address (refused without it: "
               "the token would cross the network in the clear; give --tls-cert/--tls-key instead)");
  app.add_option("--http-threads", config->http_threads, "requests the web UI serves at once")
      ->capture_default_str()
      ->check(CLI::Range(2, 1024));
}

}  // namespace

int main(int argc, char** argv) {
  hetbench::server::ServerConfig config;
  std::string port_file;
  CLI::App app{"hetbench-server: the hetbench coordinator"};
  app.set_version_flag("--version", hetbench::HetbenchVersion());
  app.add_option("--listen", config.listen_address, "gRPC address (host:port; port 0 picks one)")
      ->capture_default_str();
  bool deadlock_detection = false;
  app.add_flag("--mutex-deadlock-detection", deadlock_detection,
               "Abseil's lock-order cycle detection on every mutex (a debugging aid; off: docs/benchmarks.md)");
  app.add_option("--metrics-listen", config.metrics_address, "Prometheus /metrics address; empty disables")
      ->capture_default_str();
  app.add_option("--db", config.db_path,
                 "job store: a SQLite file path, or postgresql://USER@HOST:PORT/DB (coordinators sharing one database "
                 "elect a leader; the others stand by)")
      ->capture_default_str();
  app.add_option("--leader-lease-seconds", config.leader_lease_seconds,
                 "with PostgreSQL: a leader that stops answering loses leadership after this")
      ->capture_default_str()
      ->check(CLI::Range(0.5, 3600.0));
  app.add_option("--heartbeat-seconds", config.coordinator.heartbeat_seconds, "heartbeat period to agents")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--lease-seconds", config.coordinator.lease_seconds, "an agent silent this long is lost")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--max-queued-requests", config.coordinator.max_queued_requests,
                 "client requests waiting for the event loop at most; more are refused with RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  app.add_option("--gang-hold-after-seconds", config.coordinator.gang_hold_after_seconds,
                 "a gang queued this long holds the free devices it could use, so later single tasks cannot starve "
                 "it; -1 = never")
      ->capture_default_str()
      ->check(CLI::Range(-1.0, 1e6));
  double retention_hours = 0;
  app.add_option_function<std::string>(
         "--revalidate-every", [&config](const std::string& text) { SetRevalidateEvery(text, &config); },
         "a quick validation of the idle devices this often, e.g. 30m, 6h (default never; docs/validation.md)")
      ->type_name("DURATION");
  app.add_option("--raw-retention-hours", retention_hours,
                 "delete the raw sample and power batches of jobs finished this long ago (results stay); 0 = keep")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--max-queued-samples", config.max_queued_samples,
                 "samples all agent streams together may have waiting for the event loop; past it agents are slowed "
                 "by flow control (bounds loop latency)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1000}, int64_t{1} << 40));
  app.add_option("--max-concurrent-streams", config.max_concurrent_streams, "gRPC streams per connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  int64_t grpc_memory_mib = hetbench::server::DefaultGrpcMemoryBytes() >> 20;
  app.add_option("--grpc-memory-mib", grpc_memory_mib,
                 "memory gRPC may use for its buffers, MiB (0 = no limit; default half the machine's or its "
                 "container's memory); past a fifth of it gRPC narrows every connection's flow-control window")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  bool debug = false;
  app.add_flag("--debug", debug, "log every task assignment");
  AddWebUiFlags(app, &config);
  app.add_option("--port-file", port_file,
                 "write 'grpc=<port> metrics=<port>' (and ' http=<port>' with --http-listen) here once listening");
  auto& sec = config.security;
  app.add_option("--tls-cert", sec.tls_cert, "TLS certificate chain (PEM) of the gRPC port (and of the web UI: HTTPS)")
      ->envname("HETBENCH_TLS_CERT");
  app.add_option("--tls-key", sec.tls_key, "its private key (PEM)")->envname("HETBENCH_TLS_KEY");
  app.add_option("--tls-client-ca", sec.tls_client_ca, "CA (PEM) that signs client certificates (mutual TLS)")
      ->envname("HETBENCH_TLS_CLIENT_CA");
  app.add_flag("--require-agent-cert", sec.require_agent_cert,
               "agents must present a certificate signed by --tls-client-ca");
  app.add_option("--token-file", sec.token_file,
                 "bearer tokens, one 'ROLE TOKEN' per line (roles: agent = may only Connect, client = the client "
                 "API); without it any caller may use both")
      ->envname("HETBENCH_TOKEN_FILE");
  CLI11_PARSE(app, argc, argv);
  // Debian's Abseil keeps its debug default, a lock-order graph updated on
  // every mutex acquisition (gRPC's included): 15% of the coordinator's CPU
  // with 5,000 idle agents. The test binaries keep it on.
  absl::SetMutexDeadlockDetectionMode(deadlock_detection ? absl::OnDeadlockCycle::kReport
                                                         : absl::OnDeadlockCycle::kIgnore);
  config.coordinator.raw_retention_seconds = retention_hours * 3600.0;
  config.grpc_memory_bytes = grpc_memory_mib << 20;
  if (debug) hetbench::SetMinLogLevel(hetbench::LogLevel::kDebug);

  // Signals are taken by a normal thread via sigwait, never in a handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  hetbench::server::HetbenchServer server(config);
  // A standby waits inside Start: a signal then ends the wait.
  absl::Notification signalled;
  int sig = 0;
  std::thread signal_thread([&] {
    sigwait(&signals, &sig);
    hetbench::LogInfo("server", "signal ", sig, ": shutting down");
    signalled.Notify();
    server.Shutdown(5.0);
  });
  if (auto s = server.Start(); !s.ok()) {
    if (signalled.HasBeenNotified()) {
      signal_thread.join();
      return 0;
    }
    std::cerr << "hetbench-server: " << s.message() << "\n";
    std::_Exit(1);  // the signal thread still waits
  }
  if (!port_file.empty()) {
    std::ofstream(port_file + ".tmp") << "grpc=" << server.grpc_port() << " metrics=" << server.metrics_port()
                                      << (server.http_port() > 0 ? absl::StrCat(" http=", server.http_port()) : "")
                                      << "\n";
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  signal_thread.join();
  return 0;
}
