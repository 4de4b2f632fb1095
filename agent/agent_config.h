#pragma once
/// What an agent is told at start-up: where the coordinator is, who it is,
/// its batching and send intervals, TLS and token, rendezvous ports, and the
/// clock its own decisions run on.

#include <grpcpp/security/credentials.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"

namespace hetbench::agent {

struct AgentConfig {
  std::string server_address = "127.0.0.1:50051";
  std::string agent_id;  // default: hostname
  std::string hostname;
  std::map<std::string, std::string> labels;
  double initial_backoff_seconds = 0.25;
  double max_backoff_seconds = 15.0;
  double pump_interval_seconds = 0.05;        // how often the pump wakes (heartbeats, cancels, results)
  double sample_send_interval_seconds = 0.5;  // samples wait at most this long to fill a batch
  double progress_interval_seconds = 0.25;
  int max_samples_per_batch = 1000;
  /// Unacknowledged sample batches of one task at most; past it the agent
  /// stops draining until acks catch up (samples wait in the task's buffer).
  int max_unacked_sample_batches = 64;
  double power_send_interval_seconds = 1.0;
  /// Every power sensor tried at startup, available or not (sent in Hello).
  std::vector<v1::SensorInfo> sensors_tried;
  /// Device kinds looked for and not offered, with why (sent in Hello).
  std::vector<v1::AbsentDevice> absent;
  /// TLS (with this agent's client certificate for mutual TLS); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;  // bearer token of role agent; "" = none
  /// Where this agent hosts a gang's TCPStore when it runs rank 0: the
  /// address the other ranks' agents dial, and the first port (one per
  /// device, in device order). Multi-node gangs need a routable address.
  std::string rendezvous_host = "127.0.0.1";
  int rendezvous_port_base = 29500;
  /// The agent's time for its own decisions: leases (when the coordinator
  /// counts as silent, when a held attempt is abandoned), the heartbeat period
  /// and send intervals. Null: the real clock. Tests pass a SimulatedClock and move it.
  /// What is measured (sample timestamps, and the heartbeat's agent_ns that
  /// relates them to the coordinator's clock) always uses the steady clock.
  const Clock* clock = nullptr;
};

}  // namespace hetbench::agent
