#include "server/service/agent_sessions.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/names.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
constexpr size_t kMaxAgentIdLength = 256;
constexpr int kMaxDevicesPerAgent = 1024;
}  // namespace

std::vector<v1::AgentInfo> AgentSessions::List() const {
  std::vector<v1::AgentInfo> out;
  p_.sessions->ForEachConnected([&](const std::string& agent_id, const Session& s) {
    v1::AgentInfo info = Describe(agent_id, s.hello);
    info.set_connected_unix_seconds(s.connected_unix);
    info.set_last_seen_unix_seconds(s.last_seen_unix);
    out.push_back(std::move(info));
  });
  // Disconnected agents whose tasks still wait for them to resume.
  const int64_t now_ns = p_.clock->MonotonicNowNs();
  const double now_unix = p_.clock->SystemNowSeconds();
  for (const auto& [agent_id, d] : p_.sessions->detached()) {
    v1::AgentInfo info = Describe(agent_id, d.hello);
    info.set_resume_deadline_unix_seconds(now_unix + std::max<int64_t>(0, d.deadline_ns - now_ns) * 1e-9);
    info.set_disconnect_reason(d.reason);
    out.push_back(std::move(info));
  }
  return out;
}

v1::AgentInfo AgentSessions::Describe(const std::string& agent_id, const v1::Hello& hello) const {
  v1::AgentInfo info;
  info.set_agent_id(agent_id);
  info.set_hostname(hello.hostname());
  info.set_version(hello.version());
  *info.mutable_devices() = hello.devices();
  *info.mutable_labels() = hello.labels();
  *info.mutable_absent() = hello.absent();
  *info.mutable_sensors() = hello.sensors();
  for (const std::string& d : p_.placer->leases().LeasedDevices(agent_id)) info.add_busy_device_ids(d);
  const Quarantine& health = p_.placer->health();
  for (auto it = health.lower_bound({agent_id, ""}); it != health.end() && it->first.first == agent_id; ++it) {
    *info.add_health() = it->second;
  }
  return info;
}

std::string AgentSessions::SensorDeviceKind(const v1::Hello& hello, const std::string& device_id) {
  if (device_id.empty()) return "node";
  for (const v1::Device& d : hello.devices()) {
    if (d.id() == device_id) return DeviceKindName(d.kind());
  }
  return "node";
}

void AgentSessions::Hello(uint64_t session_id, Session& session, const v1::Hello& hello) {
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
    p_.metrics->AddRejectedMessage("bad_hello");
    session.sink->Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, problem));
    Drop(session_id, problem);
    return;
  }
  if (const uint64_t old = p_.sessions->IdOf(hello.agent_id()); old != 0 && old != session_id) {
    p_.sessions->Find(old)->sink->Close(
        grpc::Status(grpc::StatusCode::ABORTED, "replaced by a newer connection of the same agent"));
    Drop(old, "replaced by a newer connection");
  }
  p_.sessions->Bind(session_id, hello);
  changed_ = true;
  std::vector<std::pair<std::string, v1::SensorInfo>> sensors;
  for (const v1::SensorInfo& s : hello.sensors()) sensors.emplace_back(SensorDeviceKind(hello, s.device_id()), s);
  p_.metrics->SetSensorsUp(hello.agent_id(), sensors);
  p_.metrics->AgentSeen(hello.agent_id(), session.last_seen_unix);
  session.last_seen_metric_ns = session.last_seen_ns;
  LogInfo(kLog, "agent ", hello.agent_id(), " connected from ", hello.hostname(), " with ", hello.devices_size(),
          " devices");
  v1::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_heartbeat_seconds(options_.heartbeat_seconds);
  welcome.mutable_welcome()->set_lease_seconds(options_.lease_seconds);
  welcome.mutable_welcome()->set_sample_columns(true);
  session.sink->Send(welcome);
  Resume(session, hello);  // before scheduling: resumed tasks keep their devices
  p_.placer->Request();
}

void AgentSessions::Seen(Session& session) {
  if (session.has_hello && session.last_seen_ns - session.last_seen_metric_ns >= 1'000'000'000) {
    session.last_seen_metric_ns = session.last_seen_ns;
    p_.metrics->AgentSeen(session.hello.agent_id(), session.last_seen_unix);
  }
}

void AgentSessions::Drop(uint64_t session_id, const std::string& reason) {
  // Heartbeats the edge took since the last batch count for the resume deadline.
  p_.sessions->MergeEdge([this](Session& s) { Seen(s); });
  std::optional<Session> ended = p_.sessions->Close(session_id);
  if (!ended) return;  // no Hello yet, or already replaced by a newer stream of its agent
  Session& session = *ended;
  const std::string agent_id = session.hello.agent_id();
  changed_ = true;
  const size_t held = p_.placer->leases().LeasedDevices(agent_id).size();
  if (held == 0) {
    LogInfo(kLog, "agent ", agent_id, " gone: ", reason);
    Forget(agent_id);
  } else {
    // The agent keeps running its tasks and buffering their samples: if it
    // reconnects within its lease it resumes them (ResumeTasks); else Tick
    // re-queues them at the deadline.
    p_.metrics->AgentDown(agent_id);
    const int64_t deadline = session.last_seen_ns + static_cast<int64_t>(options_.lease_seconds * 1e9);
    p_.sessions->Detach(agent_id, Detached{deadline, reason, /*restart=*/false, std::move(session.hello)});
    LogInfo(kLog, "agent ", agent_id, " gone: ", reason, "; its ", held, " running task(s) wait ",
            absl::StrFormat("%.1f", std::max<double>(0, (deadline - p_.clock->MonotonicNowNs()) * 1e-9)),
            " s for it to resume");
  }
  p_.placer->Request();
}

void AgentSessions::Forget(const std::string& agent_id) {
  if (p_.sessions->Known(agent_id)) return;  // back, or still waited for
  p_.metrics->ForgetAgent(agent_id);
}

void AgentSessions::LoseTasks(const std::string& agent_id, const std::string& detail, bool restart,
                                 const std::vector<std::string>& keep) {
  for (const std::string& task_id : p_.placer->ReleaseAgent(agent_id, keep)) p_.attempts->Lose(task_id, detail, restart);
  p_.placer->Request();
}

void AgentSessions::Resume(Session& session, const v1::Hello& hello) {
  const std::string& agent_id = hello.agent_id();
  const std::optional<Detached> d = p_.sessions->TakeDetached(agent_id);
  const std::string gone_reason = d ? d->reason : "its stream ended";
  const bool restart = d && d->restart;
  auto send_cancel = [&session](const std::string& task_id, int attempt, const std::string& reason, bool fenced) {
    session.sink->Send(CancelMessage(task_id, attempt, reason, fenced));
  };
  std::vector<std::string> resumed;
  for (const v1::ResumeTask& r : hello.resume()) {
    LiveJob* job = nullptr;
    if (v1::Task* task = OwnedTask(agent_id, r.task_id(), r.attempt(), &job); task != nullptr) {
      resumed.push_back(task->id());
      task->set_resumes(task->resumes() + 1);
      p_.jobs->MarkTask(*job, *task);
      p_.metrics->AddResumedTask();
      LogInfo(kLog, "agent ", agent_id, " resumed ", task->id(), " attempt ", task->attempt(), " (", gone_reason, ")");
      p_.watches->Changed(job->job.id(), absl::StrCat("task ", task->id(), " resumed on a new stream"));
      if (job->job.state() == v1::JOB_STATE_CANCELLED) {
        send_cancel(task->id(), task->attempt(), "job cancelled by user", /*fenced=*/false);
      }
    } else if (const Settled settled = SettledInMemory(agent_id, r.task_id(), r.attempt());
               r.finished() && settled == Settled::kYes) {
      // Already ended here: its outstanding messages will be answered as they come.
    } else if (r.finished() && settled == Settled::kAskStore) {
      AnswerFromStore(session.sink, agent_id, r.task_id(), r.attempt(), std::nullopt);  // fenced unless it ended
    } else {
      p_.metrics->AddRejectedMessage("stale_attempt");
      send_cancel(r.task_id(), r.attempt(), "this attempt is no longer assigned to you", /*fenced=*/true);
    }
  }
  LoseTasks(agent_id, absl::StrCat("came back without it (", gone_reason, ")"), restart, resumed);
}

void AgentSessions::Tick() {
  // Timers run at most once per 250 ms however many batches the loop runs:
  // each pass is O(sessions) (at 5,000 agents, a 50 ms period cost 1.4% of
  // the coordinator's CPU); leases are seconds.
  p_.sessions->MergeEdge([this](Session& s) { Seen(s); });  // heartbeats handled at the edge
  const int64_t now = p_.clock->MonotonicNowNs();
  const int64_t real_now = SteadyNowNs();
  const auto heartbeat_ns = static_cast<int64_t>(options_.heartbeat_seconds * 1e9);
  if (now - last_heartbeat_ns_ >= heartbeat_ns) {
    last_heartbeat_ns_ = now;
    v1::CoordinatorMessage hb;
    hb.mutable_heartbeat()->set_unix_seconds(p_.clock->SystemNowSeconds());
    p_.sessions->SendToQuiet(hb, now, heartbeat_ns);
  }
  if (real_now - last_tick_real_ns_ < 250'000'000 && now - last_tick_ns_ < 250'000'000) return;
  last_tick_ns_ = now;
  last_tick_real_ns_ = real_now;
  const auto lease_ns = static_cast<int64_t>(options_.lease_seconds * 1e9);
  for (uint64_t id : p_.sessions->Silent(now, lease_ns)) {
    p_.sessions->Find(id)->sink->Close(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "lease expired: no message from agent"));
    Drop(id, absl::StrCat("lease expired after ", options_.lease_seconds, " s of silence"));
  }
  // Agents that did not come back within their lease lose their tasks.
  for (auto& [agent_id, gone] : p_.sessions->TakeDue(now)) {
    LoseTasks(agent_id, absl::StrCat(gone.reason, " and did not resume within the lease"), gone.restart);
    Forget(agent_id);
  }
}

// ---------------------------------------------------------------- whose attempt a message is for

v1::Task* AgentSessions::OwnedTask(const std::string& agent_id, const std::string& task_id, int attempt, LiveJob** job) {
  LiveJob* live = nullptr;
  v1::Task* task = p_.jobs->FindTask(task_id, &live);
  if (task == nullptr || task->state() != v1::TASK_STATE_RUNNING || task->agent_id() != agent_id ||
      task->attempt() != attempt) {
    return nullptr;
  }
  *job = live;
  return task;
}

AgentSessions::Settled AgentSessions::SettledInMemory(const std::string& agent_id, const std::string& task_id,
                                                      int attempt) const {
  if (const v1::Task* t = p_.jobs->FindTask(task_id)) {
    return IsTerminal(t->state()) && t->agent_id() == agent_id && t->attempt() == attempt ? Settled::kYes
                                                                                          : Settled::kNo;
  }
  return SplitTaskId(task_id) ? Settled::kAskStore : Settled::kNo;
}

void AgentSessions::AnswerFromStore(std::shared_ptr<AgentSink> sink, const std::string& agent_id,
                                    const std::string& task_id, int attempt,
                                    std::optional<v1::CoordinatorMessage> if_settled) {
  // An ended job has left memory once its end was committed: its task's row
  // is read off the loop (one indexed read), and the answer sent from there.
  ended_reader_->Submit(
      [metrics = p_.metrics, sink, agent_id, task_id, attempt, if_settled = std::move(if_settled)](JobStore& store) {
        auto stored = store.GetTask(task_id);
        const bool settled = stored.ok() && stored->has_value() && IsTerminal((*stored)->state()) &&
                             (*stored)->agent_id() == agent_id && (*stored)->attempt() == attempt;
        if (settled) {
          if (!if_settled) return;
          if (!if_settled->ack().done()) metrics->AddDuplicateBatch();
          sink->Send(*if_settled);
        } else if (stored.ok()) {
          metrics->AddRejectedMessage("stale_attempt");
          sink->Send(CancelMessage(task_id, attempt, "this attempt is not assigned to you", /*fenced=*/true));
        }  // else the read failed: unanswered, the agent sends it again
      },
      [](const absl::Status&) {});  // refused: unanswered, the agent sends it again
}

v1::Task* AgentSessions::FencedTask(Session& session, const std::string& task_id, int attempt, LiveJob** job) {
  v1::Task* task = OwnedTask(session.hello.agent_id(), task_id, attempt, job);
  if (task == nullptr) {
    // Fencing: an attempt that is no longer assigned to this agent is refused
    // and told to stop.
    p_.metrics->AddRejectedMessage("stale_attempt");
    session.sink->Send(CancelMessage(task_id, attempt, "this attempt is not assigned to you", /*fenced=*/true));
  }
  return task;
}

}  // namespace hetbench::server
