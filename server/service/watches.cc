// Watches: a job's watchers get its latest state, coalesced, in the view
// each asked for.
#include <algorithm>
#include <optional>

#include "common/clock.h"
#include "common/names.h"
#include "server/service/coordinator.h"

namespace hetbench::server {

void StripResults(v1::Job* job) {
  for (v1::Task& t : *job->mutable_tasks()) t.clear_result();
}

void Coordinator::WatchJob(std::string job_id, bool summary, std::shared_ptr<WatchSink> sink) {
  const bool posted = PostRequest([this, job_id = std::move(job_id), summary, sink] {
    if (closing_streams_) {
      sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
      return;
    }
    loop_.Defer([this, job_id, summary, sink](const absl::Status&) {
      v1::JobEvent event;
      event.set_message("snapshot");
      LiveJob* live = FindJob(job_id);
      if (live == nullptr) {
        auto stored = store_->GetJob(job_id);
        if (!stored.ok() || !stored->has_value()) {
          sink->Close(grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(JobNotFound(job_id).message())));
          return;
        }
        *event.mutable_job() = **std::move(stored);
      } else {
        *event.mutable_job() = live->job;
      }
      if (summary) StripResults(event.mutable_job());
      const bool ended = IsTerminal(event.job().state());
      sink->Send(std::move(event));
      if (ended) {
        sink->Close(grpc::Status::OK);
      } else {
        watchers_.emplace(job_id, Watcher{sink, summary});
      }
    });
  });
  if (!posted) {
    metrics_->AddRequestShed("WatchJob");
    sink->Close(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(Busy(loop_.depth()).message())));
  }
}

void Coordinator::Notify(LiveJob& live, const std::string& message) {
  live.watch_dirty = true;
  live.watch_message = message;
  watch_dirty_jobs_.insert(JobNumber(live.job.id()));
}

void Coordinator::FlushWatches(bool force) {
  // One event per job per interval, built once and shared by its watchers;
  // each watcher's sink keeps only the latest unsent one.
  const int64_t now = SteadyNowNs();
  const auto interval_ns = static_cast<int64_t>(options_.watch_interval_seconds * 1e9);
  for (auto it = watch_dirty_jobs_.begin(); it != watch_dirty_jobs_.end();) {
    auto j = jobs_.find(*it);
    if (j == jobs_.end()) {
      it = watch_dirty_jobs_.erase(it);
      continue;
    }
    LiveJob& live = j->second;
    const bool terminal =
        IsTerminal(live.job.state()) && std::find(ended_jobs_.begin(), ended_jobs_.end(), *it) != ended_jobs_.end();
    auto range = watchers_.equal_range(live.job.id());
    if (range.first == range.second) {
      live.watch_dirty = false;
      it = watch_dirty_jobs_.erase(it);
      continue;
    }
    if (!force && !terminal && now - live.last_watch_ns < interval_ns) {
      ++it;
      continue;
    }
    // Built once per view that has a watcher.
    std::optional<v1::JobEvent> full, summary;
    for (auto w = range.first; w != range.second; ++w) {
      std::optional<v1::JobEvent>& event = w->second.summary ? summary : full;
      if (!event) {
        event.emplace();
        *event->mutable_job() = live.job;
        if (w->second.summary) StripResults(event->mutable_job());
        event->set_message(live.watch_message);
      }
      w->second.sink->Send(*event);
      if (terminal) w->second.sink->Close(grpc::Status::OK);
    }
    if (terminal) watchers_.erase(live.job.id());
    live.watch_dirty = false;
    live.last_watch_ns = now;
    it = watch_dirty_jobs_.erase(it);
  }
}

}  // namespace hetbench::server
