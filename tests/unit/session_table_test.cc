// The SessionTable part alone: streams opened and bound to their agent, a
// newer stream replacing an older one, closing, detached agents and their
// deadlines, silent sessions, and messages to every stream.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/service/session_table.h"
#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server {
namespace {

using coordinator_testing::FakeAgentSink;

v1::Hello HelloOf(const std::string& agent_id) {
  v1::Hello h;
  h.set_agent_id(agent_id);
  h.add_devices()->set_id("cpu0");
  return h;
}

TEST(SessionTableTest, AStreamIsOpenedOnceAndBoundToItsAgentByItsHello) {
  SessionTable table;
  auto sink = std::make_shared<FakeAgentSink>();
  bool opened = false;
  Session& s = table.Open(7, sink, 100.0, &opened);
  EXPECT_TRUE(opened);
  EXPECT_DOUBLE_EQ(s.connected_unix, 100.0);
  table.Open(7, sink, 200.0, &opened);
  EXPECT_FALSE(opened) << "the same stream's next message finds its session";
  EXPECT_FALSE(table.Connected("a1")) << "no Hello yet";
  EXPECT_EQ(table.Bind(7, HelloOf("a1")), 0u);
  EXPECT_TRUE(table.Connected("a1"));
  EXPECT_EQ(table.IdOf("a1"), 7u);
  ASSERT_NE(table.OfAgent("a1"), nullptr);
  EXPECT_EQ(table.OfAgent("a1")->hello.agent_id(), "a1");
  EXPECT_EQ(table.connected(), 1u);
}

TEST(SessionTableTest, AHelloKeepsEachDevicesResourceForTheSchedulingPasses) {
  SessionTable table;
  bool opened = false;
  table.Open(3, std::make_shared<FakeAgentSink>(), 1, &opened);
  v1::Hello hello = HelloOf("a1");
  hello.clear_devices();
  hello.add_devices()->set_id("cpu0");
  v1::Device* qpu = hello.add_devices();
  qpu->set_id("qpu0");
  (*qpu->mutable_attributes())["host_device"] = "cpu0";  // the simulator on the CPU's cores
  hello.add_devices()->set_id("gpu0");
  table.Bind(3, hello);
  EXPECT_EQ(table.OfAgent("a1")->resources, (std::vector<std::string>{"cpu0", "cpu0", "gpu0"}));
  hello.mutable_devices()->DeleteSubrange(1, 2);
  table.Bind(3, hello);  // the same stream's Hello again: kept anew, not appended
  EXPECT_EQ(table.OfAgent("a1")->resources, std::vector<std::string>{"cpu0"});
}

TEST(SessionTableTest, ClosingAReplacedStreamLeavesTheAgentConnected) {
  SessionTable table;
  bool opened = false;
  table.Open(1, std::make_shared<FakeAgentSink>(), 1, &opened);
  table.Bind(1, HelloOf("a1"));
  table.Open(2, std::make_shared<FakeAgentSink>(), 2, &opened);
  EXPECT_EQ(table.Bind(2, HelloOf("a1")), 1u) << "the newer stream replaces the older";
  EXPECT_FALSE(table.Close(1).has_value()) << "the old stream was no longer the agent's";
  EXPECT_TRUE(table.Connected("a1"));
  std::optional<Session> closed = table.Close(2);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->hello.agent_id(), "a1");
  EXPECT_FALSE(table.Connected("a1"));
  EXPECT_FALSE(table.Close(2).has_value()) << "closing twice is harmless";
  table.Open(3, std::make_shared<FakeAgentSink>(), 3, &opened);
  EXPECT_FALSE(table.Close(3).has_value()) << "a stream without a Hello was nobody's";
  EXPECT_EQ(table.Find(3), nullptr);
}

TEST(SessionTableTest, DetachedAgentsAreKnownUntilTheyComeBackOrTheirDeadlinePasses) {
  SessionTable table;
  table.Detach("a1", Detached{/*deadline_ns=*/1000, "stream closed", false, HelloOf("a1")});
  table.Detach("a2", Detached{2000, "restart", true, {}});
  EXPECT_TRUE(table.Known("a1"));
  EXPECT_FALSE(table.Connected("a1"));
  EXPECT_TRUE(table.TakeDue(999).empty());
  auto due = table.TakeDue(1000);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].first, "a1");
  EXPECT_EQ(due[0].second.reason, "stream closed");
  EXPECT_FALSE(table.Known("a1"));
  std::optional<Detached> back = table.TakeDetached("a2");
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->restart);
  EXPECT_FALSE(table.TakeDetached("a2").has_value());
  EXPECT_TRUE(table.detached().empty());
}

TEST(SessionTableTest, SilentStreamsAndHeartbeatsToAgentsWithoutARecentEcho) {
  SessionTable table;
  auto quiet = std::make_shared<FakeAgentSink>(), talking = std::make_shared<FakeAgentSink>(),
       echoed_long_ago = std::make_shared<FakeAgentSink>();
  bool opened = false;
  table.Open(1, quiet, 0, &opened).last_seen_ns = 1'000;
  Session& t = table.Open(2, talking, 0, &opened);
  t.last_seen_ns = t.last_echo_ns = 9'000;
  table.Open(3, echoed_long_ago, 0, &opened).last_echo_ns = 8'000;
  EXPECT_THAT(table.Silent(/*now_ns=*/10'000, /*lease_ns=*/5'000), ::testing::ElementsAre(1u, 3u));
  v1::CoordinatorMessage hb;
  hb.mutable_heartbeat()->set_unix_seconds(1);
  table.SendToQuiet(hb, /*now_ns=*/10'000, /*quiet_ns=*/2'000);
  EXPECT_EQ(quiet->messages().size(), 1u) << "never echoed: it gets the heartbeat";
  EXPECT_EQ(talking->messages().size(), 0u) << "echoed 1 us ago: the echo proved the coordinator alive";
  EXPECT_EQ(echoed_long_ago->messages().size(), 1u) << "echoed 2 us ago, the whole period: it gets one";
  table.CloseAll(grpc::Status(grpc::StatusCode::UNAVAILABLE, "bye"));
  EXPECT_TRUE(quiet->closed() && talking->closed());
}

TEST(SessionTableTest, AStreamWhoseReadsTheCoordinatorHoldsBackIsNotSilent) {
  SessionTable table;
  auto held = std::make_shared<FakeAgentSink>(), dead = std::make_shared<FakeAgentSink>();
  bool opened = false;
  table.Open(1, held, 0, &opened).last_seen_ns = 1'000;
  table.Open(2, dead, 0, &opened).last_seen_ns = 1'000;
  held->set_reads_held_back(true);  // its heartbeats wait behind samples the ingest gate holds back
  EXPECT_THAT(table.Silent(/*now_ns=*/10'000, /*lease_ns=*/5'000), ::testing::ElementsAre(2u));
  EXPECT_EQ(table.Find(1)->last_seen_ns, 10'000) << "counted as seen: its lease starts again";
  held->set_reads_held_back(false);
  EXPECT_THAT(table.Silent(/*now_ns=*/14'000, /*lease_ns=*/5'000), ::testing::ElementsAre(2u));
  EXPECT_THAT(table.Silent(/*now_ns=*/16'000, /*lease_ns=*/5'000), ::testing::ElementsAre(1u, 2u));
}

}  // namespace
}  // namespace hetbench::server
