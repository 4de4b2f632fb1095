// The agent's leases on its own clock: a fake coordinator on loopback
// welcomes the agent, assigns it a task and then says nothing. The agent's
// time is a SimulatedClock the test moves, so a 30 s lease is crossed in
// milliseconds: short of the lease nothing happens; past it the agent
// reconnects and stops the attempt it holds by itself.
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "agent/agent.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "tests/testing/wait.h"

namespace hetbench::agent {
namespace {

using ::hetbench::testing::WaitFor;

// Long in real time: only the simulated clock can cross it within the test's waits.
constexpr double kLeaseSeconds = 30;

// Welcomes each stream; assigns one task on the first; then only listens.
class SilentCoordinator final : public v1::AgentGateway::Service {
 public:
  grpc::Status Connect(grpc::ServerContext*,
                       grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage m;
    if (!stream->Read(&m) || !m.has_hello()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "Hello first");
    const int n = ++streams_;
    v1::CoordinatorMessage welcome;
    welcome.mutable_welcome()->set_lease_seconds(kLeaseSeconds);
    welcome.mutable_welcome()->set_heartbeat_seconds(1);
    stream->Write(welcome);
    if (n == 1) {
      v1::CoordinatorMessage msg;
      v1::Assign* a = msg.mutable_assign();
      a->set_task_id("job-000001-t0");
      a->set_attempt(1);
      a->set_device_id("cpu0");
      a->set_batch_size(32);
      a->set_model("mlp");
      *a->mutable_spec() = WithDefaults(v1::JobSpec());
      stream->Write(msg);
    }
    while (stream->Read(&m)) {
      if (m.has_heartbeat()) ++heartbeats_;
    }
    return grpc::Status::OK;
  }
  std::atomic<int> streams_{0};
  std::atomic<int> heartbeats_{0};
};

// Runs until cancelled.
class UntilCancelled final : public Executor {
 public:
  absl::StatusOr<v1::TaskResult> Run(const v1::Assign&, const v1::Device&, TaskControl* control) override {
    running_ = true;
    while (!control->cancel.load()) absl::SleepFor(absl::Milliseconds(5));
    cancelled_ = true;
    return absl::CancelledError("cancelled");
  }
  std::atomic<bool> running_{false}, cancelled_{false};
};

TEST(AgentLeaseTest, PastItsLeaseOnItsOwnClockTheAgentReconnectsAndStopsWhatItHeld) {
  SilentCoordinator coordinator;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&coordinator);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);

  SimulatedClock clock;
  AgentConfig config;
  config.server_address = "127.0.0.1:" + std::to_string(port);
  config.agent_id = "a1";
  config.initial_backoff_seconds = 0.01;
  config.clock = &clock;
  v1::Device cpu;
  cpu.set_id("cpu0");
  cpu.set_kind(v1::DEVICE_KIND_CPU);
  auto executor = std::make_unique<UntilCancelled>();
  UntilCancelled& exec = *executor;
  Agent agent(config, {cpu}, std::move(executor));
  std::thread run([&] { agent.Run(); });

  ASSERT_TRUE(WaitFor([&] { return exec.running_.load(); }, absl::Seconds(10)));
  // Short of the lease: heartbeats go out on the agent's clock, nothing else moves.
  clock.AdvanceNs(static_cast<int64_t>((kLeaseSeconds - 1) * 1e9));
  EXPECT_TRUE(WaitFor([&] { return coordinator.heartbeats_.load() >= 1; }, absl::Seconds(10)));
  EXPECT_EQ(agent.counters().connections.load(), 1);
  EXPECT_EQ(agent.counters().attempts_abandoned.load(), 0);
  EXPECT_FALSE(exec.cancelled_.load());

  // Past it: the coordinator counts as silent and has re-queued the attempt.
  clock.AdvanceNs(static_cast<int64_t>(2 * 1e9));
  EXPECT_TRUE(WaitFor([&] { return coordinator.streams_.load() >= 2; }, absl::Seconds(10)));
  EXPECT_TRUE(WaitFor([&] { return agent.counters().attempts_abandoned.load() == 1 && exec.cancelled_.load(); }, absl::Seconds(10)));

  agent.Shutdown();
  run.join();
  server->Shutdown();
}

}  // namespace
}  // namespace hetbench::agent
