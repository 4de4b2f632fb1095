// Validation jobs through the coordinator: a task per device of the agents
// connected at submit (absent kinds SKIPPED), verdicts when the last task
// ends, a FAIL device quarantined (an ordinary job waits, its pending reason
// naming the device), kept across a restart, and released by a passing
// revalidation.
#include "common/validate_spec.h"
#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server {
namespace {

using coordinator_testing::Assigns;
using coordinator_testing::CountAssigns;
using coordinator_testing::FakeAgentSink;
using ::testing::HasSubstr;

class ValidationCoordinatorTest : public coordinator_testing::CoordinatorTest {
 protected:
  uint64_t ConnectWithGpuAbsent(const std::string& agent_id, std::shared_ptr<FakeAgentSink> sink) {
    uint64_t session = coordinator_->NewSessionId();
    v1::AgentMessage m;
    v1::Hello* h = m.mutable_hello();
    h->set_agent_id(agent_id);
    for (const char* id : {"cpu0", "cpu1"}) {
      v1::Device* d = h->add_devices();
      d->set_id(id);
      d->set_kind(v1::DEVICE_KIND_CPU);
      d->set_model("Test CPU");
    }
    v1::AbsentDevice* gpu = h->add_absent();
    gpu->set_kind(v1::DEVICE_KIND_GPU);
    gpu->set_reason("no NVIDIA driver");
    coordinator_->OnAgentMessage(session, sink, m);
    EXPECT_TRUE(sink->WaitFor([](auto& v) { return !v.empty() && v[0].has_welcome(); }));
    return session;
  }

  static v1::JobSpec ValidateSpec(std::vector<v1::TargetSelector> targets) {
    v1::JobSpec spec;
    spec.mutable_validate()->set_level("quick");
    for (auto& t : targets) *spec.add_targets() = t;
    return spec;
  }

  // What the agent sends for one device: one matmul test, passing or wrong.
  void Finish(uint64_t session, std::shared_ptr<FakeAgentSink> sink, const v1::Assign& a, bool wrong) {
    v1::AgentMessage m;
    v1::TaskDone* d = m.mutable_done();
    d->set_task_id(a.task_id());
    d->set_attempt(a.attempt());
    d->set_state(v1::TASK_STATE_SUCCEEDED);
    v1::ValidationRun* run = d->mutable_result()->mutable_validation();
    run->set_sku("cpu|Test CPU|-|0|all|test");
    run->set_level("quick");
    v1::ValidationTest* t = run->add_tests();
    t->set_name("matmul");
    t->set_unit("GFLOP/s");
    t->set_higher_is_better(true);
    if (wrong) {
      t->set_outcome(v1::TEST_OUTCOME_FAILED);
      t->set_reason("wrong result: a float32 64x64 product is off by 0.5 relative to float64");
    } else {
      t->set_outcome(v1::TEST_OUTCOME_MEASURED);
      for (double v : {50.0, 50.5, 49.8, 50.2}) t->add_values(v);
    }
    coordinator_->OnAgentMessage(session, sink, m);
  }

  const v1::AgentInfo* Agent(const std::vector<v1::AgentInfo>& agents, const std::string& id) {
    for (const auto& a : agents) {
      if (a.agent_id() == id) return &a;
    }
    return nullptr;
  }
};

TEST_F(ValidationCoordinatorTest, FailQuarantinesUntilAPassingRevalidation) {
  auto sink = std::make_shared<FakeAgentSink>();
  const uint64_t session = ConnectWithGpuAbsent("a1", sink);
  v1::TargetSelector cpu, gpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  gpu.set_device_kind(v1::DEVICE_KIND_GPU);
  auto job = Submit(ValidateSpec({cpu, gpu}));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->tasks_size(), 2);  // cpu0 and cpu1, each pinned; no task waits for a gpu
  EXPECT_EQ(job->tasks(0).target().device_id(), "cpu0");
  EXPECT_EQ(job->tasks(1).target().device_id(), "cpu1");
  ASSERT_EQ(job->validation().devices_size(), 1);
  EXPECT_EQ(job->validation().devices(0).verdict(), v1::VERDICT_SKIPPED);
  EXPECT_THAT(job->validation().devices(0).reason(), HasSubstr("no gpu device: no NVIDIA driver"));

  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
  std::vector<v1::Assign> assigns = Assigns(*sink);
  for (const v1::Assign& a : assigns) Finish(session, sink, a, /*wrong=*/a.device_id() == "cpu1");
  const v1::Job judged = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(judged.validation().devices_size(), 3);
  for (const v1::DeviceVerdict& d : judged.validation().devices()) {
    if (d.device_id() == "cpu1") {
      EXPECT_EQ(d.verdict(), v1::VERDICT_FAIL);
      EXPECT_THAT(d.reason(), HasSubstr("wrong result"));
    } else if (d.device_id() == "cpu0") {
      EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << d.reason();
    }
  }
  ASSERT_EQ(judged.validation().nodes_size(), 1);
  EXPECT_EQ(judged.validation().nodes(0).verdict(), v1::VERDICT_FAIL);

  // Quarantined: shown with the agent, and kept from ordinary tasks.
  const auto agents = Agents();
  const v1::AgentInfo* a1 = Agent(agents, "a1");
  ASSERT_NE(a1, nullptr);
  ASSERT_EQ(a1->health_size(), 1);
  EXPECT_EQ(a1->health(0).device_id(), "cpu1");
  EXPECT_TRUE(a1->health(0).quarantined());
  EXPECT_EQ(a1->health(0).job_id(), job->id());

  auto first = Submit(v1::JobSpec());  // an ordinary cpu task: cpu0
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 3; }));
  EXPECT_EQ(Assigns(*sink).back().device_id(), "cpu0");
  auto second = Submit(v1::JobSpec());  // waits: cpu0 busy, cpu1 quarantined
  ASSERT_TRUE(second.ok());
  v1::Job waiting;
  ASSERT_TRUE(hetbench::testing::WaitFor(
      [&] {
        coordinator_->RunSync([] {});
        waiting = Get(second->id());
        return !waiting.tasks(0).pending_reason().empty();
      },
      absl::Seconds(10), absl::Milliseconds(1)));
  EXPECT_THAT(waiting.tasks(0).pending_reason(), HasSubstr("quarantined until a validation passes, e.g. a1/cpu1"));
  EXPECT_THAT(waiting.tasks(0).pending_reason(), HasSubstr("FAIL in " + job->id()));
  EXPECT_EQ(CountAssigns(sink->messages()), 3);

  // The quarantine outlives a coordinator restart.
  Close();
  Open();
  auto sink2 = std::make_shared<FakeAgentSink>();
  const uint64_t session2 = ConnectWithGpuAbsent("a1", sink2);
  const auto after = Agents();
  ASSERT_NE(Agent(after, "a1"), nullptr);
  ASSERT_EQ(Agent(after, "a1")->health_size(), 1);
  EXPECT_TRUE(Agent(after, "a1")->health(0).quarantined());

  // A revalidation of cpu1 alone runs there (a validation names its device) and, passing, releases it.
  v1::TargetSelector cpu1;
  cpu1.set_agent_id("a1");
  cpu1.set_device_id("cpu1");
  auto again = Submit(ValidateSpec({cpu1}));
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->tasks_size(), 1);
  ASSERT_TRUE(sink2->WaitFor([&](auto& v) {
    for (const auto& m : v) {
      if (m.has_assign() && m.assign().task_id() == again->tasks(0).id()) return true;
    }
    return false;
  }));
  for (const v1::Assign& a : Assigns(*sink2)) {
    if (a.task_id() == again->tasks(0).id()) {
      EXPECT_EQ(a.device_id(), "cpu1");
      Finish(session2, sink2, a, /*wrong=*/false);
    }
  }
  WaitForJobState(again->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(hetbench::testing::WaitFor(
      [&] {
        coordinator_->RunSync([] {});
        const auto now = Agents();
        return Agent(now, "a1") != nullptr && Agent(now, "a1")->health_size() == 0;
      },
      absl::Seconds(10), absl::Milliseconds(1)));
}

TEST_F(ValidationCoordinatorTest, AScheduledRevalidationTakesOnlyIdleDevices) {
  Close();
  options_.revalidate_every_seconds = 60;
  options_.lease_seconds = 3600;  // the clock jumps a minute: the agent stays
  Open();
  auto sink = std::make_shared<FakeAgentSink>();
  ConnectWithGpuAbsent("a1", sink);
  auto busy = Submit(v1::JobSpec());  // takes cpu0
  ASSERT_TRUE(busy.ok());
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  EXPECT_EQ(List().size(), 1u);  // nothing before the period is up
  clock_.AdvanceNs(61'000'000'000);
  std::vector<v1::Job> jobs;
  ASSERT_TRUE(hetbench::testing::WaitFor(
      [&] {
        coordinator_->RunSync([] {});
        jobs = List();
        return jobs.size() == 2;
      },
      absl::Seconds(10), absl::Milliseconds(1)));
  const v1::Job again = Get(jobs[1].id());
  EXPECT_EQ(again.spec().name(), "revalidate");
  ASSERT_EQ(again.tasks_size(), 1);  // cpu1 only: cpu0 runs the ordinary task
  EXPECT_EQ(again.tasks(0).target().device_id(), "cpu1");
  clock_.AdvanceNs(61'000'000'000);  // due again, but the last one still runs: none more
  coordinator_->RunSync([] {});
  coordinator_->RunSync([] {});
  EXPECT_EQ(List().size(), 2u);
}

TEST_F(ValidationCoordinatorTest, NoMatchingDeviceEndsAtOnceWithTheReason) {
  auto sink = std::make_shared<FakeAgentSink>();
  ConnectWithGpuAbsent("a1", sink);
  v1::TargetSelector gpu;
  gpu.set_device_kind(v1::DEVICE_KIND_GPU);
  auto job = Submit(ValidateSpec({gpu}));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->tasks_size(), 0);
  const v1::Job ended = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(ended.validation().devices_size(), 1);
  EXPECT_EQ(ended.validation().devices(0).verdict(), v1::VERDICT_SKIPPED);
  EXPECT_THAT(ended.validation().devices(0).reason(), HasSubstr("no NVIDIA driver"));
}

TEST_F(ValidationCoordinatorTest, BaselinesGetTheNextVersionOfTheirName) {
  auto save = [&](v1::Baseline b) {
    absl::Notification done;
    absl::StatusOr<v1::Baseline> out;
    coordinator_->api().SaveBaseline(std::move(b), [&](absl::StatusOr<v1::Baseline> r) {
      out = std::move(r);
      done.Notify();
    });
    done.WaitForNotification();
    return out;
  };
  v1::Baseline b;
  b.set_schema(kBaselineSchema);
  b.set_name("nightly");
  v1::MetricBaseline* m = b.add_skus()->add_metrics();
  b.mutable_skus(0)->set_sku("cpu|x");
  m->set_test("matmul");
  m->set_median(100);
  for (int v = 1; v <= 2; ++v) {
    auto saved = save(b);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->version(), v);
  }
  absl::Notification got;
  coordinator_->api().GetBaseline("nightly", 0, [&](absl::StatusOr<v1::Baseline> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) EXPECT_EQ(r->version(), 2);
    got.Notify();
  });
  got.WaitForNotification();
  absl::Notification missing;
  coordinator_->api().GetBaseline("nightly", 7, [&](absl::StatusOr<v1::Baseline> r) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("baseline nightly v7: not stored"));
    missing.Notify();
  });
  missing.WaitForNotification();
  b.set_name("../etc");
  EXPECT_THAT(std::string(save(b).status().message()), HasSubstr("baseline.name = '../etc': give 1 to 64 characters"));
  b.set_name("nightly");
  b.mutable_skus(0)->mutable_metrics(0)->set_median(-1);
  EXPECT_THAT(std::string(save(b).status().message()), HasSubstr("median must be > 0"));
}

TEST_F(ValidationCoordinatorTest, ABaselineOfOtherDevicesIsRefusedAndNothingIsCreated) {
  auto sink = std::make_shared<FakeAgentSink>();
  ConnectWithGpuAbsent("a1", sink);
  v1::TargetSelector cpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  v1::JobSpec spec = ValidateSpec({cpu});
  v1::Baseline* b = spec.mutable_validate()->mutable_baseline();
  b->set_schema(kBaselineSchema);
  v1::MetricBaseline* m = b->add_skus()->add_metrics();
  b->mutable_skus(0)->set_sku("cpu|Other CPU|-|64|all|0.1.0");
  m->set_test("matmul");
  m->set_median(100);
  auto refused = Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("validate.baseline: its SKUs ('cpu|Other CPU|-|64') match none of the devices to validate "
                        "('cpu|Test CPU|-|0')"));
  EXPECT_TRUE(List().empty());
  b->mutable_skus(0)->set_sku("cpu|Test CPU|-|0|1|0.1.0");  // the same devices, other threads and version: fits
  auto accepted = Submit(spec);
  EXPECT_TRUE(accepted.ok()) << accepted.status();
}

TEST_F(ValidationCoordinatorTest, BadInputIsRefusedNamingTheField) {
  v1::JobSpec spec;
  spec.mutable_validate()->set_level("thorough");
  auto refused = Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("validate.level = 'thorough': unknown; use quick or standard"));
  spec.mutable_validate()->set_level("quick");
  spec.mutable_validate()->set_time_box_seconds(0);
  spec.mutable_validate()->set_min_effect(1.5);
  refused = Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("validate.time_box_seconds = 0: must be in (0, 60]"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("validate.min_effect = 1.5: must be in (0, 1)"));
  spec.mutable_validate()->clear_time_box_seconds();
  spec.mutable_validate()->clear_min_effect();
  spec.mutable_validate()->mutable_baseline()->set_schema("hetbench.baseline.v0");
  refused = Submit(spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("validate.baseline.schema = 'hetbench.baseline.v0'"));
}

}  // namespace
}  // namespace hetbench::server
