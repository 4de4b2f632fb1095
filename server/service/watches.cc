#include "server/service/watches.h"

#include <optional>

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

void Watches::Flush(const JobView& jobs) {
  const int64_t now = clock_->MonotonicNowNs();
  for (auto it = changed_.begin(); it != changed_.end();) {
    const std::string& job_id = *it;
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
    // Built once per view that has a watcher.
    std::optional<v1::JobEvent> full, summary;
    for (auto w = range.first; w != range.second; ++w) {
      std::optional<v1::JobEvent>& event = w->second.summary ? summary : full;
      if (!event) {
        event.emplace();
        *event->mutable_job() = *job;
        if (w->second.summary) StripResults(event->mutable_job());
        event->set_message(pacing.message);
      }
      w->second.sink->Send(*event);
      if (ended) w->second.sink->Close(grpc::Status::OK);
    }
    if (ended) watchers_.erase(job_id);
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
