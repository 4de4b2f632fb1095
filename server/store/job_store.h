#pragma once
/// Durable storage of jobs and timing samples.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::server {

/// Not thread-safe: the coordinator calls it from its one event-loop thread.
/// Writes between Begin() and Commit() become durable together at Commit();
/// nothing is acknowledged to a caller before that.
class JobStore {
 public:
  virtual ~JobStore() = default;

  virtual absl::Status Begin() = 0;
  virtual absl::Status Commit() = 0;
  /// Discards writes since Begin().
  virtual absl::Status Rollback() = 0;

  /// Inserts or replaces a job, tasks included.
  virtual absl::Status PutJob(const v1::Job& job) = 0;
  /// Every stored job, oldest first.
  virtual absl::StatusOr<std::vector<v1::Job>> LoadJobs() = 0;

  /// Stores a batch once per (task_id, attempt, seq). Returns false, and
  /// stores nothing, when that key is already stored.
  virtual absl::StatusOr<bool> PutSampleBatch(const v1::SampleBatch& batch) = 0;
  /// The batches of one task attempt, in seq order.
  virtual absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt) = 0;

  /// Power readings, stored once per (task_id, attempt, seq) like samples.
  virtual absl::StatusOr<bool> PutPowerBatch(const v1::PowerBatch& batch) = 0;
  virtual absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt) = 0;
};

}  // namespace hetbench::server
