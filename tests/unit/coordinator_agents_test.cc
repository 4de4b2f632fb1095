// The coordinator's agent sessions: Hello, one task per device, leases, loss
// and re-queue, resume after a broken stream or a restart, fencing, per-agent
// metrics (fixture: coordinator_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server::coordinator_testing {
namespace {

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
  coordinator_->api().CancelJob(t.job_id, [&](absl::StatusOr<v1::Job> j) {
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
  EXPECT_EQ(WaitForJobState(t.job_id, v1::JOB_STATE_CANCELLED).state(), v1::JOB_STATE_CANCELLED);
  const v1::Job j = WaitForTaskState(t.job_id, 0, v1::TASK_STATE_CANCELLED);
  ASSERT_EQ(j.tasks(0).state(), v1::TASK_STATE_CANCELLED);
  EXPECT_TRUE(j.tasks(0).result().partial());
  EXPECT_EQ(j.tasks(0).result().samples_stored(), 2);
}

// The TaskDone went through but its ack was lost with the stream: the agent
// sends it (and batches whose acks were lost) again; they are acknowledged
// and the final result stays as it was.

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
  // Past the restart's deadline (a lease after the load), the agent beating
  // as a live one does: a lease scan on the loop's own timer, at any moment,
  // finds it alive (one clock jump past a whole lease would let a scan that
  // runs before the next message call the agent silent).
  v1::AgentMessage beat;
  beat.mutable_heartbeat()->set_agent_ns(1);
  for (int i = 0; i < 2; ++i) {
    clock_.AdvanceNs(static_cast<int64_t>(options_.lease_seconds * 2.0 / 3.0 * 1e9));
    ASSERT_TRUE(coordinator_->EdgeHeartbeat(s2, *sink2, beat));
    coordinator_->RunSync([] {});
  }
  SendSamples(s2, sink2, t.assign, 1, v1::PHASE_TRAIN, {30});
  SendDone(s2, sink2, t.assign, 2, 3);
  v1::Job done = WaitForJobState(t.job_id, v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.tasks(0).error();
  EXPECT_EQ(done.tasks(0).attempt(), 1);
  EXPECT_EQ(done.tasks(0).restarts(), 0);
  EXPECT_EQ(done.tasks(0).resumes(), 1);
  EXPECT_EQ(done.tasks(0).result().samples_stored(), 3);  // the batch acked before the restart, and the rest
}

// Heartbeats at the edge (off the loop): refused before the Hello (the loop
// handles that message), then echoed at once and keeping the lease alive
// through the loop's merge; a closed session's heartbeat goes to the loop again.
TEST_F(CoordinatorTest, HeartbeatsOfAWelcomedAgentAreHandledAtTheEdgeAndKeepItsLease) {
  auto sink = std::make_shared<FakeAgentSink>();
  v1::AgentMessage beat;
  beat.mutable_heartbeat()->set_agent_ns(12345);
  const uint64_t early = coordinator_->NewSessionId();
  EXPECT_FALSE(coordinator_->EdgeHeartbeat(early, *sink, beat)) << "no Hello on that stream: the loop's";
  EXPECT_TRUE(sink->messages().empty());

  const uint64_t s = Connect("a1", sink);
  const auto echoes = [](const std::vector<v1::CoordinatorMessage>& v) {
    int n = 0;
    for (const auto& m : v) n += m.has_heartbeat() && m.heartbeat().agent_ns() == 12345;
    return n;
  };
  for (int i = 0; i < 3; ++i) {
    // Three times two-thirds of a lease, each closed by a heartbeat at the edge.
    clock_.AdvanceNs(static_cast<int64_t>(options_.lease_seconds * 2.0 / 3.0 * 1e9));
    ASSERT_TRUE(coordinator_->EdgeHeartbeat(s, *sink, beat));
    coordinator_->RunSync([] {});
  }
  EXPECT_EQ(echoes(sink->messages()), 3) << "each echoed at once, with the agent's clock";
  EXPECT_FALSE(sink->closed()) << "the edge's heartbeats kept the lease: 2 leases passed";
  const std::vector<v1::AgentInfo> agents = Agents();
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_DOUBLE_EQ(agents[0].last_seen_unix_seconds(), clock_.SystemNowSeconds()) << "the last beat, merged";

  clock_.AdvanceNs(static_cast<int64_t>((options_.lease_seconds + 1) * 1e9));  // now silent
  coordinator_->RunSync([] {});
  EXPECT_TRUE(sink->closed());
  EXPECT_FALSE(coordinator_->EdgeHeartbeat(s, *sink, beat)) << "a closed session is no longer welcomed";
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

}  // namespace
}  // namespace hetbench::server::coordinator_testing
