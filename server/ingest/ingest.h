#pragma once
/// Ingest: what the coordinator holds of each running attempt's stream, and
/// the path its batches take to the store.
///
/// Owns: the batch writer (sample and power batches are stored on its thread
/// and connection, never on the loop's), each running attempt's timing
/// aggregate (step_aggregator.h) and power readings, the last reading per
/// sensor (for the power and energy metrics), the count of batches still
/// with the writer, with what waits for them (a TaskDone), and the ended
/// replicas of replicated serving runs waiting for the rest of their gang
/// (replica_merge.h: up to 8 bytes per query until the gang's last replica).
///
/// An attempt is current from Begin until End or the next Begin of its task;
/// a batch counts (aggregate, readings) only when it was newly stored for the
/// current attempt: a duplicate, or a batch of an attempt lost meanwhile,
/// keeps its stored rows and nothing else.
///
/// Memory: per running attempt its aggregate (bounded, step_aggregator.h) and
/// its power readings (24 bytes each: the energy at the task's end needs them
/// all, as the store holds them).
///
/// Threading: the event loop's thread only. The writer's continuations are
/// posted to the loop through `post`; they run there.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/agent.pb.h"
#include "server/ingest/batch_writer.h"
#include "server/ingest/replica_merge.h"
#include "server/ingest/step_aggregator.h"
#include "server/store/job_store.h"

namespace hetbench::server {

/// What one power batch adds to the metrics: the energy between consecutive
/// readings of its sensor, and the latest power (NaN when it has none).
struct PowerDelta {
  double joules = 0;
  double watts = 0;
};

class Ingest {
 public:
  /// What a running attempt's stream added up to, taken at its end.
  struct Collected {
    TaskAggregate samples;
    std::vector<v1::PowerBatch> power;  // newly stored batches, in arrival order
  };
  /// After a batch's commit, on the loop: whether it was new (or why it could
  /// not be stored: then it is not acknowledged), and whether it counted for
  /// the current attempt.
  using SamplesStored = std::function<void(const absl::StatusOr<bool>& stored, bool counted)>;
  using PowerStored = std::function<void(const absl::StatusOr<bool>& stored, bool counted, PowerDelta delta)>;

  Ingest() = default;
  ~Ingest();

  /// Starts the writer on `connection` (a connection of its own to the store).
  void Start(std::unique_ptr<JobStore> connection, BatchWriter::Post post);
  /// Stores what was handed in, posts its continuations and stops. Idempotent.
  void Stop();

  /// `attempt` of `task_id` starts: it counts from nothing.
  void Begin(const std::string& task_id, int attempt);
  /// A running attempt reloaded at start-up, from its stored batches.
  void Restore(const std::string& task_id, int attempt, const std::vector<v1::SampleBatch>& samples,
               std::vector<v1::PowerBatch> power);
  /// The task's attempt is over: what it held is dropped.
  void End(const std::string& task_id);
  /// The attempt's aggregate and readings, moved out (empty when it is not
  /// the current attempt). The attempt stays current until End.
  Collected Take(const std::string& task_id, int attempt);

  /// Hands a sample batch to the writer; `summary` is its SummarizeBatch,
  /// made at the edge. `then` runs on the loop after the commit, once the
  /// aggregate has it.
  void Write(std::shared_ptr<const v1::SampleBatch> batch, const BatchSummary& summary, SamplesStored then);
  /// Hands a power batch to the writer; `then` as above, with its metrics delta.
  void Write(std::shared_ptr<const v1::PowerBatch> batch, PowerStored then);
  /// Runs `fn` once every batch of `task_id`'s `attempt` handed in so far is
  /// stored (right after the last one's `then`); false (and `fn` is not kept)
  /// when none is with the writer: the caller goes on now. One `fn` per attempt.
  bool AfterWrites(const std::string& task_id, int attempt, std::function<void()> fn);
  /// No batch with the writer and nothing waiting for one (tests, RunSync).
  bool settled() const { return pending_.empty() && waiting_.empty(); }
  /// Running attempts held.
  size_t attempts() const { return attempts_.size(); }
  /// A replicated serving run's replicas waiting for the rest of their gang.
  ReplicaMerges& replicas() { return replicas_; }

 private:
  struct LastReading {
    int64_t t_ns = 0;
    double watts = 0, joules = 0;
  };
  struct Attempt {
    int attempt = 0;
    TaskAggregate samples;
    std::vector<v1::PowerBatch> power;
    std::map<std::string, LastReading> last_by_sensor;  // a new attempt's clock restarts: from scratch
  };
  /// The attempt's state when it is the current one, else null.
  Attempt* Current(const std::string& task_id, int attempt);
  /// Readings of a newly stored batch into its sensor's last reading.
  static PowerDelta Advance(Attempt& a, const v1::PowerBatch& b);
  /// One batch of the attempt `key` is stored: counts it down and runs what waited.
  void Written(const std::string& key);

  std::unique_ptr<BatchWriter> writer_;
  std::map<std::string, Attempt> attempts_;              // by task id
  ReplicaMerges replicas_;
  std::map<std::string, int> pending_;                   // batches with the writer, by "task/attempt"
  std::map<std::string, std::function<void()>> waiting_;  // AfterWrites, by "task/attempt"
};

}  // namespace hetbench::server
