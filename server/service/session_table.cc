#include "server/service/session_table.h"

#include <algorithm>

#include "server/scheduler/scheduler.h"

namespace hetbench::server {

Session& SessionTable::Open(uint64_t id, std::shared_ptr<AgentSink> sink, double now_unix, bool* opened) {
  auto [it, inserted] = sessions_.try_emplace(id);
  *opened = inserted;
  if (inserted) {
    it->second.sink = std::move(sink);
    it->second.connected_unix = now_unix;
  }
  return it->second;
}

Session* SessionTable::Find(uint64_t id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

Session* SessionTable::OfAgent(const std::string& agent_id) {
  auto it = by_agent_.find(agent_id);
  return it == by_agent_.end() ? nullptr : Find(it->second);
}

bool EdgeHeartbeats::Record(const Beat& beat) {
  absl::MutexLock l(&mu_);
  if (!welcomed_.contains(beat.session)) return false;
  beats_.push_back(beat);
  return true;
}

std::vector<EdgeHeartbeats::Beat> EdgeHeartbeats::Take() {
  std::vector<Beat> out;
  absl::MutexLock l(&mu_);
  out.swap(beats_);
  return out;
}

void EdgeHeartbeats::Welcome(uint64_t id) {
  absl::MutexLock l(&mu_);
  welcomed_.insert(id);
}

void EdgeHeartbeats::Forget(uint64_t id) {
  absl::MutexLock l(&mu_);
  welcomed_.erase(id);
}

void SessionTable::MergeEdge(const std::function<void(Session&)>& merged) {
  for (const EdgeHeartbeats::Beat& beat : edge_.Take()) {
    Session* session = Find(beat.session);
    if (session == nullptr) continue;  // closed since
    session->last_seen_ns = std::max(session->last_seen_ns, beat.seen_ns);
    session->last_seen_unix = std::max(session->last_seen_unix, beat.seen_unix);
    if (beat.echoed) session->last_echo_ns = std::max(session->last_echo_ns, beat.seen_ns);
    merged(*session);
  }
}

uint64_t SessionTable::Bind(uint64_t id, const v1::Hello& hello) {
  edge_.Welcome(id);
  Session& session = sessions_.at(id);
  session.has_hello = true;
  session.hello = hello;
  session.resources.clear();
  for (const v1::Device& d : hello.devices()) session.resources.push_back(ResourceOf(d));
  uint64_t& current = by_agent_[hello.agent_id()];
  const uint64_t replaced = current != id ? current : 0;
  current = id;
  return replaced;
}

std::optional<Session> SessionTable::Close(uint64_t id) {
  edge_.Forget(id);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  Session session = std::move(it->second);
  sessions_.erase(it);
  if (!session.has_hello) return std::nullopt;
  auto a = by_agent_.find(session.hello.agent_id());
  if (a == by_agent_.end() || a->second != id) return std::nullopt;  // already replaced
  by_agent_.erase(a);
  return session;
}

std::optional<Detached> SessionTable::TakeDetached(const std::string& agent_id) {
  auto it = detached_.find(agent_id);
  if (it == detached_.end()) return std::nullopt;
  Detached d = std::move(it->second);
  detached_.erase(it);
  return d;
}

std::vector<std::pair<std::string, Detached>> SessionTable::TakeDue(int64_t now_ns) {
  std::vector<std::pair<std::string, Detached>> due;
  for (auto it = detached_.begin(); it != detached_.end();) {
    if (now_ns < it->second.deadline_ns) {
      ++it;
      continue;
    }
    due.emplace_back(it->first, std::move(it->second));
    it = detached_.erase(it);
  }
  return due;
}

std::vector<uint64_t> SessionTable::Silent(int64_t now_ns, int64_t lease_ns) {
  std::vector<uint64_t> silent;
  for (auto& [id, session] : sessions_) {
    if (now_ns - session.last_seen_ns <= lease_ns) continue;
    // Reads held back by the coordinator (its window or the ingest gate):
    // the agent's messages wait in flow control, its heartbeats among them.
    if (session.sink != nullptr && session.sink->ReadsHeldBack()) {
      session.last_seen_ns = now_ns;
      continue;
    }
    silent.push_back(id);
  }
  return silent;
}

void SessionTable::SendToQuiet(const v1::CoordinatorMessage& msg, int64_t now_ns, int64_t quiet_ns) {
  for (auto& [id, session] : sessions_) {
    if (session.last_echo_ns < 0 || now_ns - session.last_echo_ns >= quiet_ns) session.sink->Send(msg);
  }
}

void SessionTable::CloseAll(const grpc::Status& status) {
  for (auto& [id, session] : sessions_) session.sink->Close(status);
}

}  // namespace hetbench::server
