#include "server/service/watches.h"

#include <optional>
#include <utility>
#include <vector>

#include "common/names.h"

namespace hetbench::server {

void StripResults(v1::Job* job) {
  for (v1::Task& t : *job->mutable_tasks()) t.clear_result();
}

Watches::Watches(const Clock* clock, double interval_seconds)
    : clock_(clock), interval_ns_(static_cast<int64_t>(interval_seconds * 1e9)) {}

void Watches::Add(const std::string& job_id, bool summary, std::shared_ptr<WatchSink> sink) {
  watchers_.emplace(job_id, Watcher{std::move(sink), summary});
}

void Watches::Changed(const std::string& job_id, const std::string& message) {
  pacing_[job_id].message = message;
  changed_.insert(job_id);
}

void Watches::Flush(const JobView& jobs, const Defer& defer) {
  const int64_t now = clock_->MonotonicNowNs();
  for (auto it = changed_.begin(); it != changed_.end();) {
    const std::string job_id = *it;
    const v1::Job* job = jobs.find(job_id);
    auto range = watchers_.equal_range(job_id);
    if (job == nullptr || range.first == range.second) {  // gone, or nobody watches
      it = changed_.erase(it);
      continue;
    }
    Pacing& pacing = pacing_[job_id];
    const bool ended = IsTerminal(job->state()) && jobs.ended_now(job_id);
    if (!ended && pacing.sent_before && now - pacing.last_sent_ns < interval_ns_) {
      ++it;
      continue;
    }
    // Built once per view that has a watcher, now: later batches may change
    // the live job before this one commits.
    std::shared_ptr<v1::JobEvent> full, summary;
    std::vector<std::pair<Watcher, std::shared_ptr<v1::JobEvent>>> sends;
    for (auto w = range.first; w != range.second; ++w) {
      std::shared_ptr<v1::JobEvent>& event = w->second.summary ? summary : full;
      if (!event) {
        event = std::make_shared<v1::JobEvent>();
        *event->mutable_job() = *job;
        if (w->second.summary) StripResults(event->mutable_job());
        event->set_message(pacing.message);
      }
      sends.emplace_back(w->second, event);
    }
    if (ended) watchers_.erase(job_id);  // closed after the commit
    defer([this, job_id, ended, message = pacing.message, sends = std::move(sends)](const absl::Status& commit) {
      if (!commit.ok()) {
        // Rolled back: the state after the reload goes out instead.
        if (ended && !closed_) {
          for (const auto& [watcher, event] : sends) watchers_.emplace(job_id, watcher);
        }
        Changed(job_id, message);
        return;
      }
      for (const auto& [watcher, event] : sends) {
        watcher.sink->Send(*event);
        if (ended) watcher.sink->Close(grpc::Status::OK);
      }
    });
    pacing.sent_before = true;
    pacing.last_sent_ns = now;
    it = changed_.erase(it);
  }
}

void Watches::Forget(const std::string& job_id) {
  changed_.erase(job_id);
  pacing_.erase(job_id);
}

void Watches::CloseAll(const grpc::Status& status) {
  for (auto& [job_id, watcher] : watchers_) watcher.sink->Close(status);
  watchers_.clear();
  closed_ = true;
}

}  // namespace hetbench::server
