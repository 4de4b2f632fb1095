#include "server/service/job_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/validate_spec.h"
#include "server/validation/judge.h"
#include "common/names.h"
#include "common/serving_spec.h"
#include "server/scheduler/scheduler.h"

namespace hetbench::server {

void JobTable::Reset(std::vector<v1::Job> jobs, const StateCounts& counts, int64_t max_number) {
  jobs_.clear();
  task_index_.clear();
  requests_.clear();
  dirty_.clear();
  ended_.clear();
  next_number_ = std::max(next_number_, max_number + 1);
  ended_jobs_.clear();
  for (const auto& [state, n] : counts.jobs) {
    if (IsTerminal(state)) ended_jobs_[state] = n;
  }
  ended_tasks_ = counts.tasks;
  for (v1::Job& stored : jobs) {
    LiveJob& live = jobs_[JobNumber(stored.id())];
    live.job = std::move(stored);
    for (const v1::Task& task : live.job.tasks()) {
      --ended_tasks_[task.state()];  // counted live, not ended
      task_index_[task.id()] = live.job.id();
    }
  }
  for (auto& [state, n] : ended_tasks_) n = std::max<int64_t>(n, 0);
  counts_changed_ = true;
}

v1::Task* JobTable::AddTask(v1::Job& job, const std::string& model, int batch_size, const v1::TargetSelector& target,
                            double now_unix) {
  v1::Task* task = job.add_tasks();
  const int index = job.tasks_size() - 1;
  task->set_id(absl::StrCat(job.id(), "-t", index));
  task->set_job_id(job.id());
  task->set_index(index);
  task->set_model(model);
  task->set_batch_size(batch_size);
  *task->mutable_target() = target;
  task->set_state(v1::TASK_STATE_QUEUED);
  task->set_queued_unix_seconds(now_unix);
  task_index_[task->id()] = job.id();
  return task;
}

void JobTable::SetGang(v1::Task* task, const std::string& gang_id, int rank, int world) {
  task->mutable_gang()->set_id(gang_id);
  task->mutable_gang()->set_rank(rank);
  task->mutable_gang()->set_world_size(world);
}

LiveJob& JobTable::Create(v1::JobSpec effective, const std::string& request_id, double now_unix) {
  const int64_t number = next_number_++;
  LiveJob& live = jobs_[number];
  live.request_id = request_id;
  v1::Job& job = live.job;
  job.set_id(absl::StrFormat("job-%06d", number));
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_created_unix_seconds(now_unix);
  std::vector<int> world_sizes(effective.parallel().devices().begin(), effective.parallel().devices().end());
  const v1::SplitSpec& split = effective.split();
  if (split.across_agents()) world_sizes = {split.stages_size()};
  if (IsServing(effective) && effective.serving().replicas() > 1) world_sizes = {effective.serving().replicas()};
  const bool gangs = !world_sizes.empty();
  if (!gangs) world_sizes.push_back(1);
  int gang_count = 0;
  // One task per model x target x batch size x rate (serving.qps_sweep; one rate otherwise) x rank x run.
  struct Combination {
    const std::string* model;
    const v1::TargetSelector* target;
    int batch_size;
    double rate;
  };
  std::vector<Combination> combinations;
  const std::vector<double> rates = ServingRates(effective);
  for (const std::string& model : effective.models()) {
    for (const v1::TargetSelector& target : effective.targets()) {
      for (int batch_size : effective.batch_sizes()) {
        for (double rate : rates) combinations.push_back({&model, &target, batch_size, rate});
      }
    }
  }
  // `repeats` runs of the whole set, run 1 of every task first: A B A B, so
  // slow drift on a device falls on every configuration alike.
  const int repeats = std::max(effective.repeats(), 1);
  for (int run = 1; run <= repeats; ++run) {
    for (const Combination& c : combinations) {
      for (int world : world_sizes) {
        const std::string gang_id = absl::StrCat(job.id(), "-g", gang_count);
        if (gangs) ++gang_count;
        for (int rank = 0; rank < world; ++rank) {
          v1::Task* task = AddTask(job, *c.model, c.batch_size,
                                   split.across_agents() ? SplitStageTarget(split.stages(rank), *c.target) : *c.target,
                                   now_unix);
          if (c.rate > 0) task->set_target_qps(c.rate);
          if (gangs) SetGang(task, gang_id, rank, world);
          if (repeats > 1) task->set_run(run);
        }
      }
    }
  }
  *job.mutable_spec() = std::move(effective);
  if (!request_id.empty()) requests_[request_id] = job.id();
  counts_changed_ = true;
  return live;
}

void JobTable::AddPairGangs(LiveJob& live, const std::vector<std::pair<size_t, size_t>>& pairs, double now_unix) {
  v1::Job& job = live.job;
  const v1::JobSpec& spec = job.spec();
  const std::string model = spec.models().empty() ? std::string() : spec.models(0);
  const int batch_size = spec.batch_sizes().empty() ? 0 : spec.batch_sizes(0);
  int gang_count = 0;
  for (const auto& [a, b] : pairs) {
    if (a >= static_cast<size_t>(spec.targets_size()) || b >= static_cast<size_t>(spec.targets_size())) continue;
    const std::string gang_id = absl::StrCat(job.id(), "-g", gang_count++);
    for (int rank = 0; rank < 2; ++rank) {
      v1::Task* task = AddTask(job, model, batch_size, spec.targets(static_cast<int>(rank == 0 ? a : b)), now_unix);
      SetGang(task, gang_id, rank, 2);
    }
  }
  counts_changed_ = true;
}

LiveJob* JobTable::Find(const std::string& job_id) {
  auto it = jobs_.find(JobNumber(job_id));
  return it == jobs_.end() || it->second.job.id() != job_id ? nullptr : &it->second;
}

v1::Task* JobTable::FindTask(const std::string& task_id, LiveJob** job) {
  auto it = task_index_.find(task_id);
  if (it == task_index_.end()) return nullptr;
  LiveJob* live = Find(it->second);
  auto key = SplitTaskId(task_id);
  if (live == nullptr || !key || key->second >= live->job.tasks_size()) return nullptr;
  if (job != nullptr) *job = live;
  return live->job.mutable_tasks(key->second);
}

std::optional<std::string> JobTable::JobForRequest(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  return it->second;
}

void JobTable::MarkTask(LiveJob& job, const v1::Task& task) {
  counts_changed_ = true;
  job.dirty_tasks.insert(task.index());
  dirty_.insert(JobNumber(job.job.id()));
}

void JobTable::MarkHeader(LiveJob& job) {
  counts_changed_ = true;
  job.header_dirty = true;
  dirty_.insert(JobNumber(job.job.id()));
}

void JobTable::Recompute(LiveJob& live, double now_unix) {
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
  if (all_done && IsValidate(job.spec())) {
    *job.mutable_validation() = JudgeValidation(job);
    judged_.push_back(job.id());
  }
  if (job.state() == v1::JOB_STATE_CANCELLED) {
    if (all_done) EndAfterCommit(live);
    return;
  }
  if (all_done) {
    job.set_state(any_failed ? v1::JOB_STATE_FAILED : v1::JOB_STATE_SUCCEEDED);
    job.set_error(first_error);
    job.set_finished_unix_seconds(now_unix);
    EndAfterCommit(live);
  } else {
    job.set_state(any_running ? v1::JOB_STATE_RUNNING : v1::JOB_STATE_QUEUED);
  }
  if (job.state() != before || all_done) MarkHeader(live);
}

bool JobTable::EndedNow(const std::string& job_id) const {
  return std::find(ended_.begin(), ended_.end(), JobNumber(job_id)) != ended_.end();
}

std::vector<StoreWrite> JobTable::TakeWrites() {
  // Headers and the tasks that changed, copied: the writer runs them later,
  // on its own thread, while the loop goes on changing the live rows.
  std::vector<StoreWrite> writes;
  for (int64_t number : dirty_) {
    auto it = jobs_.find(number);
    if (it == jobs_.end()) continue;
    LiveJob& live = it->second;
    if (live.header_dirty) {
      // The header without its tasks: moved out and back, not copied.
      google::protobuf::RepeatedPtrField<v1::Task> tasks;
      tasks.Swap(live.job.mutable_tasks());
      writes.push_back([header = live.job](JobStore& store) { return store.PutJobHeader(header); });
      tasks.Swap(live.job.mutable_tasks());
    }
    for (int index : live.dirty_tasks) {
      if (index >= live.job.tasks_size()) continue;
      writes.push_back([task = live.job.tasks(index)](JobStore& store) { return store.PutTask(task); });
    }
    live.header_dirty = false;
    live.dirty_tasks.clear();
  }
  dirty_.clear();
  return writes;
}

void JobTable::Evict(const std::vector<int64_t>& ended, bool count,
                     const std::function<void(const v1::Job&)>& evicted) {
  for (int64_t number : ended) {
    auto it = jobs_.find(number);
    if (it == jobs_.end() || !IsTerminal(it->second.job.state())) continue;
    const v1::Job& job = it->second.job;
    evicted(job);
    if (count) ++ended_jobs_[job.state()];
    for (const v1::Task& t : job.tasks()) {
      if (count) ++ended_tasks_[t.state()];
      task_index_.erase(t.id());
    }
    if (!it->second.request_id.empty()) requests_.erase(it->second.request_id);
    jobs_.erase(it);
    counts_changed_ = true;
  }
}

void JobTable::Count(std::map<v1::JobState, int64_t>* jobs, std::map<v1::TaskState, int64_t>* tasks) const {
  *jobs = ended_jobs_;
  *tasks = ended_tasks_;
  for (const auto& [number, live] : jobs_) {
    ++(*jobs)[live.job.state()];
    for (const v1::Task& t : live.job.tasks()) ++(*tasks)[t.state()];
  }
}

}  // namespace hetbench::server
