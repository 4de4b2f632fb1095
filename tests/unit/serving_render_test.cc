// The serving views of a multi_stream task and of the generative decoder's
// tasks: the serving and generative tables, the CSV's columns, the footer,
// and the TTFT/TPOT figure of a decoder rate sweep.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "common/names.h"
#include "report/render.h"
#include "report/render/serving.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Task* ServeTask(v1::Job* job, const std::string& id, const std::string& scenario, double qps) {
  v1::Task* t = job->add_tasks();
  t->set_id(id);
  t->set_state(v1::TASK_STATE_SUCCEEDED);
  t->set_agent_id("srv");
  t->set_device_id("cpu0");
  t->set_device_kind(v1::DEVICE_KIND_CPU);
  t->set_batch_size(4);
  v1::PhaseResult* p = t->mutable_result()->add_phases();
  p->set_phase(v1::PHASE_SERVE);
  p->set_valid(true);
  p->mutable_stats()->set_count(64);
  v1::ServingRun* s = t->mutable_result()->mutable_serving();
  s->set_scenario(scenario);
  s->set_target_qps(qps);
  s->set_queries_scheduled(64);
  s->set_queries_answered(64);
  s->set_latency_p50_ns(900'000'000);
  s->set_latency_p99_ns(1'500'000'000);
  s->set_samples_per_query(1);
  s->set_max_batch(4);
  s->set_instances(1);
  s->set_compute("test");
  return t;
}

v1::Job DecoderSweep() {
  v1::Job job;
  job.set_id("job-000007");
  job.mutable_spec()->add_models("decoder");
  for (const auto& [id, qps] : {std::pair{"job-000007-t0", 10.0}, std::pair{"job-000007-t1", 20.0}}) {
    v1::Task* t = ServeTask(&job, id, "server", qps);
    for (v1::Phase phase : {v1::PHASE_TTFT, v1::PHASE_TPOT}) {
      v1::PhaseResult* p = t->mutable_result()->add_phases();
      p->set_phase(phase);
      p->set_valid(true);
      p->mutable_stats()->set_count(64);
    }
    v1::GenerativeRun* g = t->mutable_result()->mutable_serving()->mutable_generative();
    g->set_decoder("2 layers, width 64");
    g->set_prompt_tokens(1280);
    g->set_output_tokens(640);
    g->set_ttft_p50_ns(static_cast<int64_t>(qps * 10'000'000));  // 100 ms, 200 ms
    g->set_ttft_p99_ns(static_cast<int64_t>(qps * 30'000'000));
    g->set_tpot_p50_ns(20'000'000);
    g->set_tpot_p99_ns(40'000'000);
    g->set_ttft_ms(500);
    g->set_itl_p50_ns(19'000'000);
    g->set_itl_p99_ns(45'000'000);
    g->set_output_tokens_per_second(71.5);
    g->set_requests_per_second(7.15);
    g->set_goodput(6.5);
    g->set_requests_meeting_slo(58);
    g->set_max_running(4);
    g->set_mean_running(2.5);
  }
  return job;
}

TEST(ServingRenderTest, ADecoderRunHasAGenerativeTableAndFooter) {
  const v1::Job job = DecoderSweep();
  const std::string table = RenderServing(job, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("Generative (per request; TTFT from its scheduled time"));
  EXPECT_THAT(table, HasSubstr("1280/640"));
  EXPECT_THAT(table, HasSubstr("71.5"));
  EXPECT_THAT(table, HasSubstr("6.50"));
  const std::string footer = ServingFooter(job.tasks(0).result());
  EXPECT_THAT(footer, HasSubstr("decoder 2 layers, width 64"));
  EXPECT_THAT(footer, HasSubstr("(mean 2.50 requests each, at most 4 of 4 slots"));
  EXPECT_THAT(footer, HasSubstr("58 of 64 requests meeting every SLO"));
  // The main table shows the TTFT and TPOT rows with the exact percentiles.
  const std::string report = RenderReport(job, OutputFormat::kTable, false, v1::DEVICE_KIND_CPU);
  EXPECT_THAT(report, HasSubstr("ttft"));
  EXPECT_THAT(report, HasSubstr("tpot"));
}

TEST(ServingRenderTest, TheFooterStatesTheHarnessCostAndANullRunTheIssuersCeiling) {
  v1::Job job;
  v1::Task* t = ServeTask(&job, "job-000001-t0", "server", 2000);
  EXPECT_THAT(ServingFooter(t->result()), Not(HasSubstr("harness CPU")));
  v1::ServingRun* s = t->mutable_result()->mutable_serving();
  s->set_issuer_cpu_us_per_query(17.25);
  s->set_batcher_cpu_us_per_query(4.5);
  EXPECT_THAT(ServingFooter(t->result()), HasSubstr("; harness CPU per query: issuer 17.25 us"));
  EXPECT_THAT(ServingFooter(t->result()), Not(HasSubstr("batcher"))) << "a model's compute is not the harness's";
  s->set_issuer_ceiling_qps(8'300'000);
  s->set_issuer_ceiling_cpu_us_per_query(0.121);
  EXPECT_THAT(ServingFooter(t->result()),
              HasSubstr("issuer 17.25 us, batcher 4.50 us (the null model computes nothing); the issuer's ceiling "
                        "here 8300000 queries/s at 0.121 us of CPU each (all due at once)"));
}

TEST(ServingRenderTest, TheCsvHasAsManyCellsPerRowAsColumns) {
  v1::Job job = DecoderSweep();
  ServeTask(&job, "job-000007-t2", "multi_stream", 0)->mutable_result()->mutable_serving()->set_samples_per_query(8);
  const std::string csv = RenderServing(job, OutputFormat::kCsv);
  const std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  const size_t columns = std::count(lines[0].begin(), lines[0].end(), ',');
  EXPECT_THAT(lines[0], HasSubstr(",samples_per_query,ttft_p50_ns,"));
  for (const std::string& line : lines) EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  EXPECT_THAT(lines[1], HasSubstr(",100000000,"));  // TTFT p50 in ns, unrounded
  EXPECT_THAT(RenderServing(job, OutputFormat::kTable), HasSubstr("multi_stream x8"));
}

TEST(ServingRenderTest, ADecoderRateSweepDrawsTtftAndTpotAgainstLoad) {
  const v1::Job job = DecoderSweep();
  std::vector<Plot> plots;
  ServingPlots(job, &plots);
  bool found = false;
  for (const Plot& p : plots) {
    if (p.title != "TTFT and TPOT against load, decoder on srv/cpu0 (cpu), at most 4 running") continue;
    found = true;
    EXPECT_THAT(p.svg, HasSubstr("TTFT p99"));
    EXPECT_THAT(p.svg, HasSubstr("TTFT SLO 500 ms"));
    EXPECT_THAT(p.svg, Not(HasSubstr("TPOT SLO")));  // none was given
  }
  EXPECT_TRUE(found) << plots.size() << " plots, the first: " << (plots.empty() ? "" : plots[0].title);
  v1::Job one = job;
  one.mutable_tasks()->RemoveLast();
  plots.clear();
  ServingPlots(one, &plots);
  for (const Plot& p : plots) EXPECT_THAT(p.title, Not(HasSubstr("TTFT"))) << "a single rate is no curve";
}

}  // namespace
}  // namespace hetbench::report
