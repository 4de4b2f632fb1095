// The coordinator's lifecycle, its client API and job state (watches: watches.cc).
#include "server/service/coordinator.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/job_spec.h"
#include "common/log.h"
#include "common/names.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
constexpr size_t kMaxRequestIdLength = 128;
constexpr int kMaxPageSize = 1000;

// An id as errors quote it: whole up to 64 characters, else its start and
// length (an id is the caller's input: never echoed whole).
std::string QuotedId(const std::string& id) {
  if (id.size() <= 64) return absl::StrCat("'", id, "'");
  return absl::StrCat("'", id.substr(0, 32), "...' (", id.size(), " characters)");
}

}  // namespace

absl::Status Coordinator::JobNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job ", QuotedId(id), " not found; list jobs with `hetbench get jobs`"));
}

absl::StatusOr<v1::Job> Coordinator::StoredJob(JobStore& store, const std::string& job_id) {
  auto stored = store.GetJob(job_id);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return JobNotFound(job_id);
  return **std::move(stored);
}

absl::Status Coordinator::Busy(size_t depth) {
  return absl::ResourceExhaustedError(absl::StrCat("coordinator busy: ", depth,
                                                   " requests queued; retry in 1 s (a submit with the same request "
                                                   "id is safe to retry)"));
}

Coordinator::Coordinator(JobStore* store, Metrics* metrics, const Clock* clock, CoordinatorOptions options)
    : store_(store),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      loop_(store, metrics, EventLoopOptions{options.max_queued_requests, 0.1}) {}

Coordinator::~Coordinator() { Stop(); }

absl::Status Coordinator::Start() {
  if (auto s = LoadFromStore(); !s.ok()) return s;
  auto connection = store_->Connect();
  if (!connection.ok()) return connection.status();
  ingest_.Start(std::move(*connection), [this](std::function<void()> fn) { return loop_.Post(std::move(fn)); });
  for (auto* reader : {&task_data_reader_, &ended_reader_}) {
    auto reader_connection = store_->Connect();
    if (!reader_connection.ok()) return reader_connection.status();
    // Reads of ended jobs are single indexed rows: many may queue.
    *reader = std::make_unique<StoreReader>(std::move(*reader_connection), reader == &ended_reader_ ? 1024 : 32);
  }
  loop_.Start(EventLoop::Hooks{[this] { EndOfBatch(); },
                               [this](const absl::Status&) {
                                 if (auto s = LoadFromStore(); !s.ok()) LogError(kLog, "reload failed: ", s.ToString());
                               },
                               [this] { AfterCommit(); }});
  return absl::OkStatus();
}

absl::Status Coordinator::LoadFromStore() {
  auto jobs = store_->LoadLiveJobs();
  if (!jobs.ok()) return jobs.status();
  auto counts = store_->CountByState();
  if (!counts.ok()) return counts.status();
  auto max_number = store_->MaxJobNumber();
  if (!max_number.ok()) return max_number.status();
  jobs_.Reset(*std::move(jobs), *counts, *max_number);
  if (auto s = store_->Begin(); !s.ok()) return s;
  int held = 0, ended = 0;
  const int64_t deadline = clock_->MonotonicNowNs() + static_cast<int64_t>(options_.lease_seconds * 1e9);
  for (auto& [number, live] : jobs_.live()) {
    v1::Job& job = live.job;
    // A task that was running when the previous coordinator stopped may still
    // be running on its agent: it stays leased to it for one lease, for the
    // agent to reconnect and resume it (ResumeTasks); else Tick re-queues it
    // as interrupted by the restart.
    for (v1::Task& task : *job.mutable_tasks()) {
      if (task.state() != v1::TASK_STATE_RUNNING) continue;
      if (job.state() == v1::JOB_STATE_CANCELLED || task.agent_id().empty()) {
        ++ended;
        task.set_state(job.state() == v1::JOB_STATE_CANCELLED ? v1::TASK_STATE_CANCELLED : v1::TASK_STATE_QUEUED);
        task.set_error(absl::StrCat("attempt ", task.attempt(), " interrupted by a coordinator restart"));
        task.clear_agent_id();
        task.clear_device_id();
        jobs_.MarkTask(live, task);
        continue;
      }
      ++held;
      placer_.Lease(task);
      if (auto s = RebuildAggregate(task); !s.ok()) {
        (void)store_->Rollback();
        return s;
      }
      if (!sessions_.Connected(task.agent_id())) {  // (a reload after a failed commit keeps its sessions)
        sessions_.Detach(task.agent_id(), Detached{deadline, "was cut off by a coordinator restart", /*restart=*/true});
      }
    }
    if (live.header_dirty || !live.dirty_tasks.empty()) attempts_.Recompute(live);
  }
  EndOfBatch();  // writes what the load changed
  if (auto s = store_->Commit(); !s.ok()) return s;
  jobs_.DropEnded();  // (a cancelled job whose last task was just ended)
  LogInfo(kLog, "loaded ", jobs_.size(), " live jobs from the store (", *max_number, " jobs in all)",
          held > 0 ? absl::StrCat("; ", held, " running task(s) wait ", options_.lease_seconds,
                                  " s for their agents to resume them")
                   : "",
          ended > 0 ? absl::StrCat("; ", ended, " task(s) ended by the restart") : "");
  placer_.Request();
  return absl::OkStatus();
}

absl::Status Coordinator::RebuildAggregate(const v1::Task& task) {
  auto samples = store_->LoadSampleBatches(task.id(), task.attempt());
  if (!samples.ok()) return samples.status();
  auto power = store_->LoadPowerBatches(task.id(), task.attempt());
  if (!power.ok()) return power.status();
  ingest_.Restore(task.id(), task.attempt(), *samples, *std::move(power));
  return absl::OkStatus();
}

void Coordinator::RunSync(std::function<void()> fn) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  for (;;) {
    bool settled = true;
    loop_.RunSync([this, &settled] { settled = ingest_.settled(); });
    if (settled || absl::Now() > until) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  loop_.RunSync(std::move(fn));
}

void Coordinator::Stop() {
  // The writer's last continuations run on the loop's last batches.
  ingest_.Stop();
  if (task_data_reader_) task_data_reader_->Stop();
  if (ended_reader_) ended_reader_->Stop();
  loop_.Stop();
}

void Coordinator::GetTaskData(v1::GetTaskDataRequest request, std::function<void(absl::StatusOr<v1::TaskData>)> done) {
  if (!task_data_reader_) {
    done(absl::UnavailableError("coordinator not started"));
    return;
  }
  task_data_reader_->Read(std::move(request), std::move(done));
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
      LiveJob* live = jobs_.Find(job_id);
      if (live == nullptr) {
        // Ended (jobs leave memory once their end is committed) or unknown:
        // the snapshot is all there is, read off the loop.
        ended_reader_->Submit(
            [job_id, summary, sink, event](JobStore& store) mutable {
              auto stored = StoredJob(store, job_id);
              if (!stored.ok()) {
                sink->Close(grpc::Status(static_cast<grpc::StatusCode>(stored.status().code()),
                                         std::string(stored.status().message())));
                return;
              }
              *event.mutable_job() = *std::move(stored);
              if (summary) StripResults(event.mutable_job());
              sink->Send(std::move(event));
              sink->Close(grpc::Status::OK);
            },
            [sink](const absl::Status& refused) {
              sink->Close(grpc::Status(static_cast<grpc::StatusCode>(refused.code()), std::string(refused.message())));
            });
        return;
      }
      *event.mutable_job() = live->job;
      if (summary) StripResults(event.mutable_job());
      const bool ended = IsTerminal(event.job().state());
      sink->Send(std::move(event));
      if (ended) {
        sink->Close(grpc::Status::OK);
      } else {
        watches_.Add(job_id, summary, sink);
      }
    });
  });
  if (!posted) {
    metrics_->AddRequestShed("WatchJob");
    sink->Close(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(Busy(loop_.depth()).message())));
  }
}

void Coordinator::CloseStreams() {
  RunSync([this] {
    closing_streams_ = true;
    sessions_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; reconnect"));
    watches_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
  });
}

uint64_t Coordinator::NewSessionId() { return next_session_.fetch_add(1); }

// ---------------------------------------------------------------- the loop's hooks

void Coordinator::EndOfBatch() {
  Tick();
  if (placer_.TakeDue(clock_->MonotonicNowNs())) Schedule();
  jobs_.WriteChanged(*store_);  // what this batch changed, row by row
  // Raw batches past their retention, a few jobs at a time.
  const int64_t now = clock_->MonotonicNowNs();
  if (options_.raw_retention_seconds > 0 && now - last_prune_ns_ > 1'000'000'000) {
    last_prune_ns_ = now;
    auto pruned = store_->PruneRawBatches(clock_->SystemNowSeconds() - options_.raw_retention_seconds, 8);
    if (pruned.ok() && *pruned > 0) metrics_->AddJobsPruned(*pruned);
  }
}

void Coordinator::FlushWatches(bool force) {
  watches_.Flush(force, Watches::JobView{[this](const std::string& job_id) -> const v1::Job* {
                                           const LiveJob* live = jobs_.Find(job_id);
                                           return live == nullptr ? nullptr : &live->job;
                                         },
                                         [this](const std::string& job_id) { return jobs_.EndedNow(job_id); }});
}

void Coordinator::AfterCommit() {
  FlushWatches(/*force=*/false);
  // Ended jobs leave memory once their end is stored; later reads go to the store.
  jobs_.EvictEnded([this](const v1::Job& job) {
    for (const v1::Task& t : job.tasks()) ingest_.End(t.id());
    watches_.Forget(job.id());
  });
  UpdateGauges();
}

bool Coordinator::PostRequest(std::function<void()> fn) { return loop_.Post(std::move(fn), /*sheddable=*/true); }

// ---------------------------------------------------------------- client API

void Coordinator::SubmitJob(v1::JobSpec spec, JobCallback done) {
  SubmitJob(std::move(spec), "", absl::InfiniteFuture(), [done = std::move(done)](absl::StatusOr<Submitted> s) {
    if (!s.ok()) {
      done(s.status());
    } else {
      done(std::move(s->job));
    }
  });
}

void Coordinator::SubmitJob(v1::JobSpec spec, std::string request_id, absl::Time deadline,
                            std::function<void(absl::StatusOr<Submitted>)> done) {
  // The edge: work proportional to the spec's size happens here, on the
  // caller's thread, never on the loop.
  if (request_id.size() > kMaxRequestIdLength ||
      std::any_of(request_id.begin(), request_id.end(), [](char c) { return c < 0x21 || c > 0x7e; })) {
    done(absl::InvalidArgumentError(absl::StrCat(
        "request_id: ", request_id.size(), " characters: use 1 to 128 printable ASCII characters without spaces")));
    return;
  }
  v1::JobSpec effective = WithDefaults(std::move(spec));
  if (absl::Status s = ValidateJobSpec(effective); !s.ok()) {
    metrics_->AddSpecRefused();
    done(s);
    return;
  }
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<Submitted>)>>(std::move(done));
  const bool posted = PostRequest(
      [this, effective = std::move(effective), request_id = std::move(request_id), deadline, shared_done]() mutable {
        if (absl::Now() > deadline) {
          // The client gave up waiting: creating the job now would leave one it never heard of.
          (*shared_done)(absl::DeadlineExceededError(
              "the request waited past its deadline in the coordinator's queue and was not carried out; nothing "
              "was created; submit again (with the same request id)"));
          return;
        }
        CreateJob(std::move(effective), request_id, std::move(*shared_done));
      });
  if (!posted) {
    metrics_->AddRequestShed("SubmitJob");
    (*shared_done)(Busy(loop_.depth()));
  }
}

void Coordinator::CreateJob(v1::JobSpec effective, const std::string& request_id,
                            std::function<void(absl::StatusOr<Submitted>)> done) {
  if (!request_id.empty()) {
    std::string existing;
    if (auto live = jobs_.JobForRequest(request_id)) {
      existing = *live;
    } else {
      auto found = store_->FindRequest(request_id);
      if (!found.ok()) {
        done(found.status());
        return;
      }
      existing = *found;
    }
    if (!existing.empty()) {
      loop_.Defer([this, existing, done = std::move(done)](const absl::Status&) {
        GetJob(existing, [done](absl::StatusOr<v1::Job> job) {
          if (!job.ok()) {
            done(job.status());
          } else {
            done(Submitted{*std::move(job), /*existing=*/true});
          }
        });
      });
      return;
    }
  }
  const v1::Job& job = jobs_.Create(std::move(effective), request_id, clock_->SystemNowSeconds()).job;
  const std::string id = job.id();
  if (absl::Status s = store_->InsertJob(job, request_id); !s.ok()) {
    LogError(kLog, "storing ", id, ": ", s.ToString());  // the commit fails too and reloads
  }
  LogInfo(kLog, "accepted ", id, " (", absl::StrJoin(job.spec().models(), ", "), "; ", job.tasks_size(), " tasks)");
  placer_.Request();
  loop_.Defer([this, id, done = std::move(done)](const absl::Status& commit) {
    if (!commit.ok()) {
      done(absl::UnavailableError(absl::StrCat("job not stored: ", commit.message(), "; submit again")));
      return;
    }
    LiveJob* live = jobs_.Find(id);
    if (live == nullptr) {
      GetJob(id, [done](absl::StatusOr<v1::Job> job) {  // ended within its first batch
        if (!job.ok()) {
          done(job.status());
        } else {
          done(Submitted{*std::move(job), false});
        }
      });
      return;
    }
    done(Submitted{live->job, false});
  });
}

void Coordinator::GetJob(std::string job_id, JobCallback done) {
  // Reads answer after the commit of their batch, so they never show a state
  // that could still be rolled back. An ended job is read from the store.
  auto shared_done = std::make_shared<JobCallback>(std::move(done));
  const bool posted = PostRequest([this, job_id = std::move(job_id), shared_done] {
    loop_.Defer([this, job_id, shared_done](const absl::Status&) {
      if (LiveJob* live = jobs_.Find(job_id)) {
        (*shared_done)(live->job);
        return;
      }
      // Ended or unknown: read off the loop (its end is committed already).
      ended_reader_->Submit([job_id, shared_done](JobStore& store) { (*shared_done)(StoredJob(store, job_id)); },
                            [shared_done](absl::Status refused) { (*shared_done)(std::move(refused)); });
    });
  });
  if (!posted) {
    metrics_->AddRequestShed("GetJob");
    (*shared_done)(Busy(loop_.depth()));
  }
}

void Coordinator::CancelJob(std::string job_id, JobCallback done) {
  auto shared_done = std::make_shared<JobCallback>(std::move(done));
  const bool posted = PostRequest([this, job_id = std::move(job_id), shared_done] {
    JobCallback& done = *shared_done;
    LiveJob* live = jobs_.Find(job_id);
    if (live == nullptr) {  // ended or unknown: read off the loop
      ended_reader_->Submit(
          [job_id, shared_done](JobStore& store) {
            auto stored = StoredJob(store, job_id);
            if (!stored.ok()) {
              (*shared_done)(stored.status());
              return;
            }
            (*shared_done)(absl::FailedPreconditionError(absl::StrCat(
                "job ", QuotedId(job_id), " already ended as ", JobStateName(stored->state()), "; nothing to cancel")));
          },
          [shared_done](absl::Status refused) { (*shared_done)(std::move(refused)); });
      return;
    }
    v1::Job* job = &live->job;
    job->set_state(v1::JOB_STATE_CANCELLED);
    job->set_finished_unix_seconds(clock_->SystemNowSeconds());
    job->set_error("cancelled by user");
    jobs_.MarkHeader(*live);
    bool running = false;
    for (v1::Task& task : *job->mutable_tasks()) {
      if (task.state() == v1::TASK_STATE_QUEUED) {
        task.set_state(v1::TASK_STATE_CANCELLED);
        task.clear_pending_reason();
        jobs_.MarkTask(*live, task);
      } else if (task.state() == v1::TASK_STATE_RUNNING) {
        running = true;
        // The device stays leased until the agent confirms the work stopped.
        if (const Session* session = sessions_.OfAgent(task.agent_id())) {
          v1::CoordinatorMessage msg = CancelMessage(task.id(), task.attempt(), "job cancelled by user", false);
          loop_.Defer([sink = session->sink, msg](const absl::Status&) { sink->Send(msg); });
        }
      }
    }
    if (!running) jobs_.EndAfterCommit(*live);
    watches_.Changed(live->job.id(), "job cancelled");
    v1::Job snapshot = *job;
    loop_.Defer([snapshot = std::move(snapshot), shared_done](const absl::Status& commit) {
      if (!commit.ok()) {
        (*shared_done)(absl::UnavailableError(absl::StrCat("cancel not stored: ", commit.message(), "; try again")));
        return;
      }
      (*shared_done)(snapshot);
    });
  });
  if (!posted) {
    metrics_->AddRequestShed("CancelJob");
    (*shared_done)(Busy(loop_.depth()));
  }
}

void Coordinator::ListJobs(JobFilter filter, std::function<void(absl::StatusOr<JobPage>)> done) {
  if (filter.page_size <= 0) filter.page_size = 50;
  filter.page_size = std::min(filter.page_size, kMaxPageSize);
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<JobPage>)>>(std::move(done));
  if (!ended_reader_) {
    (*shared_done)(absl::UnavailableError("coordinator not started"));
    return;
  }
  // One page of committed rows, read off the loop; then, on the loop, live
  // jobs' current progress laid over it. A job that ended between the two
  // keeps its row as the page read it.
  ended_reader_->Submit(
      [this, filter = std::move(filter), shared_done](JobStore& store) {
        auto page = std::make_shared<absl::StatusOr<JobPage>>(store.ListJobs(filter));
        if (!page->ok() || (*page)->jobs.empty()) {
          (*shared_done)(std::move(*page));
          return;
        }
        const bool posted = PostRequest([this, page, shared_done] {
          loop_.Defer([this, page, shared_done](const absl::Status&) {  // committed state only
            for (v1::Job& job : (*page)->jobs) {
              if (LiveJob* live = jobs_.Find(job.id())) {
                job = live->job;
                StripResults(&job);
              }
            }
            (*shared_done)(std::move(*page));
          });
        });
        if (!posted) {
          metrics_->AddRequestShed("ListJobs");
          (*shared_done)(Busy(loop_.depth()));
        }
      },
      [shared_done](absl::Status refused) { (*shared_done)(std::move(refused)); });
}

// ---------------------------------------------------------------- job state

void Coordinator::UpdateGauges() {
  // O(live tasks + agents): run when a count may have changed, at most every
  // 20 ms (the loop's tick brings a skipped update within 100 ms).
  const int64_t now = SteadyNowNs();
  gauges_dirty_ = jobs_.TakeCountsChanged() || gauges_dirty_;
  if (!gauges_dirty_ || now - last_gauges_ns_ < 20'000'000) return;
  gauges_dirty_ = false;
  last_gauges_ns_ = now;
  std::map<v1::JobState, int64_t> jobs;
  std::map<v1::TaskState, int64_t> tasks;
  jobs_.Count(&jobs, &tasks);
  metrics_->SetJobsByState(jobs);
  metrics_->SetTasksByState(tasks);
  std::map<std::string, int64_t> agents;
  sessions_.ForEachConnected([&](const std::string&, const Session& session) {
    std::set<std::string> kinds;
    for (const v1::Device& d : session.hello.devices()) kinds.insert(DeviceKindName(d.kind()));
    for (const std::string& k : kinds) ++agents[k];
  });
  metrics_->SetAgentsByKind(agents);
  metrics_->SetLiveJobs(static_cast<int64_t>(jobs_.size()), static_cast<int64_t>(loop_.depth()));
}

// ---------------------------------------------------------------- the scheduling pass

void Coordinator::Schedule() {
  std::vector<const v1::Hello*> agents;
  agents.reserve(sessions_.connected());
  sessions_.ForEachConnected([&](const std::string&, const Session& session) { agents.push_back(&session.hello); });
  SchedulingPass pass = placer_.BeginPass(agents);
  const double now = clock_->SystemNowSeconds();
  for (auto& [number, live] : jobs_.live()) {  // oldest first: the oldest waiting gang holds first
    if (IsTerminal(live.job.state())) continue;
    const JobPlacement placed = placer_.PlaceJob(live.job, pass, now);
    for (const TaskStart& start : placed.starts) attempts_.Start(live, start);
    attempts_.FailEach(live, placed.failed);  // a gang past its timeout: every rank with its own error
    bool reasons_changed = false;
    for (const auto& [index, why] : placed.waiting) {
      v1::Task& task = *live.job.mutable_tasks(index);
      if (why == task.pending_reason()) continue;
      task.set_pending_reason(why);  // live only (not stored): bounded, cached per target
      reasons_changed = true;
    }
    if (!placed.starts.empty() || !placed.failed.empty()) {
      attempts_.Recompute(live);
      watches_.Changed(live.job.id(), "tasks assigned");
    } else if (reasons_changed) {
      watches_.Changed(live.job.id(), "waiting for devices");
    }
  }
}

}  // namespace hetbench::server
