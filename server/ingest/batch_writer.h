#pragma once
/// Stores sample and power batches on a thread of its own, over its own
/// connection to the job store, so the event loop does not pay for encoding,
/// inserting and committing what agents stream.
///
/// Each batch is stored exactly once per (task, attempt, seq) in group
/// commits; after each commit the batches' continuations run together in
/// one closure posted to the event loop, with whether each batch was new
/// (or why it could not be stored: then it is not acknowledged and the agent
/// sends it again). Pending batches are bounded upstream by the IngestGate.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/agent.pb.h"
#include "server/store/job_store.h"

namespace hetbench::server {

class BatchWriter {
 public:
  /// Runs on the event loop with the batch's outcome: true = newly stored,
  /// false = stored before (a duplicate).
  using Then = std::function<void(absl::StatusOr<bool> stored)>;
  /// Hands a closure to the event loop; false when the loop is stopping.
  using Post = std::function<bool(std::function<void()>)>;

  /// `connection`: a connection of its own to the coordinator's store.
  BatchWriter(std::unique_ptr<JobStore> connection, Post post);
  ~BatchWriter();

  /// Thread-safe. `then` runs on the event loop after the batch's commit.
  void Write(std::shared_ptr<const v1::SampleBatch> batch, Then then);
  /// The same for a batch of power readings.
  void Write(std::shared_ptr<const v1::PowerBatch> batch, Then then);
  /// Stores what was handed in, posts its continuations, and stops. Idempotent.
  void Stop();

 private:
  struct Item {
    std::shared_ptr<const v1::SampleBatch> samples;  // one of the two
    std::shared_ptr<const v1::PowerBatch> power;
    Then then;
  };
  void Run();

  std::unique_ptr<JobStore> store_;
  Post post_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetbench::server
