#pragma once
/// Reads the job store on a thread of its own, over its own connection, so
/// the coordinator's event loop never waits for a read: GetTaskData's pages
/// of one task's stored samples or power readings (a client reading millions
/// of samples; a page is at most 256 batches), and ended jobs and tasks,
/// which are no longer in the loop's memory. A read waits for at most
/// `max_queued` before it, else it is refused with RESOURCE_EXHAUSTED.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "hetbench/v1/coordinator.pb.h"
#include "server/store/job_store.h"

namespace hetbench::server {

class StoreReader {
 public:
  using Done = std::function<void(absl::StatusOr<v1::TaskData>)>;
  static constexpr int kDefaultPageSize = 64;
  static constexpr int kMaxPageSize = 256;

  StoreReader(std::unique_ptr<JobStore> connection, int max_queued = 32);
  ~StoreReader();

  /// Thread-safe. `read` runs on the reader's thread with its connection; a
  /// read refused (RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE
  /// once stopped) gets `refused` at once, on the calling thread.
  void Submit(std::function<void(JobStore&)> read, std::function<void(absl::Status)> refused);
  /// A GetTaskData page. `done` runs on the reader's thread (or at once for
  /// a request refused, as above).
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
  std::deque<std::function<void(JobStore&)>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hetbench::server
