#pragma once
/// AgentSessions: who the coordinator's agents are and whether what they send
/// is still theirs. A Hello binds a stream to its agent (a newer stream of the
/// same agent replaces the older); heartbeats and leases find silent agents;
/// an agent whose stream ended keeps its running attempts for one lease, to
/// resume them on a new stream, and loses them after; a message for an
/// attempt that is no longer the agent's is fenced (refused, and the agent
/// told to stop it).
///
/// Owns: the heartbeat and lease timers, and whether the agents changed since
/// the gauges last looked. The streams themselves are in the SessionTable;
/// what happens to a lost attempt is Attempts'.
///
/// Threading: the coordinator's loop thread only, except the store reads of
/// AnswerFromStore, which run on the ended-jobs StoreReader and answer from
/// there. Time comes from the clock given (timers also from the steady clock,
/// so a simulated clock cannot stall them).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/placer.h"
#include "server/service/attempts.h"
#include "server/service/job_table.h"
#include "server/service/session_table.h"
#include "server/service/watches.h"
#include "server/store/store_reader.h"

namespace hetbench::server {

class AgentSessions {
 public:
  struct Parts {
    SessionTable* sessions;
    JobTable* jobs;
    Placer* placer;
    Attempts* attempts;
    Watches* watches;
    Metrics* metrics;
    const Clock* clock;
  };
  struct Options {
    double heartbeat_seconds = 5.0;  // coordinator -> agent heartbeat period
    double lease_seconds = 15.0;     // an agent silent this long is lost
  };

  AgentSessions(Parts parts, Options options) : p_(parts), options_(options) {}

  /// Where AnswerFromStore reads ended tasks (set once the store is open,
  /// before the loop runs).
  void set_reader(StoreReader* ended_reader) { ended_reader_ = ended_reader; }

  /// The first message of stream `session_id`: checks the Hello (a bad one
  /// closes the stream with the field named), replaces an older stream of the
  /// same agent, welcomes it, and resumes or fences the attempts it lists.
  void Hello(uint64_t session_id, Session& session, const v1::Hello& hello);
  /// Ends stream `session_id`. Its agent's running attempts stay its own
  /// until the lease runs out (detached), so a reconnecting agent resumes them.
  void Drop(uint64_t session_id, const std::string& reason);
  /// Merges the heartbeats handled at the edge (every call); then the
  /// coordinator's heartbeat to quiet agents, and at most every 250 ms
  /// silent streams dropped and detached agents past their deadline losing
  /// their attempts.
  void Tick();
  /// A message of `session` was seen (its last_seen set): the last-seen
  /// gauge moves, at most once a second per agent.
  void Seen(Session& session);
  /// Connected agents, then detached ones with their resume deadline.
  std::vector<v1::AgentInfo> List() const;
  /// Whether agents connected or left since the last call (gauges).
  bool TakeChanged() { return std::exchange(changed_, false); }

  /// The task `task_id` when it is running attempt `attempt` on `agent_id`.
  v1::Task* OwnedTask(const std::string& agent_id, const std::string& task_id, int attempt, LiveJob** job);
  /// OwnedTask for a message of `session`; a stale attempt is refused,
  /// counted and answered with a fenced Cancel.
  v1::Task* FencedTask(Session& session, const std::string& task_id, int attempt, LiveJob** job);
  /// Whether `agent_id` ran attempt `attempt` of `task_id` and it has ended,
  /// as far as memory knows: kAskStore when its job has left memory.
  enum class Settled { kYes, kNo, kAskStore };
  Settled SettledInMemory(const std::string& agent_id, const std::string& task_id, int attempt) const;
  /// For a message of an attempt whose job has left memory: reads the task
  /// off the loop, then sends `if_settled` (when given) if this agent's
  /// attempt ended, else a fenced Cancel (counted as stale).
  void AnswerFromStore(std::shared_ptr<AgentSink> sink, const std::string& agent_id, const std::string& task_id,
                       int attempt, std::optional<v1::CoordinatorMessage> if_settled);

  /// "cpu", "gpu", ... for a sensor's device on this agent; "node" for node-level sensors.
  static std::string SensorDeviceKind(const v1::Hello& hello, const std::string& device_id);

 private:
  /// Re-binds the attempts a reconnecting agent lists to its new session;
  /// re-queues its leased attempts it does not list; fences the rest.
  void Resume(Session& session, const v1::Hello& hello);
  /// Frees every device leased to `agent_id` except for the tasks in `keep`,
  /// and loses their attempts.
  void LoseTasks(const std::string& agent_id, const std::string& detail, bool restart,
                 const std::vector<std::string>& keep = {});
  /// Removes the metric series of an agent no longer connected nor waited for.
  void Forget(const std::string& agent_id);
  /// What `get agents` shows of an agent: its Hello and the devices it holds.
  v1::AgentInfo Describe(const std::string& agent_id, const v1::Hello& hello) const;

  const Parts p_;
  const Options options_;
  StoreReader* ended_reader_ = nullptr;
  bool changed_ = true;
  int64_t last_heartbeat_ns_ = 0;
  int64_t last_tick_ns_ = 0;       // clock
  int64_t last_tick_real_ns_ = 0;  // SteadyNowNs
};

}  // namespace hetbench::server
