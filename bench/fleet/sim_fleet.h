#pragma once
/// Simulated agents for bench_fleet: each speaks the real AgentGateway
/// protocol (Hello with simulated devices, heartbeats, samples, TaskDone,
/// resume after a cut stream) with step times and power from per-kind
/// device profiles. Everything they produce is marked simulated.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "hetbench/v1/agent.grpc.pb.h"

namespace hetbench::fleet {

struct Profile {
  std::string name;
  double samples_per_second = 1e4, watts_busy = 100, watts_idle = 30, jitter = 0.05;
  double batch_overhead_us = 100;  // serving: a batch's fixed cost beside size / samples_per_second
};
using Profiles = std::map<v1::DeviceKind, Profile>;

/// Reads bench/fleet/profiles.yaml; throws std::runtime_error naming the bad entry.
Profiles LoadProfiles(const std::string& path);

/// Steady seconds.
double Now();
/// Polls `pred` every 20 ms for up to `seconds`.
bool WaitFor(const std::function<bool()>& pred, double seconds);

struct FleetStats {
  std::atomic<int64_t> connected{0}, assigns{0}, tasks_done_acked{0}, samples_acked{0}, batches_acked{0};
  std::atomic<int64_t> rejected{0}, stream_errors{0}, resumed_tasks{0}, fenced{0};
  std::mutex mu;
  std::vector<double> assign_latency_ms;        // submit start -> Assign received
  std::map<std::string, double> submit_start;   // job id -> Now()
  std::map<std::string, int64_t> samples_sent;  // "task/attempt" -> samples
};

struct Options {
  std::string mode = "idle";
  int agents = 100, devices = 4;
  double seconds = 10, heartbeat_seconds = 1;
  /// idle: seconds after the last agent connected before the measured
  /// window. gRPC probes a young connection's bandwidth on every message
  /// (a PING each way), backing off over tens of seconds, and a real
  /// fleet's connections are old, so the window waits (the coordinator does
  /// not always settle to the bare gateway's cost: docs/benchmarks.md). The
  /// warm-up's own CPU is reported beside the window's.
  double warmup_seconds = 60;
  int clients = 8, tasks_per_job = 8;
  /// ingest: sample batches in flight per task, as hetbench-agent keeps them
  /// (AgentConfig::max_unacked_sample_batches, 64).
  int batch_samples = 1000, window = 64;
  /// serving: sample batches in flight per task, as hetbench-agent keeps
  /// them (64); 0 = every batch at once (a labelled shortcut).
  int serving_window = 64;
  double chaos_per_second = 1;
  int64_t history_jobs = 1'000'000;
  bool huge_specs = false;
  std::string profiles;
  std::string degrade;  // validate: faults injected into a share of the devices (bench/fleet/faults.h)
  std::string level = "quick";  // validate
  double serve_qps = 2000;      // serving: each task's rate
  uint64_t seed = 0;            // the simulated agents' noise (runs with another seed draw other noise)
  // As real agents: one connection each, each beating on its own phase. The
  // shortcuts (several agents per connection, all beats at once) are
  // options, labelled in the RESULT line.
  int agents_per_connection = 1;
  bool synchronized_heartbeats = false;
  /// Sample batches as arrays (an agent before the compact columns), not as
  /// the columns hetbench-agent sends a coordinator that takes them.
  bool sample_arrays = false;
  /// Every ack alone: agents do not declare Hello.ack_lists (an agent before
  /// them), so the coordinator sends one message per stored batch.
  bool single_acks = false;
  std::vector<std::string> server_args;  // passed on to the spawned hetbench-server
};

/// A dispatch task's messages not yet acknowledged, kept across a cut stream.
struct Outstanding {
  int attempt = 0;
  std::vector<v1::AgentMessage> unacked;  // the sample batches (seq 0..), then the TaskDone
};

class SimAgent final : public grpc::ClientBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  /// `resume`: what an earlier stream of this agent left unacknowledged; listed in
  /// the Hello and sent again once welcomed.
  SimAgent(std::string id, const Options& opt, const Profiles& profiles, FleetStats* stats, uint64_t seed,
           std::map<std::string, Outstanding> resume = {});

  void Start(v1::AgentGateway::Stub* stub);
  void Heartbeat();
  /// Acts as if the coordinator had sent `assign`.
  void Inject(const v1::Assign& assign) { OnAssign(assign); }
  /// Ends the stream from this side (chaos).
  void Cut() { ctx_.TryCancel(); }
  /// Once done: what is still unacknowledged, for the next stream.
  std::map<std::string, Outstanding> TakeOutstanding();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& s) override;
  void WaitDone();

 private:
  struct Streaming {
    v1::Assign assign;
    uint64_t next_seq = 0;
    int64_t sent = 0, t_ns = 0;
    int unacked = 0;
    double until = 0;
  };

  void Send(v1::AgentMessage m);
  /// The batch's columns packed as hetbench-agent sends them to a coordinator
  /// that said it takes them (Welcome.sample_columns), unless --sample-arrays.
  void Pack(v1::SampleBatch* b);
  void Handle(const v1::CoordinatorMessage& m);
  void OnAck(const v1::SampleAck& ack);
  void OnAssign(const v1::Assign& a);
  /// dispatch / chaos: the whole simulated task, answered at once.
  void RunAtOnce(const v1::Assign& a);
  /// A serving task: its scenario against the device's queueing model
  /// (sim_serving.h), every query's latency as SERVE samples, then TaskDone.
  void RunServing(const v1::Assign& a);
  /// validate: the suite's figures, as faults.h simulates them, answered at once.
  void RunValidation(const v1::Assign& a);
  /// ingest: keep `window` batches in flight until the time is up, then TaskDone.
  void Pump(Streaming& s);
  v1::DeviceKind KindOf(const std::string& device_id);

  const std::string id_;
  const Options& opt_;
  const Profiles& profiles_;
  FleetStats* stats_;
  std::mt19937_64 rng_;
  grpc::ClientContext ctx_;
  v1::CoordinatorMessage in_;
  std::atomic<bool> columns_{false};  // this stream's Welcome said sample_columns
  std::mutex mu_;
  std::deque<v1::AgentMessage> out_;
  std::mutex task_mu_;
  std::map<std::string, Streaming> streaming_;
  std::map<std::string, Outstanding> outstanding_;  // by task id
  /// serving: a task's messages not sent yet (its batches, then TaskDone)
  /// and its batches in flight; the next goes when one is acknowledged.
  struct ServingQueue {
    std::deque<v1::AgentMessage> pending;
    int in_flight = 0;
  };
  std::map<std::string, ServingQueue> serving_;
  /// Sends what `q`'s window allows; the TaskDone once every batch is acknowledged.
  void PumpServing(ServingQueue& q);
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

class Fleet {
 public:
  Fleet(std::string address, const Options& opt, const Profiles& profiles, FleetStats* stats)
      : address_(std::move(address)), opt_(opt), profiles_(profiles), stats_(stats) {}
  ~Fleet() { Stop(); }

  void Connect(int first, int count, const std::string& prefix);
  /// Chaos: agent i's process dies; a fresh one with the same id connects and
  /// holds nothing (the coordinator re-queues its tasks).
  void Kill(int i, const std::string& prefix);
  /// Chaos: agent i's stream breaks; it reconnects at once, lists what it holds
  /// (Hello.resume) and sends its unacknowledged messages again.
  void CutAndResume(int i, const std::string& prefix);
  /// Hands agent i the task "<job>-t<i>" (the bare sink assigns nothing).
  void AssignEach(const std::string& job);
  /// Heartbeats of the agents whose turn has come (each on its own phase of
  /// the period, or all at once with synchronized_heartbeats); call often.
  void HeartbeatDue(double now);
  void Stop();

 private:
  v1::AgentGateway::Stub* StubFor(int i);
  std::unique_ptr<SimAgent> Replace(int i);

  std::string address_;
  const Options& opt_;
  const Profiles& profiles_;
  FleetStats* stats_;
  std::mutex mu_;
  std::vector<std::unique_ptr<v1::AgentGateway::Stub>> stubs_;
  std::map<int, std::unique_ptr<SimAgent>> agents_;
  std::map<int, double> next_beat_;  // by agent index: when its next heartbeat is due
  std::vector<std::unique_ptr<SimAgent>> graveyard_;
};

}  // namespace hetbench::fleet
