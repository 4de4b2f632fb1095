#pragma once
// A JobStore that forwards to a real one and fails the commits it is told to
// (the store was lost, a disk filled): for tests of what the coordinator does
// after a failed commit. Thread-safe as far as its inner store is.

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/store/job_store.h"

namespace hetbench::testing {

class CommitFailingStore final : public server::JobStore {
 public:
  explicit CommitFailingStore(std::unique_ptr<server::JobStore> inner) : inner_(std::move(inner)) {}

  /// The next `n` commits roll back and fail with UNAVAILABLE.
  void FailCommits(int n) { fail_commits_.store(n); }
  int failed() const { return failed_.load(); }

  absl::StatusOr<std::unique_ptr<server::JobStore>> Connect() override { return inner_->Connect(); }
  absl::Status Begin() override { return inner_->Begin(); }
  absl::Status Commit() override {
    if (fail_commits_.load() > 0) {
      fail_commits_.fetch_sub(1);
      failed_.fetch_add(1);
      (void)inner_->Rollback();
      return absl::UnavailableError("injected: the store went away");
    }
    return inner_->Commit();
  }
  absl::Status Rollback() override { return inner_->Rollback(); }
  absl::Status InsertJob(const v1::Job& job, const std::string& request_id) override {
    return inner_->InsertJob(job, request_id);
  }
  absl::Status PutJobHeader(const v1::Job& job) override { return inner_->PutJobHeader(job); }
  absl::Status PutTask(const v1::Task& task) override { return inner_->PutTask(task); }
  absl::StatusOr<std::vector<v1::Job>> LoadLiveJobs() override { return inner_->LoadLiveJobs(); }
  absl::StatusOr<std::optional<v1::Job>> GetJob(const std::string& id) override { return inner_->GetJob(id); }
  absl::StatusOr<std::optional<v1::Task>> GetTask(const std::string& id) override { return inner_->GetTask(id); }
  absl::StatusOr<std::string> FindRequest(const std::string& id) override { return inner_->FindRequest(id); }
  absl::StatusOr<server::JobPage> ListJobs(const server::JobFilter& f) override { return inner_->ListJobs(f); }
  absl::StatusOr<server::StateCounts> CountByState() override { return inner_->CountByState(); }
  absl::StatusOr<int64_t> MaxJobNumber() override { return inner_->MaxJobNumber(); }
  absl::StatusOr<bool> PutSampleBatch(const v1::SampleBatch& b) override { return inner_->PutSampleBatch(b); }
  absl::StatusOr<std::vector<v1::SampleBatch>> LoadSampleBatches(const std::string& task_id, int attempt,
                                                                 uint64_t from_seq, int max_batches) override {
    return inner_->LoadSampleBatches(task_id, attempt, from_seq, max_batches);
  }
  absl::StatusOr<bool> PutPowerBatch(const v1::PowerBatch& b) override { return inner_->PutPowerBatch(b); }
  absl::StatusOr<std::vector<v1::PowerBatch>> LoadPowerBatches(const std::string& task_id, int attempt,
                                                               uint64_t from_seq, int max_batches) override {
    return inner_->LoadPowerBatches(task_id, attempt, from_seq, max_batches);
  }
  absl::StatusOr<int> PruneRawBatches(double before, int max_jobs) override {
    return inner_->PruneRawBatches(before, max_jobs);
  }
  absl::Status PutDeviceHealth(const std::string& agent_id, const v1::DeviceHealth& h) override {
    return inner_->PutDeviceHealth(agent_id, h);
  }
  absl::StatusOr<std::vector<std::pair<std::string, v1::DeviceHealth>>> LoadDeviceHealth() override {
    return inner_->LoadDeviceHealth();
  }
  absl::Status PutBaseline(const v1::Baseline& b) override { return inner_->PutBaseline(b); }
  absl::StatusOr<int> LatestBaselineVersion(const std::string& name) override {
    return inner_->LatestBaselineVersion(name);
  }
  absl::StatusOr<std::optional<v1::Baseline>> GetBaseline(const std::string& name, int version) override {
    return inner_->GetBaseline(name, version);
  }
  absl::StatusOr<std::vector<v1::Baseline>> ListBaselines(const std::string& name, int limit) override {
    return inner_->ListBaselines(name, limit);
  }

 private:
  std::unique_ptr<server::JobStore> inner_;
  std::atomic<int> fail_commits_{0};
  std::atomic<int> failed_{0};
};

}  // namespace hetbench::testing
