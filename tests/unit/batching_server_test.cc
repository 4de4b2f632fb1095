// The serving system under test (agent/serving/batching_server.h,
// serving_model.h): batches fill up to max_batch or wait at most
// max_queue_delay, instances run at once, nothing queued is dropped, and a
// zoo model serves an open-loop run. Waits are lower bounds or deadlines far
// from the expected times, never speeds.
#include "agent/serving/batching_server.h"

#include <gtest/gtest.h>

#include <atomic>

#include "agent/serving/serving_model.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/serving_stats.h"
#include "tests/testing/wait.h"

namespace hetbench::agent {
namespace {

using hetbench::testing::WaitFor;

TEST(BatchingServerTest, AFullBatchGoesAtOnceAndALoneQueryAfterTheQueueDelay) {
  std::atomic<int> answered{0};
  auto count = [&](int64_t) { ++answered; };
  {
    BatchingServer server({4, absl::Seconds(60), 1}, [](const std::vector<int64_t>&, int) {});
    for (int i = 0; i < 8; ++i) server.Issue(i, count);
    ASSERT_TRUE(WaitFor([&] { return answered.load() == 8; }, absl::Seconds(10))) << "full batches do not wait 60 s";
    const std::vector<ServedBatch> batches = server.Batches();
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[0].size, 4);
    EXPECT_EQ(batches[1].size, 4);
  }
  BatchingServer server({8, absl::Milliseconds(50), 1}, [](const std::vector<int64_t>&, int) {});
  const int64_t issued = SteadyNowNs();
  server.Issue(0, count);
  ASSERT_TRUE(WaitFor([&] { return answered.load() == 9; }, absl::Seconds(10)));
  ASSERT_EQ(server.Batches().size(), 1u);
  EXPECT_EQ(server.Batches()[0].size, 1);
  EXPECT_GE(server.Batches()[0].started_ns - issued, 50'000'000) << "it waited for company";
}

TEST(BatchingServerTest, InstancesRunBatchesAtTheSameTime) {
  absl::Mutex mu;
  int inside = 0, most = 0;
  auto compute = [&](const std::vector<int64_t>&, int) {
    absl::MutexLock l(&mu);
    most = std::max(most, ++inside);
    auto met = [&]() { return most >= 2; };  // both instances have been inside at once
    mu.AwaitWithTimeout(absl::Condition(&met), absl::Seconds(10));
    --inside;
  };
  std::atomic<int> answered{0};
  BatchingServer server({1, absl::ZeroDuration(), 2}, compute);
  server.Issue(0, [&](int64_t) { ++answered; });
  server.Issue(1, [&](int64_t) { ++answered; });
  ASSERT_TRUE(WaitFor([&] { return answered.load() == 2; }, absl::Seconds(20)));
  absl::MutexLock l(&mu);
  EXPECT_EQ(most, 2);
  std::vector<int> instances;
  for (const ServedBatch& b : server.Batches()) instances.push_back(b.instance);
  std::sort(instances.begin(), instances.end());
  EXPECT_EQ(instances, (std::vector<int>{0, 1}));
}

TEST(BatchingServerTest, StoppingAnswersWhatIsQueued) {
  std::atomic<int> answered{0};
  {
    BatchingServer server({8, absl::Seconds(60), 1}, [](const std::vector<int64_t>&, int) {});
    for (int i = 0; i < 3; ++i) server.Issue(i, [&](int64_t) { ++answered; });
  }
  EXPECT_EQ(answered.load(), 3);
}

TEST(ServingModelTest, AZooModelServesAnOpenLoopRunInBatches) {
  torch::manual_seed(5);
  ImageDataset ds;
  ds.train = {torch::rand({64, 784}), torch::arange(64, torch::kInt64).remainder(10)};
  ds.test = {torch::rand({32, 784}), torch::arange(32, torch::kInt64).remainder(10)};
  auto workload = MakeWorkload("mlp", WithDefaults(v1::JobSpec()), ds);
  ASSERT_TRUE(workload.ok()) << workload.status();
  ASSERT_TRUE(PrepareForServing(workload->get(), torch::kCPU, 8, 2).ok());
  std::atomic<int64_t> computed{0};
  BatchingServer::Compute model = WorkloadCompute(workload->get(), torch::kCPU);
  BatchingServer server({8, absl::Milliseconds(2), 1}, [&](const std::vector<int64_t>& indices, int instance) {
    model(indices, instance);  // indices past the 32 test images wrap around
    computed += static_cast<int64_t>(indices.size());
  });
  const std::vector<int64_t> schedule = PoissonSchedule(9, 400, 500'000'000, 1000);
  ASSERT_GT(schedule.size(), 100u);
  const OpenLoopRun run = RunOpenLoop(schedule, server, absl::Seconds(30));
  EXPECT_EQ(run.unanswered, 0);
  int64_t served = 0;
  for (const ServedBatch& b : server.Batches()) {
    EXPECT_GE(b.size, 1);
    EXPECT_LE(b.size, 8);
    served += b.size;
  }
  EXPECT_EQ(served, static_cast<int64_t>(schedule.size()));
  EXPECT_EQ(computed.load(), served);
}

}  // namespace
}  // namespace hetbench::agent
