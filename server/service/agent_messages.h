#pragma once
/// AgentMessages: what agents stream up, handled in order per stream —
/// Hello (to AgentSessions), heartbeats (echoed for the clock offset),
/// progress, sample and power batches (stored exactly once through Ingest,
/// acknowledged after their commit) and the TaskDone (judged once the batches
/// sent before it are stored: counts, validity, energy and cost). A malformed
/// message of a running attempt is refused with the field named, and fails
/// the attempt; one for an attempt that is no longer the agent's is fenced.
///
/// Owns: nothing; it routes each message to the parts that own its effects.
///
/// Threading: Check runs at the edge, on the stream's thread (O(message)
/// checks and histogram counts); Handle on the coordinator's loop thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "hetbench/v1/agent.pb.h"
#include "server/ingest/ingest.h"
#include "server/ingest/step_aggregator.h"
#include "server/metrics/metrics.h"
#include "server/scheduler/placer.h"
#include "server/service/agent_sessions.h"
#include "server/service/attempts.h"
#include "server/service/job_table.h"
#include "server/service/session_table.h"
#include "server/service/sinks.h"
#include "server/service/watches.h"

namespace hetbench::server {

/// Answers an agent's heartbeat that carries its clock (agent_ns) with the
/// coordinator's clocks, at once: the agent estimates its offset from the
/// round trip. Thread-safe (the loop, or a gRPC thread at the edge).
void EchoHeartbeat(AgentSink& sink, const v1::Heartbeat& beat, const Clock& clock);

class AgentMessages {
 public:
  /// What the edge found in a message before it reached the loop.
  struct Checked {
    std::string problem;  // non-empty: malformed, with the field named
    Metrics::StepCounts steps;
    BatchSummary summary;  // samples only
  };
  /// The edge's checks of `m`; a sample batch sent as `columns` is read here
  /// in one pass into its durations (the aggregate keeps them) and `summary`
  /// (start times and items are summed, not kept); the columns stay, for the
  /// store. A refused batch keeps no half-read durations.
  static Checked Check(v1::AgentMessage* m, int max_samples_per_batch);

  struct Parts {
    SessionTable* sessions;
    AgentSessions* agents;
    JobTable* jobs;
    Placer* placer;
    Ingest* ingest;
    Attempts* attempts;
    Watches* watches;
    Metrics* metrics;
    const Clock* clock;
  };
  AgentMessages(Parts parts, Attempts::Defer defer) : p_(parts), defer_(std::move(defer)) {}

  /// Handles message `m` of stream `session_id` (opening its session at its first message).
  void Handle(uint64_t session_id, const std::shared_ptr<AgentSink>& sink,
              const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked);

  /// Sends the acks held back since the last call: one ack list per stream
  /// whose agent reads them (Hello.ack_lists). The loop calls it after the
  /// answers of each commit, so a commit costs a stream one write, not one
  /// per batch.
  void ReleaseAcks();

 private:
  /// Acks a stored batch: held back to join the others of its commit when
  /// the agent reads ack lists (`lists`), otherwise sent alone.
  void Acknowledge(const std::shared_ptr<AgentSink>& sink, bool lists, v1::CoordinatorMessage ack);
  void Progress(Session& session, const v1::Progress& p);
  /// Hands a batch of a running attempt to the batch writer; the ack, the
  /// aggregate and the metrics follow its commit (SampleStored).
  void Samples(Session& session, const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked);
  void SampleStored(const std::shared_ptr<AgentSink>& sink, bool ack_lists,
                    const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked,
                    const absl::StatusOr<bool>& stored, bool counted);
  /// Hands a power batch to the batch writer; the ack and the metrics follow its commit.
  void Power(Session& session, const std::shared_ptr<const v1::AgentMessage>& m, const Checked& checked);
  /// A replica of a replicated serving run that ended well: its latencies
  /// join its gang's (Ingest::replicas); with the last replica, the union is
  /// judged and written into every replica's task.
  void MergeReplica(LiveJob& job, v1::Task& task, const v1::TaskDone& d, std::vector<int64_t> latencies,
                    const v1::PhaseResult& phase);
  /// A TaskDone waits while batches of its attempt are with the batch
  /// writer (Ingest::AfterWrites), so the counts it is checked against are complete.
  void Done(uint64_t session_id, Session& session, const std::shared_ptr<const v1::AgentMessage>& m,
            const Checked& checked);
  /// Refuses a malformed message of a running attempt: tells the agent
  /// (Rejected, then Cancel{fenced}), counts it, and fails the attempt.
  void Reject(Session& session, LiveJob& job, v1::Task& task, const std::string& what, uint64_t seq,
              const std::string& reason, const std::string& metric_reason);
  /// The running attempt a message of `session` is for (named by `ack`, the
  /// answer it gets once handled), or null when the message was answered
  /// here: sent again for an attempt that has ended (acked), stale (fenced),
  /// or malformed (`what`, counted as `metric_reason`; the attempt fails).
  v1::Task* Admit(Session& session, const v1::CoordinatorMessage& ack, const Checked& checked, const char* what,
                  const char* metric_reason, LiveJob** job);
  /// Answers a message sent again for an attempt of this session's agent
  /// that has ended, with `ack`, once the batch commits.
  void AnswerSettled(Session& session, v1::CoordinatorMessage ack);

  const Parts p_;
  const Attempts::Defer defer_;
  /// The streams with an ack held back since ReleaseAcks (loop thread).
  HeldSends<v1::CoordinatorMessage> held_;
};

}  // namespace hetbench::server
