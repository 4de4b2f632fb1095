// The bounded send queue of the coordinator's server streams, driven with a
// fake reactor: an agent stream whose peer reads too slowly ends with
// RESOURCE_EXHAUSTED once its queue holds the bound (the in-flight write
// completes first, nothing after it goes out); a watch stream keeps only the
// latest state behind the write in flight.
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

}  // namespace
}  // namespace hetbench::server
