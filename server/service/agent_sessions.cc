// Agent sessions: Hello, heartbeats and leases, resume after a broken stream,
// fencing, and what happens to an agent's tasks when it is gone.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/names.h"
#include "server/service/coordinator.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
constexpr size_t kMaxAgentIdLength = 256;
constexpr int kMaxDevicesPerAgent = 1024;
}  // namespace

void Coordinator::OnAgentGone(uint64_t session_id, std::string reason) {
  loop_.Post([this, session_id, reason = std::move(reason)] { DropSession(session_id, reason); });
}

void Coordinator::ListAgents(std::function<void(std::vector<v1::AgentInfo>)> done) {
  auto shared_done = std::make_shared<std::function<void(std::vector<v1::AgentInfo>)>>(std::move(done));
  const bool posted = PostRequest([this, shared_done] {
    loop_.Defer([this, shared_done](const absl::Status&) {
      std::vector<v1::AgentInfo> out;
      sessions_.ForEachConnected([&](const std::string& agent_id, const Session& s) {
        v1::AgentInfo info = DescribeAgent(agent_id, s.hello);
        info.set_connected_unix_seconds(s.connected_unix);
        info.set_last_seen_unix_seconds(s.last_seen_unix);
        out.push_back(std::move(info));
      });
      // Disconnected agents whose tasks still wait for them to resume.
      const int64_t now_ns = clock_->MonotonicNowNs();
      const double now_unix = clock_->SystemNowSeconds();
      for (const auto& [agent_id, d] : sessions_.detached()) {
        v1::AgentInfo info = DescribeAgent(agent_id, d.hello);
        info.set_resume_deadline_unix_seconds(now_unix + std::max<int64_t>(0, d.deadline_ns - now_ns) * 1e-9);
        info.set_disconnect_reason(d.reason);
        out.push_back(std::move(info));
      }
      (*shared_done)(std::move(out));
    });
  });
  if (!posted) {
    metrics_->AddRequestShed("ListAgents");
    (*shared_done)({});
  }
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
  for (const std::string& d : placer_.leases().LeasedDevices(agent_id)) info.add_busy_device_ids(d);
  return info;
}

std::string Coordinator::SensorDeviceKind(const v1::Hello& hello, const std::string& device_id) {
  if (device_id.empty()) return "node";
  for (const v1::Device& d : hello.devices()) {
    if (d.id() == device_id) return DeviceKindName(d.kind());
  }
  return "node";
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
  if (const uint64_t old = sessions_.IdOf(hello.agent_id()); old != 0 && old != session_id) {
    sessions_.Find(old)->sink->Close(
        grpc::Status(grpc::StatusCode::ABORTED, "replaced by a newer connection of the same agent"));
    DropSession(old, "replaced by a newer connection");
  }
  sessions_.Bind(session_id, hello);
  gauges_dirty_ = true;
  std::vector<std::pair<std::string, v1::SensorInfo>> sensors;
  for (const v1::SensorInfo& s : hello.sensors()) sensors.emplace_back(SensorDeviceKind(hello, s.device_id()), s);
  metrics_->SetSensorsUp(hello.agent_id(), sensors);
  metrics_->AgentSeen(hello.agent_id(), session.last_seen_unix);
  session.last_seen_metric_ns = session.last_seen_ns;
  LogInfo(kLog, "agent ", hello.agent_id(), " connected from ", hello.hostname(), " with ", hello.devices_size(),
          " devices");
  v1::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_heartbeat_seconds(options_.heartbeat_seconds);
  welcome.mutable_welcome()->set_lease_seconds(options_.lease_seconds);
  session.sink->Send(welcome);
  ResumeTasks(session, hello);  // before scheduling: resumed tasks keep their devices
  placer_.Request();
}

void Coordinator::DropSession(uint64_t session_id, const std::string& reason) {
  std::optional<Session> ended = sessions_.Close(session_id);
  if (!ended) return;  // no Hello yet, or already replaced by a newer stream of its agent
  Session& session = *ended;
  const std::string agent_id = session.hello.agent_id();
  gauges_dirty_ = true;
  const size_t held = placer_.leases().LeasedDevices(agent_id).size();
  if (held == 0) {
    LogInfo(kLog, "agent ", agent_id, " gone: ", reason);
    ForgetAgent(agent_id);
  } else {
    // The agent keeps running its tasks and buffering their samples: if it
    // reconnects within its lease it resumes them (ResumeTasks); else Tick
    // re-queues them at the deadline.
    metrics_->AgentDown(agent_id);
    const int64_t deadline = session.last_seen_ns + static_cast<int64_t>(options_.lease_seconds * 1e9);
    sessions_.Detach(agent_id, Detached{deadline, reason, /*restart=*/false, std::move(session.hello)});
    LogInfo(kLog, "agent ", agent_id, " gone: ", reason, "; its ", held, " running task(s) wait ",
            absl::StrFormat("%.1f", std::max<double>(0, (deadline - clock_->MonotonicNowNs()) * 1e-9)),
            " s for it to resume");
  }
  placer_.Request();
}

void Coordinator::ForgetAgent(const std::string& agent_id) {
  if (sessions_.Known(agent_id)) return;  // back, or still waited for
  metrics_->ForgetAgent(agent_id);
}

void Coordinator::LoseAgentTasks(const std::string& agent_id, const std::string& detail, bool restart,
                                 const std::vector<std::string>& keep) {
  for (const std::string& task_id : placer_.ReleaseAgent(agent_id, keep)) attempts_.Lose(task_id, detail, restart);
  placer_.Request();
}

void Coordinator::ResumeTasks(Session& session, const v1::Hello& hello) {
  const std::string& agent_id = hello.agent_id();
  const std::optional<Detached> d = sessions_.TakeDetached(agent_id);
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
      jobs_.MarkTask(*job, *task);
      metrics_->AddResumedTask();
      LogInfo(kLog, "agent ", agent_id, " resumed ", task->id(), " attempt ", task->attempt(), " (", gone_reason, ")");
      watches_.Changed(job->job.id(), absl::StrCat("task ", task->id(), " resumed on a new stream"));
      if (job->job.state() == v1::JOB_STATE_CANCELLED) {
        send_cancel(task->id(), task->attempt(), "job cancelled by user", /*fenced=*/false);
      }
    } else if (const Settled settled = SettledInMemory(agent_id, r.task_id(), r.attempt());
               r.finished() && settled == Settled::kYes) {
      // Already ended here: its outstanding messages will be answered as they come.
    } else if (r.finished() && settled == Settled::kAskStore) {
      AnswerFromStore(session.sink, agent_id, r.task_id(), r.attempt(), std::nullopt);  // fenced unless it ended
    } else {
      metrics_->AddRejectedMessage("stale_attempt");
      send_cancel(r.task_id(), r.attempt(), "this attempt is no longer assigned to you", /*fenced=*/true);
    }
  }
  LoseAgentTasks(agent_id, absl::StrCat("came back without it (", gone_reason, ")"), restart, resumed);
}

void Coordinator::Tick() {
  // Timers run at most once per 50 ms however many batches the loop runs:
  // each pass is O(sessions).
  const int64_t now = clock_->MonotonicNowNs();
  const int64_t real_now = SteadyNowNs();
  const auto heartbeat_ns = static_cast<int64_t>(options_.heartbeat_seconds * 1e9);
  if (now - last_heartbeat_ns_ >= heartbeat_ns) {
    last_heartbeat_ns_ = now;
    v1::CoordinatorMessage hb;
    hb.mutable_heartbeat()->set_unix_seconds(clock_->SystemNowSeconds());
    sessions_.SendAll(hb);
  }
  if (real_now - last_tick_real_ns_ < 50'000'000 && now - last_tick_ns_ < 50'000'000) return;
  last_tick_ns_ = now;
  last_tick_real_ns_ = real_now;
  const auto lease_ns = static_cast<int64_t>(options_.lease_seconds * 1e9);
  for (uint64_t id : sessions_.Silent(now, lease_ns)) {
    sessions_.Find(id)->sink->Close(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "lease expired: no message from agent"));
    DropSession(id, absl::StrCat("lease expired after ", options_.lease_seconds, " s of silence"));
  }
  // Agents that did not come back within their lease lose their tasks.
  for (auto& [agent_id, gone] : sessions_.TakeDue(now)) {
    LoseAgentTasks(agent_id, absl::StrCat(gone.reason, " and did not resume within the lease"), gone.restart);
    ForgetAgent(agent_id);
  }
}

}  // namespace hetbench::server
