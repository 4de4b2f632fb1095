// Tasks that hold several devices: data-parallel gangs (every rank placed at
// once or none; a failed rank takes the gang back; a gang that cannot be
// placed fails after its timeout), split tasks (a device per stage on one
// agent) and splits across agents (a gang of stages, each its own target).
// Fixture: coordinator_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server::coordinator_testing {
namespace {

using ::testing::Not;

v1::JobSpec GangSpec(int devices, double timeout_seconds = 600) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_parallel()->add_devices(devices);
  spec.mutable_parallel()->set_gang_timeout_seconds(timeout_seconds);
  return spec;
}

std::vector<v1::Assign> GangAssigns(FakeAgentSink& sink) {
  std::vector<v1::Assign> out;
  for (const v1::Assign& a : Assigns(sink)) {
    if (a.has_gang()) out.push_back(a);
  }
  return out;
}

// Acceptance: a gang waits while only 1 of its 2 devices is free, without
// holding that one (a later single task takes it), and starts when two are.
TEST_F(CoordinatorTest, AGangWaitsWhileOnlyOneOfTwoDevicesIsFreeAndStartsWhenTheSecondFrees) {
  auto s1 = std::make_shared<FakeAgentSink>(), s2 = std::make_shared<FakeAgentSink>();
  const uint64_t a1 = Connect("a1", s1), a2 = Connect("a2", s2);
  auto busy = Submit(v1::JobSpec());
  ASSERT_TRUE(busy.ok());
  coordinator_->RunSync([] {});
  auto gang = Submit(GangSpec(2));
  ASSERT_TRUE(gang.ok()) << gang.status();
  ASSERT_EQ(gang->tasks_size(), 2);
  EXPECT_EQ(gang->tasks(0).gang().rank(), 0);
  EXPECT_EQ(gang->tasks(1).gang().rank(), 1);
  EXPECT_EQ(gang->tasks(1).gang().id(), gang->tasks(0).gang().id());
  coordinator_->RunSync([] {});
  v1::Job g = Get(gang->id());
  EXPECT_EQ(g.tasks(0).state(), v1::TASK_STATE_QUEUED);
  EXPECT_THAT(g.tasks(0).pending_reason(), HasSubstr("needs 2 x cpu device at once: 1 free now"));
  EXPECT_EQ(g.tasks(1).pending_reason(), g.tasks(0).pending_reason());

  // The free device is not reserved for the gang: a single task behind it runs.
  auto later = Submit(v1::JobSpec());
  ASSERT_TRUE(later.ok());
  coordinator_->RunSync([] {});
  EXPECT_EQ(Get(later->id()).tasks(0).state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(GangAssigns(*s1).size() + GangAssigns(*s2).size(), 0u);

  // Both single tasks end: the gang gets both devices in one pass.
  for (const auto& [session, sink] : {std::pair{a1, s1}, std::pair{a2, s2}}) {
    for (const v1::Assign& a : Assigns(*sink)) SendDone(session, sink, a, 0, 0);
  }
  auto has_rank = [](const std::vector<v1::CoordinatorMessage>& v) {
    for (const auto& m : v) {
      if (m.has_assign() && m.assign().has_gang()) return true;
    }
    return false;
  };
  ASSERT_TRUE(s1->WaitFor(has_rank));
  ASSERT_TRUE(s2->WaitFor(has_rank));
  std::vector<v1::Assign> ranks = GangAssigns(*s1);
  for (const v1::Assign& a : GangAssigns(*s2)) ranks.push_back(a);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_NE(ranks[0].gang().rank(), ranks[1].gang().rank());
  for (const v1::Assign& a : ranks) {
    EXPECT_EQ(a.gang().world_size(), 2);
    EXPECT_EQ(a.gang().master_host(), ranks[0].gang().master_host());
    EXPECT_EQ(a.gang().master_port(), ranks[0].gang().master_port());
    EXPECT_EQ(a.gang().peers_size(), 2);
    EXPECT_DOUBLE_EQ(a.gang().timeout_seconds(), 30);
  }
}

// A rank that fails (retryable) takes the gang back: the other rank is
// fenced, and both run again as attempt 2 together.
TEST_F(CoordinatorTest, AFailedRankFencesTheOtherAndTheGangIsRetriedAsAWhole) {
  auto s1 = std::make_shared<FakeAgentSink>(), s2 = std::make_shared<FakeAgentSink>();
  const uint64_t a1 = Connect("a1", s1), a2 = Connect("a2", s2);
  auto gang = Submit(GangSpec(2));
  ASSERT_TRUE(gang.ok());
  ASSERT_TRUE(s1->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  ASSERT_TRUE(s2->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign r1 = Assigns(*s1).back(), r2 = Assigns(*s2).back();
  v1::AgentMessage failed;
  failed.mutable_done()->set_task_id(r1.task_id());
  failed.mutable_done()->set_attempt(1);
  failed.mutable_done()->set_state(v1::TASK_STATE_FAILED);
  failed.mutable_done()->set_error("gloo: connection closed by peer");
  failed.mutable_done()->set_retryable(true);
  coordinator_->OnAgentMessage(a1, s1, failed);
  ASSERT_TRUE(s2->WaitFor([&](auto& v) {
    for (const auto& m : v) {
      if (m.has_cancel() && m.cancel().task_id() == r2.task_id() && m.cancel().fenced()) return true;
    }
    return false;
  })) << "the surviving rank is fenced";
  ASSERT_TRUE(s1->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
  ASSERT_TRUE(s2->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
  EXPECT_EQ(Assigns(*s1).back().attempt(), 2);
  EXPECT_EQ(Assigns(*s2).back().attempt(), 2);
  // Each round has its own name in the store, shared by its ranks.
  const std::string id = r1.gang().gang_id();
  EXPECT_EQ(r1.gang().round(), absl::StrCat(id, "/1"));
  EXPECT_EQ(r2.gang().round(), r1.gang().round());
  EXPECT_EQ(Assigns(*s1).back().gang().round(), absl::StrCat(id, "/2"));
  EXPECT_EQ(Assigns(*s2).back().gang().round(), absl::StrCat(id, "/2"));
  const v1::Job j = Get(gang->id());
  for (const v1::Task& t : j.tasks()) {
    EXPECT_EQ(t.state(), v1::TASK_STATE_RUNNING);
    EXPECT_EQ(t.attempt(), 2);
  }
  EXPECT_THAT(j.tasks(r2.task_id() == j.tasks(0).id() ? 0 : 1).error(), HasSubstr("gloo: connection closed"));
  (void)a2;
}

// A gang that cannot get its devices fails after parallel.gang_timeout_seconds,
// every rank with the reason; nothing ran.
TEST_F(CoordinatorTest, AGangThatCannotBePlacedFailsAfterItsTimeout) {
  auto s1 = std::make_shared<FakeAgentSink>();
  Connect("a1", s1);
  auto gang = Submit(GangSpec(2, /*timeout_seconds=*/5));
  ASSERT_TRUE(gang.ok());
  coordinator_->RunSync([] {});
  EXPECT_EQ(Get(gang->id()).state(), v1::JOB_STATE_QUEUED);
  clock_.AdvanceNs(6'000'000'000);
  const v1::Job j = WaitForJobState(gang->id(), v1::JOB_STATE_FAILED);
  ASSERT_EQ(j.state(), v1::JOB_STATE_FAILED);
  for (const v1::Task& t : j.tasks()) {
    EXPECT_EQ(t.state(), v1::TASK_STATE_FAILED);
    EXPECT_THAT(t.error(), HasSubstr("parallel.gang_timeout_seconds = 5"));
    EXPECT_THAT(t.error(), HasSubstr("needs 2 x cpu device at once: 1 free now"));
    EXPECT_EQ(t.attempt(), 0);
  }
  EXPECT_EQ(CountAssigns(s1->messages()), 0);
}

// A split task takes a device per stage on one agent (here the CPU and the
// simulator on its cores) and both stay leased until it ends.
TEST_F(CoordinatorTest, ASplitTaskTakesADevicePerStageOnOneAgent) {
  v1::JobSpec spec;
  spec.add_models("qnn");
  v1::SplitStage* s0 = spec.mutable_split()->add_stages();
  s0->set_layers("0-1");
  s0->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  v1::SplitStage* s1 = spec.mutable_split()->add_stages();
  s1->set_layers("2-");
  s1->mutable_target()->set_device_kind(v1::DEVICE_KIND_QPU_SIM);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto sink = std::make_shared<FakeAgentSink>();
  const uint64_t session = coordinator_->NewSessionId();
  v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("a1");
  v1::Device* cpu = hello.mutable_hello()->add_devices();
  cpu->set_id("cpu0");
  cpu->set_kind(v1::DEVICE_KIND_CPU);
  v1::Device* qpu = hello.mutable_hello()->add_devices();
  qpu->set_id("qpu0");
  qpu->set_kind(v1::DEVICE_KIND_QPU_SIM);
  (*qpu->mutable_attributes())["host_device"] = "cpu0";
  coordinator_->OnAgentMessage(session, sink, hello);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  EXPECT_EQ(a.device_id(), "cpu0");
  ASSERT_EQ(a.stage_device_ids_size(), 1);
  EXPECT_EQ(a.stage_device_ids(0), "qpu0");
  // Another task for the simulator waits: its device is the split's.
  auto other = Submit(v1::JobSpec());
  ASSERT_TRUE(other.ok());
  coordinator_->RunSync([] {});
  EXPECT_EQ(Get(other->id()).tasks(0).state(), v1::TASK_STATE_QUEUED);
  SendDone(session, sink, a, 0, 0);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
}

// Fairness: a gang queued longer than gang_hold_after_seconds (60 by
// default) holds the free device it could use, so a single task submitted
// behind it waits instead of taking it, and the gang starts when the second
// device frees. A gang that could never start (3 ranks, 2 devices) holds
// nothing.
TEST_F(CoordinatorTest, AGangWaitingPastTheHoldTimeKeepsLaterSingleTasksOffItsDevices) {
  Close();
  options_.lease_seconds = 3600;  // the fake agents stay connected while the clock jumps a minute
  Open();
  auto s1 = std::make_shared<FakeAgentSink>(), s2 = std::make_shared<FakeAgentSink>();
  const uint64_t a1 = Connect("a1", s1);
  auto busy = Submit(v1::JobSpec());
  ASSERT_TRUE(busy.ok());
  ASSERT_TRUE(s1->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  Connect("a2", s2);
  auto never = Submit(GangSpec(3));
  auto gang = Submit(GangSpec(2));
  ASSERT_TRUE(never.ok() && gang.ok());
  clock_.AdvanceNs(61'000'000'000);
  coordinator_->RunSync([] {});
  coordinator_->RunSync([] {});
  const v1::Job waiting = Get(gang->id());
  EXPECT_THAT(waiting.tasks(0).pending_reason(), HasSubstr("holding 1 free device for it (queued 61 s"));
  EXPECT_THAT(Get(never->id()).tasks(0).pending_reason(), Not(HasSubstr("holding")))
      << "3 ranks cannot fit on 2 devices: it holds nothing";

  auto later = Submit(v1::JobSpec());
  ASSERT_TRUE(later.ok());
  coordinator_->RunSync([] {});
  coordinator_->RunSync([] {});
  const v1::Job queued = Get(later->id());
  EXPECT_EQ(queued.tasks(0).state(), v1::TASK_STATE_QUEUED) << "the free device is held for the gang";
  EXPECT_THAT(queued.tasks(0).pending_reason(), HasSubstr("1 free device is held for gang " + waiting.tasks(0).gang().id()));
  EXPECT_EQ(CountAssigns(s2->messages()), 0);

  // The busy task ends: the gang (not the later task) gets both devices.
  SendDone(a1, s1, Assigns(*s1).back(), 0, 0);
  ASSERT_TRUE(s1->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
  ASSERT_TRUE(s2->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  EXPECT_TRUE(Assigns(*s1).back().has_gang());
  EXPECT_TRUE(Assigns(*s2).back().has_gang());
  EXPECT_EQ(Get(later->id()).tasks(0).state(), v1::TASK_STATE_QUEUED);
}

// A split across agents is a gang of its stages: a task per stage, each with
// its stage's target, waiting (with a reason naming the stage) until every
// stage has a device, then started at once, a stage per agent.
TEST_F(CoordinatorTest, ASplitAcrossAgentsWaitsForAllItsStagesAndStartsThemAtOnce) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_split()->set_across_agents(true);
  for (const char* layers : {"0-2", "3-"}) {
    v1::SplitStage* st = spec.mutable_split()->add_stages();
    st->set_layers(layers);
    st->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  }
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->tasks_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job->tasks(r).gang().rank(), r);
    EXPECT_EQ(job->tasks(r).gang().world_size(), 2);
    EXPECT_EQ(job->tasks(r).target().device_kind(), v1::DEVICE_KIND_CPU);
  }
  EXPECT_DOUBLE_EQ(job->spec().split().collective_timeout_seconds(), 30);
  auto s1 = std::make_shared<FakeAgentSink>(), s2 = std::make_shared<FakeAgentSink>();
  Connect("a1", s1);
  coordinator_->RunSync([] {});
  v1::Job waiting = Get(job->id());
  EXPECT_EQ(waiting.tasks(0).state(), v1::TASK_STATE_QUEUED);
  EXPECT_THAT(waiting.tasks(0).pending_reason(),
              HasSubstr("needs cpu device + cpu device at once (a stage per device, any agents): stage 1 has none free"));
  EXPECT_EQ(CountAssigns(s1->messages()), 0) << "no stage starts alone";
  Connect("a2", s2);
  ASSERT_TRUE(s1->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  ASSERT_TRUE(s2->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*s1).back(), b = Assigns(*s2).back();
  EXPECT_EQ(a.gang().rank() + b.gang().rank(), 1);
  EXPECT_TRUE(a.spec().split().across_agents());
  EXPECT_EQ(a.gang().peers(a.gang().rank()), "a1/cpu0");
  EXPECT_EQ(b.gang().peers(b.gang().rank()), "a2/cpu0");
  EXPECT_EQ(a.stage_device_ids_size(), 0) << "each rank holds only its own stage's device";
}

}  // namespace
}  // namespace hetbench::server::coordinator_testing
