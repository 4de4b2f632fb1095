#include "server/scheduler/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::server {
namespace {

v1::Hello Agent(const std::string& id, std::vector<std::pair<std::string, v1::DeviceKind>> devices,
                std::map<std::string, std::string> labels = {}) {
  v1::Hello h;
  h.set_agent_id(id);
  for (auto& [dev, kind] : devices) {
    v1::Device* d = h.add_devices();
    d->set_id(dev);
    d->set_kind(kind);
  }
  for (auto& [k, v] : labels) (*h.mutable_labels())[k] = v;
  return h;
}

TEST(SchedulerTest, SelectorMatchesKindAgentAndLabels) {
  v1::Hello a = Agent("a", {{"cpu0", v1::DEVICE_KIND_CPU}, {"gpu0", v1::DEVICE_KIND_GPU}}, {{"rack", "r1"}});
  v1::TargetSelector any;
  v1::TargetSelector gpu;
  gpu.set_device_kind(v1::DEVICE_KIND_GPU);
  v1::TargetSelector other_agent;
  other_agent.set_agent_id("b");
  v1::TargetSelector rack2;
  (*rack2.mutable_labels())["rack"] = "r2";
  EXPECT_TRUE(Matches(any, a, a.devices(0)));
  EXPECT_FALSE(Matches(gpu, a, a.devices(0)));
  EXPECT_TRUE(Matches(gpu, a, a.devices(1)));
  EXPECT_FALSE(Matches(other_agent, a, a.devices(0)));
  EXPECT_FALSE(Matches(rack2, a, a.devices(0)));
}

TEST(SchedulerTest, ALeasedDeviceIsNeverPickedAgain) {
  v1::Hello a = Agent("a", {{"cpu0", v1::DEVICE_KIND_CPU}});
  v1::Hello b = Agent("b", {{"cpu0", v1::DEVICE_KIND_CPU}});
  DeviceLeases leases;
  v1::TargetSelector cpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  auto p1 = PickDevice(cpu, {&a, &b}, leases);
  ASSERT_TRUE(p1);
  ASSERT_TRUE(leases.Acquire(p1->agent_id, p1->device.id(), "t1"));
  EXPECT_FALSE(leases.Acquire(p1->agent_id, p1->device.id(), "t2"));  // exclusive
  auto p2 = PickDevice(cpu, {&a, &b}, leases);
  ASSERT_TRUE(p2);
  EXPECT_NE(p2->agent_id, p1->agent_id);
  ASSERT_TRUE(leases.Acquire(p2->agent_id, p2->device.id(), "t2"));
  EXPECT_FALSE(PickDevice(cpu, {&a, &b}, leases));  // all busy
  EXPECT_EQ(leases.LeasedDevices("a"), std::vector<std::string>{p1->device.id()});
  EXPECT_EQ(leases.TaskOn("a", p1->device.id()), "t1");
  leases.Release("a", p1->device.id());
  EXPECT_TRUE(PickDevice(cpu, {&a, &b}, leases));
}

TEST(SchedulerTest, DevicesOnOneHostResourceAreLeasedAsOne) {
  // qpu0 is the simulator on cpu0's cores: while either runs a task, the other is busy.
  v1::Hello a = Agent("a", {{"cpu0", v1::DEVICE_KIND_CPU}, {"qpu0", v1::DEVICE_KIND_QPU_SIM},
                            {"gpu0", v1::DEVICE_KIND_GPU}});
  (*a.mutable_devices(1)->mutable_attributes())["host_device"] = "cpu0";
  EXPECT_EQ(ResourceOf(a.devices(0)), "cpu0");
  EXPECT_EQ(ResourceOf(a.devices(1)), "cpu0");
  EXPECT_EQ(ResourceOf(a.devices(2)), "gpu0");
  v1::TargetSelector cpu, qpu, gpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  qpu.set_device_kind(v1::DEVICE_KIND_QPU_SIM);
  gpu.set_device_kind(v1::DEVICE_KIND_GPU);
  DeviceLeases leases;
  ASSERT_TRUE(leases.Acquire("a", "qpu0", "t1"));
  EXPECT_FALSE(PickDevice(cpu, {&a}, leases).has_value());
  EXPECT_TRUE(PickDevice(gpu, {&a}, leases).has_value());
  EXPECT_EQ(TaskOnResource(a, a.devices(0), leases), "t1 on qpu0");
  EXPECT_THAT(PendingReason(cpu, {&a}, leases), ::testing::HasSubstr("a/cpu0 (t1 on qpu0)"));
  leases.Release("a", "qpu0");
  ASSERT_TRUE(leases.Acquire("a", "cpu0", "t2"));
  EXPECT_FALSE(PickDevice(qpu, {&a}, leases).has_value());
  leases.Release("a", "cpu0");
  // Within one pass: placing a CPU task takes the simulator too, not the GPU.
  const std::vector<const v1::Hello*> agents = {&a};  // the pass borrows it
  SchedulingPass pass(agents, leases);
  ASSERT_TRUE(pass.Take(cpu).has_value());
  EXPECT_FALSE(pass.Take(qpu).has_value());
  EXPECT_TRUE(pass.Take(gpu).has_value());
}

TEST(SchedulerTest, APassWithResourcesKeptFromTheHelloPlacesAsOneThatReadsThem) {
  // The coordinator keeps each device's resource from the agent's Hello
  // (Session::resources) so a pass need not read every device's attributes:
  // the kept ones decide, in the pass and with leases held before it.
  v1::Hello a =
      Agent("a", {{"cpu0", v1::DEVICE_KIND_CPU}, {"qpu0", v1::DEVICE_KIND_QPU_SIM}, {"gpu0", v1::DEVICE_KIND_GPU}});
  v1::Hello b = Agent("b", {{"cpu0", v1::DEVICE_KIND_CPU}, {"qpu0", v1::DEVICE_KIND_QPU_SIM}});
  const std::vector<std::string> kept_a = {"cpu0", "cpu0", "gpu0"};  // qpu0 on cpu0's cores
  const std::vector<std::string> kept_b = {"cpu0", "qpu0"};
  const std::vector<const v1::Hello*> agents = {&a, &b};
  const std::vector<const std::vector<std::string>*> resources = {&kept_a, &kept_b};
  v1::TargetSelector cpu, qpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  qpu.set_device_kind(v1::DEVICE_KIND_QPU_SIM);
  DeviceLeases leases;
  {
    SchedulingPass pass(agents, leases, nullptr, &resources);
    EXPECT_EQ(pass.free_devices(), 5u);
    ASSERT_EQ(pass.Take(cpu)->agent_id, "a");
    // a's simulator went with its CPU (the kept resources say they share one); b's did not.
    EXPECT_EQ(pass.free_devices(), 3u);
    const auto q = pass.Take(qpu);
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(q->agent_id, "b");
  }
  ASSERT_TRUE(leases.Acquire("a", "qpu0", "t1"));
  SchedulingPass pass(agents, leases, nullptr, &resources);
  EXPECT_EQ(pass.free_devices(), 3u);  // a's cpu0 and qpu0 are busy, its gpu0 and b's two are free
  EXPECT_EQ(pass.Take(cpu)->agent_id, "b");
  // Kept resources that do not match the Hello's devices are not used.
  const std::vector<std::string> stale = {"x"};
  const std::vector<const std::vector<std::string>*> wrong = {&stale, &kept_b};
  SchedulingPass read(agents, leases, nullptr, &wrong);
  EXPECT_EQ(read.free_devices(), 4u);  // a's qpu0 is leased, and read from a itself cpu0 is free
}

TEST(SchedulerTest, APassListsAgentsOnlyAsFarAsItsSearchesGoAndPlacesAsIfItListedAll) {
  // Agents are listed in order as a search reaches them: an agent with no
  // free device lists nothing and the search goes on to the next; a search
  // that finds nothing lists them all.
  v1::Hello busy = Agent("busy", {{"cpu0", v1::DEVICE_KIND_CPU}});
  v1::Hello one = Agent("one", {{"cpu0", v1::DEVICE_KIND_CPU}});
  v1::Hello two = Agent("two", {{"cpu0", v1::DEVICE_KIND_CPU}, {"gpu0", v1::DEVICE_KIND_GPU}});
  DeviceLeases leases;
  ASSERT_TRUE(leases.Acquire("busy", "cpu0", "t0"));
  const std::vector<const v1::Hello*> agents = {&busy, &one, &two};
  v1::TargetSelector cpu, gpu, tpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  gpu.set_device_kind(v1::DEVICE_KIND_GPU);
  tpu.set_device_kind(v1::DEVICE_KIND_TPU);
  SchedulingPass pass(agents, leases);
  EXPECT_EQ(pass.Take(cpu)->agent_id, "one");
  EXPECT_FALSE(pass.Take(tpu).has_value());  // lists every agent
  EXPECT_EQ(pass.free_devices(), 2u);        // two's cpu0 and gpu0
  // One agent for both stages: "one" has no free device left, "two" has both.
  const auto both = pass.TakeAll({cpu, gpu}, /*same_agent=*/true);
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ((*both)[0].agent_id, "two");
  EXPECT_EQ((*both)[1].agent_id, "two");
  EXPECT_EQ(pass.free_devices(), 0u);
  EXPECT_FALSE(pass.Take(cpu).has_value());
  // Across agents, from a fresh pass that has listed nothing yet.
  SchedulingPass fresh(agents, leases);
  const auto spread = fresh.TakeAll({gpu, cpu, cpu}, /*same_agent=*/false);
  ASSERT_TRUE(spread.has_value());
  EXPECT_EQ((*spread)[0].agent_id, "two");
  EXPECT_EQ((*spread)[1].agent_id, "one");
  EXPECT_EQ((*spread)[2].agent_id, "two");
  SchedulingPass short_of_one(agents, leases);
  EXPECT_FALSE(short_of_one.TakeAll({cpu, cpu, cpu}, /*same_agent=*/false).has_value());
  EXPECT_EQ(short_of_one.free_devices(), 3u) << "a failed TakeAll gives back what it took";
}

TEST(SchedulerTest, ATargetNamingAnExecutorGetsOnlyDevicesThatRunIt) {
  v1::Hello a = Agent("a", {{"cpu0", v1::DEVICE_KIND_CPU}, {"qpu0", v1::DEVICE_KIND_QPU_SIM}});
  a.mutable_devices(0)->add_executors("torch");
  a.mutable_devices(0)->add_executors("python");
  a.mutable_devices(1)->add_executors("statevector");
  v1::TargetSelector python;
  python.set_executor("python");
  EXPECT_TRUE(Matches(python, a, a.devices(0)));
  EXPECT_FALSE(Matches(python, a, a.devices(1)));
  v1::TargetSelector plain;
  EXPECT_EQ(ExecutorFor(plain, a.devices(0)), "torch");  // the device's first executor
  EXPECT_EQ(ExecutorFor(plain, a.devices(1)), "statevector");
  EXPECT_EQ(ExecutorFor(python, a.devices(0)), "python");
  // Agents from before executors were listed run the C++ executors only.
  v1::Hello old = Agent("old", {{"cpu0", v1::DEVICE_KIND_CPU}});
  EXPECT_FALSE(Matches(python, old, old.devices(0)));
  EXPECT_EQ(ExecutorFor(plain, old.devices(0)), "torch");
}

TEST(SchedulerTest, PendingReasonsSayWhatIsMissingAndWhy) {
  DeviceLeases leases;
  v1::TargetSelector tpu;
  tpu.set_device_kind(v1::DEVICE_KIND_TPU);
  EXPECT_EQ(PendingReason(tpu, {}, leases), "waiting for a tpu device: no agent is connected");

  v1::Hello a = Agent("vm1", {{"cpu0", v1::DEVICE_KIND_CPU}});
  a.mutable_devices(0)->add_executors("torch");
  v1::AbsentDevice* absent = a.add_absent();
  absent->set_kind(v1::DEVICE_KIND_TPU);
  absent->set_reason("no /dev/accel* device");
  EXPECT_EQ(PendingReason(tpu, {&a}, leases), "no connected agent offers a tpu device (vm1: no /dev/accel* device)");

  v1::TargetSelector cpu_python;
  cpu_python.set_device_kind(v1::DEVICE_KIND_CPU);
  cpu_python.set_executor("python");
  EXPECT_EQ(PendingReason(cpu_python, {&a}, leases),
            "no connected agent offers a cpu device with the python executor (vm1/cpu0 runs only torch)");

  v1::TargetSelector labelled;
  (*labelled.mutable_labels())["pool"] = "spot";
  EXPECT_EQ(PendingReason(labelled, {&a}, leases), "no connected agent offers a device labelled pool=spot");

  v1::TargetSelector cpu;
  cpu.set_device_kind(v1::DEVICE_KIND_CPU);
  ASSERT_TRUE(leases.Acquire("vm1", "cpu0", "job-000001-t0"));
  EXPECT_EQ(PendingReason(cpu, {&a}, leases), "waiting: the one matching device is busy: vm1/cpu0 (job-000001-t0)");
}

}  // namespace
}  // namespace hetbench::server
