#include "agent/agent.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/coordinator_target.h"
#include "common/log.h"
#include "common/names.h"
#include "common/security.h"

namespace hetbench::agent {

namespace {

constexpr char kLog[] = "agent";
const RealClock kRealClock{};

double UnixNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

Agent::Agent(AgentConfig config, std::vector<v1::Device> devices, std::unique_ptr<Executor> executor,
             PowerSampler* sampler)
    : config_(std::move(config)),
      devices_(std::move(devices)),
      executor_(std::move(executor)),
      sampler_(sampler),
      control_clock_(config_.clock != nullptr ? config_.clock : &kRealClock),
      rng_(std::random_device{}()) {}

Agent::~Agent() {
  Shutdown();
  JoinFinishedTasks(/*all=*/true);
}

void Agent::Shutdown() {
  absl::MutexLock l(&mu_);
  stop_ = true;
  for (auto& [id, task] : tasks_) task->control->cancel = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

void Agent::Run() {
  int failures = 0;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    const bool welcomed = RunConnection();
    failures = welcomed ? 0 : failures + 1;
    AbandonIfLeaseLapsed();
    JoinFinishedTasks(/*all=*/false);
    // Jittered exponential backoff: base * 2^failures, capped, times U(0.5, 1).
    double base =
        std::min(config_.max_backoff_seconds, config_.initial_backoff_seconds * std::pow(2.0, std::min(failures, 20)));
    // Tasks held for resuming: try often enough to be back within the lease.
    if (!HeldTasks().empty()) base = std::min(base, lease_seconds_.load() / 4);
    const double delay = base * std::uniform_real_distribution<double>(0.5, 1.0)(rng_);
    if (failures == 1 || (failures > 0 && failures % 20 == 0)) {
      LogWarning(kLog, "cannot reach the coordinator at ", config_.server_address, " (attempt ", failures,
                 "); retrying with backoff up to ", config_.max_backoff_seconds, " s");
    }
    absl::MutexLock l(&mu_);
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::Seconds(delay))) return;
  }
}

bool Agent::RunConnection() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  // Several addresses: the stream goes to the one whose health is SERVING (the leader).
  auto target = ResolveCoordinatorTarget(config_.server_address);
  if (!target.ok()) {
    LogWarning(kLog, target.status().message());
    return false;
  }
  AddCoordinatorTargetArguments(config_.server_address, *target, &args);
  auto channel = grpc::CreateCustomChannel(
      target->target, config_.credentials ? config_.credentials : grpc::InsecureChannelCredentials(), args);
  auto stub = v1::AgentGateway::NewStub(channel);
  grpc::ClientContext ctx;
  AddToken(&ctx, config_.token);
  {
    absl::MutexLock l(&mu_);
    if (stop_) return false;
    ctx_ = &ctx;
  }
  auto stream = stub->Connect(&ctx);
  {
    absl::MutexLock l(&write_mu_);
    stream_ = stream.get();
  }
  v1::AgentMessage hello_msg;
  v1::Hello* hello = hello_msg.mutable_hello();
  hello->set_agent_id(config_.agent_id);
  hello->set_hostname(config_.hostname);
  hello->set_version(HetbenchVersion());
  for (const v1::Device& d : devices_) *hello->add_devices() = d;
  for (const auto& [k, v] : config_.labels) (*hello->mutable_labels())[k] = v;
  for (const v1::SensorInfo& s : config_.sensors_tried) *hello->add_sensors() = s;
  for (const v1::AbsentDevice& a : config_.absent) *hello->add_absent() = a;
  hello->set_rendezvous_host(config_.rendezvous_host);
  hello->set_rendezvous_port_base(config_.rendezvous_port_base);
  hello->set_ack_lists(true);
  hello->set_gang_rounds(true);
  for (HeldTask* t : HeldTasks()) {
    if (t->abandoned.load()) continue;
    v1::ResumeTask* r = hello->add_resume();
    r->set_task_id(t->assign.task_id());
    r->set_attempt(t->assign.attempt());
    r->set_finished(t->finished.load());
  }
  const int resuming = hello->resume_size();

  bool welcomed = false;
  sample_columns_ = false;  // until this stream's Welcome says so
  connected_ = Write(hello_msg);
  last_heard_ns_ = control_clock_->MonotonicNowNs();
  std::thread pump;
  if (connected_) pump = std::thread([this, &ctx] { Pump(&ctx); });

  v1::CoordinatorMessage msg;
  while (connected_ && stream->Read(&msg)) {
    last_heard_ns_ = control_clock_->MonotonicNowNs();
    last_contact_ns_ = last_heard_ns_.load();
    switch (msg.kind_case()) {
      case v1::CoordinatorMessage::kWelcome:
        welcomed = true;
        heartbeat_now_ = true;
        ++counters_.connections;
        if (msg.welcome().heartbeat_seconds() > 0) heartbeat_seconds_ = msg.welcome().heartbeat_seconds();
        if (msg.welcome().lease_seconds() > 0) lease_seconds_ = msg.welcome().lease_seconds();
        sample_columns_ = msg.welcome().sample_columns();
        LogInfo(kLog, "connected to ", config_.server_address, " as ", config_.agent_id,
                resuming > 0 ? absl::StrCat("; resuming ", resuming, " task(s)") : "");
        break;
      case v1::CoordinatorMessage::kAssign:
        HandleAssign(msg.assign());
        break;
      case v1::CoordinatorMessage::kCancel:
        HandleCancel(msg.cancel());
        break;
      case v1::CoordinatorMessage::kAck:
        HandleAck(msg.ack());
        break;
      case v1::CoordinatorMessage::kAcks:  // the batches of one commit, in order
        for (const v1::SampleAck& ack : msg.acks().acks()) HandleAck(ack);
        break;
      case v1::CoordinatorMessage::kRejected:
        HandleRejected(msg.rejected());
        break;
      case v1::CoordinatorMessage::kHeartbeat:
        // An echo of ours carries the clocks; the periodic ones only prove the coordinator is alive.
        if (msg.heartbeat().agent_ns() != 0) clock_offset_.OnEcho(msg.heartbeat(), SteadyNowNs());
        break;
      default:
        break;
    }
  }
  connected_ = false;
  // The tasks go on: what they record waits for the next stream.
  if (pump.joinable()) pump.join();
  {
    absl::MutexLock l(&write_mu_);
    stream_ = nullptr;
  }
  grpc::Status status = stream->Finish();
  {
    absl::MutexLock l(&mu_);
    ctx_ = nullptr;
  }
  if (welcomed || status.error_code() != grpc::StatusCode::UNAVAILABLE) {
    LogInfo(kLog, "stream to ", config_.server_address,
            " ended: ", status.ok() ? std::string("OK") : status.error_message());
  }
  return welcomed;
}

bool Agent::Write(const v1::AgentMessage& msg) {
  absl::MutexLock l(&write_mu_);
  if (stream_ == nullptr) return false;
  return stream_->Write(msg);
}

void Agent::HandleAssign(const v1::Assign& assign) {
  const v1::Device* device = nullptr;
  for (const v1::Device& d : devices_) {
    if (d.id() == assign.device_id()) device = &d;
  }
  std::string refusal;
  {
    absl::MutexLock l(&mu_);
    auto slot = tasks_.find(assign.device_id());
    if (device == nullptr) {
      refusal = absl::StrCat("agent ", config_.agent_id, " has no device ", assign.device_id());
    } else if (slot != tasks_.end() && !slot->second->finished.load() && slot->second->abandoned.load()) {
      // The device is still stopping an attempt the coordinator took back
      // (fenced): the new task starts as soon as it has stopped.
      LogInfo(kLog, assign.task_id(), " waits for ", assign.device_id(), " to stop ", slot->second->assign.task_id());
      waiting_[assign.device_id()] = assign;
    } else if (slot != tasks_.end() && !slot->second->finished.load()) {
      refusal = absl::StrCat("device ", assign.device_id(), " is busy with ", slot->second->assign.task_id());
    } else {
      StartTask(assign, *device);
    }
  }
  if (!refusal.empty()) {
    v1::AgentMessage done;
    done.mutable_done()->set_task_id(assign.task_id());
    done.mutable_done()->set_attempt(assign.attempt());
    done.mutable_done()->set_state(v1::TASK_STATE_FAILED);
    done.mutable_done()->set_error(refusal);
    done.mutable_done()->set_retryable(true);  // another device, or this one a moment later
    Write(done);
  }
}

void Agent::StartTask(const v1::Assign& assign, const v1::Device& device) {
  // A finished task may still be on the device's slot for a moment: its
  // TaskDone went out (so the coordinator sent this assignment) but is not
  // acknowledged yet. The pump still owns it until then.
  if (auto it = tasks_.find(assign.device_id()); it != tasks_.end()) {
    retired_.push_back(std::move(it->second));
    tasks_.erase(it);
  }
  auto task = std::make_unique<HeldTask>();
  task->assign = assign;
  task->device = device;
  task->control = std::make_unique<TaskControl>(SampleCapacity(assign), SteadyNowNs());
  task->control->clock = [this] { return clock_offset_.Estimate(); };
  for (const std::string& id : assign.stage_device_ids()) {
    for (const v1::Device& d : devices_) {
      if (d.id() == id) task->control->stage_devices.push_back(d);
    }
  }
  if (sampler_ != nullptr) task->tap = sampler_->Subscribe();
  HeldTask* t = task.get();
  tasks_[assign.device_id()] = std::move(task);
  LogInfo(kLog, "running ", assign.task_id(), " attempt ", assign.attempt(), " (", assign.model(), ", batch ",
          assign.batch_size(), ") on ", assign.device_id());
  t->thread = std::thread([this, t] { RunTask(t); });
}

void Agent::StartWaitingTasks() {
  absl::MutexLock l(&mu_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto slot = tasks_.find(it->first);
    if (slot != tasks_.end() && !slot->second->finished.load()) {
      ++it;
      continue;
    }
    for (const v1::Device& d : devices_) {
      if (d.id() == it->first) StartTask(it->second, d);
    }
    it = waiting_.erase(it);
  }
}

void Agent::RunTask(HeldTask* t) {
  TaskControl& control = *t->control;
  v1::PhaseWindow idle;
  if (sampler_ != nullptr) sampler_->ReadNow();  // a counter reading at the very start
  const double baseline = t->assign.spec().power().idle_baseline_seconds();
  if (baseline > 0) {
    // Idle power of the device before the work, for net energy.
    control.phase = v1::PHASE_IDLE;
    idle.set_phase(v1::PHASE_IDLE);
    idle.set_start_ns(SteadyNowNs() - control.task_start_ns);
    const int64_t end = SteadyNowNs() + static_cast<int64_t>(baseline * 1e9);
    while (SteadyNowNs() < end && !control.cancel.load()) absl::SleepFor(absl::Milliseconds(20));
    if (sampler_ != nullptr) sampler_->ReadNow();
    idle.set_end_ns(SteadyNowNs() - control.task_start_ns);
  }
  t->result = executor_->Run(t->assign, t->device, &control);
  if (sampler_ != nullptr) sampler_->ReadNow();  // and at the very end
  if (t->result.ok() && baseline > 0) *t->result->add_windows() = idle;
  t->finished = true;
}

void Agent::ForEachHeld(const std::function<void(HeldTask&)>& fn) {
  absl::MutexLock l(&mu_);
  for (auto& [id, task] : tasks_) fn(*task);
  for (auto& task : retired_) fn(*task);
}

void Agent::HandleCancel(const v1::Cancel& cancel) {
  ForEachHeld([&](HeldTask& task) {
    if (task.assign.task_id() != cancel.task_id() || task.assign.attempt() != cancel.attempt()) return;
    if (cancel.fenced()) {
      if (!task.abandoned.load()) {
        LogWarning(kLog, "dropping ", cancel.task_id(), " attempt ", cancel.attempt(), ": ", cancel.reason());
      }
      task.abandoned = true;
    } else {
      LogInfo(kLog, "cancelling ", cancel.task_id(), ": ", cancel.reason());
    }
    task.control->cancel = true;
  });
}

void Agent::HandleRejected(const v1::Rejected& r) {
  // A bug of this agent's, not a transient fault: say it loudly. The attempt
  // has failed at the coordinator, which also fences it (Cancel follows).
  LogError(kLog, "the coordinator refused the ", r.what(), " message seq ", r.seq(), " of ", r.task_id(), " attempt ",
           r.attempt(), ": ", r.reason());
  ++counters_.messages_rejected;
  ForEachHeld([&](HeldTask& task) {
    if (task.assign.task_id() != r.task_id() || task.assign.attempt() != r.attempt()) return;
    task.Settle(r.what() == "done", r.what() == "power", r.seq());
  });
}

void Agent::HandleAck(const v1::SampleAck& ack) {
  ForEachHeld([&](HeldTask& task) {
    if (task.assign.task_id() != ack.task_id() || task.assign.attempt() != ack.attempt()) return;
    task.Settle(ack.done(), ack.power(), ack.seq());
  });
}

std::vector<HeldTask*> Agent::HeldTasks() {
  std::vector<HeldTask*> out;
  ForEachHeld([&](HeldTask& task) { out.push_back(&task); });
  return out;
}

void Agent::AbandonIfLeaseLapsed() {
  const double silent = (control_clock_->MonotonicNowNs() - last_contact_ns_.load()) * 1e-9;
  if (silent <= lease_seconds_.load()) return;
  ForEachHeld([&](HeldTask& task) {
    if (task.abandoned.load()) return;
    LogWarning(kLog, "no contact with the coordinator for ", static_cast<int>(silent), " s (lease ",
               lease_seconds_.load(), " s): it has re-queued ", task.assign.task_id(), " attempt ",
               task.assign.attempt(), "; stopping it");
    task.abandoned = true;
    task.control->cancel = true;
    ++counters_.attempts_abandoned;
  });
}

void Agent::JoinFinishedTasks(bool all) {
  std::vector<std::unique_ptr<HeldTask>> done;
  {
    absl::MutexLock l(&mu_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (all || it->second->Settled()) {
        done.push_back(std::move(it->second));
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (all || (*it)->Settled()) {
        done.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : done) {
    if (t->thread.joinable()) t->thread.join();
    if (sampler_ != nullptr) t->ReleaseTap(sampler_);
  }
}

Outlet Agent::MakeOutlet() {
  Outlet out;
  out.write = [this](const v1::AgentMessage& m) { return Write(m); };
  out.config = &config_;
  out.sampler = sampler_;
  out.observer = &observer_;
  out.counters = &counters_;
  out.clock = [this] { return clock_offset_.Estimate(); };
  out.sample_columns = &sample_columns_;
  return out;
}

void Agent::Pump(grpc::ClientContext* ctx) {
  const Outlet out = MakeOutlet();
  int64_t last_heartbeat_ns = control_clock_->MonotonicNowNs();
  const auto interval = absl::Seconds(config_.pump_interval_seconds);
  // First what an earlier stream left unacknowledged, in sequence order.
  bool ok = true;
  for (HeldTask* t : HeldTasks()) {
    if (ok && !t->abandoned.load()) ok = t->ResendOutstanding(out);
  }
  while (ok && connected_) {
    absl::SleepFor(interval);
    ++counters_.pump_passes;
    const int64_t now = control_clock_->MonotonicNowNs();
    // The first heartbeat goes right after the Welcome (its echo gives the
    // clock offset before the first task ends); then one per period.
    if (heartbeat_now_.exchange(false) ||
        now - last_heartbeat_ns >= static_cast<int64_t>(heartbeat_seconds_.load() * 1e9)) {
      v1::AgentMessage hb;
      hb.mutable_heartbeat()->set_unix_seconds(UnixNow());
      hb.mutable_heartbeat()->set_agent_ns(SteadyNowNs());
      ok = Write(hb);
      last_heartbeat_ns = now;
    }
    if (now - last_heard_ns_.load() > static_cast<int64_t>(lease_seconds_.load() * 1e9)) {
      LogWarning(kLog, "coordinator silent for ", lease_seconds_.load(), " s; reconnecting");
      ok = false;
    }
    for (HeldTask* t : HeldTasks()) {
      if (!ok) break;
      if (!t->abandoned.load()) ok = t->PumpPass(out, now);
    }
    if (ok) JoinFinishedTasks(/*all=*/false);
    StartWaitingTasks();
  }
  if (!ok) {  // a write failed or the coordinator went silent: end the stream
    connected_ = false;
    ctx->TryCancel();  // wakes the reader
  }
}

}  // namespace hetbench::agent
