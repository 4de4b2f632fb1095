#include "server/store/store_reader.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hetbench::server {

StoreReader::StoreReader(std::unique_ptr<JobStore> connection, int max_queued)
    : store_(std::move(connection)), max_queued_(static_cast<size_t>(max_queued)) {
  thread_ = std::thread([this] { Run(); });
}

StoreReader::~StoreReader() { Stop(); }

void StoreReader::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StoreReader::Submit(std::function<void(JobStore&)> read, std::function<void(absl::Status)> refused) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) {
      refused(absl::UnavailableError("coordinator shutting down"));
      return;
    }
    if (queue_.size() >= max_queued_) {
      refused(absl::ResourceExhaustedError(absl::StrCat(queue_.size(), " store reads are queued; retry in a second")));
      return;
    }
    queue_.push_back(std::move(read));
  }
  cv_.notify_one();
}

void StoreReader::Read(v1::GetTaskDataRequest request, Done done) {
  auto shared = std::make_shared<Done>(std::move(done));
  Submit([request = std::move(request), shared](JobStore& store) { (*shared)(ReadPage(store, request)); },
         [shared](absl::Status why) { (*shared)(std::move(why)); });
}

void StoreReader::Run() {
  for (;;) {
    std::function<void(JobStore&)> next;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    next(*store_);
  }
}

absl::StatusOr<v1::TaskData> StoreReader::ReadPage(JobStore& store, const v1::GetTaskDataRequest& r) {
  if (r.task_id().empty()) return absl::InvalidArgumentError("task_id: empty; name the task, e.g. job-000001-t0");
  if (r.kind() != v1::GetTaskDataRequest::KIND_SAMPLES && r.kind() != v1::GetTaskDataRequest::KIND_POWER) {
    return absl::InvalidArgumentError("kind: say KIND_SAMPLES or KIND_POWER");
  }
  if (r.page_size() < 0 || r.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size = ", r.page_size(), ": use 1 to ", kMaxPageSize, " (0 = ", kDefaultPageSize, ")"));
  }
  uint64_t from_seq = 0;
  if (!r.page_token().empty() && !absl::SimpleAtoi(r.page_token(), &from_seq)) {
    return absl::InvalidArgumentError("page_token: not a token this coordinator gave; start without one");
  }
  const int size = r.page_size() == 0 ? kDefaultPageSize : r.page_size();
  auto task = store.GetTask(r.task_id());
  if (!task.ok()) return task.status();
  if (!task->has_value()) return absl::NotFoundError(absl::StrCat("task ", r.task_id(), " not found"));
  v1::TaskData out;
  out.set_task_id(r.task_id());
  out.set_attempt((*task)->attempt());
  if ((*task)->attempt() <= 0) return out;  // never ran
  // One more than the page: whether another follows, and where.
  if (r.kind() == v1::GetTaskDataRequest::KIND_SAMPLES) {
    auto batches = store.LoadSampleBatches(r.task_id(), (*task)->attempt(), from_seq, size + 1);
    if (!batches.ok()) return batches.status();
    for (size_t i = 0; i < batches->size(); ++i) {
      if (static_cast<int>(i) == size) {
        out.set_next_page_token(absl::StrCat((*batches)[i].seq()));
        break;
      }
      *out.add_samples() = std::move((*batches)[i]);
    }
  } else {
    auto batches = store.LoadPowerBatches(r.task_id(), (*task)->attempt(), from_seq, size + 1);
    if (!batches.ok()) return batches.status();
    for (size_t i = 0; i < batches->size(); ++i) {
      if (static_cast<int>(i) == size) {
        out.set_next_page_token(absl::StrCat((*batches)[i].seq()));
        break;
      }
      *out.add_power() = std::move((*batches)[i]);
    }
  }
  return out;
}

}  // namespace hetbench::server
