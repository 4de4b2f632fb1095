#pragma once
/// The session table: every open agent stream (a session), which session is
/// each agent's current one, and the agents whose stream ended while they
/// held tasks (detached), each with the deadline by which it must come back
/// to resume them. A part of the coordinator (server/service/coordinator.h):
/// the coordinator decides what happens to an agent's tasks; the table
/// keeps who is connected and who is waited for.
///
/// Threading: the coordinator's loop thread only; not thread-safe, except
/// `edge()`, which gRPC threads use. Time comes in as arguments, on the
/// coordinator's clock.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "hetbench/v1/agent.pb.h"
#include "server/service/sinks.h"

namespace hetbench::server {

/// One agent stream.
struct Session {
  std::shared_ptr<AgentSink> sink;
  bool has_hello = false;
  v1::Hello hello;  // once has_hello
  std::vector<std::string> resources;  // ResourceOf each of hello's devices, in order: read once, not per pass
  int64_t last_seen_ns = 0;  // monotonic, of its last message
  double connected_unix = 0;
  double last_seen_unix = 0;
  int64_t last_seen_metric_ns = 0;  // when the last-seen gauge last moved
  int64_t last_echo_ns = -1;        // monotonic, when its last heartbeat was echoed; -1: never
};

/// An agent whose stream ended while it held tasks: they stay its own until
/// `deadline_ns`, then are re-queued.
struct Detached {
  int64_t deadline_ns = 0;
  std::string reason;
  bool restart = false;  // detached by a coordinator restart, not a broken stream
  v1::Hello hello;       // what the agent offered; empty after a restart
};

/// Heartbeats handled at the edge, off the loop: a gRPC thread records a
/// heartbeat of a welcomed session (and echoes it) without posting to the
/// loop; the loop takes the records at the end of each batch and merges them
/// into the sessions (last seen, last echo). An idle fleet's heartbeats then
/// cost no loop wake-up each. Thread-safe.
class EdgeHeartbeats {
 public:
  struct Beat {
    uint64_t session = 0;
    int64_t seen_ns = 0;
    double seen_unix = 0;
    bool echoed = false;
  };
  /// Edge: records a heartbeat of session `id`; false, recording nothing,
  /// when the session is not welcomed (no Hello yet, or closed): the loop
  /// handles that message.
  bool Record(const Beat& beat);
  /// Loop: the recorded beats, oldest first, removed.
  std::vector<Beat> Take();

 private:
  friend class SessionTable;
  void Welcome(uint64_t id);
  void Forget(uint64_t id);

  absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> welcomed_ ABSL_GUARDED_BY(mu_);
  std::vector<Beat> beats_ ABSL_GUARDED_BY(mu_);
};

class SessionTable {
 public:
  /// The session of stream `id`, opened at its first message with `sink`
  /// (`*opened` then true).
  Session& Open(uint64_t id, std::shared_ptr<AgentSink> sink, double now_unix, bool* opened);
  /// The session of stream `id`, or null.
  Session* Find(uint64_t id);
  /// The current session of `agent_id`, or null when it is not connected.
  Session* OfAgent(const std::string& agent_id);
  /// The id of `agent_id`'s current session; 0 when it is not connected.
  uint64_t IdOf(const std::string& agent_id) const {
    auto it = by_agent_.find(agent_id);
    return it == by_agent_.end() ? 0 : it->second;
  }
  /// Makes session `id`, whose Hello was accepted, its agent's current one;
  /// returns the session it replaces (0 when none).
  uint64_t Bind(uint64_t id, const v1::Hello& hello);
  /// Ends session `id`. Returns it when it was its agent's current one (the
  /// agent is then no longer connected); nothing for a session without a
  /// Hello or one already replaced.
  std::optional<Session> Close(uint64_t id);

  /// Waits for `agent_id` to come back until `detached.deadline_ns`.
  void Detach(const std::string& agent_id, Detached detached) { detached_[agent_id] = std::move(detached); }
  /// The agent's detached entry, removed (it came back).
  std::optional<Detached> TakeDetached(const std::string& agent_id);
  /// Detached agents whose deadline has passed, removed.
  std::vector<std::pair<std::string, Detached>> TakeDue(int64_t now_ns);
  /// Sessions silent for longer than `lease_ns`; a session whose reads the
  /// coordinator holds back (AgentSink::ReadsHeldBack) is not silent: it is
  /// counted as seen now.
  std::vector<uint64_t> Silent(int64_t now_ns, int64_t lease_ns);
  /// Whether `agent_id` is connected or waited for.
  bool Known(const std::string& agent_id) const { return by_agent_.count(agent_id) || detached_.count(agent_id); }
  bool Connected(const std::string& agent_id) const { return by_agent_.count(agent_id) > 0; }

  /// Sends `msg` (the coordinator's periodic heartbeat) on every open
  /// session whose agent had no heartbeat echoed within `quiet_ns` before
  /// `now_ns`: an echo already proves the coordinator alive, so an agent
  /// that beats gets one message a period, not two.
  void SendToQuiet(const v1::CoordinatorMessage& msg, int64_t now_ns, int64_t quiet_ns);
  /// Closes every open session's stream with `status` (shutdown).
  void CloseAll(const grpc::Status& status);

  /// Heartbeats of bound sessions handled at the edge (thread-safe).
  EdgeHeartbeats& edge() { return edge_; }
  /// Merges the edge's heartbeats into their sessions (last seen, last
  /// echo); `merged` runs for each session a beat moved.
  void MergeEdge(const std::function<void(Session&)>& merged);

  /// Connected agents in agent-id order: fn(agent_id, session).
  template <typename Fn>
  void ForEachConnected(Fn&& fn) {
    for (const auto& [agent_id, id] : by_agent_) fn(agent_id, sessions_.at(id));
  }
  const std::map<std::string, Detached>& detached() const { return detached_; }
  size_t connected() const { return by_agent_.size(); }

 private:
  std::map<uint64_t, Session> sessions_;       // by stream
  std::map<std::string, uint64_t> by_agent_;   // agent id -> its current session
  std::map<std::string, Detached> detached_;   // by agent id
  EdgeHeartbeats edge_;                        // bound sessions: welcomed at Bind, forgotten at Close
};

}  // namespace hetbench::server
