// The coordinator's jobs and client API: submit (validated, idempotent), get,
// list, cancel, watch, restarts, pending reasons (fixture: coordinator_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/failing_store.h"
#include "tests/testing/wait.h"
#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server::coordinator_testing {
namespace {

TEST_F(CoordinatorTest, InvalidSpecIsRefusedAndNothingIsStored) {
  v1::JobSpec spec;
  spec.add_batch_sizes(0);
  auto r = Submit(spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("batch_sizes[0] = 0"));
  spec.clear_batch_sizes();
  spec.set_model("nope");
  EXPECT_EQ(Submit(spec).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(List().empty());
  Close();
  Open();
  EXPECT_TRUE(List().empty());
}

TEST_F(CoordinatorTest, EachModelGetsItsTasksAndAMathLibraryBelowTheCpuInvalidatesTheResult) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.add_models("lstm");
  spec.add_batch_sizes(32);
  spec.add_batch_sizes(64);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->tasks_size(), 4);
  EXPECT_EQ(job->tasks(0).model(), "mlp");
  EXPECT_EQ(job->tasks(1).model(), "mlp");
  EXPECT_EQ(job->tasks(2).model(), "lstm");
  EXPECT_EQ(job->tasks(3).batch_size(), 64);

  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  EXPECT_EQ(a.model(), "mlp");
  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 10, 10, 10});
  v1::AgentMessage m;
  v1::TaskDone* d = m.mutable_done();
  d->set_task_id(a.task_id());
  d->set_attempt(a.attempt());
  d->set_state(v1::TASK_STATE_SUCCEEDED);
  d->set_batches_sent(1);
  d->set_samples_sent(4);
  d->mutable_result()->mutable_calibration()->set_blas_below(true);
  d->mutable_result()->mutable_calibration()->set_blas_check(
      "MISMATCH: OpenBLAS Prescott kernels on a CPU with AVX-512");
  coordinator_->OnAgentMessage(s, sink, m);
  coordinator_->RunSync([] {});
  const v1::Task t = Get(job->id()).tasks(0);
  ASSERT_EQ(t.state(), v1::TASK_STATE_SUCCEEDED) << t.error();
  ASSERT_EQ(t.result().phases_size(), 1);
  EXPECT_FALSE(t.result().phases(0).valid());
  EXPECT_THAT(absl::StrJoin(t.result().phases(0).invalid_reasons(), "; "),
              HasSubstr("math library below the CPU: MISMATCH: OpenBLAS Prescott kernels"));
}

// The train phase is judged against the steps the agent's executor aimed
// for (result.min_train_steps), computed there once, never recomputed here.
TEST_F(CoordinatorTest, TheTrainPhaseIsJudgedAgainstTheStepsTheAgentAimedFor) {
  const Started short_of_it = StartOneTask();
  SendSamples(short_of_it.session, short_of_it.sink, short_of_it.assign, 0, v1::PHASE_TRAIN, {10, 10, 10, 10});
  SendDone(short_of_it.session, short_of_it.sink, short_of_it.assign, 1, 4, v1::TASK_STATE_SUCCEEDED, 0,
           /*min_train_steps=*/10);
  const v1::Task t = WaitForJobState(short_of_it.job_id, v1::JOB_STATE_SUCCEEDED).tasks(0);
  ASSERT_EQ(t.result().phases_size(), 1);
  EXPECT_FALSE(t.result().phases(0).valid());
  EXPECT_THAT(absl::StrJoin(t.result().phases(0).invalid_reasons(), "; "), HasSubstr("only 4 of 10 steps measured"));

  // An agent that does not say what it aimed for gets no verdict of valid.
  auto job = Submit(v1::JobSpec());
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(short_of_it.sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
  const v1::Assign a = Assigns(*short_of_it.sink).back();
  SendSamples(short_of_it.session, short_of_it.sink, a, 0, v1::PHASE_TRAIN, {10, 10, 10, 10});
  SendDone(short_of_it.session, short_of_it.sink, a, 1, 4, v1::TASK_STATE_SUCCEEDED, 0, /*min_train_steps=*/0);
  const v1::Task u = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED).tasks(0);
  ASSERT_EQ(u.result().phases_size(), 1);
  EXPECT_FALSE(u.result().phases(0).valid());
  EXPECT_THAT(absl::StrJoin(u.result().phases(0).invalid_reasons(), "; "),
              HasSubstr("did not say how many training steps it aimed for"));
}

TEST_F(CoordinatorTest, RawBatchesPastTheirRetentionArePrunedOffTheLoop) {
  Close();
  options_.raw_retention_seconds = 60;
  Open();
  const Started s = StartOneTask();
  SendSamples(s.session, s.sink, s.assign, 0, v1::PHASE_TRAIN, {10, 10, 10, 10});
  SendDone(s.session, s.sink, s.assign, 1, 4);
  const v1::Job ended = WaitForJobState(s.job_id, v1::JOB_STATE_SUCCEEDED);
  auto reader = *SqliteJobStore::Open(dir_.path() + "/jobs.db");  // the test's own connection
  ASSERT_EQ(reader->LoadSampleBatches(s.assign.task_id(), s.assign.attempt())->size(), 1u);

  coordinator_->RunSync([] {});
  EXPECT_EQ(reader->LoadSampleBatches(s.assign.task_id(), s.assign.attempt())->size(), 1u) << "within retention";
  clock_.AdvanceNs(61'000'000'000);
  // The pruner counts after its commit, so the rows can be gone a moment before the count moves: wait for both.
  auto pruned = [&] {
    double n = 0;
    for (const auto& f : metrics_.registry()->Collect()) {
      if (f.name == "hetbench_jobs_raw_batches_pruned_total") n = f.metric.at(0).counter.value;
    }
    return n;
  };
  ASSERT_TRUE(hetbench::testing::WaitFor(
      [&] {
        coordinator_->RunSync([] {});
        return reader->LoadSampleBatches(s.assign.task_id(), s.assign.attempt())->empty() && pruned() >= 1;
      },
      absl::Seconds(10)));
  EXPECT_EQ(pruned(), 1);
  EXPECT_EQ(Get(s.job_id).tasks(0).result().phases(0).stats().count(), 4) << "the aggregate stays";
}

TEST_F(CoordinatorTest, AModelFilterLongerThanANameIsRefusedQuotedShort) {
  JobFilter filter;
  filter.model = std::string(1 << 20, 'm');  // 1 MB
  absl::Notification done;
  absl::Status status;
  coordinator_->api().ListJobs(filter, [&](absl::StatusOr<JobPage> page) {
    status = page.status();
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(status.message().size(), 300u);
  EXPECT_THAT(std::string(status.message()), HasSubstr("model: 'mmmm"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("(1048576 characters)"));
}

TEST_F(CoordinatorTest, RestartKeepsAcceptedJobsAndRequeuesRunningTasks) {
  v1::JobSpec spec;
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok());
  auto sink = std::make_shared<FakeAgentSink>();
  Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  Close();  // the coordinator stops while the task runs
  Open();
  // The task waits a lease for its agent to resume it; the agent does not come.
  EXPECT_EQ(Get(job->id()).tasks(0).state(), v1::TASK_STATE_RUNNING);
  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds + 1) * 1e9));
  coordinator_->RunSync([] {});
  v1::Job j = Get(job->id());
  EXPECT_EQ(j.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(j.tasks(0).attempt(), 1);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("coordinator restart"));
  auto again = Submit(spec);  // ids continue after the stored ones
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), "job-000002");
  EXPECT_TRUE(store_->CheckIntegrity().ok());
}

// The loop's writer commits while the loop goes on. A failed commit: the
// submit it held is answered "not stored" (never accepted), the coordinator
// reloads what the store has, job numbers never go back, and what commits
// afterwards is stored as usual.
TEST_F(CoordinatorTest, AFailedCommitAnswersNotStoredAndTheCoordinatorReloads) {
  Close();
  auto inner = SqliteJobStore::Open(dir_.path() + "/jobs.db");
  ASSERT_TRUE(inner.ok()) << inner.status();
  hetbench::testing::CommitFailingStore store(*std::move(inner));
  coordinator_ = std::make_unique<Coordinator>(&store, &metrics_, &clock_, options_);
  ASSERT_TRUE(coordinator_->Start().ok());
  auto first = Submit(v1::JobSpec());
  ASSERT_TRUE(first.ok()) << first.status();

  store.FailCommits(1);
  auto lost = Submit(v1::JobSpec());
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lost.status().message(), HasSubstr("job not stored"));
  EXPECT_EQ(store.failed(), 1);

  auto after = Submit(v1::JobSpec());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->id(), "job-000003") << "the lost job's number is not given again";
  EXPECT_EQ(Get(first->id()).state(), v1::JOB_STATE_QUEUED) << "reloaded from the store";
  absl::Notification got;
  absl::Status lost_read;
  coordinator_->api().GetJob("job-000002", [&](absl::StatusOr<v1::Job> j) {
    lost_read = j.status();
    got.Notify();
  });
  got.WaitForNotification();
  EXPECT_EQ(lost_read.code(), absl::StatusCode::kNotFound) << "the lost job is gone from memory too";

  Close();  // a restart on the same store: the two stored jobs, not the lost one
  Open();
  EXPECT_EQ(Get(first->id()).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(Get(after->id()).state(), v1::JOB_STATE_QUEUED);
  EXPECT_TRUE(store_->CheckIntegrity().ok());
}

// Found by the chaos test (40 coordinator kills): restarts used to consume a
// task's retry budget, so a job could fail for the coordinator's crashes.

TEST_F(CoordinatorTest, RestartsDoNotUseUpATasksAttemptsButAreBounded) {
  v1::JobSpec spec;
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok());
  for (int i = 1; i <= options_.max_restarts + 1; ++i) {
    auto sink = std::make_shared<FakeAgentSink>();
    Connect("a1", sink);
    ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
    Close();
    Open();
    clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds + 1) * 1e9));
    coordinator_->RunSync([] {});
    v1::Job j = Get(job->id());
    EXPECT_EQ(j.tasks(0).restarts(), i);
    if (i <= options_.max_restarts) {
      ASSERT_EQ(j.tasks(0).state(), v1::TASK_STATE_QUEUED) << "restart " << i << ": " << j.tasks(0).error();
      EXPECT_EQ(j.tasks(0).attempt(), i);  // attempts still number the samples apart
    } else {
      EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_FAILED);
      EXPECT_THAT(j.tasks(0).error(), HasSubstr("11 restarts interrupted it (at most 10)"));
    }
  }
}

TEST_F(CoordinatorTest, CancelStopsQueuedTasksAndTellsTheAgent) {
  v1::JobSpec spec;
  spec.add_batch_sizes(16);
  spec.add_batch_sizes(32);
  auto job = Submit(spec);
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  absl::Notification done;
  coordinator_->api().CancelJob(job->id(), [&](absl::StatusOr<v1::Job> j) {
    EXPECT_TRUE(j.ok());
    EXPECT_EQ(j->state(), v1::JOB_STATE_CANCELLED);
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return !v.empty() && v.back().has_cancel(); }));
  const v1::Assign a = Assigns(*sink).back();
  SendDone(s, sink, a, 0, 0, v1::TASK_STATE_CANCELLED);
  coordinator_->RunSync([] {});
  v1::Job j = Get(job->id());
  EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_CANCELLED);
  EXPECT_EQ(j.tasks(1).state(), v1::TASK_STATE_CANCELLED);
}

TEST_F(CoordinatorTest, WatchSendsSnapshotThenEventsAndClosesAtTheEnd) {
  v1::JobSpec spec;
  auto job = Submit(spec);
  auto watch = std::make_shared<FakeSink<v1::JobEvent>>();
  coordinator_->api().WatchJob(job->id(), /*summary=*/false, watch);
  auto summary = std::make_shared<FakeSink<v1::JobEvent>>();
  coordinator_->api().WatchJob(job->id(), /*summary=*/true, summary);
  ASSERT_TRUE(watch->WaitFor([](auto& v) { return !v.empty(); }));
  EXPECT_EQ(watch->messages()[0].message(), "snapshot");
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  SendDone(s, sink, a, 0, 0);
  ASSERT_TRUE(watch->WaitFor([](auto& v) { return v.back().job().state() == v1::JOB_STATE_SUCCEEDED; }));
  ASSERT_TRUE(summary->WaitFor([](auto& v) { return v.back().job().state() == v1::JOB_STATE_SUCCEEDED; }));
  coordinator_->RunSync([] {});
  EXPECT_TRUE(watch->closed());
  EXPECT_TRUE(watch->status().ok());
  EXPECT_TRUE(summary->closed());
  // The full view carries the result; the summary the same states without it.
  EXPECT_TRUE(watch->messages().back().job().tasks(0).has_result());
  EXPECT_FALSE(summary->messages().back().job().tasks(0).has_result());
  EXPECT_EQ(summary->messages().back().job().tasks(0).state(), v1::TASK_STATE_SUCCEEDED);

  auto missing = std::make_shared<FakeSink<v1::JobEvent>>();
  coordinator_->api().WatchJob("job-999999", false, missing);
  // Not in memory: read from the store off the loop, answered from the reader's thread.
  ASSERT_TRUE(hetbench::testing::WaitFor([&] { return missing->closed(); }, absl::Seconds(10)));
  EXPECT_EQ(missing->status().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CoordinatorTest, ASubmitRetriedWithItsRequestIdReturnsTheFirstJobEvenAfterARestart) {
  auto submit = [&](const std::string& request_id) {
    absl::Notification done;
    absl::StatusOr<Coordinator::Submitted> result;
    coordinator_->api().SubmitJob(v1::JobSpec(), request_id, absl::InfiniteFuture(),
                            [&](absl::StatusOr<Coordinator::Submitted> s) {
                              result = std::move(s);
                              done.Notify();
                            });
    done.WaitForNotification();
    return result;
  };
  auto first = submit("req-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->existing);
  auto again = submit("req-1");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->existing);
  EXPECT_EQ(again->job.id(), first->job.id());
  auto other = submit("req-2");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->job.id(), first->job.id());
  Close();
  Open();
  auto after_restart = submit("req-1");  // found in the store now
  ASSERT_TRUE(after_restart.ok());
  EXPECT_TRUE(after_restart->existing);
  EXPECT_EQ(after_restart->job.id(), first->job.id());
  EXPECT_EQ(List().size(), 2u);
  // An ended job has left memory: its request id is found by the store reader, off the loop.
  absl::Notification cancelled;
  coordinator_->api().CancelJob(other->job.id(), [&](absl::StatusOr<v1::Job>) { cancelled.Notify(); });
  cancelled.WaitForNotification();
  coordinator_->RunSync([] {});
  auto ended = submit("req-2");
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_TRUE(ended->existing);
  EXPECT_EQ(ended->job.id(), other->job.id());
  EXPECT_EQ(ended->job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(List().size(), 2u);
  EXPECT_EQ(submit(std::string(200, 'x')).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, ASubmitThatWaitedPastItsDeadlineCreatesNothing) {
  absl::Notification done;
  absl::Status status;
  coordinator_->api().SubmitJob(v1::JobSpec(), "late", absl::Now() - absl::Seconds(1),
                          [&](absl::StatusOr<Coordinator::Submitted> s) {
                            status = s.status();
                            done.Notify();
                          });
  done.WaitForNotification();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(List().empty());
}

TEST_F(CoordinatorTest, AMillionEntrySpecIsRefusedAtTheEdgeByItsCount) {
  v1::JobSpec spec;
  for (int i = 0; i < 1'000'000; ++i) spec.add_batch_sizes(1 + i % 1000);
  auto r = Submit(spec);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("batch_sizes: 1000000 entries: at most 64"));
  EXPECT_TRUE(List().empty());
}

TEST_F(CoordinatorTest, AnEndedJobLeavesMemoryAndIsReadFromTheStore) {
  Started t = StartOneTask();
  SendSamples(t.session, t.sink, t.assign, 0, v1::PHASE_TRAIN, {10, 20, 30});
  SendDone(t.session, t.sink, t.assign, 1, 3);
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.tasks(0).result().phases(0).stats().count(), 3);  // read back from the store, results included
  size_t live = 99;
  coordinator_->RunSync([&] { live = coordinator_->live_jobs(); });
  EXPECT_EQ(live, 0u);
  ASSERT_EQ(List().size(), 1u);
  // A TaskDone sent again for the ended attempt is still answered (from the store).
  SendDone(t.session, t.sink, t.assign, 1, 3);
  EXPECT_TRUE(t.sink->WaitFor([](auto& v) {
    int done_acks = 0;
    for (const auto& m : v) done_acks += m.has_ack() && m.ack().done();
    return done_acks == 2;
  }));
}

TEST_F(CoordinatorTest, AQueuedTasksPendingReasonIsABoundedSummary) {
  v1::JobSpec spec;
  for (int b = 1; b <= 60; ++b) spec.add_batch_sizes(b);
  std::vector<std::shared_ptr<FakeAgentSink>> sinks;
  for (int i = 0; i < 40; ++i) {
    sinks.push_back(std::make_shared<FakeAgentSink>());
    Connect(absl::StrCat("agent-", i), sinks.back());
  }
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok());
  coordinator_->RunSync([] {});
  v1::Job j = Get(job->id());
  int queued = 0;
  for (const v1::Task& t : j.tasks()) {
    if (t.state() != v1::TASK_STATE_QUEUED) continue;
    ++queued;
    EXPECT_THAT(t.pending_reason(), HasSubstr("waiting: 40 matching devices busy, e.g. agent-"));
    EXPECT_LT(t.pending_reason().size(), 120u);
  }
  EXPECT_EQ(queued, 20);
  EXPECT_LT(j.ByteSizeLong(), 64u * 1024);
}

TEST_F(CoordinatorTest, AWatcherGetsTheLatestStateNotACopyPerEvent) {
  Started t = StartOneTask();
  auto watcher = std::make_shared<FakeSink<v1::JobEvent>>();
  coordinator_->api().WatchJob(t.job_id, /*summary=*/true, watcher);
  ASSERT_TRUE(watcher->WaitFor([](auto& v) { return !v.empty(); }));
  for (int step = 1; step <= 500; ++step) {
    v1::AgentMessage m;
    m.mutable_progress()->set_task_id(t.assign.task_id());
    m.mutable_progress()->set_attempt(1);
    m.mutable_progress()->set_phase(v1::PHASE_TRAIN);
    m.mutable_progress()->set_step(step);
    m.mutable_progress()->set_total_steps(500);
    coordinator_->OnAgentMessage(t.session, t.sink, m);
  }
  // The last progress reaches the watcher (within a watch interval)...
  ASSERT_TRUE(watcher->WaitFor([](auto& v) { return v.back().job().tasks(0).step() == 500; }));
  // ...without one event per update: events are coalesced to the latest state.
  EXPECT_LT(watcher->messages().size(), 100u);
}

}  // namespace
}  // namespace hetbench::server::coordinator_testing
