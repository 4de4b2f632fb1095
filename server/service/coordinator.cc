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

}  // namespace

absl::Status Coordinator::JobNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job '", id, "' not found; list jobs with `hetbench get jobs`"));
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
  writer_ = std::make_unique<BatchWriter>(std::move(*connection),
                                          [this](std::function<void()> fn) { return loop_.Post(std::move(fn)); });
  auto reader_connection = store_->Connect();
  if (!reader_connection.ok()) return reader_connection.status();
  reader_ = std::make_unique<TaskDataReader>(std::move(*reader_connection));
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
  jobs_.clear();
  task_index_.clear();
  requests_.clear();
  ended_jobs_.clear();
  dirty_jobs_.clear();
  aggregates_.clear();
  next_job_number_ = std::max(next_job_number_, *max_number + 1);
  ended_job_counts_.clear();
  ended_task_counts_ = counts->tasks;
  for (const auto& [state, n] : counts->jobs) {
    if (IsTerminal(state)) ended_job_counts_[state] = n;
  }
  if (auto s = store_->Begin(); !s.ok()) return s;
  int held = 0, ended = 0;
  const int64_t deadline = clock_->MonotonicNowNs() + static_cast<int64_t>(options_.lease_seconds * 1e9);
  for (v1::Job& stored : *jobs) {
    const int64_t number = JobNumber(stored.id());
    LiveJob& live = jobs_[number];
    live.job = std::move(stored);
    v1::Job& job = live.job;
    // A task that was running when the previous coordinator stopped may still
    // be running on its agent: it stays leased to it for one lease, for the
    // agent to reconnect and resume it (ResumeTasks); else Tick re-queues it
    // as interrupted by the restart.
    for (v1::Task& task : *job.mutable_tasks()) {
      --ended_task_counts_[task.state()];  // counted live, not ended
      task_index_[task.id()] = job.id();
      if (task.state() != v1::TASK_STATE_RUNNING) continue;
      if (job.state() == v1::JOB_STATE_CANCELLED || task.agent_id().empty()) {
        ++ended;
        task.set_state(job.state() == v1::JOB_STATE_CANCELLED ? v1::TASK_STATE_CANCELLED : v1::TASK_STATE_QUEUED);
        task.set_error(absl::StrCat("attempt ", task.attempt(), " interrupted by a coordinator restart"));
        task.clear_agent_id();
        task.clear_device_id();
        MarkTask(live, task);
        continue;
      }
      ++held;
      leases_.Acquire(task.agent_id(), task.device_id(), task.id());
      if (auto s = RebuildAggregate(task); !s.ok()) {
        (void)store_->Rollback();
        return s;
      }
      if (!agent_sessions_.count(task.agent_id())) {  // (a reload after a failed commit keeps its sessions)
        detached_[task.agent_id()] = Detached{deadline, "was cut off by a coordinator restart", /*restart=*/true};
      }
    }
    if (live.header_dirty || !live.dirty_tasks.empty()) RecomputeJobState(live);
  }
  for (auto& [state, n] : ended_task_counts_) n = std::max<int64_t>(n, 0);
  EndOfBatch();  // writes what the load changed
  if (auto s = store_->Commit(); !s.ok()) return s;
  for (int64_t number : ended_jobs_) jobs_.erase(number);  // (a cancelled job whose last task was just ended)
  ended_jobs_.clear();
  LogInfo(kLog, "loaded ", jobs_.size(), " live jobs from the store (", *max_number, " jobs in all)",
          held > 0 ? absl::StrCat("; ", held, " running task(s) wait ", options_.lease_seconds,
                                  " s for their agents to resume them")
                   : "",
          ended > 0 ? absl::StrCat("; ", ended, " task(s) ended by the restart") : "");
  schedule_needed_ = true;
  return absl::OkStatus();
}

absl::Status Coordinator::RebuildAggregate(const v1::Task& task) {
  auto batches = store_->LoadSampleBatches(task.id(), task.attempt());
  if (!batches.ok()) return batches.status();
  TaskAggregate& agg = aggregates_[task.id()];
  agg = TaskAggregate{};
  agg.attempt = task.attempt();
  for (const v1::SampleBatch& b : *batches) agg.Add(b);
  return absl::OkStatus();
}

void Coordinator::RunSync(std::function<void()> fn) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  for (;;) {
    bool settled = true;
    loop_.RunSync([this, &settled] { settled = writes_pending_.empty() && parked_done_.empty(); });
    if (settled || absl::Now() > until) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  loop_.RunSync(std::move(fn));
}

void Coordinator::Stop() {
  // The writer's last continuations run on the loop's last batches.
  if (writer_) writer_->Stop();
  if (reader_) reader_->Stop();
  loop_.Stop();
}

void Coordinator::GetTaskData(v1::GetTaskDataRequest request, std::function<void(absl::StatusOr<v1::TaskData>)> done) {
  if (!reader_) {
    done(absl::UnavailableError("coordinator not started"));
    return;
  }
  reader_->Read(std::move(request), std::move(done));
}

void Coordinator::CloseStreams() {
  RunSync([this] {
    closing_streams_ = true;
    for (auto& [id, session] : sessions_) {
      session.sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; reconnect"));
    }
    for (auto& [id, watcher] : watchers_) {
      watcher.sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
    }
    watchers_.clear();
  });
}

uint64_t Coordinator::NewSessionId() { return next_session_.fetch_add(1); }

// ---------------------------------------------------------------- the loop's hooks

void Coordinator::EndOfBatch() {
  Tick();
  if (gangs_waiting_ && clock_->MonotonicNowNs() - last_gang_pass_ns_ > 1'000'000'000) {
    last_gang_pass_ns_ = clock_->MonotonicNowNs();
    schedule_needed_ = true;  // for the gangs' timeouts
  }
  if (schedule_needed_) {
    schedule_needed_ = false;
    Schedule();
  }
  // Write what this batch changed: headers and the tasks that changed, row by row.
  for (int64_t number : dirty_jobs_) {
    auto it = jobs_.find(number);
    if (it == jobs_.end()) continue;
    LiveJob& live = it->second;
    if (live.header_dirty) (void)store_->PutJobHeader(live.job);
    for (int index : live.dirty_tasks) {
      if (index < live.job.tasks_size()) (void)store_->PutTask(live.job.tasks(index));
    }
    live.header_dirty = false;
    live.dirty_tasks.clear();
  }
  dirty_jobs_.clear();
  // Raw batches past their retention, a few jobs at a time.
  const int64_t now = clock_->MonotonicNowNs();
  if (options_.raw_retention_seconds > 0 && now - last_prune_ns_ > 1'000'000'000) {
    last_prune_ns_ = now;
    auto pruned = store_->PruneRawBatches(clock_->SystemNowSeconds() - options_.raw_retention_seconds, 8);
    if (pruned.ok() && *pruned > 0) metrics_->AddJobsPruned(*pruned);
  }
}

void Coordinator::AfterCommit() {
  FlushWatches(/*force=*/false);
  // Ended jobs leave memory once their end is stored; later reads go to the store.
  for (int64_t number : ended_jobs_) {
    auto it = jobs_.find(number);
    if (it == jobs_.end() || !IsTerminal(it->second.job.state())) continue;
    const v1::Job& job = it->second.job;
    ++ended_job_counts_[job.state()];
    for (const v1::Task& t : job.tasks()) {
      ++ended_task_counts_[t.state()];
      task_index_.erase(t.id());
      aggregates_.erase(t.id());
      last_power_.erase(t.id());
    }
    if (!it->second.request_id.empty()) requests_.erase(it->second.request_id);
    watch_dirty_jobs_.erase(number);
    jobs_.erase(it);
    gauges_dirty_ = true;
  }
  ended_jobs_.clear();
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
    if (auto it = requests_.find(request_id); it != requests_.end()) {
      existing = it->second;
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
  const int64_t number = next_job_number_++;
  LiveJob& live = jobs_[number];
  live.request_id = request_id;
  v1::Job& job = live.job;
  job.set_id(absl::StrFormat("job-%06d", number));
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_created_unix_seconds(clock_->SystemNowSeconds());
  int index = 0, gangs = 0;
  // Without parallel.devices every combination is one task; with it, one
  // gang per device count, its ranks consecutive tasks (rank 0 first). A
  // split across agents is one gang whose rank s runs stage s on a device
  // matching the stage's target.
  std::vector<int> world_sizes(effective.parallel().devices().begin(), effective.parallel().devices().end());
  const v1::SplitSpec& split = effective.split();
  if (split.across_agents()) world_sizes = {split.stages_size()};
  const bool parallel = !world_sizes.empty();
  if (!parallel) world_sizes.push_back(1);
  const double now = clock_->SystemNowSeconds();
  for (const std::string& model : effective.models()) {
    for (const v1::TargetSelector& target : effective.targets()) {
      for (int batch_size : effective.batch_sizes()) {
        for (int world : world_sizes) {
          const std::string gang_id = absl::StrCat(job.id(), "-g", gangs);
          if (parallel) ++gangs;
          for (int rank = 0; rank < world; ++rank) {
            v1::Task* task = job.add_tasks();
            task->set_id(absl::StrCat(job.id(), "-t", index));
            task->set_job_id(job.id());
            task->set_index(index);
            task->set_model(model);
            task->set_batch_size(batch_size);
            *task->mutable_target() = split.across_agents() ? SplitStageTarget(split.stages(rank), target) : target;
            task->set_state(v1::TASK_STATE_QUEUED);
            task->set_queued_unix_seconds(now);
            if (parallel) {
              task->mutable_gang()->set_id(gang_id);
              task->mutable_gang()->set_rank(rank);
              task->mutable_gang()->set_world_size(world);
            }
            task_index_[task->id()] = job.id();
            ++index;
          }
        }
      }
    }
  }
  *job.mutable_spec() = std::move(effective);
  const std::string id = job.id();
  if (!request_id.empty()) requests_[request_id] = id;
  if (absl::Status s = store_->InsertJob(job, request_id); !s.ok()) {
    LogError(kLog, "storing ", id, ": ", s.ToString());  // the commit fails too and reloads
  }
  LogInfo(kLog, "accepted ", id, " (", absl::StrJoin(job.spec().models(), ", "), "; ", index, " tasks)");
  schedule_needed_ = true;
  loop_.Defer([this, id, done = std::move(done)](const absl::Status& commit) {
    if (!commit.ok()) {
      done(absl::UnavailableError(absl::StrCat("job not stored: ", commit.message(), "; submit again")));
      return;
    }
    LiveJob* live = FindJob(id);
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

Coordinator::LiveJob* Coordinator::FindJob(const std::string& job_id) {
  auto it = jobs_.find(JobNumber(job_id));
  return it == jobs_.end() || it->second.job.id() != job_id ? nullptr : &it->second;
}

v1::Task* Coordinator::LiveTask(const std::string& task_id, LiveJob** job) {
  auto it = task_index_.find(task_id);
  if (it == task_index_.end()) return nullptr;
  LiveJob* live = FindJob(it->second);
  auto key = SplitTaskId(task_id);
  if (live == nullptr || !key || key->second >= live->job.tasks_size()) return nullptr;
  if (job != nullptr) *job = live;
  return live->job.mutable_tasks(key->second);
}

void Coordinator::GetJob(std::string job_id, JobCallback done) {
  // Reads answer after the commit of their batch, so they never show a state
  // that could still be rolled back. An ended job is read from the store.
  auto shared_done = std::make_shared<JobCallback>(std::move(done));
  const bool posted = PostRequest([this, job_id = std::move(job_id), shared_done] {
    loop_.Defer([this, job_id, shared_done](const absl::Status&) {
      if (LiveJob* live = FindJob(job_id)) {
        (*shared_done)(live->job);
        return;
      }
      auto stored = store_->GetJob(job_id);
      if (!stored.ok()) {
        (*shared_done)(stored.status());
      } else if (!stored->has_value()) {
        (*shared_done)(JobNotFound(job_id));
      } else {
        (*shared_done)(**std::move(stored));
      }
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
    LiveJob* live = FindJob(job_id);
    if (live == nullptr) {
      auto stored = store_->GetJob(job_id);
      if (stored.ok() && stored->has_value()) {
        done(absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' already ended as ",
                                                        JobStateName((*stored)->state()), "; nothing to cancel")));
      } else {
        done(stored.ok() ? JobNotFound(job_id) : stored.status());
      }
      return;
    }
    v1::Job* job = &live->job;
    job->set_state(v1::JOB_STATE_CANCELLED);
    job->set_finished_unix_seconds(clock_->SystemNowSeconds());
    job->set_error("cancelled by user");
    MarkHeader(*live);
    bool running = false;
    for (v1::Task& task : *job->mutable_tasks()) {
      if (task.state() == v1::TASK_STATE_QUEUED) {
        task.set_state(v1::TASK_STATE_CANCELLED);
        task.clear_pending_reason();
        MarkTask(*live, task);
      } else if (task.state() == v1::TASK_STATE_RUNNING) {
        running = true;
        // The device stays leased until the agent confirms the work stopped.
        auto it = agent_sessions_.find(task.agent_id());
        if (it != agent_sessions_.end()) {
          v1::CoordinatorMessage msg = CancelMessage(task.id(), task.attempt(), "job cancelled by user", false);
          auto sink = sessions_[it->second].sink;
          loop_.Defer([sink, msg](const absl::Status&) { sink->Send(msg); });
        }
      }
    }
    if (!running) ended_jobs_.push_back(JobNumber(job_id));
    Notify(*live, "job cancelled");
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
  const bool posted = PostRequest([this, filter = std::move(filter), shared_done] {
    loop_.Defer([this, filter, shared_done](const absl::Status&) {
      // One page from the store (committed state), with live jobs' current
      // progress laid over it.
      auto page = store_->ListJobs(filter);
      if (page.ok()) {
        for (v1::Job& job : page->jobs) {
          if (LiveJob* live = FindJob(job.id())) {
            job = live->job;
            StripResults(&job);
          }
        }
      }
      (*shared_done)(std::move(page));
    });
  });
  if (!posted) {
    metrics_->AddRequestShed("ListJobs");
    (*shared_done)(Busy(loop_.depth()));
  }
}

// ---------------------------------------------------------------- job state

void Coordinator::MarkTask(LiveJob& job, const v1::Task& task) {
  gauges_dirty_ = true;
  job.dirty_tasks.insert(task.index());
  dirty_jobs_.insert(JobNumber(job.job.id()));
}

void Coordinator::MarkHeader(LiveJob& job) {
  gauges_dirty_ = true;
  job.header_dirty = true;
  dirty_jobs_.insert(JobNumber(job.job.id()));
}

void Coordinator::FinishTask(LiveJob& live, v1::Task& task, v1::TaskState state, const std::string& error) {
  task.set_state(state);
  task.set_error(error);
  task.clear_pending_reason();
  const double now = clock_->SystemNowSeconds();
  task.set_finished_unix_seconds(now);
  const double duration = now - task.started_unix_seconds();
  aggregates_.erase(task.id());
  last_power_.erase(task.id());
  MarkTask(live, task);
  const std::string model = task.model();
  const v1::DeviceKind kind = task.device_kind();
  const bool simulated = task.result().environment().simulated();
  auto result = std::make_shared<v1::TaskResult>(task.result());
  loop_.Defer([this, model, kind, state, duration, result, simulated](const absl::Status& commit) {
    if (!commit.ok()) return;
    metrics_->ObserveTaskFinished(model, kind, state, duration);
    // Simulated figures never reach the measured per-model gauges.
    if (state == v1::TASK_STATE_SUCCEEDED && !simulated) metrics_->SetTaskFigures(model, kind, *result);
  });
  LogInfo(kLog, "task ", task.id(), " attempt ", task.attempt(), " ", TaskStateName(state), error.empty() ? "" : ": ",
          error);
  RecomputeJobState(live);
  Notify(live, absl::StrCat("task ", task.id(), " ", TaskStateName(state)));
  if (state == v1::TASK_STATE_FAILED) BreakGang(live, task);
}

void Coordinator::RequeueOrFail(LiveJob& live, v1::Task& task, const std::string& why, bool restart) {
  aggregates_.erase(task.id());
  last_power_.erase(task.id());
  // Restarts are the coordinator's fault, not the task's: they are counted
  // apart from attempts, and bounded on their own.
  if (restart) task.set_restarts(task.restarts() + 1);
  if (live.job.state() == v1::JOB_STATE_CANCELLED) {
    FinishTask(live, task, v1::TASK_STATE_CANCELLED, why);
  } else if (restart && task.restarts() > options_.max_restarts) {
    // A task that keeps being interrupted by restarts may be what brings the coordinator down.
    FinishTask(
        live, task, v1::TASK_STATE_FAILED,
        absl::StrCat(why, "; ", task.restarts(), " restarts interrupted it (at most ", options_.max_restarts, ")"));
  } else if (!restart && task.attempt() - task.restarts() >= options_.max_attempts) {
    FinishTask(live, task, v1::TASK_STATE_FAILED, absl::StrCat(why, "; no attempts left"));
  } else {
    task.set_state(v1::TASK_STATE_QUEUED);
    task.set_error(why);
    task.clear_agent_id();
    task.clear_device_id();
    task.clear_stage_device_ids();
    task.set_queued_unix_seconds(clock_->SystemNowSeconds());
    MarkTask(live, task);
    RecomputeJobState(live);
    Notify(live, absl::StrCat("task ", task.id(), " re-queued: ", why));
    schedule_needed_ = true;
    BreakGang(live, task);
  }
}

void Coordinator::RecomputeJobState(LiveJob& live) {
  v1::Job& job = live.job;
  bool all_done = true, any_running = false, any_failed = false;
  std::string first_error;
  for (const v1::Task& t : job.tasks()) {
    all_done = all_done && IsTerminal(t.state());
    any_running = any_running || t.state() == v1::TASK_STATE_RUNNING;
    if (t.state() == v1::TASK_STATE_FAILED) {
      if (!any_failed) first_error = absl::StrCat(t.id(), ": ", t.error());
      any_failed = true;
    }
  }
  const v1::JobState before = job.state();
  if (job.state() == v1::JOB_STATE_CANCELLED) {
    if (all_done) ended_jobs_.push_back(JobNumber(job.id()));
    return;
  }
  if (all_done) {
    job.set_state(any_failed ? v1::JOB_STATE_FAILED : v1::JOB_STATE_SUCCEEDED);
    job.set_error(first_error);
    job.set_finished_unix_seconds(clock_->SystemNowSeconds());
    ended_jobs_.push_back(JobNumber(job.id()));
  } else {
    job.set_state(any_running ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_QUEUED);
  }
  if (job.state() != before || all_done) MarkHeader(live);
}

void Coordinator::UpdateGauges() {
  // O(live tasks + agents): run when a count may have changed, at most every
  // 20 ms (the loop's tick brings a skipped update within 100 ms).
  const int64_t now = SteadyNowNs();
  if (!gauges_dirty_ || now - last_gauges_ns_ < 20'000'000) return;
  gauges_dirty_ = false;
  last_gauges_ns_ = now;
  std::map<v1::JobState, int64_t> jobs = ended_job_counts_;
  std::map<v1::TaskState, int64_t> tasks = ended_task_counts_;
  for (const auto& [number, live] : jobs_) {
    ++jobs[live.job.state()];
    for (const v1::Task& t : live.job.tasks()) ++tasks[t.state()];
  }
  metrics_->SetJobsByState(jobs);
  metrics_->SetTasksByState(tasks);
  std::map<std::string, int64_t> agents;
  for (const auto& [agent_id, session_id] : agent_sessions_) {
    std::set<std::string> kinds;
    for (const v1::Device& d : sessions_[session_id].hello.devices()) kinds.insert(DeviceKindName(d.kind()));
    for (const std::string& k : kinds) ++agents[k];
  }
  metrics_->SetAgentsByKind(agents);
  metrics_->SetLiveJobs(static_cast<int64_t>(jobs_.size()), static_cast<int64_t>(loop_.depth()));
}

// ---------------------------------------------------------------- the scheduling pass

void Coordinator::Schedule() {
  std::vector<const v1::Hello*> agents;
  agents.reserve(agent_sessions_.size());
  for (const auto& [agent_id, session_id] : agent_sessions_) agents.push_back(&sessions_[session_id].hello);
  SchedulingPass pass(agents, leases_);
  gangs_waiting_ = false;
  for (auto& [number, live] : jobs_) {
    v1::Job& job = live.job;
    if (IsTerminal(job.state())) continue;
    bool changed = false, reasons_changed = false;
    for (int i = 0; i < job.tasks_size(); ++i) {
      v1::Task& task = *job.mutable_tasks(i);
      if (task.state() != v1::TASK_STATE_QUEUED) continue;
      std::string why;
      Placed placed = Placed::kWaiting;
      if (task.gang().world_size() > 0) {
        if (task.gang().rank() != 0) continue;  // placed with its rank 0
        placed = PlaceGang(live, i, pass, &why);
      } else if (job.spec().split().stages_size() > 0) {
        placed = PlaceSplit(live, task, pass, &why);
      } else if (auto placement = pass.Take(task.target())) {
        SendAfterCommit(placement->agent_id, StartAttempt(live, task, *placement));
        placed = Placed::kStarted;
      } else {
        why = pass.Reason(task.target());  // live only (not stored): bounded, cached per target
      }
      if (placed != Placed::kWaiting) {
        changed = true;
        continue;
      }
      const int ranks = std::max(task.gang().world_size(), 1);
      for (int r = 0; r < ranks && i + r < job.tasks_size(); ++r) {
        v1::Task& t = *job.mutable_tasks(i + r);
        if (why != t.pending_reason()) {
          t.set_pending_reason(why);
          reasons_changed = true;
        }
      }
    }
    if (changed) {
      RecomputeJobState(live);
      Notify(live, "tasks assigned");
    } else if (reasons_changed) {
      Notify(live, "waiting for devices");
    }
  }
}

}  // namespace hetbench::server
