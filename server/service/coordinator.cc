#include "server/service/coordinator.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/job_spec.h"
#include "common/log.h"
#include "common/names.h"
#include "common/stats.h"
#include "server/ingest/energy_cost.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
constexpr size_t kMaxAgentIdLength = 256;
constexpr int kMaxDevicesPerAgent = 1024;
}  // namespace

Coordinator::Coordinator(JobStore* store, Metrics* metrics, const Clock* clock, CoordinatorOptions options)
    : store_(store), metrics_(metrics), clock_(clock), options_(options) {}

Coordinator::~Coordinator() { Stop(); }

absl::Status Coordinator::Start() {
  if (auto s = LoadFromStore(); !s.ok()) return s;
  {
    absl::MutexLock l(&mu_);
    started_ = true;
  }
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

absl::Status Coordinator::LoadFromStore() {
  auto jobs = store_->LoadJobs();
  if (!jobs.ok()) return jobs.status();
  jobs_.clear();
  job_order_.clear();
  task_index_.clear();
  if (auto s = store_->Begin(); !s.ok()) return s;
  int held = 0, ended = 0;
  const int64_t deadline = clock_->MonotonicNowNs() + static_cast<int64_t>(options_.lease_seconds * 1e9);
  for (v1::Job& job : *jobs) {
    // A task that was running when the previous coordinator stopped may still
    // be running on its agent: it stays leased to it for one lease, for the
    // agent to reconnect and resume it (ResumeTasks); else Tick re-queues it
    // as interrupted by the restart.
    bool changed = false;
    for (v1::Task& task : *job.mutable_tasks()) {
      if (task.state() != v1::TASK_STATE_RUNNING) continue;
      if (job.state() == v1::JOB_STATE_CANCELLED || task.agent_id().empty()) {
        changed = true;
        ++ended;
        task.set_state(job.state() == v1::JOB_STATE_CANCELLED ? v1::TASK_STATE_CANCELLED : v1::TASK_STATE_QUEUED);
        task.set_error(absl::StrCat("attempt ", task.attempt(), " interrupted by a coordinator restart"));
        task.clear_agent_id();
        task.clear_device_id();
        continue;
      }
      ++held;
      leases_.Acquire(task.agent_id(), task.device_id(), task.id());
      if (!agent_sessions_.count(task.agent_id())) {  // (a reload after a failed commit keeps its sessions)
        detached_[task.agent_id()] = Detached{deadline, "was cut off by a coordinator restart", /*restart=*/true};
      }
    }
    if (changed) {
      RecomputeJobState(job);
      if (auto s = store_->PutJob(job); !s.ok()) {
        (void)store_->Rollback();
        return s;
      }
    }
    int64_t number = 0;
    if (sscanf(job.id().c_str(), "job-%ld", &number) == 1) next_job_number_ = std::max(next_job_number_, number + 1);
    for (int i = 0; i < job.tasks_size(); ++i) task_index_[job.tasks(i).id()] = {job.id(), i};
    job_order_.push_back(job.id());
    jobs_[job.id()] = std::move(job);
  }
  if (auto s = store_->Commit(); !s.ok()) return s;
  LogInfo(kLog, "loaded ", jobs_.size(), " jobs from the store",
          held > 0 ? absl::StrCat("; ", held, " running task(s) wait ", options_.lease_seconds,
                                  " s for their agents to resume them")
                   : "",
          ended > 0 ? absl::StrCat("; ", ended, " task(s) ended by the restart") : "");
  gauges_dirty_ = true;
  return absl::OkStatus();
}

void Coordinator::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (!started_ || stop_) return;
    stop_ = true;
  }
  if (loop_.joinable()) loop_.join();
}

void Coordinator::CloseStreams() {
  RunSync([this] {
    closing_streams_ = true;
    for (auto& [id, session] : sessions_) {
      session.sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; reconnect"));
    }
    for (auto& [id, sink] : watchers_) {
      sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
    }
    watchers_.clear();
  });
}

void Coordinator::Post(std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  if (stop_) return;  // shutting down: the caller's stream is being closed anyway
  queue_.push_back(std::move(fn));
}

void Coordinator::RunSync(std::function<void()> fn) {
  // Notified after the commit of the batch that ran `fn` (and its Tick), so
  // the caller sees everything that batch did, sends included.
  auto done = std::make_shared<absl::Notification>();
  Post([this, fn = std::move(fn), done] {
    fn();
    Defer([done](const absl::Status&) { done->Notify(); });
  });
  done->WaitForNotificationWithTimeout(absl::Seconds(30));
}

void Coordinator::Loop() {
  for (;;) {
    std::vector<std::function<void()>> batch;
    bool stopping;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(250));
      batch.swap(queue_);
      stopping = stop_;
    }
    absl::Status txn = store_->Begin();
    for (auto& fn : batch) fn();
    Tick();
    for (const std::string& id : dirty_jobs_) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      if (auto s = store_->PutJob(it->second); !s.ok() && txn.ok()) txn = s;
    }
    dirty_jobs_.clear();
    if (txn.ok()) {
      txn = store_->Commit();
    }
    if (!txn.ok()) {
      LogError(kLog, "commit failed, reloading state from the store: ", txn.ToString());
      (void)store_->Rollback();
      if (auto s = LoadFromStore(); !s.ok()) LogError(kLog, "reload failed: ", s.ToString());
    }
    std::vector<Deferred> deferred;
    deferred.swap(deferred_);
    for (auto& d : deferred) d(txn);
    UpdateGauges();
    if (stopping) break;
  }
}

uint64_t Coordinator::NewSessionId() { return next_session_.fetch_add(1); }

// ---------------------------------------------------------------- client API

void Coordinator::SubmitJob(v1::JobSpec spec, JobCallback done) {
  Post([this, spec = std::move(spec), done = std::move(done)]() mutable {
    v1::JobSpec effective = WithDefaults(std::move(spec));
    if (absl::Status s = ValidateJobSpec(effective); !s.ok()) {
      done(s);
      return;
    }
    v1::Job job;
    job.set_id(absl::StrFormat("job-%06d", next_job_number_++));
    *job.mutable_spec() = effective;
    job.set_state(v1::JOB_STATE_QUEUED);
    job.set_created_unix_seconds(clock_->SystemNowSeconds());
    int index = 0;
    for (const std::string& model : effective.models()) {
      for (const v1::TargetSelector& target : effective.targets()) {
        for (int batch_size : effective.batch_sizes()) {
          v1::Task* task = job.add_tasks();
          task->set_id(absl::StrCat(job.id(), "-t", index));
          task->set_job_id(job.id());
          task->set_index(index);
          task->set_model(model);
          task->set_batch_size(batch_size);
          *task->mutable_target() = target;
          task->set_state(v1::TASK_STATE_QUEUED);
          task_index_[task->id()] = {job.id(), index};
          ++index;
        }
      }
    }
    const std::string id = job.id();
    job_order_.push_back(id);
    jobs_[id] = std::move(job);
    Persist(jobs_[id]);
    gauges_dirty_ = true;
    LogInfo(kLog, "accepted ", id, " (", absl::StrJoin(effective.models(), ", "), "; ", index, " tasks)");
    Schedule();
    Defer([this, id, done = std::move(done)](const absl::Status& commit) {
      if (!commit.ok()) {
        done(absl::UnavailableError(absl::StrCat("job not stored: ", commit.message(), "; submit again")));
        return;
      }
      v1::Job* job = FindJob(id);
      if (job == nullptr) {
        done(absl::InternalError("job vanished after commit"));
        return;
      }
      done(*job);
    });
  });
}

v1::Job* Coordinator::FindJob(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

namespace {
absl::Status JobNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job '", id, "' not found; list jobs with `hetbench get jobs`"));
}
}  // namespace

void Coordinator::GetJob(std::string job_id, JobCallback done) {
  // Reads answer after the commit of their batch, so they never show a state
  // that could still be rolled back.
  Post([this, job_id = std::move(job_id), done = std::move(done)] {
    Defer([this, job_id, done](const absl::Status&) {
      v1::Job* job = FindJob(job_id);
      if (job == nullptr) {
        done(JobNotFound(job_id));
      } else {
        done(*job);
      }
    });
  });
}

void Coordinator::CancelJob(std::string job_id, JobCallback done) {
  Post([this, job_id = std::move(job_id), done = std::move(done)] {
    v1::Job* job = FindJob(job_id);
    if (job == nullptr) {
      done(JobNotFound(job_id));
      return;
    }
    if (IsTerminal(job->state())) {
      done(absl::FailedPreconditionError(
          absl::StrCat("job '", job_id, "' already ended as ", JobStateName(job->state()), "; nothing to cancel")));
      return;
    }
    job->set_state(v1::JOB_STATE_CANCELLED);
    job->set_finished_unix_seconds(clock_->SystemNowSeconds());
    job->set_error("cancelled by user");
    for (v1::Task& task : *job->mutable_tasks()) {
      if (task.state() == v1::TASK_STATE_QUEUED) {
        task.set_state(v1::TASK_STATE_CANCELLED);
      } else if (task.state() == v1::TASK_STATE_RUNNING) {
        // The device stays leased until the agent confirms the work stopped.
        auto it = agent_sessions_.find(task.agent_id());
        if (it != agent_sessions_.end()) {
          v1::CoordinatorMessage msg;
          msg.mutable_cancel()->set_task_id(task.id());
          msg.mutable_cancel()->set_attempt(task.attempt());
          msg.mutable_cancel()->set_reason("job cancelled by user");
          auto sink = sessions_[it->second].sink;
          Defer([sink, msg](const absl::Status&) { sink->Send(msg); });
        }
      }
    }
    Persist(*job);
    gauges_dirty_ = true;
    Notify(*job, "job cancelled");
    Defer([this, job_id, done = std::move(done)](const absl::Status& commit) {
      if (!commit.ok()) {
        done(absl::UnavailableError(absl::StrCat("cancel not stored: ", commit.message(), "; try again")));
        return;
      }
      done(*FindJob(job_id));
    });
  });
}

void Coordinator::ListJobs(int limit, std::function<void(std::vector<v1::Job>)> done) {
  Post([this, limit, done = std::move(done)] {
    Defer([this, limit, done](const absl::Status&) {
      std::vector<v1::Job> out;
      const int n = static_cast<int>(job_order_.size());
      const int first = limit > 0 ? std::max(0, n - limit) : 0;
      for (int i = first; i < n; ++i) {
        v1::Job job = jobs_[job_order_[i]];
        // A listing carries states, not results.
        for (v1::Task& t : *job.mutable_tasks()) t.clear_result();
        out.push_back(std::move(job));
      }
      done(std::move(out));
    });
  });
}

v1::AgentInfo Coordinator::DescribeAgent(const std::string& agent_id, const v1::Hello& hello) {
  v1::AgentInfo info;
  info.set_agent_id(agent_id);
  info.set_hostname(hello.hostname());
  info.set_version(hello.version());
  *info.mutable_devices() = hello.devices();
  *info.mutable_labels() = hello.labels();
  *info.mutable_absent() = hello.absent();
  *info.mutable_sensors() = hello.sensors();
  for (const std::string& d : leases_.LeasedDevices(agent_id)) info.add_busy_device_ids(d);
  return info;
}

void Coordinator::ListAgents(std::function<void(std::vector<v1::AgentInfo>)> done) {
  Post([this, done = std::move(done)] {
    Defer([this, done](const absl::Status&) {
      std::vector<v1::AgentInfo> out;
      for (const auto& [agent_id, session_id] : agent_sessions_) {
        const Session& s = sessions_[session_id];
        v1::AgentInfo info = DescribeAgent(agent_id, s.hello);
        info.set_connected_unix_seconds(s.connected_unix);
        info.set_last_seen_unix_seconds(s.last_seen_unix);
        out.push_back(std::move(info));
      }
      // Disconnected agents whose tasks still wait for them to resume.
      const int64_t now_ns = clock_->MonotonicNowNs();
      const double now_unix = clock_->SystemNowSeconds();
      for (const auto& [agent_id, d] : detached_) {
        v1::AgentInfo info = DescribeAgent(agent_id, d.hello);
        info.set_resume_deadline_unix_seconds(now_unix + std::max<int64_t>(0, d.deadline_ns - now_ns) * 1e-9);
        info.set_disconnect_reason(d.reason);
        out.push_back(std::move(info));
      }
      done(std::move(out));
    });
  });
}

void Coordinator::WatchJob(std::string job_id, std::shared_ptr<WatchSink> sink) {
  Post([this, job_id = std::move(job_id), sink = std::move(sink)] {
    if (closing_streams_) {
      sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
      return;
    }
    v1::Job* job = FindJob(job_id);
    if (job == nullptr) {
      sink->Close(grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(JobNotFound(job_id).message())));
      return;
    }
    v1::JobEvent event;
    *event.mutable_job() = *job;
    event.set_message("snapshot");
    sink->Send(std::move(event));
    if (IsTerminal(job->state())) {
      sink->Close(grpc::Status::OK);
      return;
    }
    watchers_.emplace(job_id, sink);
  });
}

// ---------------------------------------------------------------- agents

void Coordinator::OnAgentMessage(uint64_t session_id, std::shared_ptr<AgentSink> sink, v1::AgentMessage msg) {
  auto shared = std::make_shared<v1::AgentMessage>(std::move(msg));
  Post([this, session_id, sink = std::move(sink), shared] {
    if (closing_streams_) {
      sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; reconnect"));
      return;
    }
    auto [it, inserted] = sessions_.try_emplace(session_id);
    Session& session = it->second;
    if (inserted) {
      session.sink = sink;
      session.connected_unix = clock_->SystemNowSeconds();
    }
    session.last_seen_ns = clock_->MonotonicNowNs();
    session.last_seen_unix = clock_->SystemNowSeconds();
    if (session.has_hello) metrics_->AgentSeen(session.hello.agent_id(), session.last_seen_unix);
    const v1::AgentMessage& m = *shared;
    if (m.kind_case() == v1::AgentMessage::kHello) {
      HandleHello(session_id, session, m.hello());
      return;
    }
    if (!session.has_hello) {
      metrics_->AddRejectedMessage("no_hello");
      sink->Close(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "send Hello first"));
      sessions_.erase(session_id);
      return;
    }
    switch (m.kind_case()) {
      case v1::AgentMessage::kHeartbeat:
        break;
      case v1::AgentMessage::kProgress:
        HandleProgress(session, m.progress());
        break;
      case v1::AgentMessage::kSamples:
        HandleSamples(session, m.samples());
        break;
      case v1::AgentMessage::kDone:
        HandleDone(session, m.done());
        break;
      case v1::AgentMessage::kPower:
        HandlePower(session, m.power());
        break;
      default:
        metrics_->AddRejectedMessage("unknown_kind");
        break;
    }
  });
}

void Coordinator::OnAgentGone(uint64_t session_id, std::string reason) {
  Post([this, session_id, reason = std::move(reason)] { DropSession(session_id, reason); });
}

void Coordinator::HandleHello(uint64_t session_id, Session& session, const v1::Hello& hello) {
  std::string problem;
  if (session.has_hello) problem = "Hello sent twice on one stream";
  if (hello.agent_id().empty() || hello.agent_id().size() > kMaxAgentIdLength) {
    problem = "hello.agent_id: must be 1 to 256 characters";
  }
  if (hello.devices_size() > kMaxDevicesPerAgent) problem = "hello.devices: more than 1024 devices";
  std::set<std::string> ids;
  for (const v1::Device& d : hello.devices()) {
    if (d.id().empty() || !ids.insert(d.id()).second)
      problem = "hello.devices: device ids must be unique and non-empty";
  }
  if (!problem.empty()) {
    metrics_->AddRejectedMessage("bad_hello");
    session.sink->Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, problem));
    DropSession(session_id, problem);
    return;
  }
  if (auto old = agent_sessions_.find(hello.agent_id()); old != agent_sessions_.end() && old->second != session_id) {
    const uint64_t old_session = old->second;
    sessions_[old_session].sink->Close(
        grpc::Status(grpc::StatusCode::ABORTED, "replaced by a newer connection of the same agent"));
    DropSession(old_session, "replaced by a newer connection");
  }
  session.has_hello = true;
  session.hello = hello;
  agent_sessions_[hello.agent_id()] = session_id;
  gauges_dirty_ = true;
  std::vector<std::pair<std::string, v1::SensorInfo>> sensors;
  for (const v1::SensorInfo& s : hello.sensors()) sensors.emplace_back(SensorDeviceKind(hello, s.device_id()), s);
  metrics_->SetSensorsUp(hello.agent_id(), sensors);
  metrics_->AgentSeen(hello.agent_id(), session.last_seen_unix);
  LogInfo(kLog, "agent ", hello.agent_id(), " connected from ", hello.hostname(), " with ", hello.devices_size(),
          " devices");
  v1::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_heartbeat_seconds(options_.heartbeat_seconds);
  welcome.mutable_welcome()->set_lease_seconds(options_.lease_seconds);
  session.sink->Send(welcome);
  ResumeTasks(session, hello);  // before scheduling: resumed tasks keep their devices
  Schedule();
}

v1::Task* Coordinator::OwnedTask(const std::string& agent_id, const std::string& task_id, int attempt, v1::Job** job) {
  auto it = task_index_.find(task_id);
  if (it == task_index_.end()) return nullptr;
  v1::Job* j = FindJob(it->second.first);
  if (j == nullptr || it->second.second >= j->tasks_size()) return nullptr;
  v1::Task* task = j->mutable_tasks(it->second.second);
  if (task->state() != v1::TASK_STATE_RUNNING || task->agent_id() != agent_id || task->attempt() != attempt) {
    return nullptr;
  }
  *job = j;
  return task;
}

v1::Task* Coordinator::SettledTask(const std::string& agent_id, const std::string& task_id, int attempt) {
  auto it = task_index_.find(task_id);
  if (it == task_index_.end()) return nullptr;
  v1::Job* j = FindJob(it->second.first);
  if (j == nullptr || it->second.second >= j->tasks_size()) return nullptr;
  v1::Task* task = j->mutable_tasks(it->second.second);
  if (!IsTerminal(task->state()) || task->agent_id() != agent_id || task->attempt() != attempt) return nullptr;
  return task;
}

void Coordinator::HandleProgress(Session& session, const v1::Progress& p) {
  v1::Job* job = nullptr;
  v1::Task* task = OwnedTask(session.hello.agent_id(), p.task_id(), p.attempt(), &job);
  if (task == nullptr) return;  // late progress of an ended attempt: harmless
  task->set_phase(p.phase());
  task->set_step(p.step());
  task->set_total_steps(p.total_steps());
  Notify(*job, "progress");
}

void Coordinator::HandleSamples(Session& session, const v1::SampleBatch& b) {
  if (AnswerSettled(session, b.task_id(), b.attempt(), Ack(b.task_id(), b.attempt(), b.seq(), /*power=*/false))) {
    return;
  }
  v1::Job* job = nullptr;
  v1::Task* task = FencedTask(session, b.task_id(), b.attempt(), &job);
  if (task == nullptr) return;
  const int n = b.duration_ns_size();
  if (b.start_ns_size() != n || b.items_size() != n || n > options_.max_samples_per_batch ||
      (b.phase() != v1::PHASE_TRAIN && b.phase() != v1::PHASE_INFER)) {
    metrics_->AddRejectedMessage("malformed_batch");
    LogWarning(kLog, "malformed sample batch from ", session.hello.agent_id(), " for ", b.task_id(), " seq ", b.seq());
    return;  // not acked; the task's final count check will fail it
  }
  auto stored = store_->PutSampleBatch(b);
  if (!stored.ok()) {
    LogError(kLog, "storing samples of ", b.task_id(), ": ", stored.status().ToString());
    return;  // not acked
  }
  const bool is_new = *stored;
  const v1::DeviceKind kind = task->device_kind();
  v1::CoordinatorMessage ack = Ack(b.task_id(), b.attempt(), b.seq(), /*power=*/false);
  auto sink = session.sink;
  const v1::Phase phase = b.phase();
  Metrics::StepCounts steps = Metrics::CountSteps(b.duration_ns());
  const std::string model = task->model();
  Defer([this, sink, ack, is_new, phase, kind, n, model, steps = std::move(steps)](const absl::Status& commit) {
    if (!commit.ok()) return;
    if (is_new) {
      metrics_->AddSamplesIngested(phase, kind, n);
      metrics_->ObserveSteps(model, kind, phase, steps);
    } else {
      metrics_->AddDuplicateBatch();
    }
    sink->Send(ack);
  });
}

v1::Task* Coordinator::FencedTask(Session& session, const std::string& task_id, int attempt, v1::Job** job) {
  v1::Task* task = OwnedTask(session.hello.agent_id(), task_id, attempt, job);
  if (task == nullptr) {
    // Fencing: an attempt that is no longer assigned to this agent is refused
    // and told to stop.
    metrics_->AddRejectedMessage("stale_attempt");
    v1::CoordinatorMessage cancel;
    cancel.mutable_cancel()->set_task_id(task_id);
    cancel.mutable_cancel()->set_attempt(attempt);
    cancel.mutable_cancel()->set_reason("this attempt is not assigned to you");
    cancel.mutable_cancel()->set_fenced(true);
    session.sink->Send(cancel);
  }
  return task;
}

bool Coordinator::AnswerSettled(Session& session, const std::string& task_id, int attempt,
                                v1::CoordinatorMessage ack) {
  if (SettledTask(session.hello.agent_id(), task_id, attempt) == nullptr) return false;
  // Sent again after a broken stream, for an attempt that has ended since:
  // its result is final, so nothing is stored; the ack lets the agent let go.
  if (!ack.ack().done()) metrics_->AddDuplicateBatch();
  auto sink = session.sink;
  Defer([sink, ack = std::move(ack)](const absl::Status&) { sink->Send(ack); });
  return true;
}

v1::CoordinatorMessage Coordinator::Ack(const std::string& task_id, int attempt, uint64_t seq, bool power) {
  v1::CoordinatorMessage ack;
  ack.mutable_ack()->set_task_id(task_id);
  ack.mutable_ack()->set_attempt(attempt);
  ack.mutable_ack()->set_seq(seq);
  ack.mutable_ack()->set_power(power);
  return ack;
}

std::string Coordinator::SensorDeviceKind(const v1::Hello& hello, const std::string& device_id) {
  if (device_id.empty()) return "node";
  for (const v1::Device& d : hello.devices()) {
    if (d.id() == device_id) return DeviceKindName(d.kind());
  }
  return "node";
}

void Coordinator::HandlePower(Session& session, const v1::PowerBatch& b) {
  if (AnswerSettled(session, b.task_id(), b.attempt(), Ack(b.task_id(), b.attempt(), b.seq(), /*power=*/true))) {
    return;
  }
  v1::Job* job = nullptr;
  if (FencedTask(session, b.task_id(), b.attempt(), &job) == nullptr) return;
  const int n = b.t_ns_size();
  if (b.watts_size() != n || b.joules_size() != n || n > options_.max_samples_per_batch || b.sensor().name().empty() ||
      b.sensor().name().size() > 256) {
    metrics_->AddRejectedMessage("malformed_power_batch");
    LogWarning(kLog, "malformed power batch from ", session.hello.agent_id(), " for ", b.task_id(), " seq ", b.seq());
    return;  // not acked; the task's final count check will fail it
  }
  auto stored = store_->PutPowerBatch(b);
  if (!stored.ok()) {
    LogError(kLog, "storing power readings of ", b.task_id(), ": ", stored.status().ToString());
    return;
  }
  v1::CoordinatorMessage ack = Ack(b.task_id(), b.attempt(), b.seq(), /*power=*/true);
  // Metrics: the latest power and the energy between consecutive readings.
  double joules = 0, watts = NAN;
  if (*stored && n > 0) {
    AttemptReadings& readings = last_power_[b.task_id()];
    if (readings.attempt != b.attempt()) readings = AttemptReadings{b.attempt(), {}};
    LastReading& last = readings.by_sensor[b.sensor().name()];
    for (int i = 0; i < n; ++i) {
      const double dt = static_cast<double>(b.t_ns(i) - last.t_ns) * 1e-9;
      const bool have_prev = last.t_ns != 0 && dt > 0;
      if (b.sensor().has_energy_counter()) {
        if (have_prev) {
          joules += std::max(0.0, b.joules(i) - last.joules);
          watts = (b.joules(i) - last.joules) / dt;
        }
        last.joules = b.joules(i);
      } else if (!std::isnan(b.watts(i))) {
        if (have_prev) joules += 0.5 * (b.watts(i) + last.watts) * dt;
        watts = b.watts(i);
        last.watts = b.watts(i);
      }
      last.t_ns = b.t_ns(i);
    }
  }
  auto sink = session.sink;
  const std::string agent = session.hello.agent_id();
  const std::string kind = SensorDeviceKind(session.hello, b.sensor().device_id());
  const v1::PowerSource source = b.sensor().source();
  const int errors = b.read_errors();
  const bool is_new = *stored;
  Defer([this, sink, ack, agent, kind, source, joules, watts, errors, is_new](const absl::Status& commit) {
    if (!commit.ok()) return;
    if (is_new) {
      if (!std::isnan(watts)) metrics_->SetPower(agent, kind, source, watts);
      metrics_->AddEnergy(agent, kind, source, joules);
      metrics_->AddPowerReadErrors(agent, source, errors);
    } else {
      metrics_->AddDuplicateBatch();
    }
    sink->Send(ack);
  });
}

void Coordinator::HandleDone(Session& session, const v1::TaskDone& d) {
  v1::CoordinatorMessage ack = Ack(d.task_id(), d.attempt(), 0, /*power=*/false);
  ack.mutable_ack()->set_done(true);
  if (AnswerSettled(session, d.task_id(), d.attempt(), ack)) return;
  v1::Job* job = nullptr;
  v1::Task* task = FencedTask(session, d.task_id(), d.attempt(), &job);
  if (task == nullptr) return;
  leases_.Release(task->agent_id(), task->device_id());
  *task->mutable_result() = d.result();
  task->mutable_result()->clear_phases();
  task->mutable_result()->set_partial(d.state() == v1::TASK_STATE_CANCELLED);

  auto batches = store_->LoadSampleBatches(task->id(), task->attempt());
  v1::TaskState state = d.state();
  std::string error = d.error();
  if (!batches.ok()) {
    state = v1::TASK_STATE_FAILED;
    error = absl::StrCat("reading stored samples: ", batches.status().message());
  } else {
    std::map<v1::Phase, std::vector<StepSample>> by_phase;
    int64_t stored_samples = 0;
    for (const v1::SampleBatch& b : *batches) {
      auto& steps = by_phase[b.phase()];
      for (int i = 0; i < b.duration_ns_size(); ++i) {
        steps.push_back(StepSample{b.start_ns(i), b.duration_ns(i), b.items(i)});
      }
      stored_samples += b.duration_ns_size();
    }
    task->mutable_result()->set_samples_stored(stored_samples);
    const v1::JobSpec& spec = job->spec();
    for (auto& [phase, steps] : by_phase) {
      v1::PhaseResult* pr = task->mutable_result()->add_phases();
      pr->set_phase(phase);
      *pr->mutable_stats() = ComputeTimingStats(steps);
      const int64_t train_size = d.result().dataset_train_size();
      const int64_t test_size = d.result().dataset_test_size();
      const int64_t expected =
          phase == v1::PHASE_TRAIN
              ? std::min(EffectiveMinSteps(spec, task->batch_size(), train_size), spec.train().max_steps())
              : ExpectedInferenceBatches(spec, task->batch_size(), test_size);
      JudgeValidity(spec, expected, pr, &d.result().calibration());
    }
    if (state == v1::TASK_STATE_SUCCEEDED &&
        (batches->size() != d.batches_sent() || stored_samples != d.samples_sent())) {
      state = v1::TASK_STATE_FAILED;
      error = absl::StrCat("incomplete samples: stored ", batches->size(), " of ", d.batches_sent(), " batches and ",
                           stored_samples, " of ", d.samples_sent(), " samples");
    }
  }
  auto power = store_->LoadPowerBatches(task->id(), task->attempt());
  if (!power.ok()) {
    state = v1::TASK_STATE_FAILED;
    error = absl::StrCat("reading stored power readings: ", power.status().message());
  } else {
    if (state == v1::TASK_STATE_SUCCEEDED && power->size() != d.power_batches_sent()) {
      state = v1::TASK_STATE_FAILED;
      error =
          absl::StrCat("incomplete power readings: stored ", power->size(), " of ", d.power_batches_sent(), " batches");
    }
    ComputeEnergyAndCost(job->spec(), session.hello, *power, task);
  }
  last_power_.erase(task->id());
  FinishTask(*job, *task, state, error);
  auto sink = session.sink;
  Defer([sink, ack](const absl::Status& commit) {
    if (commit.ok()) sink->Send(ack);
  });
  Schedule();
}

void Coordinator::FinishTask(v1::Job& job, v1::Task& task, v1::TaskState state, const std::string& error) {
  task.set_state(state);
  task.set_error(error);
  const double now = clock_->SystemNowSeconds();
  task.set_finished_unix_seconds(now);
  const double duration = now - task.started_unix_seconds();
  const std::string model = task.model();
  const v1::DeviceKind kind = task.device_kind();
  const v1::TaskResult result = task.result();
  Defer([this, model, kind, state, duration, result](const absl::Status& commit) {
    if (!commit.ok()) return;
    metrics_->ObserveTaskFinished(model, kind, state, duration);
    if (state == v1::TASK_STATE_SUCCEEDED) metrics_->SetTaskFigures(model, kind, result);
  });
  LogInfo(kLog, "task ", task.id(), " attempt ", task.attempt(), " ", TaskStateName(state), error.empty() ? "" : ": ",
          error);
  RecomputeJobState(job);
  Persist(job);
  Notify(job, absl::StrCat("task ", task.id(), " ", TaskStateName(state)));
}

void Coordinator::RecomputeJobState(v1::Job& job) {
  bool all_done = true, any_running = false, any_failed = false;
  std::string first_error;
  for (const v1::Task& t : job.tasks()) {
    all_done = all_done && IsTerminal(t.state());
    any_running = any_running || t.state() == v1::TASK_STATE_RUNNING;
    if (t.state() == v1::TASK_STATE_FAILED) {
      if (!any_failed) first_error = absl::StrCat(t.id(), ": ", t.error());
      any_failed = true;
    }
  }
  const v1::JobState before = job.state();
  if (job.state() == v1::JOB_STATE_CANCELLED) return;
  if (all_done) {
    job.set_state(any_failed ? v1::JOB_STATE_FAILED : v1::JOB_STATE_SUCCEEDED);
    job.set_error(first_error);
    job.set_finished_unix_seconds(clock_->SystemNowSeconds());
  } else {
    job.set_state(any_running ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_QUEUED);
  }
  if (job.state() != before) gauges_dirty_ = true;
}

void Coordinator::DropSession(uint64_t session_id, const std::string& reason) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  Session session = std::move(it->second);
  sessions_.erase(it);
  if (!session.has_hello) return;
  const std::string& agent_id = session.hello.agent_id();
  auto a = agent_sessions_.find(agent_id);
  if (a == agent_sessions_.end() || a->second != session_id) return;  // already replaced
  agent_sessions_.erase(a);
  gauges_dirty_ = true;
  metrics_->ForgetAgent(agent_id);
  const size_t held = leases_.LeasedDevices(agent_id).size();
  if (held == 0) {
    LogInfo(kLog, "agent ", agent_id, " gone: ", reason);
  } else {
    // The agent keeps running its tasks and buffering their samples: if it
    // reconnects within its lease it resumes them (ResumeTasks); else Tick
    // re-queues them at the deadline.
    const int64_t deadline = session.last_seen_ns + static_cast<int64_t>(options_.lease_seconds * 1e9);
    detached_[agent_id] = Detached{deadline, reason, /*restart=*/false, std::move(session.hello)};
    LogInfo(kLog, "agent ", agent_id, " gone: ", reason, "; its ", held, " running task(s) wait ",
            absl::StrFormat("%.1f", std::max<double>(0, (deadline - clock_->MonotonicNowNs()) * 1e-9)),
            " s for it to resume");
  }
  Schedule();
}

void Coordinator::LoseAgentTasks(const std::string& agent_id, const std::string& detail, bool restart,
                                 const std::set<std::string>& keep) {
  for (const std::string& device_id : leases_.LeasedDevices(agent_id)) {
    const std::string task_id = leases_.TaskOn(agent_id, device_id);
    if (keep.count(task_id)) continue;
    leases_.Release(agent_id, device_id);
    LoseTask(task_id, detail, restart);
  }
}

void Coordinator::LoseTask(const std::string& task_id, const std::string& detail, bool restart) {
  auto ti = task_index_.find(task_id);
  if (ti == task_index_.end()) return;
  v1::Job* job = FindJob(ti->second.first);
  if (job == nullptr) return;
  v1::Task& task = *job->mutable_tasks(ti->second.second);
  if (task.state() != v1::TASK_STATE_RUNNING) return;
  const std::string why = absl::StrCat("attempt ", task.attempt(), " lost: agent ", task.agent_id(), " ", detail);
  last_power_.erase(task.id());
  // Restarts are the coordinator's fault, not the task's: they are counted
  // apart from attempts, and bounded on their own.
  if (restart) task.set_restarts(task.restarts() + 1);
  if (job->state() == v1::JOB_STATE_CANCELLED) {
    FinishTask(*job, task, v1::TASK_STATE_CANCELLED, why);
  } else if (restart && task.restarts() > options_.max_restarts) {
    // A task that keeps being interrupted by restarts may be what brings the coordinator down.
    FinishTask(*job, task, v1::TASK_STATE_FAILED,
               absl::StrCat(why, "; ", task.restarts(), " restarts interrupted it (at most ", options_.max_restarts,
                            ")"));
  } else if (!restart && task.attempt() - task.restarts() >= options_.max_attempts) {
    FinishTask(*job, task, v1::TASK_STATE_FAILED, absl::StrCat(why, "; no attempts left"));
  } else {
    task.set_state(v1::TASK_STATE_QUEUED);
    task.set_error(why);
    task.clear_agent_id();
    task.clear_device_id();
    RecomputeJobState(*job);
    Persist(*job);
    Notify(*job, absl::StrCat("task ", task.id(), " re-queued: ", why));
  }
}

void Coordinator::ResumeTasks(Session& session, const v1::Hello& hello) {
  const std::string& agent_id = hello.agent_id();
  auto d = detached_.find(agent_id);
  const std::string gone_reason = d == detached_.end() ? "its stream ended" : d->second.reason;
  const bool restart = d != detached_.end() && d->second.restart;
  if (d != detached_.end()) detached_.erase(d);
  auto send_cancel = [&session](const std::string& task_id, int attempt, const std::string& reason, bool fenced) {
    v1::CoordinatorMessage msg;
    msg.mutable_cancel()->set_task_id(task_id);
    msg.mutable_cancel()->set_attempt(attempt);
    msg.mutable_cancel()->set_reason(reason);
    msg.mutable_cancel()->set_fenced(fenced);
    session.sink->Send(std::move(msg));
  };
  std::set<std::string> resumed;
  for (const v1::ResumeTask& r : hello.resume()) {
    v1::Job* job = nullptr;
    if (v1::Task* task = OwnedTask(agent_id, r.task_id(), r.attempt(), &job); task != nullptr) {
      resumed.insert(task->id());
      task->set_resumes(task->resumes() + 1);
      Persist(*job);
      metrics_->AddResumedTask();
      LogInfo(kLog, "agent ", agent_id, " resumed ", task->id(), " attempt ", task->attempt(), " (", gone_reason,
              ")");
      Notify(*job, absl::StrCat("task ", task->id(), " resumed on a new stream"));
      if (job->state() == v1::JOB_STATE_CANCELLED) {
        send_cancel(task->id(), task->attempt(), "job cancelled by user", /*fenced=*/false);
      }
    } else if (r.finished() && SettledTask(agent_id, r.task_id(), r.attempt()) != nullptr) {
      // Already ended here: its outstanding messages will be answered as they come.
    } else {
      metrics_->AddRejectedMessage("stale_attempt");
      send_cancel(r.task_id(), r.attempt(), "this attempt is no longer assigned to you", /*fenced=*/true);
    }
  }
  LoseAgentTasks(agent_id, absl::StrCat("came back without it (", gone_reason, ")"), restart, resumed);
}

void Coordinator::Schedule() {
  std::vector<const v1::Hello*> agents;
  for (const auto& [agent_id, session_id] : agent_sessions_) agents.push_back(&sessions_[session_id].hello);
  for (const std::string& job_id : job_order_) {
    v1::Job& job = jobs_[job_id];
    if (IsTerminal(job.state())) continue;
    bool changed = false, reasons_changed = false;
    for (v1::Task& task : *job.mutable_tasks()) {
      if (task.state() != v1::TASK_STATE_QUEUED) continue;
      auto placement = PickDevice(task.target(), agents, leases_);
      if (!placement) {
        std::string why = PendingReason(task.target(), agents, leases_);
        if (why != task.pending_reason()) {
          task.set_pending_reason(std::move(why));
          reasons_changed = true;
        }
        continue;
      }
      leases_.Acquire(placement->agent_id, placement->device.id(), task.id());
      const std::string executor = ExecutorFor(task.target(), placement->device);
      task.clear_pending_reason();
      task.set_executor(executor);
      task.set_state(v1::TASK_STATE_RUNNING);
      task.set_attempt(task.attempt() + 1);
      task.set_resumes(0);
      task.set_agent_id(placement->agent_id);
      task.set_device_id(placement->device.id());
      task.set_device_kind(placement->device.kind());
      task.set_started_unix_seconds(clock_->SystemNowSeconds());
      task.set_phase(v1::PHASE_UNSPECIFIED);
      task.set_step(0);
      task.set_total_steps(0);
      task.clear_result();
      changed = true;
      v1::CoordinatorMessage msg;
      v1::Assign* assign = msg.mutable_assign();
      assign->set_task_id(task.id());
      assign->set_attempt(task.attempt());
      assign->set_device_id(placement->device.id());
      assign->set_batch_size(task.batch_size());
      assign->set_model(task.model());
      assign->set_executor(executor);
      *assign->mutable_spec() = job.spec();
      auto sink = sessions_[agent_sessions_[placement->agent_id]].sink;
      Defer([sink, msg](const absl::Status& commit) {
        if (commit.ok()) sink->Send(msg);
      });
      LogInfo(kLog, "assigned ", task.id(), " attempt ", task.attempt(), " to ", placement->agent_id, "/",
              placement->device.id());
    }
    if (changed) {
      RecomputeJobState(job);
      Persist(job);
      Notify(job, "tasks assigned");
    } else if (reasons_changed) {
      Notify(job, "waiting for devices");
    }
  }
}

void Coordinator::Tick() {
  const int64_t now = clock_->MonotonicNowNs();
  const auto heartbeat_ns = static_cast<int64_t>(options_.heartbeat_seconds * 1e9);
  const auto lease_ns = static_cast<int64_t>(options_.lease_seconds * 1e9);
  if (now - last_heartbeat_ns_ >= heartbeat_ns) {
    last_heartbeat_ns_ = now;
    v1::CoordinatorMessage hb;
    hb.mutable_heartbeat()->set_unix_seconds(clock_->SystemNowSeconds());
    for (auto& [id, session] : sessions_) session.sink->Send(hb);
  }
  std::vector<uint64_t> expired;
  for (const auto& [id, session] : sessions_) {
    if (now - session.last_seen_ns > lease_ns) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    sessions_[id].sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "lease expired: no message from agent"));
    DropSession(id, absl::StrCat("lease expired after ", options_.lease_seconds, " s of silence"));
  }
  // Agents that did not come back within their lease lose their tasks.
  bool lost = false;
  for (auto it = detached_.begin(); it != detached_.end();) {
    if (now < it->second.deadline_ns) {
      ++it;
      continue;
    }
    const std::string agent_id = it->first;
    const Detached gone = std::move(it->second);
    it = detached_.erase(it);
    LoseAgentTasks(agent_id, absl::StrCat(gone.reason, " and did not resume within the lease"), gone.restart);
    lost = true;
  }
  if (lost) Schedule();
}

void Coordinator::Persist(const v1::Job& job) {
  gauges_dirty_ = true;  // task and job counts may have changed
  if (std::find(dirty_jobs_.begin(), dirty_jobs_.end(), job.id()) == dirty_jobs_.end()) {
    dirty_jobs_.push_back(job.id());
  }
}

void Coordinator::Notify(const v1::Job& job, const std::string& message) {
  auto range = watchers_.equal_range(job.id());
  if (range.first == range.second) return;
  std::vector<std::shared_ptr<WatchSink>> sinks;
  for (auto it = range.first; it != range.second; ++it) sinks.push_back(it->second);
  const bool terminal = IsTerminal(job.state());
  if (terminal) watchers_.erase(job.id());
  v1::JobEvent event;
  *event.mutable_job() = job;
  event.set_message(message);
  Defer([sinks = std::move(sinks), event = std::move(event), terminal](const absl::Status&) {
    for (const auto& sink : sinks) {
      sink->Send(event);
      if (terminal) sink->Close(grpc::Status::OK);
    }
  });
}

void Coordinator::UpdateGauges() {
  if (!gauges_dirty_) return;
  gauges_dirty_ = false;
  std::map<v1::JobState, int64_t> jobs;
  std::map<v1::TaskState, int64_t> tasks;
  for (const auto& [id, job] : jobs_) {
    ++jobs[job.state()];
    for (const v1::Task& t : job.tasks()) ++tasks[t.state()];
  }
  metrics_->SetJobsByState(jobs);
  metrics_->SetTasksByState(tasks);
  std::map<std::string, int64_t> agents;
  for (const auto& [agent_id, session_id] : agent_sessions_) {
    std::set<std::string> kinds;
    for (const v1::Device& d : sessions_[session_id].hello.devices()) kinds.insert(DeviceKindName(d.kind()));
    for (const std::string& k : kinds) ++agents[k];
  }
  metrics_->SetAgentsByKind(agents);
}

}  // namespace hetbench::server
