#include "bench/fleet/sim_fleet.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <ctime>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/fleet/faults.h"
#include "bench/fleet/sim_serving.h"
#include "common/serving_spec.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/sample_codec.h"
#include "common/validate_spec.h"

namespace hetbench::fleet {

Profiles LoadProfiles(const std::string& path) {
  Profiles out;
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
    if (kv.second["batch_overhead_us"]) p.batch_overhead_us = kv.second["batch_overhead_us"].as<double>();
    out[*kind] = p;
  }
  return out;
}

double Now() { return static_cast<double>(SteadyNowNs()) * 1e-9; }

bool WaitFor(const std::function<bool()>& pred, double seconds) {
  const double end = Now() + seconds;
  while (Now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// ---------------------------------------------------------------- SimAgent

SimAgent::SimAgent(std::string id, const Options& opt, const Profiles& profiles, FleetStats* stats, uint64_t seed,
                   std::map<std::string, Outstanding> resume)
    : id_(std::move(id)), opt_(opt), profiles_(profiles), stats_(stats), rng_(seed), outstanding_(std::move(resume)) {}

void SimAgent::Start(v1::AgentGateway::Stub* stub) {
  stub->async()->Connect(&ctx_, this);
  v1::AgentMessage hello;
  v1::Hello* h = hello.mutable_hello();
  h->set_agent_id(id_);
  h->set_hostname("fleet-sim");
  h->set_version(HetbenchVersion());
  h->set_ack_lists(!opt_.single_acks);  // as hetbench-agent, unless the shortcut says otherwise
  const v1::DeviceKind kinds[] = {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU, v1::DEVICE_KIND_DPU,
                                  v1::DEVICE_KIND_QPU_SIM};
  for (int i = 0; i < opt_.devices; ++i) {
    v1::Device* d = h->add_devices();
    const v1::DeviceKind kind = kinds[i % 5];
    d->set_id(absl::StrCat(DeviceKindName(kind), i / 5));
    d->set_kind(kind);
    d->set_model(absl::StrCat("simulated ", profiles_.at(kind).name));
    d->set_simulated(true);
    d->set_cores(8);
    d->add_executors(kind == v1::DEVICE_KIND_QPU_SIM ? "statevector" : "torch");
  }
  (*h->mutable_labels())["fleet"] = "simulated";
  {
    std::lock_guard<std::mutex> l(task_mu_);
    for (const auto& [task_id, o] : outstanding_) {
      v1::ResumeTask* r = h->add_resume();
      r->set_task_id(task_id);
      r->set_attempt(o.attempt);
      r->set_finished(true);
    }
  }
  Send(std::move(hello));
  StartRead(&in_);
  StartCall();
}

void SimAgent::Heartbeat() {
  // As the real agent's (agent/agent.cc): its steady clock too, which the coordinator echoes for the clock offset.
  v1::AgentMessage hb;
  hb.mutable_heartbeat()->set_unix_seconds(static_cast<double>(std::time(nullptr)));
  hb.mutable_heartbeat()->set_agent_ns(SteadyNowNs());
  Send(std::move(hb));
}

std::map<std::string, Outstanding> SimAgent::TakeOutstanding() {
  std::lock_guard<std::mutex> l(task_mu_);
  return std::move(outstanding_);
}

void SimAgent::OnReadDone(bool ok) {
  if (!ok) return;
  Handle(in_);
  StartRead(&in_);
}

void SimAgent::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> l(mu_);
  out_.pop_front();
  if (!ok) {
    out_.clear();
    return;
  }
  if (!out_.empty()) StartWrite(&out_.front());
}

void SimAgent::OnDone(const grpc::Status& s) {
  if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) ++stats_->stream_errors;
  std::lock_guard<std::mutex> l(done_mu_);
  done_ = true;
  done_cv_.notify_all();
}

void SimAgent::WaitDone() {
  std::unique_lock<std::mutex> l(done_mu_);
  done_cv_.wait_for(l, std::chrono::seconds(10), [this] { return done_; });
}

void SimAgent::Send(v1::AgentMessage m) {
  std::lock_guard<std::mutex> l(mu_);
  out_.push_back(std::move(m));
  if (out_.size() == 1) StartWrite(&out_.front());
}

void SimAgent::Pack(v1::SampleBatch* b) {
  if (columns_.load()) PackSampleColumns(b);
}

void SimAgent::Handle(const v1::CoordinatorMessage& m) {
  switch (m.kind_case()) {
    case v1::CoordinatorMessage::kWelcome: {
      columns_ = m.welcome().sample_columns() && !opt_.sample_arrays;
      ++stats_->connected;
      // Resumed: what the earlier stream left unacknowledged goes again.
      std::vector<v1::AgentMessage> again;
      {
        std::lock_guard<std::mutex> l(task_mu_);
        for (const auto& [task_id, o] : outstanding_) {
          again.insert(again.end(), o.unacked.begin(), o.unacked.end());
        }
        stats_->resumed_tasks += static_cast<int64_t>(outstanding_.size());
      }
      for (auto& msg : again) Send(std::move(msg));
      break;
    }
    case v1::CoordinatorMessage::kAssign:
      OnAssign(m.assign());
      break;
    case v1::CoordinatorMessage::kAck:
      OnAck(m.ack());
      break;
    case v1::CoordinatorMessage::kAcks:
      for (const v1::SampleAck& ack : m.acks().acks()) OnAck(ack);
      break;
    case v1::CoordinatorMessage::kCancel:
      if (m.cancel().fenced()) {
        // Not ours any more: drop what was not delivered.
        ++stats_->fenced;
        std::lock_guard<std::mutex> l(task_mu_);
        auto it = outstanding_.find(m.cancel().task_id());
        if (it != outstanding_.end() && it->second.attempt == m.cancel().attempt()) outstanding_.erase(it);
      }
      break;
    case v1::CoordinatorMessage::kRejected:
      ++stats_->rejected;
      break;
    default:
      break;
  }
}

void SimAgent::OnAck(const v1::SampleAck& ack) {
  std::lock_guard<std::mutex> l(task_mu_);
  if (auto it = outstanding_.find(ack.task_id()); it != outstanding_.end() && it->second.attempt == ack.attempt()) {
    if (ack.done()) {
      outstanding_.erase(it);
    } else if (!ack.power()) {
      auto& unacked = it->second.unacked;
      for (auto m = unacked.begin(); m != unacked.end(); ++m) {
        if (m->has_samples() && m->samples().seq() == ack.seq()) {
          unacked.erase(m);
          break;
        }
      }
    }
  }
  if (ack.done()) {
    ++stats_->tasks_done_acked;
    return;
  }
  if (ack.power()) return;
  ++stats_->batches_acked;
  if (auto q = serving_.find(ack.task_id()); q != serving_.end()) {
    --q->second.in_flight;
    PumpServing(q->second);
    if (q->second.pending.empty()) serving_.erase(q);
    return;
  }
  auto it = streaming_.find(ack.task_id());
  if (it != streaming_.end()) {
    stats_->samples_acked += opt_.batch_samples;
    --it->second.unacked;
    Pump(it->second);
  }
}

void SimAgent::OnAssign(const v1::Assign& a) {
  ++stats_->assigns;
  const std::string job_id = a.task_id().substr(0, a.task_id().rfind("-t"));
  {
    std::lock_guard<std::mutex> l(stats_->mu);
    auto it = stats_->submit_start.find(job_id);
    if (it != stats_->submit_start.end()) stats_->assign_latency_ms.push_back((Now() - it->second) * 1e3);
  }
  if (IsValidate(a.spec())) {
    RunValidation(a);
    return;
  }
  if (opt_.mode == "ingest") {
    std::lock_guard<std::mutex> l(task_mu_);
    Streaming& s = streaming_[a.task_id()];
    s.assign = a;
    s.until = Now() + opt_.seconds;
    for (int i = 0; i < opt_.window; ++i) Pump(s);
    return;
  }
  RunAtOnce(a);
}

void SimAgent::RunValidation(const v1::Assign& a) {
  const v1::DeviceKind kind = KindOf(a.device_id());
  const Profile& p = profiles_.at(kind);
  static const Degrade degrade = [this] {
    auto d = ParseDegrade(opt_.degrade);
    return d.ok() ? *d : Degrade{};
  }();
  const std::string sku =
      absl::StrCat(DeviceKindName(kind), "|simulated ", p.name, "|-|8|all|", HetbenchVersion());
  v1::AgentMessage done;
  v1::TaskDone* d = done.mutable_done();
  d->set_task_id(a.task_id());
  d->set_attempt(a.attempt());
  d->set_state(v1::TASK_STATE_SUCCEEDED);
  const Fault fault = FaultOf(degrade, id_, a.device_id());
  if (a.gang().world_size() == 2) {  // a rank of an all-reduce pair: the partner's fault matters too
    const std::string peer = a.gang().peers_size() == 2 ? a.gang().peers(1 - a.gang().rank()) : "";
    const size_t slash = peer.rfind('/');
    const Fault peer_fault = slash == std::string::npos
                                 ? Fault::kNone
                                 : FaultOf(degrade, peer.substr(0, slash), peer.substr(slash + 1));
    *d->mutable_result()->mutable_validation() = SimulatedAllReduce(a, sku, fault, peer_fault, rng_());
  } else {
    *d->mutable_result()->mutable_validation() = SimulatedValidation(a, kind, p, id_, sku, fault, rng_());
  }
  v1::RunEnvironment* env = d->mutable_result()->mutable_environment();
  env->set_simulated(true);
  env->set_simulation_profile(absl::StrFormat("%s: %s (validation figures simulated)", DeviceKindName(kind), p.name));
  env->set_hostname("fleet-sim");
  {
    std::lock_guard<std::mutex> l(task_mu_);
    Outstanding& o = outstanding_[a.task_id()];
    o.attempt = a.attempt();
    o.unacked = {done};
  }
  Send(std::move(done));
}

void SimAgent::RunServing(const v1::Assign& a) {
  const v1::DeviceKind kind = KindOf(a.device_id());
  const Profile& p = profiles_.at(kind);
  SimulatedServing sim = SimulateServing(a, kind, p, rng_(), 1000);
  {
    std::lock_guard<std::mutex> l(stats_->mu);
    stats_->samples_sent[absl::StrCat(a.task_id(), "/", a.attempt())] = sim.queries;
  }
  v1::AgentMessage done;
  v1::TaskDone* d = done.mutable_done();
  d->set_task_id(a.task_id());
  d->set_attempt(a.attempt());
  d->set_state(v1::TASK_STATE_SUCCEEDED);
  d->set_batches_sent(sim.batches.size());
  d->set_samples_sent(sim.queries);
  v1::TaskResult* r = d->mutable_result();
  *r->mutable_serving() = sim.run;
  v1::RunEnvironment* env = r->mutable_environment();
  env->set_simulated(true);
  env->set_simulation_profile(absl::StrFormat("%s: %s, %.3g samples/s + %.0f us per batch, %.0f W busy",
                                              DeviceKindName(kind), p.name, p.samples_per_second, p.batch_overhead_us,
                                              p.watts_busy));
  env->set_device_model(absl::StrCat("simulated ", p.name));
  env->set_executor(a.executor());
  env->set_hostname("fleet-sim");
  v1::PhaseWindow* w = r->add_windows();
  w->set_phase(v1::PHASE_SERVE);
  w->set_end_ns(sim.end_ns);
  std::vector<v1::AgentMessage> messages;
  for (v1::SampleBatch& b : sim.batches) {
    v1::AgentMessage m;
    *m.mutable_samples() = std::move(b);
    Pack(m.mutable_samples());
    messages.push_back(std::move(m));
  }
  messages.push_back(done);
  std::lock_guard<std::mutex> l(task_mu_);
  outstanding_[a.task_id()] = Outstanding{a.attempt(), messages};
  if (opt_.serving_window <= 0) {  // the shortcut: everything at once
    for (v1::AgentMessage& m : messages) Send(std::move(m));
    return;
  }
  ServingQueue& q = serving_[a.task_id()];
  q = ServingQueue{std::deque<v1::AgentMessage>(std::make_move_iterator(messages.begin()),
                                                std::make_move_iterator(messages.end())),
                   0};
  PumpServing(q);
}

void SimAgent::PumpServing(ServingQueue& q) {
  while (!q.pending.empty()) {
    const bool done = q.pending.front().has_done();
    if (done ? q.in_flight > 0 : q.in_flight >= opt_.serving_window) return;
    if (!done) ++q.in_flight;
    Send(std::move(q.pending.front()));
    q.pending.pop_front();
  }
}

void SimAgent::RunAtOnce(const v1::Assign& a) {
  // The simulated task runs its measured steps at the profile's speed; the
  // answer is sent at once (the coordinator's cost is what is measured, not
  // the simulated seconds).
  if (IsServing(a.spec())) {
    RunServing(a);
    return;
  }
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
  Pack(b);
  {
    std::lock_guard<std::mutex> l(stats_->mu);
    stats_->samples_sent[absl::StrCat(a.task_id(), "/", a.attempt())] = steps;
  }
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
  d->mutable_result()->set_min_train_steps(steps);  // what the simulated executor aimed for
  d->mutable_result()->set_dataset_test_size(0);
  v1::PhaseWindow* w = d->mutable_result()->add_windows();
  w->set_phase(v1::PHASE_TRAIN);
  w->set_end_ns(t);
  {
    // Kept until acknowledged, so a cut stream can resume them.
    std::lock_guard<std::mutex> l(task_mu_);
    outstanding_[a.task_id()] = Outstanding{a.attempt(), {batch, done}};
  }
  Send(std::move(batch));
  Send(std::move(done));
}

void SimAgent::Pump(Streaming& s) {
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
    Pack(b);
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

v1::DeviceKind SimAgent::KindOf(const std::string& device_id) {
  for (v1::DeviceKind k :
       {v1::DEVICE_KIND_QPU_SIM, v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU, v1::DEVICE_KIND_DPU}) {
    if (device_id.rfind(DeviceKindName(k), 0) == 0) return k;
  }
  return v1::DEVICE_KIND_CPU;
}

// ---------------------------------------------------------------- Fleet

v1::AgentGateway::Stub* Fleet::StubFor(int i) {
  // Real agents each hold their own connection; --agents-per-connection N shares one among N (a shortcut).
  const auto channel = static_cast<size_t>(i / std::max(1, opt_.agents_per_connection));
  while (stubs_.size() <= channel) {
    grpc::ChannelArguments args;
    args.SetInt("hetbench.fleet.channel", static_cast<int>(stubs_.size()));
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs_.push_back(
        v1::AgentGateway::NewStub(grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args)));
  }
  return stubs_[channel].get();
}

void Fleet::Connect(int first, int count, const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu_);
  for (int i = first; i < first + count; ++i) {
    auto agent = std::make_unique<SimAgent>(absl::StrCat(prefix, i), opt_, profiles_, stats_, opt_.seed * 1000003 + 1234 + i);
    agent->Start(StubFor(i));
    agents_[i] = std::move(agent);
  }
}

std::unique_ptr<SimAgent> Fleet::Replace(int i) {
  auto it = agents_.find(i);
  if (it == agents_.end()) return nullptr;
  it->second->Cut();
  it->second->WaitDone();
  std::unique_ptr<SimAgent> old = std::move(it->second);
  agents_.erase(it);
  return old;
}

void Fleet::Kill(int i, const std::string& prefix) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto old = Replace(i);
    if (old == nullptr) return;
    graveyard_.push_back(std::move(old));
  }
  Connect(i, 1, prefix);
}

void Fleet::CutAndResume(int i, const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu_);
  auto old = Replace(i);
  if (old == nullptr) return;
  auto agent =
      std::make_unique<SimAgent>(absl::StrCat(prefix, i), opt_, profiles_, stats_, 4321 + i, old->TakeOutstanding());
  graveyard_.push_back(std::move(old));
  agent->Start(StubFor(i));
  agents_[i] = std::move(agent);
}

void Fleet::AssignEach(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [i, a] : agents_) {
    v1::Assign assign;
    assign.set_task_id(absl::StrCat(job, "-t", i));
    assign.set_attempt(1);
    assign.set_device_id("cpu0");
    assign.set_batch_size(i + 1);
    a->Inject(assign);
  }
}

void Fleet::HeartbeatDue(double now) {
  std::lock_guard<std::mutex> l(mu_);
  const double period = opt_.heartbeat_seconds;
  for (auto& [i, a] : agents_) {
    auto it = next_beat_.find(i);
    if (it == next_beat_.end()) {
      // Its own phase, fixed by its index (independent agents started at independent times).
      const double phase = opt_.synchronized_heartbeats
                               ? 0
                               : period * static_cast<double>(std::hash<int>{}(i * 2654435761u % 1000003) % 1000) / 1000;
      it = next_beat_.emplace(i, now + phase).first;
    }
    if (now < it->second) continue;
    a->Heartbeat();
    it->second += period;
    if (it->second < now) it->second = now + period;  // fell behind: no burst to catch up
  }
}

void Fleet::Stop() {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [i, a] : agents_) a->Cut();
  for (auto& [i, a] : agents_) a->WaitDone();
  agents_.clear();
  for (auto& a : graveyard_) a->WaitDone();
  graveyard_.clear();
}

}  // namespace hetbench::fleet
