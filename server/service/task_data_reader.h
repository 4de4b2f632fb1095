#pragma once
/// Serves GetTaskData: pages of one task's stored samples or power readings,
/// read on a thread of its own over its own connection to the job store, so
/// a client reading millions of samples never holds up the event loop (a
/// page is at most 256 batches; a request waits for at most `max_queued`
/// before it).

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/store/job_store.h"

namespace hetbench::server {

class TaskDataReader {
 public:
  using Done = std::function<void(absl::StatusOr<v1::TaskData>)>;
  static constexpr int kDefaultPageSize = 64;
  static constexpr int kMaxPageSize = 256;

  TaskDataReader(std::unique_ptr<JobStore> connection, int max_queued = 32);
  ~TaskDataReader();

  /// Thread-safe. `done` runs on the reader's thread (or at once for a
  /// request refused: bad field, RESOURCE_EXHAUSTED when the queue is full,
  /// UNAVAILABLE once stopped).
  void Read(v1::GetTaskDataRequest request, Done done);
  /// Answers what is queued, then stops. Idempotent.
  void Stop();

  /// One page, on the calling thread (the reader's, or a test's).
  static absl::StatusOr<v1::TaskData> ReadPage(JobStore& store, const v1::GetTaskDataRequest& request);

 private:
  void Run();

  std::unique_ptr<JobStore> store_;
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<v1::GetTaskDataRequest, Done>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetbench::server
