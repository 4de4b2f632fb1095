// The Attempts part alone, over real parts (job table, sessions, placer,
// ingest, watches, metrics), a simulated clock and a commit that the test
// runs by hand: what an attempt's start, end, re-queue and loss change, and
// how the ranks of a gang follow one another.
#include "server/service/attempts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;
using coordinator_testing::Assigns;
using coordinator_testing::FakeAgentSink;

class AttemptsTest : public ::testing::Test {
 protected:
  AttemptsTest()
      : watches_(&clock_, 1.0),
        attempts_(Attempts::Parts{&jobs_, &sessions_, &placer_, &ingest_, &watches_, &metrics_, &clock_},
                  Attempts::Limits{/*max_attempts=*/2, /*max_restarts=*/1},
                  [this](std::function<void(const absl::Status&)> fn) { deferred_.push_back(std::move(fn)); }) {}

  // A connected agent with `devices` CPUs.
  std::shared_ptr<FakeAgentSink> Connect(const std::string& agent_id, int devices) {
    auto sink = std::make_shared<FakeAgentSink>();
    bool opened = false;
    const uint64_t id = ++next_session_;
    sessions_.Open(id, sink, clock_.SystemNowSeconds(), &opened);
    v1::Hello hello;
    hello.set_agent_id(agent_id);
    for (int i = 0; i < devices; ++i) {
      v1::Device* d = hello.add_devices();
      d->set_id("cpu" + std::to_string(i));
      d->set_kind(v1::DEVICE_KIND_CPU);
    }
    hellos_[agent_id] = hello;
    sessions_.Bind(id, hello);
    return sink;
  }

  // A job of one model on CPUs; `gang` > 0: one gang of that many ranks.
  LiveJob& NewJob(int gang = 0) {
    v1::JobSpec spec;
    spec.add_models("mlp");
    spec.add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
    spec.add_batch_sizes(8);
    if (gang > 0) spec.mutable_parallel()->add_devices(gang);
    return jobs_.Create(spec, "", clock_.SystemNowSeconds());
  }

  // Starts every queued task of `live` the placer can place now.
  void StartAll(LiveJob& live) {
    std::vector<const v1::Hello*> agents;
    for (const auto& [id, h] : hellos_) agents.push_back(&h);
    SchedulingPass pass = placer_.BeginPass(agents);
    JobPlacement p = placer_.PlaceJob(live.job, pass, clock_.MonotonicNowNs());
    for (const TaskStart& s : p.starts) attempts_.Start(live, s);
  }

  // Runs what waited for the commit, with the commit's status.
  void Commit(absl::Status status = absl::OkStatus()) {
    auto fns = std::move(deferred_);
    deferred_.clear();
    for (auto& fn : fns) fn(status);
  }

  SimulatedClock clock_;
  JobTable jobs_;
  SessionTable sessions_;
  Placer placer_{PlacerOptions{}};
  Ingest ingest_;
  Watches watches_;
  Metrics metrics_;
  Attempts attempts_;
  std::vector<std::function<void(const absl::Status&)>> deferred_;
  std::map<std::string, v1::Hello> hellos_;
  uint64_t next_session_ = 0;
};

TEST_F(AttemptsTest, AStartLeasesItsDeviceAndItsAssignWaitsForTheCommit) {
  auto sink = Connect("a", 1);
  LiveJob& live = NewJob();
  StartAll(live);
  const v1::Task& t = live.job.tasks(0);
  EXPECT_EQ(t.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(t.attempt(), 1);
  EXPECT_EQ(t.agent_id(), "a");
  EXPECT_EQ(placer_.leases().size(), 1u);
  EXPECT_EQ(ingest_.attempts(), 1u);
  EXPECT_EQ(live.job.state(), v1::JOB_STATE_QUEUED) << "the job's state is recomputed by the caller's pass";
  EXPECT_TRUE(sink->messages().empty()) << "nothing is sent before the batch commits";
  Commit();
  ASSERT_EQ(Assigns(*sink).size(), 1u);
  EXPECT_EQ(Assigns(*sink)[0].task_id(), t.id());
  EXPECT_EQ(Assigns(*sink)[0].attempt(), 1);
}

TEST_F(AttemptsTest, AnAssignWhoseCommitFailedIsNeverSent) {
  auto sink = Connect("a", 1);
  LiveJob& live = NewJob();
  StartAll(live);
  Commit(absl::UnavailableError("disk full"));
  EXPECT_TRUE(sink->messages().empty());
}

TEST_F(AttemptsTest, ARequeueCountsAttemptsAndTheLastOneFails) {
  Connect("a", 1);
  LiveJob& live = NewJob();
  StartAll(live);
  v1::Task& t = *live.job.mutable_tasks(0);
  placer_.Release(t);
  attempts_.RequeueOrFail(live, t, "stream cut", /*restart=*/false);
  EXPECT_EQ(t.state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(t.error(), "stream cut");
  EXPECT_TRUE(t.agent_id().empty());
  EXPECT_EQ(ingest_.attempts(), 0u) << "the attempt's ingest state is dropped";
  EXPECT_TRUE(placer_.TakeDue(clock_.MonotonicNowNs())) << "a re-queued task asks for a pass";

  StartAll(live);
  ASSERT_EQ(t.attempt(), 2);
  placer_.Release(t);
  attempts_.RequeueOrFail(live, t, "stream cut again", /*restart=*/false);
  EXPECT_EQ(t.state(), v1::TASK_STATE_FAILED);
  EXPECT_EQ(t.error(), "stream cut again; no attempts left");
  EXPECT_EQ(live.job.state(), v1::JOB_STATE_FAILED);
}

TEST_F(AttemptsTest, RestartsAreCountedApartFromAttemptsAndBoundedOnTheirOwn) {
  Connect("a", 1);
  LiveJob& live = NewJob();
  v1::Task& t = *live.job.mutable_tasks(0);
  StartAll(live);
  placer_.Release(t);
  attempts_.RequeueOrFail(live, t, "coordinator restarted", /*restart=*/true);
  EXPECT_EQ(t.state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(t.restarts(), 1);
  // Attempt 2 of at most 2, but one was a restart's: a retryable failure still re-queues it.
  StartAll(live);
  placer_.Release(t);
  attempts_.RequeueOrFail(live, t, "stream cut", /*restart=*/false);
  EXPECT_EQ(t.state(), v1::TASK_STATE_QUEUED);
  // A second restart is one more than max_restarts.
  StartAll(live);
  placer_.Release(t);
  attempts_.RequeueOrFail(live, t, "coordinator restarted", /*restart=*/true);
  EXPECT_EQ(t.state(), v1::TASK_STATE_FAILED);
  EXPECT_THAT(t.error(), HasSubstr("2 restarts interrupted it (at most 1)"));
}

TEST_F(AttemptsTest, ALostAttemptNamesItsAgentAndACancelledJobsIsCancelled) {
  Connect("a", 2);
  LiveJob& live = NewJob();
  StartAll(live);
  v1::Task& t = *live.job.mutable_tasks(0);
  placer_.Release(t);
  attempts_.Lose(t.id(), "did not come back within 30 s", /*restart=*/false);
  EXPECT_EQ(t.state(), v1::TASK_STATE_QUEUED);
  EXPECT_EQ(t.error(), "attempt 1 lost: agent a did not come back within 30 s");
  // Losing a task that is not running changes nothing.
  attempts_.Lose(t.id(), "again", /*restart=*/false);
  EXPECT_EQ(t.error(), "attempt 1 lost: agent a did not come back within 30 s");

  StartAll(live);
  live.job.set_state(v1::JOB_STATE_CANCELLED);
  placer_.Release(t);
  attempts_.Lose(t.id(), "is gone", /*restart=*/false);
  EXPECT_EQ(t.state(), v1::TASK_STATE_CANCELLED);
}

TEST_F(AttemptsTest, AFailedRankFencesAndFailsTheRestOfItsGang) {
  auto a = Connect("a", 1);
  auto b = Connect("b", 1);
  LiveJob& live = NewJob(/*gang=*/2);
  StartAll(live);
  ASSERT_EQ(live.job.tasks(0).state(), v1::TASK_STATE_RUNNING);
  ASSERT_EQ(live.job.tasks(1).state(), v1::TASK_STATE_RUNNING);
  Commit();
  v1::Task& r1 = *live.job.mutable_tasks(1);
  const std::string r0_agent = live.job.tasks(0).agent_id();
  placer_.Release(r1);
  attempts_.Finish(live, r1, v1::TASK_STATE_FAILED, "NCCL timeout");
  const v1::Task& r0 = live.job.tasks(0);
  EXPECT_EQ(r0.state(), v1::TASK_STATE_FAILED);
  EXPECT_THAT(r0.error(), HasSubstr("rank 1 failed: NCCL timeout"));
  EXPECT_TRUE(placer_.leases().size() == 0) << "the fenced rank's devices are free";
  EXPECT_EQ(live.job.state(), v1::JOB_STATE_FAILED);
  Commit();
  auto& sink = r0_agent == "a" ? *a : *b;
  bool fenced = false;
  for (const auto& m : sink.messages()) fenced |= m.has_cancel() && m.cancel().fenced() && m.cancel().task_id() == r0.id();
  EXPECT_TRUE(fenced) << "rank 0's agent is told to stop and drop what it did not deliver";
}

TEST_F(AttemptsTest, ARequeuedRankRequeuesItsWholeGangEvenARankThatSucceeded) {
  Connect("a", 1);
  Connect("b", 1);
  Connect("c", 1);
  LiveJob& live = NewJob(/*gang=*/3);
  StartAll(live);
  v1::Task& r0 = *live.job.mutable_tasks(0);
  v1::Task& r2 = *live.job.mutable_tasks(2);
  r0.mutable_result()->set_test_accuracy(0.9);
  placer_.Release(r0);
  attempts_.Finish(live, r0, v1::TASK_STATE_SUCCEEDED, "");
  placer_.Release(r2);
  attempts_.Lose(r2.id(), "is gone", /*restart=*/false);
  for (const v1::Task& t : live.job.tasks()) {
    EXPECT_EQ(t.state(), v1::TASK_STATE_QUEUED) << t.id();
  }
  EXPECT_FALSE(r0.has_result()) << "one rank's result alone is not the gang's";
  EXPECT_THAT(live.job.tasks(1).error(), HasSubstr("rank 2 is retried"));
  EXPECT_TRUE(placer_.leases().size() == 0);
}

TEST_F(AttemptsTest, RanksFailedTogetherKeepTheirOwnErrors) {
  LiveJob& live = NewJob(/*gang=*/2);
  attempts_.FailEach(live, {{0, "gang waited 300 s for 2 CPUs: 1 free"}, {1, "gang waited 300 s for 2 CPUs: 1 free"}});
  for (const v1::Task& t : live.job.tasks()) {
    EXPECT_EQ(t.state(), v1::TASK_STATE_FAILED);
    EXPECT_EQ(t.error(), "gang waited 300 s for 2 CPUs: 1 free") << "not worded as another rank's failure";
  }
}

}  // namespace
}  // namespace hetbench::server
