// Two replicas of a replicated serving run meeting over loopback (a real
// c10d store and Gloo group, as two agents would): they agree on one start,
// the latest replica's proposal plus the lead, each back on its own steady
// clock by its offset; a replica left alone fails retryably.
#include <gtest/gtest.h>

#include <thread>

#include "agent/serving/replicas.h"
#include "common/clock.h"
#include "tests/testing/free_port.h"

namespace hetbench::agent {
namespace {

using ::hetbench::testing::FreePort;

ReplicaMeeting Meeting(int rank, int port, int64_t offset_ns, double timeout_seconds = 20) {
  ReplicaMeeting m;
  m.gang.set_gang_id("job-000001-g0");
  m.gang.set_rank(rank);
  m.gang.set_world_size(2);
  m.gang.set_master_host("127.0.0.1");
  m.gang.set_master_port(port);
  m.gang.set_timeout_seconds(timeout_seconds);
  m.gang.add_peers("r1/cpu0");
  m.gang.add_peers("r2/cpu0");
  m.clock = [offset_ns] {
    v1::ClockSync c;
    c.set_offset_ns(offset_ns);
    c.set_bound_ns(20'000);
    c.set_round_trips(5);
    return c;
  };
  return m;
}

TEST(ServingReplicasTest, TwoReplicasAgreeOnOneStartOnTheCoordinatorsClock) {
  const int port = FreePort();
  // Replica 1's clock runs 3 ms behind the coordinator's, replica 0's 1 ms ahead.
  absl::StatusOr<ReplicaStart> s0, s1;
  const int64_t before = SteadyNowNs();
  std::thread t0([&] { s0 = MeetReplicas(Meeting(0, port, -1'000'000), absl::Milliseconds(200)); });
  std::thread t1([&] {
    absl::SleepFor(absl::Milliseconds(300));  // the slower replica: its proposal is the latest
    s1 = MeetReplicas(Meeting(1, port, 3'000'000), absl::Milliseconds(200));
  });
  t0.join();
  t1.join();
  ASSERT_TRUE(s0.ok()) << s0.status();
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_EQ(s0->record.start_coordinator_ns(), s1->record.start_coordinator_ns());
  // Each back on its own clock: coordinator = steady + offset.
  EXPECT_EQ(s0->start_ns, s0->record.start_coordinator_ns() + 1'000'000);
  EXPECT_EQ(s1->start_ns, s1->record.start_coordinator_ns() - 3'000'000);
  // The latest proposal: after the slower replica arrived, with the lead.
  EXPECT_GE(s1->start_ns, before + 300'000'000 + 200'000'000);
  EXPECT_EQ(s0->rank, 0);
  EXPECT_EQ(s1->rank, 1);
  EXPECT_EQ(s1->replicas, 2);
  EXPECT_EQ(s1->record.clock_bound_ns(), 20'000);
  EXPECT_EQ(s1->record.peers(), "r1/cpu0, r2/cpu0");
}

TEST(ServingReplicasTest, AReplicaLeftAloneFailsRetryably) {
  const absl::StatusOr<ReplicaStart> s = MeetReplicas(Meeting(0, FreePort(), 0, 1.5), absl::Milliseconds(100));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
}

TEST(ServingReplicasTest, ARunOfOneStartsAtOnceWithoutMeeting) {
  ReplicaMeeting m = Meeting(0, FreePort(), 0);
  m.gang.set_world_size(1);
  const absl::StatusOr<ReplicaStart> s = MeetReplicas(m, absl::Milliseconds(100));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->start_ns, 0);
  EXPECT_EQ(AgreedStartSteadyNs(5'000, 2'000), 3'000);
}

}  // namespace
}  // namespace hetbench::agent
