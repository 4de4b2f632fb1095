// The bounded send queue of the coordinator's server streams, driven with a
// fake reactor: an agent stream whose peer reads too slowly ends with
// RESOURCE_EXHAUSTED once its queue holds the bound (the in-flight write
// completes first, nothing after it goes out); a watch stream keeps only the
// latest state behind the write in flight; an agent stream's held acks leave
// as one ack list, never behind a message sent after them.
#include "server/service/reactor_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hetbench::server {
namespace {

struct FakeReactor {
  std::vector<std::string> started;  // what StartWrite was given, in order
  int finished = 0;
  grpc::Status status;
  void StartWrite(const std::string* m) { started.push_back(*m); }
  void Finish(const grpc::Status& s) {
    ++finished;
    status = s;
  }
};

using Sink = ReactorSink<FakeReactor, std::string>;

TEST(ReactorSinkTest, AStreamWhoseQueueReachesItsBoundEndsWithResourceExhaustedAfterTheWriteInFlight) {
  constexpr size_t kBound = 8192;  // the agent streams' bound (AgentStreamSink::kMaxQueue)
  FakeReactor r;
  Sink sink(&r, RpcTimer(nullptr, "Connect"), nullptr, "agent", /*coalesce=*/false, kBound);
  for (size_t i = 0; i < kBound; ++i) sink.Send("m" + std::to_string(i));
  ASSERT_EQ(r.started.size(), 1u);  // one write in flight, the rest queued
  EXPECT_EQ(r.finished, 0);
  sink.Send("one too many");
  EXPECT_EQ(r.finished, 0);  // the write in flight still owns its message
  sink.WriteDone(true);
  EXPECT_EQ(r.started.size(), 1u);  // nothing queued behind it went out
  ASSERT_EQ(r.finished, 1);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(r.status.error_message().find("send queue"), std::string::npos) << r.status.error_message();
  sink.Send("after the end");
  sink.Close(grpc::Status::OK);
  EXPECT_EQ(r.finished, 1);
  EXPECT_EQ(r.started.size(), 1u);
}

TEST(ReactorSinkTest, UnderItsBoundEveryMessageGoesOutInOrder) {
  FakeReactor r;
  Sink sink(&r, RpcTimer(nullptr, "Connect"), nullptr, "agent", false, 4);
  for (const char* m : {"a", "b", "c", "d"}) sink.Send(m);
  for (int i = 0; i < 4; ++i) sink.WriteDone(true);
  EXPECT_EQ(r.started, (std::vector<std::string>{"a", "b", "c", "d"}));
  sink.Close(grpc::Status::OK);
  EXPECT_EQ(r.finished, 1);
  EXPECT_TRUE(r.status.ok());
}

TEST(ReactorSinkTest, AWatchStreamKeepsOnlyTheLatestStateBehindTheWriteInFlight) {
  FakeReactor r;
  Sink sink(&r, RpcTimer(nullptr, "WatchJob"), nullptr, "watch", /*coalesce=*/true, 2);
  for (const char* m : {"v1", "v2", "v3", "v4"}) sink.Send(m);
  sink.WriteDone(true);
  sink.WriteDone(true);
  EXPECT_EQ(r.started, (std::vector<std::string>{"v1", "v4"}));
  EXPECT_EQ(r.finished, 0);
  sink.Close(grpc::Status::OK);
  EXPECT_EQ(r.finished, 1);
}

TEST(ReactorSinkTest, AFailedWriteEndsTheStreamAndDropsTheRest) {
  FakeReactor r;
  Sink sink(&r, RpcTimer(nullptr, "Connect"), nullptr, "agent", false, 16);
  for (const char* m : {"a", "b", "c"}) sink.Send(m);
  sink.WriteDone(false);
  EXPECT_EQ(r.started, (std::vector<std::string>{"a"}));
  ASSERT_EQ(r.finished, 1);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
}

// Held acks (SendHeld) of an agent stream merge into one ack list that goes
// out on Release; any other Send, or Close, sends what is held first, so the
// stream keeps the order of the calls.
struct FakeAgentReactor {
  std::vector<v1::CoordinatorMessage> started;
  int finished = 0;
  void StartWrite(const v1::CoordinatorMessage* m) { started.push_back(*m); }
  void Finish(const grpc::Status&) { ++finished; }
};
using AgentStreamSink = ReactorSink<FakeAgentReactor, v1::CoordinatorMessage>;

v1::CoordinatorMessage Ack(uint64_t seq) {
  v1::CoordinatorMessage m;
  m.mutable_ack()->set_task_id("t");
  m.mutable_ack()->set_seq(seq);
  return m;
}

std::vector<uint64_t> Seqs(const v1::CoordinatorMessage& m) {
  std::vector<uint64_t> out;
  if (m.has_ack()) out.push_back(m.ack().seq());
  for (const v1::SampleAck& a : m.acks().acks()) out.push_back(a.seq());
  return out;
}

TEST(ReactorSinkTest, HeldAcksLeaveAsOneListOnReleaseAndBeforeAnyOtherMessage) {
  FakeAgentReactor r;
  AgentStreamSink sink(&r, RpcTimer(nullptr, "Connect"), nullptr, "agent", false, 16);
  for (uint64_t seq : {1, 2, 3}) sink.SendHeld(Ack(seq));
  EXPECT_TRUE(r.started.empty()) << "held until released";
  sink.Release();
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_TRUE(r.started[0].has_acks());
  EXPECT_EQ(Seqs(r.started[0]), (std::vector<uint64_t>{1, 2, 3}));
  sink.Release();  // nothing held: nothing sent
  sink.WriteDone(true);
  EXPECT_EQ(r.started.size(), 1u);

  sink.SendHeld(Ack(4));
  v1::CoordinatorMessage cancel;
  cancel.mutable_cancel()->set_task_id("t");
  sink.Send(cancel);  // the held ack goes first
  sink.SendHeld(Ack(5));
  sink.Close(grpc::Status::OK);  // and what is held before the end
  for (int i = 0; i < 3; ++i) sink.WriteDone(true);
  ASSERT_EQ(r.started.size(), 4u);
  EXPECT_TRUE(r.started[1].has_ack()) << "one held ack stays a single ack";
  EXPECT_EQ(Seqs(r.started[1]), (std::vector<uint64_t>{4}));
  EXPECT_TRUE(r.started[2].has_cancel());
  EXPECT_EQ(Seqs(r.started[3]), (std::vector<uint64_t>{5}));
  EXPECT_EQ(r.finished, 1);
}

TEST(ReactorSinkTest, OnlyAcksMergeAndAHeldMessageCountsTowardTheBound) {
  FakeAgentReactor r;
  AgentStreamSink sink(&r, RpcTimer(nullptr, "Connect"), nullptr, "agent", false, 2);
  v1::CoordinatorMessage assign;
  assign.mutable_assign()->set_task_id("t2");
  sink.SendHeld(Ack(1));
  sink.SendHeld(assign);  // not an ack: the ack before it is queued, the assign held
  sink.SendHeld(Ack(2));  // an ack does not merge into an assign
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_EQ(Seqs(r.started[0]), (std::vector<uint64_t>{1}));
  sink.Release();  // queue: [ack 1 (writing), assign], ack 2 overflows the bound of 2
  EXPECT_EQ(r.finished, 0);
  sink.WriteDone(true);
  EXPECT_EQ(r.finished, 1) << "the held ack overflowed the queue: the stream ends";
}

}  // namespace
}  // namespace hetbench::server
