// A replicated serving run on the coordinator: the replicas' placement (each
// on an agent of its own) and the merge of their latencies (exact: the
// union's nearest-rank percentiles, judged by the whole spec's rules).
#include "server/ingest/replica_merge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/job_spec.h"
#include "common/serving_spec.h"
#include "common/serving_stats.h"
#include "server/scheduler/placer.h"

namespace hetbench::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::JobSpec Spec(int replicas, int64_t min_queries) {
  v1::JobSpec spec;
  spec.add_models("null");
  v1::ServingSpec* s = spec.mutable_serving();
  s->set_scenario("server");
  s->set_target_qps(1000);
  s->set_latency_bound_ms(20);
  s->set_min_duration_seconds(1);
  s->set_min_queries(min_queries);
  s->set_replicas(replicas);
  spec = WithDefaults(spec);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  return spec;
}

ReplicaPart Part(int rank, std::vector<int64_t> latencies, int64_t start_ns, int64_t end_ns, int attempt = 1) {
  std::sort(latencies.begin(), latencies.end());
  ReplicaPart p;
  p.task_id = "job-000001-t" + std::to_string(rank);
  p.rank = rank;
  p.attempt = attempt;
  p.stored = p.items = static_cast<int64_t>(latencies.size());
  p.sorted_latencies = std::move(latencies);
  p.window_start_coordinator_ns = start_ns;
  p.window_end_coordinator_ns = end_ns;
  p.queries_scheduled = p.queries_answered = p.stored;
  p.issue_delay_p99_ns = 1000 * (rank + 1);
  p.clock_bound_ns = 50'000 * (rank + 1);
  p.target_qps = 1000;
  return p;
}

TEST(ReplicaMergeTest, MergedPercentilesAreThoseOfTheUnionOfTheReplicasLatencies) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(14.0, 0.8);  // ~1.2 ms, a long tail
  std::vector<int64_t> a(700), b(523), all;
  for (int64_t& v : a) v = static_cast<int64_t>(latency(rng));
  for (int64_t& v : b) v = static_cast<int64_t>(latency(rng)) * 2;  // a slower replica
  all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  const v1::ReplicaMerge m = MergeReplicas(
      Spec(2, 1000), {Part(0, a, 1'000'000'000, 2'100'000'000), Part(1, b, 1'050'000'000, 2'000'000'000)});
  EXPECT_EQ(m.replicas(), 2);
  EXPECT_THAT(m.task_ids(), ElementsAre("job-000001-t0", "job-000001-t1"));
  EXPECT_EQ(m.serving().latency_p50_ns(), NearestRank(all, 50));
  EXPECT_EQ(m.serving().latency_p90_ns(), NearestRank(all, 90));
  EXPECT_EQ(m.serving().latency_p99_ns(), NearestRank(all, 99));
  EXPECT_TRUE(m.serving().exact());
  EXPECT_EQ(m.serving().queries_answered(), 1223);
  EXPECT_EQ(m.phase().stats().count(), 1223);
  EXPECT_DOUBLE_EQ(m.phase().stats().window_seconds(), 1.1) << "the union's window on the coordinator's clock";
  EXPECT_NEAR(m.serving().achieved_qps(), 1223 / 1.1, 1e-9);
  EXPECT_EQ(m.serving().issue_delay_p99_ns(), 2000) << "the largest replica's";
  EXPECT_EQ(m.max_clock_bound_ns(), 100'000);
  EXPECT_EQ(m.serving().replica().replicas(), 2);
  // Not an average of the replicas' percentiles.
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_NE(m.serving().latency_p99_ns(), (NearestRank(a, 99) + NearestRank(b, 99)) / 2);
}

TEST(ReplicaMergeTest, TheUnionIsJudgedByTheWholeSpec) {
  // 600 + 300 queries: each replica's share of 1,000 would do, the union's 900 does not.
  const v1::ReplicaMerge m =
      MergeReplicas(Spec(2, 1000), {Part(0, std::vector<int64_t>(600, 1'000'000), 0, 1'500'000'000),
                                    Part(1, std::vector<int64_t>(300, 1'000'000), 0, 1'500'000'000)});
  EXPECT_FALSE(m.phase().valid());
  EXPECT_THAT(
      m.phase().invalid_reasons(),
      ElementsAre(HasSubstr("only 900 queries measured: needs at least 100 more (serving.min_queries = 1000)")));
}

TEST(ReplicaMergeTest, TheGangMergesOnceEveryRankOfOneAttemptIsIn) {
  ReplicaMerges merges;
  EXPECT_FALSE(merges.Add("g", 3, Part(0, {1, 2}, 0, 1)));
  EXPECT_FALSE(merges.Add("g", 3, Part(2, {3}, 0, 1)));
  // The gang was retried: attempt 2's parts replace attempt 1's.
  EXPECT_FALSE(merges.Add("g", 3, Part(1, {4}, 0, 1, 2)));
  EXPECT_FALSE(merges.Add("g", 3, Part(0, {5}, 0, 1, 1))) << "a late part of the older attempt is dropped";
  EXPECT_FALSE(merges.Add("g", 3, Part(0, {6}, 0, 1, 2)));
  auto parts = merges.Add("g", 3, Part(2, {7}, 0, 1, 2));
  ASSERT_TRUE(parts);
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].sorted_latencies, std::vector<int64_t>{6});
  EXPECT_EQ((*parts)[1].sorted_latencies, std::vector<int64_t>{4});
  EXPECT_EQ((*parts)[2].sorted_latencies, std::vector<int64_t>{7});
  EXPECT_EQ(merges.gangs(), 0u) << "forgotten once merged";
}

v1::Hello Agent(const std::string& id, int cpus) {
  v1::Hello h;
  h.set_agent_id(id);
  h.set_rendezvous_host("127.0.0.1");
  for (int i = 0; i < cpus; ++i) {
    v1::Device* d = h.add_devices();
    d->set_id("cpu" + std::to_string(i));
    d->set_kind(v1::DEVICE_KIND_CPU);
  }
  return h;
}

v1::Job ReplicatedJob(int replicas) {
  v1::Job job;
  job.set_id("job-000001");
  *job.mutable_spec() = Spec(replicas, 1000);
  for (int r = 0; r < replicas; ++r) {
    v1::Task* t = job.add_tasks();
    t->set_id("job-000001-t" + std::to_string(r));
    t->set_index(r);
    t->set_state(v1::TASK_STATE_QUEUED);
    t->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
    t->mutable_gang()->set_id("job-000001-g0");
    t->mutable_gang()->set_rank(r);
    t->mutable_gang()->set_world_size(replicas);
  }
  return job;
}

TEST(ReplicaPlacementTest, EachReplicaGoesToAnAgentOfItsOwnOrTheRunWaitsSayingWhy) {
  Placer placer({});
  v1::Hello a = Agent("a", 2), b = Agent("b", 1);
  const v1::Job job = ReplicatedJob(2);
  {
    std::vector<const v1::Hello*> one{&a};  // two free CPUs, but on one agent
    SchedulingPass pass = placer.BeginPass(one);
    const JobPlacement p = placer.PlaceJob(job, pass, 10);
    EXPECT_TRUE(p.starts.empty());
    ASSERT_EQ(p.waiting.size(), 2u);
    EXPECT_THAT(p.waiting[0].second, HasSubstr("serving replicas job-000001-g0 need 2 x"));
    EXPECT_THAT(p.waiting[0].second, HasSubstr("each on an agent of its own: 1 found on distinct agents now"));
  }
  std::vector<const v1::Hello*> two{&a, &b};
  SchedulingPass pass = placer.BeginPass(two);
  const JobPlacement p = placer.PlaceJob(job, pass, 20);
  ASSERT_EQ(p.starts.size(), 2u);
  EXPECT_NE(p.starts[0].placement.agent_id, p.starts[1].placement.agent_id);
  ASSERT_TRUE(p.starts[0].gang);
  EXPECT_EQ(p.starts[0].gang->timeout_seconds(), kReplicaRendezvousSeconds);
}

TEST(ReplicaPlacementTest, ARunWaitingPastItsReplicaTimeoutFails) {
  Placer placer({});
  v1::Hello a = Agent("a", 4);
  v1::Job job = ReplicatedJob(3);
  job.mutable_spec()->mutable_serving()->set_replica_timeout_seconds(30);
  std::vector<const v1::Hello*> one{&a};
  SchedulingPass pass = placer.BeginPass(one);
  const JobPlacement p = placer.PlaceJob(job, pass, 31);
  ASSERT_EQ(p.failed.size(), 3u);
  EXPECT_THAT(p.failed[0].second, HasSubstr("(serving.replica_timeout_seconds = 30)"));
}

}  // namespace
}  // namespace hetbench::server
