// The coordinator driven directly: fake agent streams, a simulated clock and
// a real SQLite store. No sleeps: every wait is on a condition with a deadline.
#include "server/service/coordinator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include <cmath>
#include <filesystem>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;

template <typename T>
class FakeSink final : public MessageSink<T> {
 public:
  void Send(T msg) override {
    absl::MutexLock l(&mu_);
    if (!closed_) messages_.push_back(std::move(msg));
  }
  void Close(const grpc::Status& status) override {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    status_ = status;
  }
  /// Waits until `pred(messages)` holds; false after 10 s.
  bool WaitFor(std::function<bool(const std::vector<T>&)> pred) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(messages_); };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(10));
  }
  std::vector<T> messages() {
    absl::MutexLock l(&mu_);
    return messages_;
  }
  bool closed() {
    absl::MutexLock l(&mu_);
    return closed_;
  }
  grpc::Status status() {
    absl::MutexLock l(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  std::vector<T> messages_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

using FakeAgentSink = FakeSink<v1::CoordinatorMessage>;

/// Every Assign the sink received, in order.
std::vector<v1::Assign> Assigns(FakeAgentSink& sink) {
  std::vector<v1::Assign> out;
  for (const auto& m : sink.messages()) {
    if (m.has_assign()) out.push_back(m.assign());
  }
  return out;
}

/// The first Rejected the sink saw, once it sees one (empty after the wait: none came).
std::optional<v1::Rejected> WaitForRejected(FakeSink<v1::CoordinatorMessage>& sink) {
  sink.WaitFor([](auto& v) {
    for (const auto& x : v) {
      if (x.has_rejected()) return true;
    }
    return false;
  });
  for (const auto& x : sink.messages()) {
    if (x.has_rejected()) return x.rejected();
  }
  return std::nullopt;
}

int CountAssigns(const std::vector<v1::CoordinatorMessage>& m) {
  int n = 0;
  for (const auto& x : m) n += x.has_assign() ? 1 : 0;
  return n;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { Close(); }
  void Open() {
    store_ = *SqliteJobStore::Open(dir_.path() + "/jobs.db");
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &metrics_, &clock_, options_);
    ASSERT_TRUE(coordinator_->Start().ok());
  }
  void Close() {
    if (coordinator_) coordinator_->Stop();
    coordinator_.reset();
    store_.reset();
  }

  absl::StatusOr<v1::Job> Submit(v1::JobSpec spec) {
    absl::Notification done;
    absl::StatusOr<v1::Job> result;
    coordinator_->SubmitJob(std::move(spec), [&](absl::StatusOr<v1::Job> j) {
      result = std::move(j);
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }
  v1::Job Get(const std::string& id) {
    absl::Notification done;
    v1::Job job;
    coordinator_->GetJob(id, [&](absl::StatusOr<v1::Job> j) {
      job = *j;
      done.Notify();
    });
    done.WaitForNotification();
    return job;
  }
  std::vector<v1::Job> List() {
    absl::Notification done;
    std::vector<v1::Job> jobs;
    coordinator_->ListJobs(JobFilter{1000}, [&](absl::StatusOr<JobPage> page) {
      // Newest first; tests read them oldest first.
      if (page.ok()) jobs.assign(page->jobs.rbegin(), page->jobs.rend());
      done.Notify();
    });
    done.WaitForNotification();
    return jobs;
  }

  std::vector<v1::AgentInfo> Agents() {
    absl::Notification done;
    std::vector<v1::AgentInfo> agents;
    coordinator_->ListAgents([&](std::vector<v1::AgentInfo> a) {
      agents = std::move(a);
      done.Notify();
    });
    done.WaitForNotification();
    return agents;
  }

  /// Connects a fake agent with `devices` CPU devices; returns its session id.
  uint64_t Connect(const std::string& agent_id, std::shared_ptr<FakeAgentSink> sink, int devices = 1,
                   const std::vector<v1::ResumeTask>& resume = {}) {
    uint64_t session = coordinator_->NewSessionId();
    v1::AgentMessage m;
    m.mutable_hello()->set_agent_id(agent_id);
    for (const v1::ResumeTask& r : resume) *m.mutable_hello()->add_resume() = r;
    for (int i = 0; i < devices; ++i) {
      v1::Device* d = m.mutable_hello()->add_devices();
      d->set_id("cpu" + std::to_string(i));
      d->set_kind(v1::DEVICE_KIND_CPU);
    }
    coordinator_->OnAgentMessage(session, sink, m);
    EXPECT_TRUE(sink->WaitFor([](auto& v) { return !v.empty() && v[0].has_welcome(); }));
    return session;
  }

  void SendSamples(uint64_t session, std::shared_ptr<FakeAgentSink> sink, const v1::Assign& a, uint64_t seq,
                   v1::Phase phase, std::vector<int64_t> durations) {
    v1::AgentMessage m;
    v1::SampleBatch* b = m.mutable_samples();
    b->set_task_id(a.task_id());
    b->set_attempt(a.attempt());
    b->set_seq(seq);
    b->set_phase(phase);
    int64_t t = 0;
    for (int64_t d : durations) {
      b->add_start_ns(t);
      b->add_duration_ns(d);
      b->add_items(a.batch_size());
      t += d;
    }
    coordinator_->OnAgentMessage(session, sink, m);
  }

  void SendDone(uint64_t session, std::shared_ptr<FakeAgentSink> sink, const v1::Assign& a, uint64_t batches,
                int64_t samples, v1::TaskState state = v1::TASK_STATE_SUCCEEDED, uint64_t power_batches = 0) {
    v1::AgentMessage m;
    v1::TaskDone* d = m.mutable_done();
    d->set_task_id(a.task_id());
    d->set_attempt(a.attempt());
    d->set_state(state);
    d->set_batches_sent(batches);
    d->set_samples_sent(samples);
    d->set_power_batches_sent(power_batches);
    d->mutable_result()->set_test_accuracy(0.85);
    coordinator_->OnAgentMessage(session, sink, m);
  }

  /// A default job whose one task is assigned to a freshly connected agent.
  struct Started {
    std::string job_id;
    uint64_t session = 0;
    std::shared_ptr<FakeAgentSink> sink;
    v1::Assign assign;
  };
  Started StartOneTask(const std::string& agent_id = "a1") {
    Started out;
    auto job = Submit(v1::JobSpec());
    EXPECT_TRUE(job.ok()) << job.status();
    if (job.ok()) out.job_id = job->id();
    out.sink = std::make_shared<FakeAgentSink>();
    out.session = Connect(agent_id, out.sink);
    EXPECT_TRUE(out.sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
    const std::vector<v1::Assign> assigns = Assigns(*out.sink);
    if (!assigns.empty()) out.assign = assigns.back();
    return out;
  }

  v1::Job WaitForJobState(const std::string& id, v1::JobState state) {
    for (int i = 0; i < 1000; ++i) {
      v1::Job j = Get(id);
      if (j.state() == state) return j;
      coordinator_->RunSync([] {});
    }
    return Get(id);
  }

  hetbench::testing::TempDir dir_{"hetbench-coord"};
  SimulatedClock clock_;
  Metrics metrics_;
  CoordinatorOptions options_;
  std::unique_ptr<SqliteJobStore> store_;
  std::unique_ptr<Coordinator> coordinator_;
};

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

TEST_F(CoordinatorTest, JobRunsOnAConnectedAgentAndAggregatesStoredSamples) {
  v1::JobSpec spec;
  spec.add_batch_sizes(32);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_QUEUED);  // no agent yet

  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  EXPECT_EQ(a.batch_size(), 32);
  EXPECT_EQ(a.attempt(), 1);
  EXPECT_EQ(a.model(), "mlp");

  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 20, 30, 40});
  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 20, 30, 40});  // a retry: must not be stored twice
  SendSamples(s, sink, a, 1, v1::PHASE_INFER, {5, 5});
  SendDone(s, sink, a, 2, 6);
  v1::Job done = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.DebugString();
  const v1::TaskResult& r = done.tasks(0).result();
  EXPECT_EQ(r.samples_stored(), 6);
  ASSERT_EQ(r.phases_size(), 2);
  EXPECT_EQ(r.phases(0).phase(), v1::PHASE_TRAIN);
  EXPECT_EQ(r.phases(0).stats().count(), 4);
  EXPECT_DOUBLE_EQ(r.phases(0).stats().p50_ns(), 25);
  EXPECT_EQ(r.phases(1).stats().count(), 2);
  EXPECT_DOUBLE_EQ(r.test_accuracy(), 0.85);

  int acks = 0, done_acks = 0;
  for (auto& m : sink->messages()) {
    if (m.has_ack()) (m.ack().done() ? done_acks : acks) += 1;
  }
  EXPECT_EQ(acks, 3);  // the duplicate is acknowledged too, so the agent stops resending
  EXPECT_EQ(done_acks, 1);
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

TEST_F(CoordinatorTest, MissingSamplesFailTheTaskWithTheCounts) {
  v1::JobSpec spec;
  ASSERT_TRUE(Submit(spec).ok());
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 20});
  SendDone(s, sink, a, 2, 5);  // claims more than it sent
  v1::Job j = WaitForJobState(a.task_id().substr(0, 10), v1::JOB_STATE_FAILED);
  ASSERT_EQ(j.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("stored 1 of 2 batches and 2 of 5 samples"));
}

TEST_F(CoordinatorTest, NeverTwoTasksOnOneDevice) {
  v1::JobSpec spec;
  spec.add_batch_sizes(16);
  spec.add_batch_sizes(32);
  spec.add_batch_sizes(64);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok());
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink, /*devices=*/2);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
  coordinator_->RunSync([] {});
  EXPECT_EQ(CountAssigns(sink->messages()), 2);  // the third waits for a free device
  const std::vector<v1::Assign> assigns = Assigns(*sink);
  EXPECT_NE(assigns[0].device_id(), assigns[1].device_id());
  SendDone(s, sink, assigns[0], 0, 0);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 3; }));
  const std::vector<v1::Assign> now = Assigns(*sink);
  EXPECT_EQ(now[2].device_id(), assigns[0].device_id());  // the freed device, not the busy one
}

TEST_F(CoordinatorTest, LostAgentsTaskIsRequeuedAndItsLateSamplesAreFenced) {
  v1::JobSpec spec;
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok());
  auto sink1 = std::make_shared<FakeAgentSink>();
  uint64_t s1 = Connect("a1", sink1);
  ASSERT_TRUE(sink1->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign first = Assigns(*sink1).back();
  // The agent goes silent: after the lease it is lost and its task re-queued.
  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds + 1) * 1e9));
  coordinator_->RunSync([] {});
  EXPECT_TRUE(sink1->closed());
  v1::Job j = Get(job->id());
  EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_QUEUED);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("attempt 1 lost"));

  auto sink2 = std::make_shared<FakeAgentSink>();
  uint64_t s2 = Connect("a2", sink2);
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign second = Assigns(*sink2).back();
  EXPECT_EQ(second.attempt(), 2);

  // The old agent's samples for attempt 1 are refused, not mixed in.
  auto late = std::make_shared<FakeAgentSink>();
  uint64_t s3 = Connect("a1", late);
  SendSamples(s3, late, first, 0, v1::PHASE_TRAIN, {999, 999});
  ASSERT_TRUE(late->WaitFor([](auto& v) {
    for (auto& m : v) {
      if (m.has_cancel()) return true;
    }
    return false;
  }));
  SendSamples(s2, sink2, second, 0, v1::PHASE_TRAIN, {10, 20});
  SendDone(s2, sink2, second, 1, 2);
  v1::Job done = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.tasks(0).result().samples_stored(), 2);
  EXPECT_DOUBLE_EQ(done.tasks(0).result().phases(0).stats().max_ns(), 20);
  (void)s1;
}

v1::ResumeTask Resume(const v1::Assign& a, bool finished = false) {
  v1::ResumeTask r;
  r.set_task_id(a.task_id());
  r.set_attempt(a.attempt());
  r.set_finished(finished);
  return r;
}

int CountAcks(const std::vector<v1::CoordinatorMessage>& m, bool done) {
  int n = 0;
  for (const auto& x : m) n += x.has_ack() && x.ack().done() == done ? 1 : 0;
  return n;
}

const v1::Cancel* FindCancel(const std::vector<v1::CoordinatorMessage>& m) {
  for (const auto& x : m) {
    if (x.has_cancel()) return &x.cancel();
  }
  return nullptr;
}

// Batches are stored by the batch writer after the loop has handed them on;
// a TaskDone right behind them waits for their commit, then is judged on the
// complete counts (without the wait it would see fewer and fail the task).
// Every batch is acked once, after its commit, and the TaskDone last.
TEST_F(CoordinatorTest, ATaskDoneRightBehindItsBatchesWaitsForThemToBeStored) {
  const Started t = StartOneTask();
  constexpr int kBatches = 200;
  for (int seq = 0; seq < kBatches; ++seq) {
    SendSamples(t.session, t.sink, t.assign, seq, v1::PHASE_TRAIN, std::vector<int64_t>(100, 1000 + seq));
  }
  SendDone(t.session, t.sink, t.assign, kBatches, 100 * kBatches);
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAcks(v, true) == 1; }));
  coordinator_->RunSync([] {});
  const std::vector<v1::CoordinatorMessage> sent = t.sink->messages();
  EXPECT_EQ(CountAcks(sent, false), kBatches);
  EXPECT_TRUE(sent.back().has_ack() && sent.back().ack().done()) << "the TaskDone's ack comes after every batch's";
  const v1::Task task = Get(t.job_id).tasks(0);
  ASSERT_EQ(task.state(), v1::TASK_STATE_SUCCEEDED) << task.error();
  EXPECT_EQ(task.result().samples_stored(), 100 * kBatches);
  EXPECT_EQ(task.result().phases(0).stats().count(), 100 * kBatches);
  auto stored = store_->LoadSampleBatches(t.assign.task_id(), 1);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), static_cast<size_t>(kBatches));
}

// Stream resume: the stream breaks mid-task, the agent reconnects within its
// lease listing the attempt, sends its unacknowledged batches again and goes
// on. Same attempt, no re-queue, each batch stored once.
TEST_F(CoordinatorTest, ABrokenStreamIsResumedWithinTheLeaseAndResentBatchesAreStoredOnce) {
  const Started t = StartOneTask();
  SendSamples(t.session, t.sink, t.assign, 0, v1::PHASE_TRAIN, {10, 20});
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAcks(v, false) == 1; }));
  // Stored, but its ack is lost with the stream.
  SendSamples(t.session, t.sink, t.assign, 1, v1::PHASE_TRAIN, {30, 40});
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds - 1) * 1e9));
  coordinator_->RunSync([] {});
  v1::Job j = Get(t.job_id);
  ASSERT_EQ(j.tasks(0).state(), v1::TASK_STATE_RUNNING) << "the lease has not run out: the task waits";

  auto sink2 = std::make_shared<FakeAgentSink>();
  uint64_t s2 = Connect("a1", sink2, 1, {Resume(t.assign)});
  coordinator_->RunSync([] {});
  EXPECT_EQ(CountAssigns(sink2->messages()), 0);  // re-bound, not re-assigned
  EXPECT_EQ(FindCancel(sink2->messages()), nullptr);
  j = Get(t.job_id);
  EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(j.tasks(0).attempt(), 1);
  EXPECT_EQ(j.tasks(0).resumes(), 1);
  // Past the old deadline nothing is re-queued: the agent is back.
  clock_.AdvanceNs(static_cast<int64_t>(2 * 1e9));
  SendSamples(s2, sink2, t.assign, 1, v1::PHASE_TRAIN, {30, 40});  // sent again: acked, not stored twice
  SendSamples(s2, sink2, t.assign, 2, v1::PHASE_INFER, {5});
  SendDone(s2, sink2, t.assign, 3, 5);
  v1::Job done = WaitForJobState(t.job_id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.tasks(0).error();
  EXPECT_EQ(done.tasks(0).attempt(), 1);
  EXPECT_EQ(done.tasks(0).result().samples_stored(), 5);
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return CountAcks(v, false) == 2 && CountAcks(v, true) == 1; }));
}

TEST_F(CoordinatorTest, AnAgentThatDoesNotComeBackWithinTheLeaseLosesItsTask) {
  const Started t = StartOneTask();
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds - 0.5) * 1e9));
  coordinator_->RunSync([] {});
  EXPECT_EQ(Get(t.job_id).tasks(0).state(), v1::TASK_STATE_RUNNING);
  clock_.AdvanceNs(static_cast<int64_t>(1e9));
  coordinator_->RunSync([] {});
  v1::Job j = Get(t.job_id);
  EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_QUEUED);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("attempt 1 lost: agent a1 stream closed by peer"));
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("did not resume within the lease"));
  // The same agent coming back later still holding attempt 1 is fenced.
  auto sink2 = std::make_shared<FakeAgentSink>();
  Connect("a1", sink2, 1, {Resume(t.assign)});
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return FindCancel(v) != nullptr; }));
  const v1::Cancel cancel = *FindCancel(sink2->messages());
  EXPECT_EQ(cancel.attempt(), 1);
  EXPECT_TRUE(cancel.fenced());
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  EXPECT_EQ(Assigns(*sink2).back().attempt(), 2);
}

// `get agents` while an agent's tasks wait for it: it is listed, disconnected,
// with the devices it holds, the deadline and why its stream ended; after a
// coordinator restart with what the store knows (id and devices held).
TEST_F(CoordinatorTest, AnAgentWaitingToResumeIsListedAsDisconnectedUntilItsLeaseRunsOut) {
  const Started t = StartOneTask();
  ASSERT_EQ(Agents().size(), 1u);
  EXPECT_EQ(Agents()[0].resume_deadline_unix_seconds(), 0);  // connected
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  clock_.AdvanceNs(static_cast<int64_t>(1e9));
  std::vector<v1::AgentInfo> agents = Agents();
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].agent_id(), "a1");
  EXPECT_EQ(agents[0].devices_size(), 1);  // what it offered, from its Hello
  ASSERT_EQ(agents[0].busy_device_ids_size(), 1);
  EXPECT_EQ(agents[0].busy_device_ids(0), "cpu0");
  EXPECT_EQ(agents[0].disconnect_reason(), "stream closed by peer");
  EXPECT_NEAR(agents[0].resume_deadline_unix_seconds(), clock_.SystemNowSeconds() + options_.lease_seconds - 1, 1e-3);

  Close();
  Open();
  agents = Agents();
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].agent_id(), "a1");
  EXPECT_EQ(agents[0].devices_size(), 0);  // not in the store
  ASSERT_EQ(agents[0].busy_device_ids_size(), 1);
  EXPECT_THAT(agents[0].disconnect_reason(), HasSubstr("coordinator restart"));
  EXPECT_GT(agents[0].resume_deadline_unix_seconds(), clock_.SystemNowSeconds());

  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds + 1) * 1e9));
  coordinator_->RunSync([] {});
  EXPECT_TRUE(Agents().empty());  // its task is re-queued; nothing waits for it
  EXPECT_EQ(Get(t.job_id).tasks(0).state(), v1::TASK_STATE_QUEUED);
}

TEST_F(CoordinatorTest, AnAgentBackWithoutItsTaskHasItReQueuedAtOnce) {
  const Started t = StartOneTask();
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  auto sink2 = std::make_shared<FakeAgentSink>();
  Connect("a1", sink2);  // a restarted agent: it holds nothing
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  EXPECT_EQ(Assigns(*sink2).back().attempt(), 2);
  EXPECT_THAT(Get(t.job_id).tasks(0).error(), HasSubstr("came back without it"));
}

// A job cancelled while its agent's stream is down: the cancel reaches the
// agent when it resumes (a user's cancel, so partial results are delivered).
TEST_F(CoordinatorTest, ACancelMadeWhileTheStreamIsDownReachesTheAgentWhenItResumes) {
  const Started t = StartOneTask();
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  absl::Notification cancelled;
  coordinator_->CancelJob(t.job_id, [&](absl::StatusOr<v1::Job> j) {
    EXPECT_TRUE(j.ok());
    cancelled.Notify();
  });
  cancelled.WaitForNotification();
  EXPECT_EQ(Get(t.job_id).tasks(0).state(), v1::TASK_STATE_RUNNING);  // until the agent confirms
  auto sink2 = std::make_shared<FakeAgentSink>();
  uint64_t s2 = Connect("a1", sink2, 1, {Resume(t.assign)});
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return FindCancel(v) != nullptr; }));
  EXPECT_FALSE(FindCancel(sink2->messages())->fenced());
  SendSamples(s2, sink2, t.assign, 0, v1::PHASE_TRAIN, {10, 20});
  SendDone(s2, sink2, t.assign, 1, 2, v1::TASK_STATE_CANCELLED);
  v1::Job j = WaitForJobState(t.job_id, v1::JOB_STATE_CANCELLED);
  for (int i = 0; i < 100 && j.tasks(0).state() == v1::TASK_STATE_RUNNING; ++i) j = Get(t.job_id);
  EXPECT_EQ(j.tasks(0).state(), v1::TASK_STATE_CANCELLED);
  EXPECT_TRUE(j.tasks(0).result().partial());
  EXPECT_EQ(j.tasks(0).result().samples_stored(), 2);
}

// The TaskDone went through but its ack was lost with the stream: the agent
// sends it (and batches whose acks were lost) again; they are acknowledged
// and the final result stays as it was.
TEST_F(CoordinatorTest, MessagesOfAFinishedAttemptSentAgainAreAcknowledgedNotStored) {
  const Started t = StartOneTask();
  SendSamples(t.session, t.sink, t.assign, 0, v1::PHASE_TRAIN, {10, 20});
  SendDone(t.session, t.sink, t.assign, 1, 2);
  ASSERT_EQ(WaitForJobState(t.job_id, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  auto sink2 = std::make_shared<FakeAgentSink>();
  uint64_t s2 = Connect("a1", sink2, 1, {Resume(t.assign, /*finished=*/true)});
  SendSamples(s2, sink2, t.assign, 0, v1::PHASE_TRAIN, {99, 99});
  SendDone(s2, sink2, t.assign, 1, 2);
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return CountAcks(v, false) == 1 && CountAcks(v, true) == 1; }));
  EXPECT_EQ(FindCancel(sink2->messages()), nullptr);
  v1::Job j = Get(t.job_id);
  EXPECT_EQ(j.tasks(0).result().samples_stored(), 2);
  EXPECT_DOUBLE_EQ(j.tasks(0).result().phases(0).stats().max_ns(), 20);
}

// A coordinator restart is a broken stream for every agent: an agent that
// reconnects within the lease resumes its attempt; the restart costs nothing.
TEST_F(CoordinatorTest, AfterARestartAnAgentResumesItsRunningTask) {
  const Started t = StartOneTask();
  SendSamples(t.session, t.sink, t.assign, 0, v1::PHASE_TRAIN, {10, 20});
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAcks(v, false) == 1; }));
  Close();
  Open();
  auto sink2 = std::make_shared<FakeAgentSink>();
  uint64_t s2 = Connect("a1", sink2, 1, {Resume(t.assign)});
  coordinator_->RunSync([] {});
  EXPECT_EQ(CountAssigns(sink2->messages()), 0);
  EXPECT_EQ(FindCancel(sink2->messages()), nullptr);
  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds + 1) * 1e9));  // past the restart's deadline
  SendSamples(s2, sink2, t.assign, 1, v1::PHASE_TRAIN, {30});
  SendDone(s2, sink2, t.assign, 2, 3);
  v1::Job done = WaitForJobState(t.job_id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.tasks(0).error();
  EXPECT_EQ(done.tasks(0).attempt(), 1);
  EXPECT_EQ(done.tasks(0).restarts(), 0);
  EXPECT_EQ(done.tasks(0).resumes(), 1);
  EXPECT_EQ(done.tasks(0).result().samples_stored(), 3);  // the batch acked before the restart, and the rest
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
  coordinator_->CancelJob(job->id(), [&](absl::StatusOr<v1::Job> j) {
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
  coordinator_->WatchJob(job->id(), /*summary=*/false, watch);
  auto summary = std::make_shared<FakeSink<v1::JobEvent>>();
  coordinator_->WatchJob(job->id(), /*summary=*/true, summary);
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
  coordinator_->WatchJob("job-999999", false, missing);
  coordinator_->RunSync([] {});
  EXPECT_EQ(missing->status().error_code(), grpc::StatusCode::NOT_FOUND);
}

v1::PowerBatch Power(const v1::Assign& a, uint64_t seq, const std::string& sensor, v1::PowerSource source,
                     std::vector<std::pair<int64_t, double>> readings, bool counter) {
  v1::PowerBatch b;
  b.set_task_id(a.task_id());
  b.set_attempt(a.attempt());
  b.set_seq(seq);
  b.mutable_sensor()->set_name(sensor);
  b.mutable_sensor()->set_source(source);
  b.mutable_sensor()->set_device_id("cpu0");
  b.mutable_sensor()->set_available(true);
  b.mutable_sensor()->set_update_period_seconds(0.1);
  b.mutable_sensor()->set_has_energy_counter(counter);
  if (source == v1::POWER_SOURCE_MODELED) b.set_assumptions("MODELED, not measured: test");
  for (auto [t, v] : readings) {
    b.add_t_ns(t);
    b.add_watts(counter ? NAN : v);
    b.add_joules(counter ? v : NAN);
  }
  return b;
}

TEST_F(CoordinatorTest, PowerReadingsBecomeEnergyPerPhaseAndCostPerSample) {
  v1::JobSpec spec;
  (*spec.mutable_cost()->mutable_usd_per_hour())["cpu"] = 3.6;  // 0.001 USD per second
  spec.mutable_cost()->set_electricity_usd_per_kwh(0.36);       // 1e-7 USD per joule
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  constexpr int64_t kS = 1'000'000'000;
  // Two 1 s train steps of 128 samples from t = 1 s to 3 s; one infer batch from 3 s to 4 s.
  v1::AgentMessage m;
  v1::SampleBatch* train = m.mutable_samples();
  train->set_task_id(a.task_id());
  train->set_attempt(a.attempt());
  train->set_seq(0);
  train->set_phase(v1::PHASE_TRAIN);
  for (int64_t t : {1 * kS, 2 * kS}) {
    train->add_start_ns(t);
    train->add_duration_ns(kS);
    train->add_items(128);
  }
  coordinator_->OnAgentMessage(s, sink, m);
  SendSamples(s, sink, a, 1, v1::PHASE_INFER, {kS});  // starts at 0 in SendSamples; fine for counts
  // RAPL counter: 100 W from t = 0 to 5 s; modeled: 150 W flat.
  std::vector<std::pair<int64_t, double>> counter, flat;
  for (int i = 0; i <= 50; ++i) {
    counter.push_back({i * kS / 10, 10.0 * i});
    flat.push_back({i * kS / 10, 150.0});
  }
  v1::AgentMessage p1, p2;
  *p1.mutable_power() = Power(a, 0, "rapl:package-0", v1::POWER_SOURCE_RAPL, counter, true);
  *p2.mutable_power() = Power(a, 1, "modeled:cpu0", v1::POWER_SOURCE_MODELED, flat, false);
  coordinator_->OnAgentMessage(s, sink, p1);
  coordinator_->OnAgentMessage(s, sink, p1);  // resent: stored once
  coordinator_->OnAgentMessage(s, sink, p2);

  v1::AgentMessage done;
  v1::TaskDone* d = done.mutable_done();
  d->set_task_id(a.task_id());
  d->set_attempt(a.attempt());
  d->set_state(v1::TASK_STATE_SUCCEEDED);
  d->set_batches_sent(2);
  d->set_samples_sent(3);
  d->set_power_batches_sent(2);
  d->mutable_result()->set_dataset_train_size(60000);
  for (auto [phase, lo, hi] :
       {std::tuple{v1::PHASE_TRAIN, 1 * kS, 3 * kS}, std::tuple{v1::PHASE_INFER, 3 * kS, 4 * kS}}) {
    v1::PhaseWindow* w = d->mutable_result()->add_windows();
    w->set_phase(phase);
    w->set_start_ns(lo);
    w->set_end_ns(hi);
  }
  coordinator_->OnAgentMessage(s, sink, done);
  v1::Job j = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(j.state(), v1::JOB_STATE_SUCCEEDED) << j.DebugString();
  const v1::TaskResult& r = j.tasks(0).result();
  EXPECT_EQ(r.power_readings_stored(), 102);

  const v1::EnergyResult* rapl_train = nullptr;
  const v1::EnergyResult* modeled_whole = nullptr;
  for (const auto& e : r.energy()) {
    if (e.sensor() == "rapl:package-0" && e.phase() == v1::PHASE_TRAIN) rapl_train = &e;
    if (e.sensor() == "modeled:cpu0" && e.phase() == v1::PHASE_UNSPECIFIED) modeled_whole = &e;
  }
  ASSERT_NE(rapl_train, nullptr);
  EXPECT_NEAR(rapl_train->energy_joules(), 200.0, 1e-6);  // 100 W x 2 s
  EXPECT_NEAR(rapl_train->joules_per_sample(), 200.0 / 256, 1e-9);
  EXPECT_EQ(rapl_train->method(), "counter delta");
  EXPECT_DOUBLE_EQ(rapl_train->coverage(), 1.0);
  ASSERT_NE(modeled_whole, nullptr);
  EXPECT_NEAR(modeled_whole->energy_joules(), 450.0, 1e-6);  // 150 W x 3 s (1 s to 4 s)
  EXPECT_EQ(modeled_whole->assumptions(), "MODELED, not measured: test");

  const v1::CostResult* cost = nullptr;
  for (const auto& c : r.cost()) {
    if (c.phase() == v1::PHASE_TRAIN) cost = &c;
  }
  ASSERT_NE(cost, nullptr);
  EXPECT_EQ(cost->rate_source(), "job cost.usd_per_hour[cpu]");
  // Train window 2 s (first step start to last step end) = 0.002 USD for 256 samples.
  EXPECT_NEAR(cost->usd_per_1000_samples(), 0.002 / 256 * 1000, 1e-12);
  EXPECT_NEAR(cost->usd_per_epoch(), 0.002 * 60000 / 256, 1e-9);
  EXPECT_NEAR(cost->electricity_usd(), 200.0 * 1e-7, 1e-15);  // RAPL preferred over modeled
}

TEST_F(CoordinatorTest, MissingPowerBatchesFailTheTask) {
  v1::JobSpec spec;
  ASSERT_TRUE(Submit(spec).ok());
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  SendDone(s, sink, a, 0, 0, v1::TASK_STATE_SUCCEEDED, /*power_batches=*/3);
  v1::Job j = WaitForJobState("job-000001", v1::JOB_STATE_FAILED);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("incomplete power readings: stored 0 of 3"));
}

TEST_F(CoordinatorTest, MessagesBeforeHelloAndBadHellosAreRefused) {
  auto sink = std::make_shared<FakeAgentSink>();
  v1::AgentMessage hb;
  hb.mutable_heartbeat();
  coordinator_->OnAgentMessage(coordinator_->NewSessionId(), sink, hb);
  coordinator_->RunSync([] {});
  EXPECT_EQ(sink->status().error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  auto sink2 = std::make_shared<FakeAgentSink>();
  v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("dup");
  hello.mutable_hello()->add_devices()->set_id("cpu0");
  hello.mutable_hello()->add_devices()->set_id("cpu0");
  coordinator_->OnAgentMessage(coordinator_->NewSessionId(), sink2, hello);
  coordinator_->RunSync([] {});
  EXPECT_EQ(sink2->status().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// ---------------------------------------------------------------- a coordinator for a fleet

TEST_F(CoordinatorTest, ASubmitRetriedWithItsRequestIdReturnsTheFirstJobEvenAfterARestart) {
  auto submit = [&](const std::string& request_id) {
    absl::Notification done;
    absl::StatusOr<Coordinator::Submitted> result;
    coordinator_->SubmitJob(v1::JobSpec(), request_id, absl::InfiniteFuture(),
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
  EXPECT_EQ(submit(std::string(200, 'x')).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, ASubmitThatWaitedPastItsDeadlineCreatesNothing) {
  absl::Notification done;
  absl::Status status;
  coordinator_->SubmitJob(v1::JobSpec(), "late", absl::Now() - absl::Seconds(1),
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

TEST_F(CoordinatorTest, ATaskDoneWhoseStateIsNotTerminalIsRejectedAndFailsTheAttempt) {
  Started t = StartOneTask();
  SendDone(t.session, t.sink, t.assign, 0, 0, v1::TASK_STATE_RUNNING);
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.tasks(0).error(), HasSubstr("done.state = running"));
  EXPECT_EQ(job.tasks(0).attempt(), 1);  // an agent's bug is not retried
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) {
    bool rejected = false, fenced = false;
    for (const auto& m : v) {
      rejected = rejected || (m.has_rejected() && m.rejected().what() == "done");
      fenced = fenced || (m.has_cancel() && m.cancel().fenced());
    }
    return rejected && fenced;
  }));
  // The device is free again: the next job runs on it.
  auto next = Submit(v1::JobSpec());
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(t.sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
}

TEST_F(CoordinatorTest, AMalformedBatchIsRejectedNamingTheFieldNeverSilentlyDropped) {
  Started t = StartOneTask();
  v1::AgentMessage m;
  v1::SampleBatch* b = m.mutable_samples();
  b->set_task_id(t.assign.task_id());
  b->set_attempt(t.assign.attempt());
  b->set_seq(0);
  b->set_phase(v1::PHASE_TRAIN);
  b->add_start_ns(0);
  b->add_start_ns(10);
  b->add_duration_ns(10);
  b->add_duration_ns(10);
  b->add_items(1);  // one item for two steps
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  const std::optional<v1::Rejected> rejected = WaitForRejected(*t.sink);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->what(), "samples");
  EXPECT_EQ(rejected->reason(), "samples.items: 1 values, duration_ns has 2");
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.tasks(0).error(), HasSubstr("malformed samples message"));
  EXPECT_TRUE(store_->LoadSampleBatches(t.assign.task_id(), 1)->empty());  // nothing half-applied
}

TEST_F(CoordinatorTest, ANegativeStepIsRejectedNamingItsIndex) {
  Started t = StartOneTask();
  v1::AgentMessage m;
  v1::SampleBatch* b = m.mutable_samples();
  b->set_task_id(t.assign.task_id());
  b->set_attempt(t.assign.attempt());
  b->set_phase(v1::PHASE_TRAIN);
  for (int i = 0; i < 4; ++i) {
    b->add_start_ns(i * 10);
    b->add_duration_ns(i == 2 ? -5 : 10);
    b->add_items(1);
  }
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  const std::optional<v1::Rejected> rejected = WaitForRejected(*t.sink);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->reason(), "samples[2]: negative duration or items");
  WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_TRUE(store_->LoadSampleBatches(t.assign.task_id(), 1)->empty());
}

TEST_F(CoordinatorTest, ADeterministicFailureEndsTheTaskAtOnceARetryableOneIsQueuedAgain) {
  Started t = StartOneTask();
  v1::AgentMessage m;
  v1::TaskDone* d = m.mutable_done();
  d->set_task_id(t.assign.task_id());
  d->set_attempt(1);
  d->set_state(v1::TASK_STATE_FAILED);
  d->set_error("out of device memory");
  d->set_retryable(true);
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));  // attempt 2
  const v1::Assign second = Assigns(*t.sink).back();
  EXPECT_EQ(second.attempt(), 2);
  d->set_attempt(2);
  d->set_retryable(false);
  d->set_error("torchscript.path = \"/x.pt\": cannot read it on this agent; copy the file there");
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.tasks(0).attempt(), 2);  // not 3: the failure would repeat
  EXPECT_EQ(job.tasks(0).error(), "torchscript.path = \"/x.pt\": cannot read it on this agent; copy the file there");
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

TEST_F(CoordinatorTest, PerAgentSeriesGoAwayWithTheirAgents) {
  for (int fleet = 0; fleet < 3; ++fleet) {
    std::vector<uint64_t> sessions;
    for (int i = 0; i < 20; ++i) {
      auto sink = std::make_shared<FakeAgentSink>();
      sessions.push_back(Connect(absl::StrCat("fleet", fleet, "-", i), sink));
    }
    coordinator_->RunSync([] {});
    EXPECT_GE(metrics_.agent_series(), 20u);
    EXPECT_LE(metrics_.agent_series(), 40u);  // up + last seen, for the 20 connected only
    for (uint64_t s : sessions) coordinator_->OnAgentGone(s, "test");
    coordinator_->RunSync([] {});
    EXPECT_EQ(metrics_.agent_series(), 0u) << "fleet " << fleet;
  }
}

TEST_F(CoordinatorTest, AWatcherGetsTheLatestStateNotACopyPerEvent) {
  Started t = StartOneTask();
  auto watcher = std::make_shared<FakeSink<v1::JobEvent>>();
  coordinator_->WatchJob(t.job_id, /*summary=*/true, watcher);
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
}  // namespace hetbench::server
