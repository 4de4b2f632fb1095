#pragma once
// Rows the store tests write: a sample batch and a job with its tasks.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "hetbench/v1/agent.pb.h"
#include "hetbench/v1/coordinator.pb.h"
#include "tests/testing/sample_batches.h"

namespace hetbench::testing {

/// `n` train samples of one task attempt: durations 90, 91, ... ns, 8 items each.
inline v1::SampleBatch Batch(const std::string& task, int attempt, uint64_t seq, int n) {
  return SampleBatchOf(task, attempt, seq, n);
}

/// "job-%06d" in `state` with `tasks` CPU tasks of `model`, each with a result.
inline v1::Job MakeJob(int number, v1::JobState state, int tasks, const std::string& model = "mlp") {
  v1::Job job;
  job.set_id(absl::StrFormat("job-%06d", number));
  job.set_state(state);
  job.set_created_unix_seconds(1000 + number);
  job.mutable_spec()->add_models(model);
  job.mutable_spec()->add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
  for (int i = 0; i < tasks; ++i) {
    v1::Task* t = job.add_tasks();
    t->set_id(absl::StrCat(job.id(), "-t", i));
    t->set_job_id(job.id());
    t->set_index(i);
    t->set_state(IsTerminal(state) ? v1::TASK_STATE_SUCCEEDED : v1::TASK_STATE_QUEUED);
    t->mutable_result()->set_test_accuracy(0.5);
  }
  return job;
}

}  // namespace hetbench::testing
