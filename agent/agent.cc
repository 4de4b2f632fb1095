#include "agent/agent.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "agent/power/sensors.h"
#include "common/coordinator_target.h"
#include "common/log.h"
#include "common/names.h"
#include "common/security.h"

namespace hetbench::agent {

bool IsRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

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
  for (RunningTask* t : HeldTasks()) {
    if (t->abandoned.load()) continue;
    v1::ResumeTask* r = hello->add_resume();
    r->set_task_id(t->assign.task_id());
    r->set_attempt(t->assign.attempt());
    r->set_finished(t->finished.load());
  }
  const int resuming = hello->resume_size();

  bool welcomed = false;
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
        ++connections_;
        if (msg.welcome().heartbeat_seconds() > 0) heartbeat_seconds_ = msg.welcome().heartbeat_seconds();
        if (msg.welcome().lease_seconds() > 0) lease_seconds_ = msg.welcome().lease_seconds();
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
      case v1::CoordinatorMessage::kRejected:
        HandleRejected(msg.rejected());
        break;
      case v1::CoordinatorMessage::kHeartbeat:
        // An echo of ours carries the clocks; the periodic ones only prove the coordinator is alive.
        if (msg.heartbeat().agent_ns() != 0) OnHeartbeatEcho(msg.heartbeat());
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

void Agent::OnHeartbeatEcho(const v1::Heartbeat& hb) {
  // NTP's estimate with one coordinator timestamp: the reply was stamped at
  // some moment of the round trip, so the offset is known within half of it.
  const int64_t received_ns = SteadyNowNs();
  const int64_t rtt_ns = received_ns - hb.agent_ns();
  if (rtt_ns < 0) return;
  const int64_t offset_ns = hb.coordinator_ns() - (hb.agent_ns() + rtt_ns / 2);
  absl::MutexLock l(&clock_mu_);
  const int trips = clock_.round_trips() + 1;
  if (clock_.round_trips() == 0 || rtt_ns / 2 <= clock_.bound_ns()) {
    clock_.set_offset_ns(offset_ns);
    clock_.set_bound_ns(rtt_ns / 2 + 1);
  }
  clock_.set_round_trips(trips);
}

v1::ClockSync Agent::ClockEstimate() const {
  absl::MutexLock l(&clock_mu_);
  return clock_;
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
  auto task = std::make_unique<RunningTask>();
  task->assign = assign;
  task->device = device;
  task->control = std::make_unique<TaskControl>(SampleCapacity(assign), SteadyNowNs());
  for (const std::string& id : assign.stage_device_ids()) {
    for (const v1::Device& d : devices_) {
      if (d.id() == id) task->control->stage_devices.push_back(d);
    }
  }
  if (sampler_ != nullptr) task->tap = sampler_->Subscribe();
  RunningTask* t = task.get();
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

void Agent::RunTask(RunningTask* t) {
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

bool Agent::DrainPower(RunningTask& task) {
  if (task.tap == nullptr) return true;
  bool write_ok = true;
  const auto& sensors = sampler_->sensors();
  for (size_t i = 0; i < sensors.size(); ++i) {
    int errors = 0;
    std::vector<TimedReading> readings = task.tap->Take(i, &errors);
    const v1::SensorInfo& info = sensors[i]->info();
    if (!SensorMeasures(info, task.device)) continue;
    if (readings.empty() && errors == 0) continue;
    size_t first = 0;
    do {  // at least one batch, so an errors-only interval is reported too
      v1::AgentMessage msg;
      v1::PowerBatch* b = msg.mutable_power();
      b->set_task_id(task.assign.task_id());
      b->set_attempt(task.assign.attempt());
      b->set_seq(task.next_power_seq);
      *b->mutable_sensor() = info;
      b->set_assumptions(sensors[i]->assumptions());
      b->set_read_errors(first == 0 ? errors : 0);
      const size_t last = std::min(readings.size(), first + static_cast<size_t>(config_.max_samples_per_batch));
      for (size_t k = first; k < last; ++k) {
        b->add_t_ns(readings[k].t_ns - task.control->task_start_ns);
        b->add_watts(readings[k].watts);
        b->add_joules(readings[k].joules);
      }
      ++task.next_power_seq;
      first = last;
      {
        absl::MutexLock o(&task.out_mu);
        task.unacked_power[b->seq()] = msg;
      }
      // Unsent batches are outstanding and go again on the next stream; the
      // readings still in `readings` are sent in later batches of this loop
      // once a stream is up, so none are dropped.
      if (!Write(msg)) write_ok = false;
    } while (first < readings.size());
  }
  return write_ok;
}

void Agent::ForEachHeld(const std::function<void(RunningTask&)>& fn) {
  absl::MutexLock l(&mu_);
  for (auto& [id, task] : tasks_) fn(*task);
  for (auto& task : retired_) fn(*task);
}

void Agent::HandleCancel(const v1::Cancel& cancel) {
  ForEachHeld([&](RunningTask& task) {
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
  ++messages_rejected_;
  ForEachHeld([&](RunningTask& task) {
    if (task.assign.task_id() != r.task_id() || task.assign.attempt() != r.attempt()) return;
    absl::MutexLock o(&task.out_mu);
    if (r.what() == "done") {
      task.done_acked = true;
    } else if (r.what() == "power") {
      task.unacked_power.erase(r.seq());
    } else {
      task.unacked_samples.erase(r.seq());
    }
  });
}

void Agent::HandleAck(const v1::SampleAck& ack) {
  ForEachHeld([&](RunningTask& task) {
    if (task.assign.task_id() != ack.task_id() || task.assign.attempt() != ack.attempt()) return;
    absl::MutexLock o(&task.out_mu);
    if (ack.done()) {
      task.done_acked = true;
    } else if (ack.power()) {
      task.unacked_power.erase(ack.seq());
    } else {
      task.unacked_samples.erase(ack.seq());
    }
  });
}

std::vector<Agent::RunningTask*> Agent::HeldTasks() {
  std::vector<RunningTask*> out;
  ForEachHeld([&](RunningTask& task) { out.push_back(&task); });
  return out;
}

void Agent::AbandonIfLeaseLapsed() {
  const double silent = (control_clock_->MonotonicNowNs() - last_contact_ns_.load()) * 1e-9;
  if (silent <= lease_seconds_.load()) return;
  ForEachHeld([&](RunningTask& task) {
    if (task.abandoned.load()) return;
    LogWarning(kLog, "no contact with the coordinator for ", static_cast<int>(silent), " s (lease ",
               lease_seconds_.load(), " s): it has re-queued ", task.assign.task_id(), " attempt ",
               task.assign.attempt(), "; stopping it");
    task.abandoned = true;
    task.control->cancel = true;
    ++attempts_abandoned_;
  });
}

void Agent::JoinFinishedTasks(bool all) {
  std::vector<std::unique_ptr<RunningTask>> done;
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
    ReleaseTap(*t);
  }
}

void Agent::ReleaseTap(RunningTask& task) {
  if (task.tap == nullptr) return;
  sampler_->Unsubscribe(task.tap);
  task.tap = nullptr;
}

bool Agent::DrainSamples(RunningTask& task) {
  const size_t published = task.control->samples.published();
  while (task.sent < published) {
    v1::AgentMessage msg;
    v1::SampleBatch* b = msg.mutable_samples();
    b->set_task_id(task.assign.task_id());
    b->set_attempt(task.assign.attempt());
    b->set_seq(task.next_seq);
    const int32_t phase = task.control->samples.at(task.sent).phase;
    b->set_phase(static_cast<v1::Phase>(phase));
    while (task.sent < published && b->duration_ns_size() < config_.max_samples_per_batch) {
      const SampleRecord& r = task.control->samples.at(task.sent);
      if (r.phase != phase) break;  // one phase per batch
      b->add_start_ns(r.start_ns);
      b->add_duration_ns(r.duration_ns);
      b->add_items(r.items);
      ++task.sent;
    }
    ++task.next_seq;
    task.samples_sent += b->duration_ns_size();
    samples_sent_ += b->duration_ns_size();
    if (observer_) observer_(*b);
    {
      absl::MutexLock o(&task.out_mu);
      task.unacked_samples[b->seq()] = msg;
    }
    if (!Write(msg)) return false;  // outstanding: sent again on the next stream
  }
  return true;
}

bool Agent::ResendOutstanding(RunningTask& task) {
  std::vector<v1::AgentMessage> out;
  {
    absl::MutexLock o(&task.out_mu);
    for (const auto& [seq, m] : task.unacked_samples) out.push_back(m);
    for (const auto& [seq, m] : task.unacked_power) out.push_back(m);
    // The TaskDone goes last: the coordinator checks it has every batch.
    if (task.done.has_value() && !task.done_acked) out.push_back(*task.done);
  }
  task.done_written = false;
  for (const v1::AgentMessage& m : out) {
    if (!Write(m)) return false;
    ++messages_resent_;
    if (m.has_done()) task.done_written = true;
  }
  return true;
}

void Agent::Pump(grpc::ClientContext* ctx) {
  int64_t last_heartbeat_ns = control_clock_->MonotonicNowNs();
  const auto interval = absl::Seconds(config_.pump_interval_seconds);
  // First what an earlier stream left unacknowledged, in sequence order.
  bool ok = true;
  for (RunningTask* t : HeldTasks()) {
    if (ok && !t->abandoned.load()) ok = ResendOutstanding(*t);
  }
  while (ok && connected_) {
    absl::SleepFor(interval);
    ++pump_passes_;
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
    for (RunningTask* t : HeldTasks()) {
      if (!ok) break;
      if (t->abandoned.load()) continue;
      const bool finished = t->finished.load();  // read before draining: all records are published by then
      // Samples go out in full batches, or when they have waited long enough, or at the end.
      const size_t pending = t->control->samples.published() - t->sent;
      // When acks lag, samples wait in the task's buffer and go out later in
      // fuller batches: the window slows instead of piling up unacked messages.
      size_t unacked = 0;
      {
        absl::MutexLock o(&t->out_mu);
        unacked = t->unacked_samples.size();
      }
      const bool acks_lag = !finished && unacked >= static_cast<size_t>(config_.max_unacked_sample_batches);
      if (acks_lag) ++ack_lag_waits_;
      if (!acks_lag &&
          (finished || pending >= static_cast<size_t>(config_.max_samples_per_batch) ||
           now - t->last_samples_send_ns >= static_cast<int64_t>(config_.sample_send_interval_seconds * 1e9))) {
        ok = DrainSamples(*t);
        t->last_samples_send_ns = now;
      }
      // After the TaskDone is built these drain nothing: no record is
      // published after the end, and the power tap is released then.
      if (ok && (finished ||
                 now - t->last_power_send_ns >= static_cast<int64_t>(config_.power_send_interval_seconds * 1e9))) {
        ok = DrainPower(*t);
        t->last_power_send_ns = now;
      }
      if (ok && !finished &&
          now - t->last_progress_ns >= static_cast<int64_t>(config_.progress_interval_seconds * 1e9)) {
        v1::AgentMessage p;
        p.mutable_progress()->set_task_id(t->assign.task_id());
        p.mutable_progress()->set_attempt(t->assign.attempt());
        p.mutable_progress()->set_phase(static_cast<v1::Phase>(t->control->phase.load()));
        p.mutable_progress()->set_step(t->control->step.load());
        p.mutable_progress()->set_total_steps(t->control->total_steps.load());
        ok = Write(p);
        t->last_progress_ns = now;
      }
      if (ok && finished && !t->done_written) {
        std::optional<v1::AgentMessage> msg;
        {
          absl::MutexLock o(&t->out_mu);
          if (!t->done.has_value()) {
            // Built once, after the last batch: its counts cover every batch made.
            v1::AgentMessage m;
            v1::TaskDone* d = m.mutable_done();
            d->set_task_id(t->assign.task_id());
            d->set_attempt(t->assign.attempt());
            d->set_batches_sent(t->next_seq);
            d->set_samples_sent(t->samples_sent);
            d->set_power_batches_sent(t->next_power_seq);
            if (!t->result.ok()) {
              d->set_state(v1::TASK_STATE_FAILED);
              d->set_error(std::string(t->result.status().message()));
              d->set_retryable(IsRetryable(t->result.status()));
            } else {
              d->set_state(t->control->cancel.load() ? v1::TASK_STATE_CANCELLED : v1::TASK_STATE_SUCCEEDED);
              *d->mutable_result() = *t->result;
              v1::ClockSync clock = ClockEstimate();
              if (clock.round_trips() > 0) {
                clock.set_task_start_coordinator_ns(t->control->task_start_ns + clock.offset_ns());
                *d->mutable_result()->mutable_clock() = clock;
              }
            }
            t->done = std::move(m);
            // Its counts are final: readings taken after the end (the sampler
            // goes on) must not become a batch the TaskDone does not count.
            ReleaseTap(*t);
            ++tasks_finished_;
            LogInfo(kLog, "finished ", t->assign.task_id(), ": ", TaskStateName(d->state()), " (", t->samples_sent,
                    " samples in ", t->next_seq, " batches)");
          }
          if (!t->done_acked) msg = t->done;
        }
        if (msg.has_value()) ok = Write(*msg);
        t->done_written = ok;
      }
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
