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
#include "server/validation/health.h"

namespace hetbench::server {

namespace {
constexpr char kLog[] = "coordinator";
}  // namespace

Coordinator::Coordinator(JobStore* store, Metrics* metrics, const Clock* clock, CoordinatorOptions options)
    : store_(store),
      metrics_(metrics),
      clock_(clock),
      options_(options),
      loop_(store, metrics, EventLoopOptions{options.max_queued_requests, 0.1}) {}

Coordinator::~Coordinator() { Stop(); }

absl::Status Coordinator::Start() {
  if (auto s = LoadFromStore(); !s.ok()) return s;
  if (auto s = loop_.CommitBeforeStart(); !s.ok()) return s;  // what the load changed
  auto connection = store_->Connect();
  if (!connection.ok()) return connection.status();
  // Each commit's answers run as one closure; the acks they hold back leave
  // after it, one ack list per stream (AgentMessages::ReleaseAcks).
  ingest_.Start(std::move(*connection), [this](std::function<void()> fn) {
    return loop_.Post([this, fn = std::move(fn)] {
      fn();
      messages_.ReleaseAcks();
    });
  });
  for (auto* reader : {&task_data_reader_, &ended_reader_}) {
    auto reader_connection = store_->Connect();
    if (!reader_connection.ok()) return reader_connection.status();
    // Reads of ended jobs are single indexed rows: many may queue.
    *reader = std::make_unique<StoreReader>(std::move(*reader_connection), reader == &ended_reader_ ? 1024 : 32);
  }
  agents_.set_reader(ended_reader_.get());
  api_.set_readers(ended_reader_.get(), task_data_reader_.get());
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
  auto health = store_->LoadDeviceHealth();
  if (!health.ok()) return health.status();
  for (const auto& [agent_id, h] : *health) placer_.SetHealth(agent_id, h);
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
      // The attempt may resume: what Ingest held of it, from its stored batches.
      auto samples = store_->LoadSampleBatches(task.id(), task.attempt());
      auto power = samples.ok() ? store_->LoadPowerBatches(task.id(), task.attempt())
                                : absl::StatusOr<std::vector<v1::PowerBatch>>(samples.status());
      if (!power.ok()) {
        (void)store_->Rollback();
        return power.status();
      }
      ingest_.Restore(task.id(), task.attempt(), *samples, *std::move(power));
      if (!sessions_.Connected(task.agent_id())) {  // (a reload after a failed commit keeps its sessions)
        sessions_.Detach(task.agent_id(), Detached{deadline, "was cut off by a coordinator restart", /*restart=*/true});
      }
    }
    if (live.header_dirty || !live.dirty_tasks.empty()) attempts_.Recompute(live);
  }
  if (auto s = store_->Commit(); !s.ok()) return s;  // (a read: the writes go with the loop's next commit)
  // A cancelled job whose last task was just ended leaves memory after the
  // commit, uncounted: the store's counts hold it already.
  loop_.Defer([this, ended = jobs_.TakeEnded()](const absl::Status& commit) {
    if (commit.ok()) jobs_.Evict(ended, /*count=*/false, [this](const v1::Job& job) { Forget(job); });
  });
  EndOfBatch();  // what the load changed: written by CommitBeforeStart, or the batch of a reload
  LogInfo(kLog, "loaded ", jobs_.size(), " live jobs from the store (", *max_number, " jobs in all)",
          held > 0 ? absl::StrCat("; ", held, " running task(s) wait ", options_.lease_seconds,
                                  " s for their agents to resume them")
                   : "",
          ended > 0 ? absl::StrCat("; ", ended, " task(s) ended by the restart") : "");
  placer_.Request();
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

void Coordinator::CloseStreams() {
  RunSync([this] {
    closing_streams_ = true;
    sessions_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; reconnect"));
    watches_.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; watch again"));
  });
}

uint64_t Coordinator::NewSessionId() { return next_session_.fetch_add(1); }

void Coordinator::OnAgentMessage(uint64_t session_id, std::shared_ptr<AgentSink> sink, v1::AgentMessage msg) {
  auto checked = std::make_shared<AgentMessages::Checked>(AgentMessages::Check(&msg, options_.max_samples_per_batch));
  std::shared_ptr<const v1::AgentMessage> shared = std::make_shared<v1::AgentMessage>(std::move(msg));
  // Not sheddable: each stream bounds its own in-flight messages (Handled).
  loop_.Post([this, session_id, sink = std::move(sink), shared, checked] {
    if (closing_streams_) {
      sink->Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator shutting down; reconnect"));
    } else {
      messages_.Handle(session_id, sink, shared, *checked);
    }
    sink->Handled();
  });
}

bool Coordinator::EdgeHeartbeat(uint64_t session_id, AgentSink& sink, const v1::AgentMessage& msg) {
  if (!msg.has_heartbeat()) return false;
  const bool echo = msg.heartbeat().agent_ns() != 0;
  if (!sessions_.edge().Record({session_id, clock_->MonotonicNowNs(), clock_->SystemNowSeconds(), echo})) return false;
  if (echo) EchoHeartbeat(sink, msg.heartbeat(), *clock_);
  return true;
}

void Coordinator::OnAgentGone(uint64_t session_id, std::string reason) {
  loop_.Post([this, session_id, reason = std::move(reason)] { agents_.Drop(session_id, reason); });
}

// ---------------------------------------------------------------- the loop's hooks

void Coordinator::MaybeRevalidate() {
  const int64_t now = clock_->MonotonicNowNs();
  if (!last_revalidate_ns_) last_revalidate_ns_ = now;  // the first period starts with the coordinator
  if (now - *last_revalidate_ns_ < static_cast<int64_t>(options_.revalidate_every_seconds * 1e9)) return;
  if (!revalidation_job_.empty() && jobs_.Find(revalidation_job_) != nullptr) return;  // the last one still runs
  last_revalidate_ns_ = now;
  v1::JobSpec spec;
  spec.mutable_validate()->set_level("quick");
  spec.set_name("revalidate");
  sessions_.ForEachConnected([&](const std::string& agent_id, const Session& s) {
    for (const v1::Device& d : s.hello.devices()) {
      if (!TaskOnResource(s.hello, d, placer_.leases()).empty()) continue;  // busy: its task goes on
      v1::TargetSelector* t = spec.add_targets();
      t->set_agent_id(agent_id);
      t->set_device_id(d.id());
      t->set_device_kind(d.kind());
    }
  });
  if (spec.targets().empty()) return;
  const int devices = spec.targets_size();
  api_.CreateOwnJob(WithDefaults(std::move(spec)), [this, devices](absl::StatusOr<JobApi::Submitted> made) {
    if (!made.ok()) {
      LogWarning(kLog, "scheduled revalidation not created: ", made.status().ToString());
      return;
    }
    revalidation_job_ = made->job.id();
    LogInfo(kLog, "scheduled revalidation ", revalidation_job_, " of ", devices, " idle devices");
  });
}

void Coordinator::EndOfBatch() {
  agents_.Tick();
  if (options_.revalidate_every_seconds > 0) MaybeRevalidate();
  // Validations judged in this batch: their devices' health, stored in the
  // same transaction as their end (quarantine, release).
  for (const std::string& job_id : jobs_.TakeJudged()) {
    const LiveJob* live = jobs_.Find(job_id);
    if (live == nullptr) continue;
    for (const auto& [agent_id, h] : HealthChanges(live->job, clock_->SystemNowSeconds())) {
      placer_.SetHealth(agent_id, h);
      loop_.Write([agent_id, h](JobStore& store) { return store.PutDeviceHealth(agent_id, h); });
      if (h.quarantined()) {
        LogWarning(kLog, "quarantined ", agent_id, "/", h.device_id(), " (", VerdictName(h.verdict()), " in ", job_id,
                   "): ", h.reason().substr(0, 200));
      }
    }
    metrics_->SetDeviceHealth(placer_.health());
    for (const v1::DeviceVerdict& d : live->job.validation().devices()) {
      if (!d.task_id().empty() && !d.device_id().empty()) metrics_->SetValidationRatios(d);
    }
  }
  if (placer_.TakeDue(clock_->MonotonicNowNs())) Schedule();
  for (StoreWrite& write : jobs_.TakeWrites()) loop_.Write(std::move(write));  // what this batch changed, row by row
  // Watch events of the state this batch commits, sent after its commit.
  watches_.Flush(Watches::JobView{[this](const std::string& job_id) -> const v1::Job* {
                                    const LiveJob* live = jobs_.Find(job_id);
                                    return live == nullptr ? nullptr : &live->job;
                                  },
                                  [this](const std::string& job_id) { return jobs_.EndedNow(job_id); }},
                 [this](EventLoop::Deferred fn) { loop_.Defer(std::move(fn)); });
  // Jobs that ended in this batch leave memory once their end is stored;
  // later reads go to the store.
  if (std::vector<int64_t> ended = jobs_.TakeEnded(); !ended.empty()) {
    loop_.Defer([this, ended = std::move(ended)](const absl::Status& commit) {
      if (commit.ok()) jobs_.Evict(ended, /*count=*/true, [this](const v1::Job& job) { Forget(job); });
    });
  }
  // Raw batches past their retention, a few jobs at a time, on the ended
  // jobs' reader (its own connection and transaction): never on the loop.
  const int64_t now = clock_->MonotonicNowNs();
  if (options_.raw_retention_seconds > 0 && now - last_prune_ns_ > 1'000'000'000 && !pruning_->exchange(true)) {
    last_prune_ns_ = now;
    const double before = clock_->SystemNowSeconds() - options_.raw_retention_seconds;
    ended_reader_->Submit(
        [metrics = metrics_, pruning = pruning_, before](JobStore& store) {
          absl::StatusOr<int> pruned = store.Begin().ok() ? store.PruneRawBatches(before, 8)
                                                          : absl::StatusOr<int>(absl::UnavailableError("begin"));
          if (pruned.ok() && store.Commit().ok()) {
            if (*pruned > 0) metrics->AddJobsPruned(*pruned);
          } else {
            (void)store.Rollback();
            LogWarning(kLog, "pruning raw batches: ", pruned.ok() ? "commit failed" : pruned.status().ToString());
          }
          *pruning = false;
        },
        [pruning = pruning_](absl::Status) { *pruning = false; });  // queue full: the next second tries again
  }
}

void Coordinator::AfterCommit() { UpdateGauges(); }

void Coordinator::Forget(const v1::Job& job) {
  for (const v1::Task& t : job.tasks()) ingest_.End(t.id());
  watches_.Forget(job.id());
}


// ---------------------------------------------------------------- gauges

void Coordinator::UpdateGauges() {
  // Run when a count may have changed, at most every 20 ms (the loop's tick
  // brings a skipped update within 100 ms): the job and task counts are
  // O(live tasks), the agents by kind O(agents) and only when agents come or go.
  const int64_t now = SteadyNowNs();
  job_gauges_dirty_ = jobs_.TakeCountsChanged() || job_gauges_dirty_;
  agent_gauges_dirty_ = agents_.TakeChanged() || agent_gauges_dirty_;
  if (!(job_gauges_dirty_ || agent_gauges_dirty_) || now - last_gauges_ns_ < 20'000'000) return;
  last_gauges_ns_ = now;
  if (job_gauges_dirty_) {
    std::map<v1::JobState, int64_t> jobs;
    std::map<v1::TaskState, int64_t> tasks;
    jobs_.Count(&jobs, &tasks);
    metrics_->SetJobsByState(jobs);
    metrics_->SetTasksByState(tasks);
  }
  if (agent_gauges_dirty_) {
    std::map<std::string, int64_t> agents;
    sessions_.ForEachConnected([&](const std::string&, const Session& session) {
      std::set<std::string> kinds;
      for (const v1::Device& d : session.hello.devices()) kinds.insert(DeviceKindName(d.kind()));
      for (const std::string& k : kinds) ++agents[k];
    });
    metrics_->SetAgentsByKind(agents);
  }
  job_gauges_dirty_ = agent_gauges_dirty_ = false;
  metrics_->SetLiveJobs(static_cast<int64_t>(jobs_.size()), static_cast<int64_t>(loop_.depth()));
}

// ---------------------------------------------------------------- the scheduling pass

void Coordinator::Schedule() {
  std::vector<const v1::Hello*> agents;
  std::vector<const std::vector<std::string>*> resources;  // each device's, kept from its Hello
  agents.reserve(sessions_.connected());
  resources.reserve(sessions_.connected());
  sessions_.ForEachConnected([&](const std::string&, const Session& session) {
    agents.push_back(&session.hello);
    resources.push_back(&session.resources);
  });
  SchedulingPass pass = placer_.BeginPass(agents, &resources);
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
