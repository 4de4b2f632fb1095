// The Placer alone: jobs as plain protos, agents as Hellos, time as an
// argument. It decides; nothing here runs a loop or a store.
#include "server/scheduler/placer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;

v1::Hello Agent(const std::string& id, int cpus, int port_base = 0) {
  v1::Hello h;
  h.set_agent_id(id);
  h.set_rendezvous_host("127.0.0.1");
  h.set_rendezvous_port_base(port_base);
  for (int i = 0; i < cpus; ++i) {
    v1::Device* d = h.add_devices();
    d->set_id("cpu" + std::to_string(i));
    d->set_kind(v1::DEVICE_KIND_CPU);
  }
  return h;
}

v1::TargetSelector Cpu() {
  v1::TargetSelector t;
  t.set_device_kind(v1::DEVICE_KIND_CPU);
  return t;
}

// A job of `singles` single tasks, then (if `gang` > 0) one gang of that many ranks.
v1::Job Job(const std::string& id, int singles, int gang = 0, double queued_at = 0) {
  v1::Job job;
  job.set_id(id);
  int index = 0;
  auto add = [&]() -> v1::Task* {
    v1::Task* t = job.add_tasks();
    t->set_id(id + "-t" + std::to_string(index));
    t->set_index(index++);
    t->set_state(v1::TASK_STATE_QUEUED);
    t->set_queued_unix_seconds(queued_at);
    *t->mutable_target() = Cpu();
    return t;
  };
  for (int i = 0; i < singles; ++i) add();
  for (int r = 0; r < gang; ++r) {
    v1::Task* t = add();
    t->mutable_gang()->set_id(id + "-g");
    t->mutable_gang()->set_rank(r);
    t->mutable_gang()->set_world_size(gang);
  }
  job.mutable_spec()->mutable_parallel()->set_gang_timeout_seconds(300);
  return job;
}

// Applies a start the way the coordinator does: the task runs and holds its devices.
void Apply(Placer& placer, v1::Job& job, const TaskStart& s) {
  v1::Task& t = *job.mutable_tasks(s.index);
  t.set_state(v1::TASK_STATE_RUNNING);
  t.set_agent_id(s.placement.agent_id);
  t.set_device_id(s.placement.device.id());
  for (const std::string& d : s.stage_device_ids) t.add_stage_device_ids(d);
  placer.Lease(t);
}

TEST(PlacerTest, SingleTasksTakeFreeDevicesAndTheRestWaitWithAReason) {
  Placer placer({});
  v1::Hello a = Agent("a", 2);
  std::vector<const v1::Hello*> agents{&a};
  v1::Job job = Job("j1", 3);
  SchedulingPass pass = placer.BeginPass(agents);
  JobPlacement p = placer.PlaceJob(job, pass, 0);
  ASSERT_EQ(p.starts.size(), 2u);
  EXPECT_NE(p.starts[0].placement.device.id(), p.starts[1].placement.device.id());
  ASSERT_EQ(p.waiting.size(), 1u);
  EXPECT_EQ(p.waiting[0].first, 2);
  EXPECT_THAT(p.waiting[0].second, HasSubstr("busy"));
  // Deciding leases nothing: the same pass again would start the same two.
  EXPECT_EQ(placer.leases().size(), 0u);
  for (const TaskStart& s : p.starts) Apply(placer, job, s);
  EXPECT_EQ(placer.leases().size(), 2u);
  placer.Release(job.tasks(0));
  EXPECT_EQ(placer.leases().size(), 1u);
}

// Two configurations (A, B) x 3 runs, made as JobTable makes them: run 1 of
// each, then run 2 of each, ...
v1::Job Repeated(const std::string& id, int configurations, int runs) {
  v1::Job job = Job(id, configurations * runs);
  job.mutable_spec()->set_repeats(runs);
  for (int i = 0; i < job.tasks_size(); ++i) job.mutable_tasks(i)->set_run(1 + i / configurations);
  return job;
}

TEST(PlacerTest, RunsOfOneConfigurationNeverOverlapWhileConfigurationsRunSideBySide) {
  Placer placer({});
  v1::Hello a = Agent("a", 2), b = Agent("b", 2);
  std::vector<const v1::Hello*> agents{&a, &b};  // 4 free devices
  v1::Job job = Repeated("j1", 2, 3);            // A1 B1 A2 B2 A3 B3
  auto place = [&](double now) {
    SchedulingPass pass = placer.BeginPass(agents);
    JobPlacement p = placer.PlaceJob(job, pass, now);
    for (const TaskStart& s : p.starts) Apply(placer, job, s);
    return p;
  };
  JobPlacement p = place(0);
  // A1 and B1 start; the later runs wait although two devices are free.
  ASSERT_EQ(p.starts.size(), 2u);
  EXPECT_EQ(p.starts[0].index, 0);
  EXPECT_EQ(p.starts[1].index, 1);
  ASSERT_EQ(p.waiting.size(), 4u);
  EXPECT_EQ(p.waiting[0].first, 2);
  EXPECT_THAT(p.waiting[0].second, HasSubstr("run 2 waits for run 1 (j1-t0) to end"));
  EXPECT_THAT(p.waiting[2].second, HasSubstr("run 3 waits for run 2 (j1-t2) to end"));
  // A1 ends: A2 starts, B2 still waits for B1.
  job.mutable_tasks(0)->set_state(v1::TASK_STATE_SUCCEEDED);
  placer.Release(job.tasks(0));
  p = place(1);
  ASSERT_EQ(p.starts.size(), 1u);
  EXPECT_EQ(p.starts[0].index, 2);
  // B1 failed for good: its run 2 goes on.
  job.mutable_tasks(1)->set_state(v1::TASK_STATE_FAILED);
  placer.Release(job.tasks(1));
  p = place(2);
  ASSERT_EQ(p.starts.size(), 1u);
  EXPECT_EQ(p.starts[0].index, 3);
  // A job without repeats is not held back: all start at once.
  Placer fresh({});
  v1::Job once = Job("j2", 3);
  SchedulingPass pass = fresh.BeginPass(agents);
  EXPECT_EQ(fresh.PlaceJob(once, pass, 0).starts.size(), 3u);
}

TEST(PlacerTest, OneAtATimeRunsTheJobsTasksInOrderNeverSideBySide) {
  Placer placer({});
  v1::Hello a = Agent("a", 1), b = Agent("b", 1);
  std::vector<const v1::Hello*> agents{&a, &b};  // two agents (on one host, say), both free
  v1::Job job = Repeated("j1", 2, 2);            // A1 B1 A2 B2
  job.mutable_spec()->set_one_at_a_time(true);
  auto place = [&]() {
    SchedulingPass pass = placer.BeginPass(agents);
    JobPlacement p = placer.PlaceJob(job, pass, 0);
    for (const TaskStart& s : p.starts) Apply(placer, job, s);
    return p;
  };
  for (int next = 0; next < 4; ++next) {
    const JobPlacement p = place();
    ASSERT_EQ(p.starts.size(), 1u) << next;
    EXPECT_EQ(p.starts[0].index, next);
    ASSERT_EQ(p.waiting.size(), static_cast<size_t>(3 - next));
    for (const auto& [index, why] : p.waiting) {
      EXPECT_GT(index, next);
      EXPECT_THAT(why, HasSubstr("one at a time: waits for j1-t" + std::to_string(next) + " to end"));
    }
    // Nothing more while it runs, though a device is free.
    EXPECT_TRUE(place().starts.empty());
    job.mutable_tasks(next)->set_state(next == 1 ? v1::TASK_STATE_FAILED : v1::TASK_STATE_SUCCEEDED);
    placer.Release(job.tasks(next));
  }
  // Without the option the same job starts A1 and B1 side by side.
  Placer fresh({});
  v1::Job side = Repeated("j2", 2, 2);
  SchedulingPass pass = fresh.BeginPass(agents);
  EXPECT_EQ(fresh.PlaceJob(side, pass, 0).starts.size(), 2u);
}

TEST(PlacerTest, AGangRunWaitsForItsEarlierRunAndItsTimeoutCountsFromThatRunsEnd) {
  Placer placer({});
  v1::Hello a = Agent("a", 1, 29500), b = Agent("b", 1, 29600);
  std::vector<const v1::Hello*> agents{&a, &b};
  // One gang of 2 ranks, 2 runs: tasks r1 rank 0, r1 rank 1, r2 rank 0, r2 rank 1.
  v1::Job job = Job("j1", 0, 2);
  job.mutable_spec()->set_repeats(2);
  job.mutable_spec()->mutable_parallel()->set_gang_timeout_seconds(10);
  for (int r = 0; r < 2; ++r) {
    v1::Task* t = job.add_tasks();
    *t = job.tasks(r);
    t->set_id("j1-t" + std::to_string(2 + r));
    t->set_index(2 + r);
    t->mutable_gang()->set_id("j1-g1");
  }
  for (int i = 0; i < 4; ++i) job.mutable_tasks(i)->set_run(1 + i / 2);
  SchedulingPass pass = placer.BeginPass(agents);
  JobPlacement p = placer.PlaceJob(job, pass, 0);
  ASSERT_EQ(p.starts.size(), 2u);
  ASSERT_EQ(p.waiting.size(), 2u);  // both ranks of run 2, with one reason
  EXPECT_EQ(p.waiting[0].first, 2);
  EXPECT_EQ(p.waiting[1].first, 3);
  EXPECT_THAT(p.waiting[1].second, HasSubstr("run 2 waits for run 1"));
  for (const TaskStart& s : p.starts) Apply(placer, job, s);
  // Run 1 ends at t = 100, far past the gang timeout of 10 s after run 2 was queued (t = 0).
  for (int r = 0; r < 2; ++r) {
    job.mutable_tasks(r)->set_state(v1::TASK_STATE_SUCCEEDED);
    job.mutable_tasks(r)->set_finished_unix_seconds(100);
    placer.Release(job.tasks(r));
  }
  // Only one device is connected now: run 2 waits for the second, and does not fail at once.
  std::vector<const v1::Hello*> one{&a};
  SchedulingPass pass2 = placer.BeginPass(one);
  p = placer.PlaceJob(job, pass2, 105);
  EXPECT_TRUE(p.failed.empty());
  EXPECT_EQ(p.waiting.size(), 2u);
  SchedulingPass pass3 = placer.BeginPass(one);
  p = placer.PlaceJob(job, pass3, 111);
  EXPECT_EQ(p.failed.size(), 2u);  // 11 s after run 1 ended
}

TEST(PlacerTest, AGangStartsEveryRankAtOnceWithOneRendezvousOrNone) {
  Placer placer({});
  v1::Hello a = Agent("a", 1, 29500), b = Agent("b", 1, 29600);
  std::vector<const v1::Hello*> one{&a};
  v1::Job job = Job("j1", 0, 2);
  {
    SchedulingPass pass = placer.BeginPass(one);
    JobPlacement p = placer.PlaceJob(job, pass, 10);
    EXPECT_TRUE(p.starts.empty());
    ASSERT_EQ(p.waiting.size(), 2u);  // both ranks carry the reason
    EXPECT_THAT(p.waiting[1].second, HasSubstr("needs 2 x"));
    EXPECT_THAT(p.waiting[1].second, HasSubstr("1 free now"));
  }
  std::vector<const v1::Hello*> two{&a, &b};
  SchedulingPass pass = placer.BeginPass(two);
  JobPlacement p = placer.PlaceJob(job, pass, 20);
  ASSERT_EQ(p.starts.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(p.starts[r].gang);
    EXPECT_EQ(p.starts[r].gang->rank(), r);
    EXPECT_EQ(p.starts[r].gang->world_size(), 2);
    EXPECT_EQ(p.starts[r].gang->master_port(), p.starts[0].placement.agent_id == "a" ? 29500 : 29600);
    EXPECT_EQ(p.starts[r].gang->peers_size(), 2);
  }
  EXPECT_NE(p.starts[0].placement.agent_id, p.starts[1].placement.agent_id);
}

// Each round of a gang is named (its id and rank 0's next attempt) for the
// ranks' store keys, but only when every rank's agent keys by it: a rank
// that does and one that does not would never meet.
TEST(PlacerTest, AGangRoundIsNamedOnlyWhenEveryRanksAgentKeysByIt) {
  Placer placer({});
  v1::Hello a = Agent("a", 1, 29500), b = Agent("b", 1, 29600);
  std::vector<const v1::Hello*> two{&a, &b};
  v1::Job job = Job("j1", 0, 2);
  auto rounds = [&] {
    SchedulingPass pass = placer.BeginPass(two);
    JobPlacement p = placer.PlaceJob(job, pass, 20);
    std::vector<std::string> out;
    for (const TaskStart& s : p.starts) out.push_back(s.gang ? s.gang->round() : "no gang");
    return out;
  };
  a.set_gang_rounds(true);
  EXPECT_THAT(rounds(), ::testing::ElementsAre("", "")) << "b's agent does not key by round";
  b.set_gang_rounds(true);
  EXPECT_THAT(rounds(), ::testing::ElementsAre("j1-g/1", "j1-g/1"));
  job.mutable_tasks(0)->set_attempt(2);  // rank 0 ran twice: this is round 3
  job.mutable_tasks(1)->set_attempt(4);
  EXPECT_THAT(rounds(), ::testing::ElementsAre("j1-g/3", "j1-g/3"));
}

TEST(PlacerTest, AGangPastItsTimeoutFailsEveryRankWithOneError) {
  Placer placer({});
  v1::Hello a = Agent("a", 1);
  std::vector<const v1::Hello*> agents{&a};
  v1::Job job = Job("j1", 0, 2, /*queued_at=*/100);
  SchedulingPass pass = placer.BeginPass(agents);
  JobPlacement p = placer.PlaceJob(job, pass, 100 + 301);
  EXPECT_TRUE(p.starts.empty());
  ASSERT_EQ(p.failed.size(), 2u);
  EXPECT_EQ(p.failed[0].second, p.failed[1].second);
  EXPECT_THAT(p.failed[0].second, HasSubstr("parallel.gang_timeout_seconds = 300"));
}

TEST(PlacerTest, AGangWaitingPastTheHoldTimeKeepsAYoungerJobOffTheFreeDevice) {
  Placer placer(PlacerOptions{/*gang_hold_after_seconds=*/30});
  v1::Hello a = Agent("a", 1), b = Agent("b", 1);
  std::vector<const v1::Hello*> agents{&a, &b};
  v1::Job busy = Job("j0", 1);  // holds one device
  {
    SchedulingPass pass = placer.BeginPass(agents);
    Apply(placer, busy, placer.PlaceJob(busy, pass, 0).starts.at(0));
  }
  v1::Job gang = Job("j1", 0, 2, /*queued_at=*/0);
  v1::Job later = Job("j2", 1);
  auto younger_starts = [&](double now) {
    SchedulingPass pass = placer.BeginPass(agents);
    JobPlacement g = placer.PlaceJob(gang, pass, now);
    EXPECT_TRUE(g.starts.empty());
    return placer.PlaceJob(later, pass, now).starts.size();
  };
  EXPECT_EQ(younger_starts(10), 1u);  // not yet holding: the free device goes to whoever asks
  EXPECT_EQ(younger_starts(31), 0u);  // held for the gang
  SchedulingPass pass = placer.BeginPass(agents);
  EXPECT_THAT(placer.PlaceJob(gang, pass, 31).waiting.at(0).second, HasSubstr("holding 1 free device"));
}

TEST(PlacerTest, PassesComeWhenAskedAndEachSecondWhileAGangWaits) {
  Placer placer({});
  EXPECT_TRUE(placer.TakeDue(0));  // the first
  EXPECT_FALSE(placer.TakeDue(1));
  placer.Request();
  EXPECT_TRUE(placer.TakeDue(2));
  v1::Hello a = Agent("a", 1);
  std::vector<const v1::Hello*> agents{&a};
  v1::Job gang = Job("j1", 0, 2);
  SchedulingPass pass = placer.BeginPass(agents);
  placer.PlaceJob(gang, pass, 0);  // waits
  EXPECT_TRUE(placer.TakeDue(2'000'000'000));
  EXPECT_FALSE(placer.TakeDue(2'500'000'000));
  EXPECT_TRUE(placer.TakeDue(3'100'000'000));
}

TEST(PlacerTest, ASplitOnOneAgentTakesADevicePerStageAndReleasesThemAll) {
  Placer placer({});
  v1::Hello a = Agent("a", 1);
  v1::Device* gpu = a.add_devices();
  gpu->set_id("gpu0");
  gpu->set_kind(v1::DEVICE_KIND_GPU);
  std::vector<const v1::Hello*> agents{&a};
  v1::Job job = Job("j1", 1);
  *job.mutable_spec()->mutable_split()->add_stages()->mutable_target() = Cpu();
  job.mutable_spec()->mutable_split()->add_stages()->mutable_target()->set_device_kind(v1::DEVICE_KIND_GPU);
  SchedulingPass pass = placer.BeginPass(agents);
  JobPlacement p = placer.PlaceJob(job, pass, 0);
  ASSERT_EQ(p.starts.size(), 1u);
  EXPECT_EQ(p.starts[0].placement.device.id(), "cpu0");
  EXPECT_EQ(p.starts[0].stage_device_ids, std::vector<std::string>{"gpu0"});
  Apply(placer, job, p.starts[0]);
  EXPECT_EQ(placer.leases().size(), 2u);
  // The agent lost: one task id back, however many devices it held.
  EXPECT_EQ(placer.ReleaseAgent("a", {}), std::vector<std::string>{"j1-t0"});
  EXPECT_EQ(placer.leases().size(), 0u);
}

}  // namespace
}  // namespace hetbench::server
