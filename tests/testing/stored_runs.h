#pragma once
// Stored runs the report tests compare: finished tasks of mlp on one agent's
// device, with the environment compare matches runs and other jobs on, and
// the jobs that hold them.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::testing {

/// Where a run was taken: compare pairs runs, and learns a prior from other
/// jobs, only within one agent's device at one batch size.
struct RunPlace {
  std::string agent = "agent-1";
  std::string device = "cpu0";
  int batch = 64;
};

/// Run `run` of job `job` ("<job>-t<run>"): mlp, succeeded, on `place`'s CPU,
/// with 2 threads, device model "AMD EPYC" and model fingerprint "fp". No
/// phases and no start time: the caller adds what its test reads.
inline v1::Task StoredTask(const std::string& job, int run, const RunPlace& place = {}) {
  v1::Task t;
  t.set_id(absl::StrCat(job, "-t", run));
  t.set_job_id(job);
  t.set_run(run);
  t.set_state(v1::TASK_STATE_SUCCEEDED);
  t.set_agent_id(place.agent);
  t.set_device_id(place.device);
  t.set_device_kind(v1::DEVICE_KIND_CPU);
  t.set_batch_size(place.batch);
  t.set_model("mlp");
  v1::RunEnvironment* e = t.mutable_result()->mutable_environment();
  e->set_threads(2);
  e->set_device_model("AMD EPYC");
  e->set_model_fingerprint("fp");
  return t;
}

/// `task` with a train phase whose median step is `p50_ns`, valid or not.
inline v1::Task WithTrainMedian(v1::Task task, double p50_ns, bool valid = true) {
  v1::PhaseResult* p = task.mutable_result()->add_phases();
  p->set_phase(v1::PHASE_TRAIN);
  p->set_valid(valid);
  p->mutable_stats()->set_p50_ns(p50_ns);
  return task;
}

/// Job `id` of mlp holding `tasks`: repeats = their count, created when the
/// first of them started (0 when none did).
inline v1::Job StoredJob(const std::string& id, const std::vector<v1::Task>& tasks) {
  v1::Job j;
  j.set_id(id);
  j.set_created_unix_seconds(tasks.empty() ? 0 : tasks[0].started_unix_seconds());
  j.mutable_spec()->add_models("mlp");
  j.mutable_spec()->set_repeats(static_cast<int>(tasks.size()));
  for (const v1::Task& t : tasks) *j.add_tasks() = t;
  return j;
}

}  // namespace hetbench::testing
