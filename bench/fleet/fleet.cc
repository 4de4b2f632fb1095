// bench_fleet: N simulated agents over the real AgentGateway protocol against
// the real hetbench-server binary (spawned here on loopback, or --server).
//
// Modes (one RESULT line each):
//   idle     agents connect and heartbeat; the coordinator's CPU and RSS
//   dispatch clients submit 8-task jobs; agents finish each task at once;
//            tasks/s, Assign latency, the Job message size, RSS
//   ingest   one task per agent streams 1,000-sample batches for --seconds,
//            first into a bare callback sink (acks, stores nothing) run in
//            this process, then into the coordinator; the ratio, and
//            exactly-once (stored samples = sent samples per task)
//   chaos    dispatch while agents are cut off or killed at --chaos-per-second;
//            every acknowledged job must end and every succeeded task hold
//            exactly the samples its last attempt sent
//
// Simulated devices say so in their Hello (Device.simulated) and results
// (RunEnvironment.simulated); the coordinator keeps them out of the measured
// per-model gauges and every report marks them.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/names.h"
#include "hetbench/v1/agent.grpc.pb.h"
#include "hetbench/v1/coordinator.grpc.pb.h"

namespace {

using namespace hetbench;  // NOLINT: a bench's main file

struct Profile {
  std::string name;
  double samples_per_second = 1e4, watts_busy = 100, watts_idle = 30, jitter = 0.05;
};

std::map<v1::DeviceKind, Profile> LoadProfiles(const std::string& path) {
  std::map<v1::DeviceKind, Profile> out;
  YAML::Node root = YAML::LoadFile(path);
  for (const auto& kv : root) {
    auto kind = ParseDeviceKind(kv.first.as<std::string>());
    if (!kind) throw std::runtime_error("profiles: unknown kind " + kv.first.as<std::string>());
    Profile p;
    p.name = kv.second["name"].as<std::string>();
    p.samples_per_second = kv.second["samples_per_second"].as<double>();
    p.watts_busy = kv.second["watts_busy"].as<double>();
    p.watts_idle = kv.second["watts_idle"].as<double>();
    p.jitter = kv.second["jitter"].as<double>();
    out[*kind] = p;
  }
  return out;
}

double Now() { return static_cast<double>(SteadyNowNs()) * 1e-9; }

// ---------------------------------------------------------------- process stats

struct ProcStats {
  double cpu_seconds = 0;
  double rss_mb = 0;
};

ProcStats ReadProc(pid_t pid) {
  ProcStats s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) s.cpu_seconds += std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
      if (i == 15) s.cpu_seconds += std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mb = std::stod(line.substr(6)) / 1024.0;
  }
  return s;
}

// ---------------------------------------------------------------- a simulated agent

struct FleetStats {
  std::atomic<int64_t> connected{0}, assigns{0}, tasks_done_acked{0}, samples_acked{0}, batches_acked{0};
  std::atomic<int64_t> rejected{0}, stream_errors{0};
  std::mutex mu;
  std::vector<double> assign_latency_ms;          // submit start -> Assign received
  std::map<std::string, double> submit_start;     // job id -> Now()
  std::map<std::string, int64_t> samples_sent;    // "task/attempt" -> samples
};

struct Options {
  std::string mode = "idle";
  int agents = 100, devices = 4;
  double seconds = 10, heartbeat_seconds = 1;
  int clients = 8, tasks_per_job = 8;
  int batch_samples = 1000, window = 16;
  double chaos_per_second = 1;
  std::string profiles;
};

class SimAgent final : public grpc::ClientBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  SimAgent(std::string id, const Options& opt, const std::map<v1::DeviceKind, Profile>& profiles, FleetStats* stats,
           uint64_t seed)
      : id_(std::move(id)), opt_(opt), profiles_(profiles), stats_(stats), rng_(seed) {}

  void Start(v1::AgentGateway::Stub* stub) {
    stub->async()->Connect(&ctx_, this);
    v1::AgentMessage hello;
    v1::Hello* h = hello.mutable_hello();
    h->set_agent_id(id_);
    h->set_hostname("fleet-sim");
    h->set_version(HetbenchVersion());
    const v1::DeviceKind kinds[] = {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU,
                                    v1::DEVICE_KIND_DPU, v1::DEVICE_KIND_QPU_SIM};
    for (int i = 0; i < opt_.devices; ++i) {
      v1::Device* d = h->add_devices();
      const v1::DeviceKind kind = kinds[i % 5];
      d->set_id(absl::StrCat(DeviceKindName(kind), i / 5));
      d->set_kind(kind);
      d->set_model(absl::StrCat("simulated ", profiles_.at(kind).name));
      d->set_simulated(true);
      d->set_cores(8);
      d->add_executors(kind == v1::DEVICE_KIND_QPU_SIM ? "qsim" : "torch");
    }
    (*h->mutable_labels())["fleet"] = "simulated";
    Send(std::move(hello));
    StartRead(&in_);
    StartCall();
  }

  void Heartbeat() {
    v1::AgentMessage hb;
    hb.mutable_heartbeat()->set_unix_seconds(static_cast<double>(std::time(nullptr)));
    Send(std::move(hb));
  }

  /// Acts as if the coordinator had sent `assign`.
  void Inject(const v1::Assign& assign) { OnAssign(assign); }

  /// Ends the stream from this side (chaos).
  void Cut() { ctx_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    Handle(in_);
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    out_.pop_front();
    if (!ok) {
      out_.clear();
      return;
    }
    if (!out_.empty()) StartWrite(&out_.front());
  }
  void OnDone(const grpc::Status& s) override {
    if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) ++stats_->stream_errors;
    std::lock_guard<std::mutex> l(done_mu_);
    done_ = true;
    done_cv_.notify_all();
  }
  void WaitDone() {
    std::unique_lock<std::mutex> l(done_mu_);
    done_cv_.wait_for(l, std::chrono::seconds(10), [this] { return done_; });
  }
  bool done() {
    std::lock_guard<std::mutex> l(done_mu_);
    return done_;
  }

 private:
  void Send(v1::AgentMessage m) {
    std::lock_guard<std::mutex> l(mu_);
    out_.push_back(std::move(m));
    if (out_.size() == 1) StartWrite(&out_.front());
  }

  struct Streaming {
    v1::Assign assign;
    uint64_t next_seq = 0;
    int64_t sent = 0, t_ns = 0;
    int unacked = 0;
    double until = 0;
  };

  void Handle(const v1::CoordinatorMessage& m) {
    switch (m.kind_case()) {
      case v1::CoordinatorMessage::kWelcome:
        ++stats_->connected;
        break;
      case v1::CoordinatorMessage::kAssign:
        OnAssign(m.assign());
        break;
      case v1::CoordinatorMessage::kAck:
        if (m.ack().done()) {
          ++stats_->tasks_done_acked;
        } else if (!m.ack().power()) {
          ++stats_->batches_acked;
          std::lock_guard<std::mutex> l(task_mu_);
          auto it = streaming_.find(m.ack().task_id());
          if (it != streaming_.end()) {
            stats_->samples_acked += opt_.batch_samples;
            --it->second.unacked;
            Pump(it->second);
          }
        }
        break;
      case v1::CoordinatorMessage::kRejected:
        ++stats_->rejected;
        break;
      default:
        break;
    }
  }

  void OnAssign(const v1::Assign& a) {
    ++stats_->assigns;
    const std::string job_id = a.task_id().substr(0, a.task_id().rfind("-t"));
    {
      std::lock_guard<std::mutex> l(stats_->mu);
      auto it = stats_->submit_start.find(job_id);
      if (it != stats_->submit_start.end()) stats_->assign_latency_ms.push_back((Now() - it->second) * 1e3);
    }
    if (opt_.mode == "ingest") {
      std::lock_guard<std::mutex> l(task_mu_);
      Streaming& s = streaming_[a.task_id()];
      s.assign = a;
      s.until = Now() + opt_.seconds;
      for (int i = 0; i < opt_.window; ++i) Pump(s);
      return;
    }
    // dispatch / chaos: the simulated task runs its measured steps at the
    // profile's speed; the answer is sent at once (the coordinator's cost is
    // what is measured, not the simulated seconds).
    const v1::DeviceKind kind = KindOf(a.device_id());
    const Profile& p = profiles_.at(kind);
    const int64_t steps = std::max<int64_t>(1, a.spec().train().min_steps());
    std::normal_distribution<double> noise(1.0, p.jitter);
    v1::AgentMessage batch;
    v1::SampleBatch* b = batch.mutable_samples();
    b->set_task_id(a.task_id());
    b->set_attempt(a.attempt());
    b->set_seq(0);
    b->set_phase(v1::PHASE_TRAIN);
    int64_t t = 0;
    for (int64_t i = 0; i < steps; ++i) {
      const auto d = static_cast<int64_t>(1e9 * a.batch_size() / p.samples_per_second * std::max(0.5, noise(rng_)));
      b->add_start_ns(t);
      b->add_duration_ns(d);
      b->add_items(a.batch_size());
      t += d;
    }
    {
      std::lock_guard<std::mutex> l(stats_->mu);
      stats_->samples_sent[absl::StrCat(a.task_id(), "/", a.attempt())] = steps;
    }
    Send(std::move(batch));
    v1::AgentMessage done;
    v1::TaskDone* d = done.mutable_done();
    d->set_task_id(a.task_id());
    d->set_attempt(a.attempt());
    d->set_state(v1::TASK_STATE_SUCCEEDED);
    d->set_batches_sent(1);
    d->set_samples_sent(steps);
    v1::RunEnvironment* env = d->mutable_result()->mutable_environment();
    env->set_simulated(true);
    env->set_simulation_profile(absl::StrFormat("%s: %s, %.3g samples/s, %.0f W busy", DeviceKindName(kind), p.name,
                                                p.samples_per_second, p.watts_busy));
    env->set_device_model(absl::StrCat("simulated ", p.name));
    env->set_executor(a.executor());
    env->set_hostname("fleet-sim");
    d->mutable_result()->set_dataset_train_size(steps * a.batch_size());
    d->mutable_result()->set_dataset_test_size(0);
    v1::PhaseWindow* w = d->mutable_result()->add_windows();
    w->set_phase(v1::PHASE_TRAIN);
    w->set_end_ns(t);
    Send(std::move(done));
  }

  // ingest: keep `window` batches in flight until the time is up, then TaskDone.
  void Pump(Streaming& s) {
    if (s.until == 0) return;
    if (Now() < s.until) {
      if (s.unacked >= opt_.window) return;
      v1::AgentMessage m;
      v1::SampleBatch* b = m.mutable_samples();
      b->set_task_id(s.assign.task_id());
      b->set_attempt(s.assign.attempt());
      b->set_seq(s.next_seq++);
      b->set_phase(v1::PHASE_TRAIN);
      b->mutable_start_ns()->Reserve(opt_.batch_samples);
      b->mutable_duration_ns()->Reserve(opt_.batch_samples);
      b->mutable_items()->Reserve(opt_.batch_samples);
      for (int i = 0; i < opt_.batch_samples; ++i) {
        const int64_t d = 1'000'000 + (s.t_ns % 9973);
        b->add_start_ns(s.t_ns);
        b->add_duration_ns(d);
        b->add_items(s.assign.batch_size());
        s.t_ns += d;
      }
      s.sent += opt_.batch_samples;
      ++s.unacked;
      Send(std::move(m));
      return;
    }
    if (s.unacked > 0) return;  // the TaskDone goes after the last ack
    s.until = 0;
    {
      std::lock_guard<std::mutex> l(stats_->mu);
      stats_->samples_sent[absl::StrCat(s.assign.task_id(), "/", s.assign.attempt())] = s.sent;
    }
    v1::AgentMessage done;
    v1::TaskDone* d = done.mutable_done();
    d->set_task_id(s.assign.task_id());
    d->set_attempt(s.assign.attempt());
    d->set_state(v1::TASK_STATE_SUCCEEDED);
    d->set_batches_sent(s.next_seq);
    d->set_samples_sent(s.sent);
    d->mutable_result()->mutable_environment()->set_simulated(true);
    Send(std::move(done));
  }

  v1::DeviceKind KindOf(const std::string& device_id) {
    for (v1::DeviceKind k : {v1::DEVICE_KIND_QPU_SIM, v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU,
                             v1::DEVICE_KIND_DPU}) {
      if (device_id.rfind(DeviceKindName(k), 0) == 0) return k;
    }
    return v1::DEVICE_KIND_CPU;
  }

  const std::string id_;
  const Options& opt_;
  const std::map<v1::DeviceKind, Profile>& profiles_;
  FleetStats* stats_;
  std::mt19937_64 rng_;
  grpc::ClientContext ctx_;
  v1::CoordinatorMessage in_;
  std::mutex mu_;
  std::deque<v1::AgentMessage> out_;
  std::mutex task_mu_;
  std::map<std::string, Streaming> streaming_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

// ---------------------------------------------------------------- the fleet

class Fleet {
 public:
  Fleet(const std::string& address, const Options& opt, const std::map<v1::DeviceKind, Profile>& profiles,
        FleetStats* stats)
      : address_(address), opt_(opt), profiles_(profiles), stats_(stats) {}
  ~Fleet() { Stop(); }

  void Connect(int first, int count, const std::string& prefix) {
    for (int i = first; i < first + count; ++i) {
      // Real agents each hold their own connection; 50 simulated agents share one here.
      const size_t channel = static_cast<size_t>(i / 50);
      while (stubs_.size() <= channel) {
        grpc::ChannelArguments args;
        args.SetInt("hetbench.fleet.channel", static_cast<int>(stubs_.size()));
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        args.SetMaxReceiveMessageSize(64 << 20);
        stubs_.push_back(v1::AgentGateway::NewStub(
            grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args)));
      }
      auto agent = std::make_unique<SimAgent>(absl::StrCat(prefix, i), opt_, profiles_, stats_, 1234 + i);
      agent->Start(stubs_[channel].get());
      agents_[i] = std::move(agent);
    }
  }

  /// Chaos: cut agent i's stream and connect it again as a fresh process
  /// (its running tasks are lost to it; the coordinator re-queues them).
  void Kill(int i, const std::string& prefix) {
    auto it = agents_.find(i);
    if (it == agents_.end()) return;
    it->second->Cut();
    it->second->WaitDone();
    graveyard_.push_back(std::move(it->second));
    agents_.erase(it);
    Connect(i, 1, prefix);
  }

  /// Hands agent i the task "<job>-t<i>" (the bare sink assigns nothing).
  void AssignEach(const std::string& job) {
    for (auto& [i, a] : agents_) {
      v1::Assign assign;
      assign.set_task_id(absl::StrCat(job, "-t", i));
      assign.set_attempt(1);
      assign.set_device_id("cpu0");
      assign.set_batch_size(i + 1);
      a->Inject(assign);
    }
  }

  void HeartbeatAll() {
    for (auto& [i, a] : agents_) a->Heartbeat();
  }

  void Stop() {
    for (auto& [i, a] : agents_) a->Cut();
    for (auto& [i, a] : agents_) a->WaitDone();
    agents_.clear();
    for (auto& a : graveyard_) a->WaitDone();
    graveyard_.clear();
  }

 private:
  std::string address_;
  const Options& opt_;
  const std::map<v1::DeviceKind, Profile>& profiles_;
  FleetStats* stats_;
  std::vector<std::unique_ptr<v1::AgentGateway::Stub>> stubs_;
  std::map<int, std::unique_ptr<SimAgent>> agents_;
  std::vector<std::unique_ptr<SimAgent>> graveyard_;
};

bool WaitFor(const std::function<bool()>& pred, double seconds) {
  const double end = Now() + seconds;
  while (Now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// ---------------------------------------------------------------- the bare sink

/// What ingest costs with nothing behind it: a callback AgentGateway that
/// welcomes, acks every batch at once and stores nothing.
class BareSink final : public v1::AgentGateway::CallbackService {
  class Stream final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
   public:
    Stream() { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      v1::CoordinatorMessage out;
      if (in_.has_hello()) {
        out.mutable_welcome()->set_lease_seconds(60);
      } else if (in_.has_samples()) {
        out.mutable_ack()->set_task_id(in_.samples().task_id());
        out.mutable_ack()->set_attempt(in_.samples().attempt());
        out.mutable_ack()->set_seq(in_.samples().seq());
      } else if (in_.has_done()) {
        out.mutable_ack()->set_task_id(in_.done().task_id());
        out.mutable_ack()->set_done(true);
      } else {
        StartRead(&in_);
        return;
      }
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(std::move(out));
      if (queue_.size() == 1) StartWrite(&queue_.front());
      StartRead(&in_);
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::mutex> l(mu_);
      queue_.pop_front();
      if (ok && !queue_.empty()) StartWrite(&queue_.front());
    }
    void OnDone() override { delete this; }

   private:
    v1::AgentMessage in_;
    std::mutex mu_;
    std::deque<v1::CoordinatorMessage> queue_;
  };

 public:
  grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* Connect(grpc::CallbackServerContext*) override {
    return new Stream();
  }
};

// ---------------------------------------------------------------- the coordinator process

struct Server {
  pid_t pid = 0;
  std::string address;
  std::string dir;
  int metrics_port = 0;
};

Server Spawn(const std::string& binary, const Options& opt) {
  Server s;
  // The spawned coordinator's store, port file and log; kept for inspection after the run.
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/hetbench-fleet-XXXXXX");
  s.dir = mkdtemp(tmpl.data());
  const std::string port_file = s.dir + "/ports";
  s.pid = fork();
  if (s.pid == 0) {
    const std::string log = s.dir + "/server.log";
    freopen(log.c_str(), "w", stderr);
    const std::string hb = absl::StrCat(opt.heartbeat_seconds);
    execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--db",
          (s.dir + "/fleet.db").c_str(), "--port-file", port_file.c_str(), "--heartbeat-seconds", hb.c_str(),
          "--lease-seconds", "15", static_cast<char*>(nullptr));
    _exit(127);
  }
  WaitFor([&] { return access(port_file.c_str(), R_OK) == 0; }, 30);
  std::ifstream in(port_file);
  std::string grpc_part, metrics_part;
  in >> grpc_part >> metrics_part;
  s.address = "127.0.0.1:" + grpc_part.substr(5);
  s.metrics_port = std::atoi(metrics_part.substr(8).c_str());
  return s;
}

void StopServer(const Server& s) {
  if (s.pid <= 0) return;
  kill(s.pid, SIGTERM);
  int status = 0;
  waitpid(s.pid, &status, 0);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

std::unique_ptr<v1::Coordinator::Stub> ClientStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return v1::Coordinator::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

absl::StatusOr<v1::Job> GetJob(v1::Coordinator::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job job;
  grpc::Status s = stub.GetJob(&ctx, req, &job);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return job;
}

/// Checks every job ended and every succeeded task stored what its last attempt sent.
std::string CheckExactlyOnce(v1::Coordinator::Stub& stub, const std::vector<std::string>& jobs, FleetStats& stats,
                             int64_t* ended, int64_t* tasks_checked) {
  int64_t bad = 0, unended = 0;
  for (const std::string& id : jobs) {
    auto job = GetJob(stub, id);
    if (!job.ok() || !IsTerminal(job->state())) {
      ++unended;
      continue;
    }
    ++*ended;
    for (const v1::Task& t : job->tasks()) {
      if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
      ++*tasks_checked;
      std::lock_guard<std::mutex> l(stats.mu);
      auto it = stats.samples_sent.find(absl::StrCat(t.id(), "/", t.attempt()));
      if (it == stats.samples_sent.end() || it->second != t.result().samples_stored()) ++bad;
      if (!t.result().environment().simulated()) ++bad;
    }
  }
  return absl::StrCat("unended=", unended, " exactly_once_violations=", bad);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::string server_address, server_binary;
  CLI::App app{"bench_fleet: simulated agents against the real hetbench-server"};
  app.add_option("--mode", opt.mode, "idle, dispatch, ingest or chaos")->capture_default_str();
  app.add_option("--agents", opt.agents, "simulated agents")->capture_default_str();
  app.add_option("--devices", opt.devices, "devices per agent (kinds cycle cpu, gpu, tpu, dpu, qpu-sim)")
      ->capture_default_str();
  app.add_option("--seconds", opt.seconds, "length of the measured window")->capture_default_str();
  app.add_option("--heartbeat-seconds", opt.heartbeat_seconds, "agent and coordinator heartbeat")->capture_default_str();
  app.add_option("--clients", opt.clients, "submitting clients (dispatch, chaos)")->capture_default_str();
  app.add_option("--tasks-per-job", opt.tasks_per_job, "tasks per submitted job (dispatch, chaos)")
      ->capture_default_str();
  app.add_option("--batch-samples", opt.batch_samples, "samples per batch (ingest)")->capture_default_str();
  app.add_option("--window", opt.window, "batches in flight per task (ingest)")->capture_default_str();
  app.add_option("--chaos-per-second", opt.chaos_per_second, "agent kills or cuts per second (chaos)")
      ->capture_default_str();
  app.add_option("--profiles", opt.profiles, "device profiles YAML")->capture_default_str();
  app.add_option("--server", server_address, "a running coordinator (else one is spawned)");
  app.add_option("--server-binary", server_binary, "hetbench-server to spawn")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (opt.profiles.empty()) opt.profiles = HETBENCH_FLEET_PROFILES;
  if (server_binary.empty()) server_binary = HETBENCH_SERVER_BINARY;
  std::map<v1::DeviceKind, Profile> profiles;
  try {
    profiles = LoadProfiles(opt.profiles);
  } catch (const std::exception& e) {
    std::cerr << "bench_fleet: --profiles " << opt.profiles << ": " << e.what() << "\n";
    return 2;
  }
  if (opt.mode != "idle" && opt.mode != "dispatch" && opt.mode != "ingest" && opt.mode != "chaos") {
    std::cerr << "bench_fleet: --mode " << opt.mode << ": use idle, dispatch, ingest or chaos\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  // ingest: the bare sink first, in this process, with the same agents and batches.
  double bare_rate = 0;
  if (opt.mode == "ingest") {
    BareSink sink;
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&sink);
    b.SetMaxReceiveMessageSize(64 << 20);
    auto server = b.BuildAndStart();
    FleetStats st;
    {
      Fleet fleet(absl::StrCat("127.0.0.1:", port), opt, profiles, &st);
      fleet.Connect(0, opt.agents, "bare-");
      WaitFor([&] { return st.connected.load() >= opt.agents; }, 60);
      // No coordinator assigns here: each agent is handed the task it would get.
      const double start = Now();
      fleet.AssignEach("bare-job");
      WaitFor([&] { return st.tasks_done_acked.load() >= opt.agents; }, opt.seconds + 60);
      bare_rate = static_cast<double>(st.samples_acked.load()) / (Now() - start);
      fleet.Stop();
    }
    server->Shutdown();
    std::cerr << "bare sink: " << bare_rate << " samples/s\n";
  }

  Server server;
  if (server_address.empty()) {
    server = Spawn(server_binary, opt);
    server_address = server.address;
  }
  FleetStats stats;
  auto client = ClientStub(server_address);
  Fleet fleet(server_address, opt, profiles, &stats);
  const double t_connect = Now();
  fleet.Connect(0, opt.agents, "sim-");
  const bool all = WaitFor([&] { return stats.connected.load() >= opt.agents; }, 120);
  const double connect_seconds = Now() - t_connect;
  std::atomic<bool> stop{false};
  std::thread heart([&] {
    while (!stop.load()) {
      fleet.HeartbeatAll();
      const double until = Now() + opt.heartbeat_seconds;
      while (!stop.load() && Now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const ProcStats before = server.pid ? ReadProc(server.pid) : ProcStats{};
  const double t0 = Now();
  std::string result;

  if (opt.mode == "idle") {
    while (Now() - t0 < opt.seconds) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const ProcStats after = ReadProc(server.pid);
    result = absl::StrFormat(
        "RESULT mode=idle agents=%d devices=%d connected=%lld connect_seconds=%.2f heartbeat_seconds=%g "
        "server_cpu_fraction=%.3f server_rss_mb=%.0f simulated=true",
        opt.agents, opt.agents * opt.devices, static_cast<long long>(stats.connected.load()), connect_seconds,
        opt.heartbeat_seconds, (after.cpu_seconds - before.cpu_seconds) / (Now() - t0), after.rss_mb);
  } else if (opt.mode == "dispatch" || opt.mode == "chaos") {
    std::vector<std::string> jobs;
    std::mutex jobs_mu;
    std::atomic<int64_t> submitted_tasks{0}, refused{0};
    size_t max_job_bytes = 0;
    std::vector<std::thread> clients;
    for (int c = 0; c < opt.clients; ++c) {
      clients.emplace_back([&, c] {
        auto stub = ClientStub(server_address);
        int n = 0;
        while (Now() - t0 < opt.seconds) {
          // Keep the queue near the devices available: at most 2 jobs' worth per device in flight.
          if (submitted_tasks.load() - stats.tasks_done_acked.load() > 2LL * opt.agents * opt.devices) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
          }
          v1::SubmitJobRequest req;
          req.set_request_id(absl::StrCat("fleet-", c, "-", n++));
          v1::JobSpec* spec = req.mutable_spec();
          spec->set_name("fleet");
          spec->add_models("mlp");
          for (int t = 0; t < opt.tasks_per_job; ++t) spec->add_batch_sizes(32 * (t + 1));
          static const v1::DeviceKind kinds[] = {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU,
                                                 v1::DEVICE_KIND_DPU};
          spec->add_targets()->set_device_kind(opt.devices >= 4 ? kinds[n % 4] : v1::DEVICE_KIND_CPU);
          spec->mutable_train()->set_min_steps(10);
          spec->mutable_train()->set_min_duration_seconds(0);
          spec->mutable_train()->set_warmup_steps(0);
          const double start = Now();
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          v1::SubmitJobResponse resp;
          // The job id is known only from the answer; the Assign may come first.
          grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
          if (!s.ok()) {
            ++refused;
            continue;
          }
          submitted_tasks += opt.tasks_per_job;
          {
            std::lock_guard<std::mutex> l(stats.mu);
            stats.submit_start[resp.job_id()] = start;
          }
          std::lock_guard<std::mutex> l(jobs_mu);
          jobs.push_back(resp.job_id());
        }
      });
    }
    std::thread chaos;
    int64_t kills = 0;
    if (opt.mode == "chaos") {
      chaos = std::thread([&] {
        std::mt19937 rng(7);
        while (Now() - t0 < opt.seconds) {
          std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(1000 / opt.chaos_per_second)));
          fleet.Kill(static_cast<int>(rng() % static_cast<unsigned>(opt.agents)), "sim-");
          ++kills;
        }
      });
    }
    for (auto& t : clients) t.join();
    if (chaos.joinable()) chaos.join();
    const double elapsed = Now() - t0;
    const int64_t done_in_window = stats.tasks_done_acked.load();
    // Let what was accepted finish (chaos: lost tasks come back after the lease).
    if (opt.mode == "chaos") {
      // Lost tasks come back after the lease (15 s): wait for every job to end.
      WaitFor(
          [&] {
            for (const std::string& id : jobs) {
              auto job = GetJob(*client, id);
              if (!job.ok() || !IsTerminal(job->state())) return false;
            }
            return true;
          },
          90);
    } else {
      WaitFor([&] { return stats.tasks_done_acked.load() >= submitted_tasks.load(); }, 30);
    }
    const ProcStats after = ReadProc(server.pid);
    // The Job message of the largest live job, as GetJob returns it.
    for (size_t i = 0; i < std::min<size_t>(jobs.size(), 20); ++i) {
      auto job = GetJob(*client, jobs[i]);
      if (job.ok()) max_job_bytes = std::max(max_job_bytes, job->ByteSizeLong());
    }
    int64_t ended = 0, checked = 0;
    std::string exactly = CheckExactlyOnce(*client, jobs, stats, &ended, &checked);
    std::vector<double> lat;
    {
      std::lock_guard<std::mutex> l(stats.mu);
      lat = stats.assign_latency_ms;
    }
    result = absl::StrFormat(
        "RESULT mode=%s agents=%d devices=%d jobs=%zu tasks=%lld tasks_per_second=%.0f assign_p50_ms=%.1f "
        "assign_p99_ms=%.1f submit_refused=%lld job_message_bytes=%zu jobs_ended=%lld tasks_checked=%lld %s "
        "kills=%lld server_cpu_fraction=%.3f server_rss_mb=%.0f simulated=true",
        opt.mode, opt.agents, opt.agents * opt.devices, jobs.size(), static_cast<long long>(submitted_tasks.load()),
        static_cast<double>(done_in_window) / elapsed, Percentile(lat, 0.5), Percentile(lat, 0.99),
        static_cast<long long>(refused.load()), max_job_bytes, static_cast<long long>(ended),
        static_cast<long long>(checked), exactly, static_cast<long long>(kills),
        (after.cpu_seconds - before.cpu_seconds) / elapsed, after.rss_mb);
  } else {  // ingest
    // One job: a task per agent (cpu targets, distinct batch sizes), each streaming for --seconds.
    std::vector<std::string> jobs;
    for (int first = 0; first < opt.agents; first += 64) {
      v1::SubmitJobRequest req;
      v1::JobSpec* spec = req.mutable_spec();
      spec->add_models("mlp");
      for (int i = first; i < std::min(opt.agents, first + 64); ++i) spec->add_batch_sizes(i + 1);
      spec->add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
      spec->mutable_train()->set_min_steps(1);
      grpc::ClientContext ctx;
      v1::SubmitJobResponse resp;
      if (client->SubmitJob(&ctx, req, &resp).ok()) jobs.push_back(resp.job_id());
    }
    const double start = Now();
    WaitFor([&] { return stats.tasks_done_acked.load() >= opt.agents; }, opt.seconds + 120);
    const double elapsed = Now() - start;
    const ProcStats after = ReadProc(server.pid);
    int64_t ended = 0, checked = 0;
    std::string exactly = CheckExactlyOnce(*client, jobs, stats, &ended, &checked);
    const double rate = static_cast<double>(stats.samples_acked.load()) / elapsed;
    result = absl::StrFormat(
        "RESULT mode=ingest agents=%d batch_samples=%d window=%d samples_acked=%lld samples_per_second=%.0f "
        "bare_sink_samples_per_second=%.0f ratio_to_bare_sink=%.2f %s tasks_checked=%lld server_cpu_fraction=%.3f "
        "server_rss_mb=%.0f simulated=true",
        opt.agents, opt.batch_samples, opt.window, static_cast<long long>(stats.samples_acked.load()), rate,
        bare_rate, bare_rate > 0 ? rate / bare_rate : 0.0, exactly, static_cast<long long>(checked),
        (after.cpu_seconds - before.cpu_seconds) / elapsed, after.rss_mb);
  }
  stop = true;
  heart.join();
  fleet.Stop();
  StopServer(server);
  std::cout << result << std::endl;
  return 0;
}
