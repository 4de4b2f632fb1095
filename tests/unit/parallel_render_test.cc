// The scaling table and figures of data-parallel gangs and the split
// breakdown, from job protos built here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "report/render.h"
#include "report/render/parallel.h"
#include "report/render/plots.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;

// A rank that trained at `sps` samples/s with steps of `step_ms`, `allreduce_ms` of them all-reduce.
v1::Task Rank(const std::string& gang, int rank, int world, double sps, double step_ms, double allreduce_ms) {
  v1::Task t;
  t.set_id(absl::StrCat(gang, "-r", rank));
  t.set_model("mlp");
  t.set_batch_size(64);
  t.set_state(v1::TASK_STATE_SUCCEEDED);
  t.mutable_gang()->set_id(gang);
  t.mutable_gang()->set_rank(rank);
  t.mutable_gang()->set_world_size(world);
  v1::PhaseResult* p = t.mutable_result()->add_phases();
  p->set_phase(v1::PHASE_TRAIN);
  p->mutable_stats()->set_samples_per_second(sps);
  p->mutable_stats()->set_p50_ns(step_ms * 1e6);
  v1::ParallelRun* d = t.mutable_result()->mutable_parallel();
  d->set_world_size(world);
  d->set_bytes_per_step(world > 1 ? 2'000'000 : 0);
  d->mutable_allreduce()->set_p50_ns(allreduce_ms * 1e6);
  d->mutable_compute()->set_p50_ns((step_ms - allreduce_ms) * 1e6);
  t.mutable_result()->mutable_clock()->set_bound_ns(150'000);
  t.mutable_result()->mutable_clock()->set_round_trips(3);
  return t;
}

v1::Job TwoGangs() {
  v1::Job job;
  job.set_id("job-1");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->add_models("mlp");
  *job.add_tasks() = Rank("g0", 0, 1, 1000, 64, 0);
  *job.add_tasks() = Rank("g1", 0, 2, 800, 80, 20);
  *job.add_tasks() = Rank("g1", 1, 2, 790, 81, 21);
  return job;
}

TEST(ParallelRenderTest, ScalingSumsTheRanksAndComparesWithOneDevice) {
  const std::vector<GangFigures> gangs = Gangs(TwoGangs());
  ASSERT_EQ(gangs.size(), 2u);
  EXPECT_EQ(gangs[1].world_size, 2);
  EXPECT_DOUBLE_EQ(gangs[1].samples_per_second, 1590);
  EXPECT_DOUBLE_EQ(gangs[1].scaling_efficiency, 1590.0 / 2000.0);
  EXPECT_DOUBLE_EQ(gangs[1].allreduce_p50_ns, 21e6) << "the slowest rank's";
  EXPECT_NEAR(gangs[1].allreduce_gbytes_per_second, 2e6 / 21e6, 1e-12);
  const std::string table = RenderScaling(TwoGangs(), OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("EFFICIENCY"));
  EXPECT_THAT(table, HasSubstr("0.80"));
  EXPECT_THAT(table, HasSubstr("0.150")) << "the ranks' clock bound, ms";
  EXPECT_THAT(RenderScaling(TwoGangs(), OutputFormat::kCsv), HasSubstr("g1,mlp,64,128,2,1590.0,"));
  EXPECT_THAT(RenderReport(TwoGangs(), OutputFormat::kTable), HasSubstr("data-parallel scaling"));
}

TEST(ParallelRenderTest, AGangWithAFailedRankHasNoFigures) {
  v1::Job job = TwoGangs();
  job.mutable_tasks(2)->set_state(v1::TASK_STATE_FAILED);
  const std::vector<GangFigures> gangs = Gangs(job);
  EXPECT_EQ(gangs[1].ranks_succeeded, 1);
  EXPECT_EQ(gangs[1].scaling_efficiency, 0);
}

TEST(ParallelRenderTest, SplitStagesGetATableAndAFigure) {
  v1::Job job;
  job.set_id("job-2");
  v1::Task* t = job.add_tasks();
  t->set_id("job-2-t0");
  t->set_model("qnn");
  t->set_state(v1::TASK_STATE_SUCCEEDED);
  for (int s = 0; s < 2; ++s) {
    v1::SplitStageResult* r = t->mutable_result()->add_split();
    r->set_stage(s);
    r->set_layers(s == 0 ? "0-1" : "2-4");
    r->set_device_id(s == 0 ? "cpu0" : "qpu0");
    r->set_device_kind(s == 0 ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_QPU_SIM);
    r->set_forward_ns(1e6 * (s + 1));
    r->set_backward_ns(2e6 * (s + 1));
    r->set_transfer_bytes(8192);
    r->set_idle_ns(3e6);
    r->set_step_ns(9e6);
  }
  const std::string table = RenderSplit(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("qpu0 (qpu-sim)"));
  EXPECT_THAT(table, HasSubstr("2-4"));
  std::vector<Plot> plots;
  ParallelPlots(job, &plots);
  ASSERT_EQ(plots.size(), 1u);
  EXPECT_EQ(plots[0].name, "split-job-2-t0");
  EXPECT_THAT(plots[0].svg, HasSubstr("idle (bubble)"));
  plots.clear();
  ParallelPlots(TwoGangs(), &plots);
  ASSERT_EQ(plots.size(), 1u);
  EXPECT_THAT(plots[0].svg, HasSubstr("2 dev (eff 0.80)"));
}

// A split across agents: its stages are a gang, but not a data-parallel one
// (no scaling row); the stage on another agent is named with it; a rank that
// evaluated nothing says so instead of printing an accuracy of 0.
TEST(ParallelRenderTest, ASplitAcrossAgentsNamesTheStagesAgentsAndIsNoScalingRow) {
  v1::Job job;
  job.set_id("job-3");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->add_models("mlp");
  job.mutable_spec()->mutable_split()->set_across_agents(true);
  for (int r = 0; r < 2; ++r) {
    v1::Task t = Rank("job-3-g0", r, 2, 20000, 2.4, 0);
    t.mutable_result()->clear_parallel();
    t.mutable_result()->set_test_accuracy(0);
    if (r == 0) {
      for (int s = 0; s < 2; ++s) {
        v1::SplitStageResult* st = t.mutable_result()->add_split();
        st->set_stage(s);
        st->set_layers(s == 0 ? "0-2" : "3-6");
        st->set_device_id("cpu0");
        st->set_agent_id(s == 0 ? "a1" : "a2");
        st->set_device_kind(v1::DEVICE_KIND_CPU);
        if (s == 0) {  // the link to stage 1, probed
          st->set_link_latency_ns(95200);
          st->set_link_gbytes_per_second(1.62);
        }
      }
    }
    *job.add_tasks() = t;
  }
  EXPECT_TRUE(Gangs(job).empty());
  const std::string table = RenderSplit(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("a2/cpu0 (cpu)"));
  EXPECT_THAT(table, HasSubstr("stage 0 -> 1: 95.2 us one way, 1.62 GB/s"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("stage 1 -> 2"))) << "the last stage has no outgoing link";
  const std::string csv = RenderSplit(job, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr(",link_latency_us,link_gbytes_per_second\n"));
  EXPECT_THAT(csv, HasSubstr(",95.2,1.62\n"));
  const std::string report = RenderReport(job, OutputFormat::kTable);
  EXPECT_THAT(report, HasSubstr("no test evaluation after"));
  EXPECT_THAT(report, ::testing::Not(HasSubstr("test accuracy 0.0000")));
  EXPECT_THAT(report, ::testing::Not(HasSubstr("data-parallel scaling")));
}

}  // namespace
}  // namespace hetbench::report
