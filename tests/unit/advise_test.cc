// The placement advisor on jobs built here: the plan that wins each
// objective under the stated model, and refusals that say what to run.
#include "report/advise.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "common/stats.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A task of the 3-layer qnn on `kind`: per-layer forward (backward 0) in ms,
// a measured step equal to their sum, average training power and a rate.
v1::Task Timed(const std::string& id, v1::DeviceKind kind, std::vector<double> layer_ms, double watts, double usd) {
  v1::Task t;
  t.set_id(id);
  t.set_model("qnn");
  t.set_batch_size(64);
  t.set_device_kind(kind);
  t.set_state(v1::TASK_STATE_SUCCEEDED);
  double sum = 0;
  for (size_t i = 0; i < layer_ms.size(); ++i) {
    v1::LayerTiming* l = t.mutable_result()->add_layers();
    l->set_index(static_cast<int>(i));
    l->set_name(absl::StrCat("layer", i));
    l->mutable_forward()->set_p50_ns(layer_ms[i] * 1e6);
    l->set_output_bytes_per_sample(32);
    sum += layer_ms[i];
  }
  v1::PhaseResult* p = t.mutable_result()->add_phases();
  p->set_phase(v1::PHASE_TRAIN);
  p->mutable_stats()->set_p50_ns(sum * 1e6);
  v1::EnergyResult* e = t.mutable_result()->add_energy();
  e->set_phase(v1::PHASE_TRAIN);
  e->set_average_watts(watts);
  e->set_source(v1::POWER_SOURCE_RAPL);
  v1::CostResult* c = t.mutable_result()->add_cost();
  c->set_phase(v1::PHASE_TRAIN);
  c->set_usd_per_hour(usd);
  return t;
}

v1::Job TwoKinds() {
  v1::Job job;
  job.set_id("job-7");
  *job.add_tasks() = Timed("job-7-t0", v1::DEVICE_KIND_CPU, {1, 10, 1}, 100, 1.0);
  *job.add_tasks() = Timed("job-7-t1", v1::DEVICE_KIND_QPU_SIM, {5, 2, 4}, 10, 100.0);
  return job;
}

TEST(AdviseTest, TimePutsEachLayerWhereItIsFastestWhenTheLinkIsCheap) {
  AdviseOptions o;
  o.link_gbytes_per_second = 1.0;
  auto a = Advise(TwoKinds(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->best.stages.size(), 3u);
  EXPECT_EQ(SplitFlag(a->best, 3), "0:cpu,1:qpu-sim,2-:cpu");
  // 1 + 2 + 1 ms, plus two boundaries of 2 x 32 B x 64 / 1 GB/s = 4.096 us each.
  EXPECT_NEAR(a->best.step_ns, 4e6 + 2 * 4096, 1);
  ASSERT_EQ(a->singles.size(), 2u);
  EXPECT_NEAR(a->singles[0].as_plan.step_ns, 12e6, 1) << "a kind alone predicts its measured step";
  EXPECT_EQ(a->link_source, "given (--link-gbytes-per-second)");
}

// Three runs of each kind (repeats): the plan is searched on the median of
// the runs, and each run's own profile gives the prediction interval for a
// new run; the median, not the outlying run, sets the prediction.
TEST(AdviseTest, RepeatsGiveMedianProfilesAndAPredictionInterval) {
  v1::Job job;
  job.set_id("job-8");
  const double scale[] = {1.0, 1.04, 1.5};  // run 3 of the cpu an outlier
  for (int r = 0; r < 3; ++r) {
    v1::Task cpu = Timed(absl::StrCat("job-8-t", 2 * r), v1::DEVICE_KIND_CPU,
                         {1 * scale[r], 10 * scale[r], 1 * scale[r]}, 100, 1.0);
    v1::Task qpu = Timed(absl::StrCat("job-8-t", 2 * r + 1), v1::DEVICE_KIND_QPU_SIM, {5, 2, 4}, 10, 100.0);
    cpu.set_run(r + 1);
    qpu.set_run(r + 1);
    *job.add_tasks() = cpu;
    *job.add_tasks() = qpu;
  }
  AdviseOptions o;
  o.link_gbytes_per_second = 1.0;
  o.plan = {"0-:cpu"};
  auto a = Advise(job, o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->runs, 3);
  ASSERT_EQ(a->run_step_ns.size(), 3u);
  EXPECT_NEAR(a->best.step_ns, 12.48e6, 1e3) << "the median run (x1.04), not the mean";
  EXPECT_NEAR(a->run_step_ns[2], 18e6, 1e3);
  EXPECT_LT(a->interval_low_ns, 12e6);
  EXPECT_GT(a->interval_high_ns, 18e6) << "the interval covers the runs it came from";
  EXPECT_THAT(RenderAdvice(*a, OutputFormat::kTable), HasSubstr("95% prediction interval"));
  const auto j = nlohmann::json::parse(RenderAdvice(*a, OutputFormat::kJson));
  EXPECT_EQ(j["runs"], 3);
  EXPECT_EQ(j["prediction_interval_ms"].size(), 2u);
  // One run of each kind: no interval, and the output says how to get one.
  auto one = Advise(TwoKinds(), o);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->interval_high_ns, 0);
  EXPECT_THAT(RenderAdvice(*one, OutputFormat::kTable), HasSubstr("--repeats 3"));
}

// A plan across agents profiled on one agent says that the figures hold that
// agent alone; profiled on each agent (one target per agent, runs
// interleaved), its figures are the median over both agents' runs and the
// output names them.
TEST(AdviseTest, AProfileOnEachAgentOfASplitIsNamedAndOnOneAgentIsFlagged) {
  auto job_on = [](const std::vector<std::string>& agents) {
    v1::Job job;
    job.set_id("job-10");
    const double scale[] = {1.0, 1.1, 1.02, 1.12};  // the second agent 10% slower
    for (size_t r = 0; r < 4; ++r) {
      v1::Task cpu = Timed(absl::StrCat("job-10-t", r), v1::DEVICE_KIND_CPU,
                           {1 * scale[r], 10 * scale[r], 1 * scale[r]}, 100, 1.0);
      cpu.set_agent_id(agents[r % agents.size()]);
      cpu.set_run(static_cast<int>(r / agents.size()) + 1);
      *job.add_tasks() = cpu;
    }
    return job;
  };
  AdviseOptions o;
  o.link_gbytes_per_second = 1.0;
  o.plan = {"0-1:cpu", "2-:cpu"};
  o.across_agents = true;
  auto both = Advise(job_on({"adv1", "adv2"}), o);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->runs, 4);
  EXPECT_EQ(both->profile_agents, (std::vector<std::string>{"adv1", "adv2"}));
  EXPECT_GT(both->interval_high_ns / both->interval_low_ns, 1.1) << "the agents' difference is in the interval";
  const std::string table = RenderAdvice(*both, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("the profiled runs are from 2 agents (adv1, adv2)"));
  EXPECT_THAT(table, Not(HasSubstr("every profiled run was on one agent")));
  EXPECT_EQ(nlohmann::json::parse(RenderAdvice(*both, OutputFormat::kJson))["profile_agents"].size(), 2u);
  auto one = Advise(job_on({"adv1"}), o);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(RenderAdvice(*one, OutputFormat::kTable),
              HasSubstr("every profiled run was on one agent (adv1) and the plan's stages run on several"));
  // On one agent (no split across agents) one agent is all there is: nothing to flag.
  o.across_agents = false;
  o.plan = {"0-:cpu"};
  auto local = Advise(job_on({"adv1"}), o);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(RenderAdvice(*local, OutputFormat::kTable), Not(HasSubstr("one agent")));
}

// Two layers on the cpu with forward, backward and optimizer shares (ms):
// layer 0 10 + 20 and 1, layer 1 2 + 3 and `optimizer1`; the measured step
// is their sum.
v1::Job WithOptimizer(double optimizer1) {
  v1::Job job;
  job.set_id("job-9");
  v1::Task t = Timed("job-9-t0", v1::DEVICE_KIND_CPU, {10, 2}, 100, 1.0);
  const double backward[] = {20, 3}, optimizer[] = {1, optimizer1};
  for (int i = 0; i < 2; ++i) {
    v1::LayerTiming* l = t.mutable_result()->mutable_layers(i);
    l->mutable_backward()->set_count(5);
    l->mutable_backward()->set_p50_ns(backward[i] * 1e6);
    l->mutable_optimizer()->set_count(5);
    l->mutable_optimizer()->set_p50_ns(optimizer[i] * 1e6);
  }
  t.mutable_result()->mutable_phases(0)->mutable_stats()->set_p50_ns((35 + 1 + optimizer1) * 1e6);
  *job.add_tasks() = t;
  return job;
}

// The optimizer is timed per layer, not spread over the layers with the
// step: across agents the later stage steps its own optimizer beside the
// earlier stage's backward, and only what is left of it when the next
// step's forward arrives lengthens the step.
TEST(AdviseTest, AcrossAgentsALaterStagesOptimizerRunsBesideTheEarlierBackward) {
  AdviseOptions o;
  o.link_gbytes_per_second = 1e9;  // transfers of ~0
  o.plan = {"0:cpu", "1-:cpu"};
  o.across_agents = true;
  auto a = Advise(WithOptimizer(6), o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->singles.size(), 1u);
  EXPECT_NEAR(a->singles[0].as_plan.step_ns, 42e6, 1) << "the cpu alone predicts its measured step";
  EXPECT_NEAR(a->singles[0].as_plan.optimizer_ns, 7e6, 1) << "one optimizer over both layers";
  EXPECT_NEAR(a->singles[0].profiled_optimizer_ns, 7e6, 1);
  // Stage 1's 6 ms end while stage 0 still runs its 20 ms backward: the step is 35 + stage 0's 1 ms.
  EXPECT_NEAR(a->best.optimizer_ns, 1e6, 1e3);
  EXPECT_NEAR(a->best.step_ns, 36e6, 1e3);
  EXPECT_THAT(absl::StrJoin(a->assumptions, "\n"), HasSubstr("beside the earlier stages' backward"));
  EXPECT_THAT(absl::StrJoin(a->assumptions, "\n"), HasSubstr("with its optimizer share"));
  const auto j = nlohmann::json::parse(RenderAdvice(*a, OutputFormat::kJson));
  EXPECT_NEAR(j["best"]["optimizer_ms"].get<double>(), 1.0, 1e-3);
  // A 40 ms optimizer on stage 1: its backward ends 20 ms before stage 0's,
  // and the next step's forward reaches it 1 + 10 ms after that: 9 ms late.
  auto late = Advise(WithOptimizer(40), o);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_NEAR(late->best.optimizer_ns, 10e6, 1e3);
  EXPECT_NEAR(late->best.step_ns, 45e6, 1e3);
  EXPECT_NEAR(late->singles[0].as_plan.step_ns, 76e6, 1);
  // A profile without optimizer timings (an older agent) keeps the model before: spread over the layers.
  auto old = Advise(TwoKinds(), AdviseOptions{});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->best.optimizer_ns, 0);
  EXPECT_THAT(absl::StrJoin(old->assumptions, "\n"), HasSubstr("no optimizer timings"));
}

TEST(AdviseTest, ASlowLinkKeepsTheModelOnOneDevice) {
  AdviseOptions o;
  o.link_gbytes_per_second = 1e-5;  // 4096 B take 0.4 s
  auto a = Advise(TwoKinds(), o);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->best.stages.size(), 1u);
  EXPECT_EQ(a->best.stages[0].kind, v1::DEVICE_KIND_QPU_SIM) << "11 ms on qpu-sim alone beats 12 ms on cpu; a boundary costs 0.4 s";
}

// --plan predicts a given plan instead of searching; across agents two
// stages may share a kind, and the link comes from another job's splits
// across agents (its transfer bytes over its transfer time).
// A job whose split tasks ran across agents (the link's measurement), and
// the plan 0-1:cpu,2-:cpu across two agents with its link from `link`.
v1::Job LinkJob() {
  v1::Job link;
  link.set_id("job-8");
  link.mutable_spec()->mutable_split()->set_across_agents(true);
  return link;
}
AdviseOptions TwoCpuStagesAcrossAgents(const v1::Job& link) {
  AdviseOptions o;
  o.plan = {"0-1:cpu", "2-:cpu"};
  o.across_agents = true;
  o.link_job = &link;
  return o;
}

// Across agents, a boundary also costs what the link job's split spent
// beyond its stages' compute and transfers (handoffs between the agents).
TEST(AdviseTest, AcrossAgentsABoundaryAddsTheLinkSplitsHandoff) {
  v1::Job link = LinkJob();
  for (double step_ms : {10.0, 10.4, 12.0}) {  // the median task: 1.4 ms past 9 ms of compute and transfers
    v1::TaskResult* r = link.add_tasks()->mutable_result();
    v1::SplitStageResult* s0 = r->add_split();
    s0->set_forward_ns(3e6);
    s0->set_backward_ns(2e6);
    s0->set_transfer_ns(1e6);
    s0->set_transfer_bytes(2000);  // 2000 B in 1 ms: a link of 0.002 GB/s (no probe)
    s0->set_step_ns(step_ms * 1e6);
    v1::SplitStageResult* s1 = r->add_split();
    s1->set_forward_ns(2e6);
    s1->set_backward_ns(1e6);
  }
  const AdviseOptions o = TwoCpuStagesAcrossAgents(link);
  auto a = Advise(TwoKinds(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NEAR(a->handoff_ns, 1.4e6, 1);
  // 2 x 32 B x 64 at 0.002 GB/s (2.048 ms), plus the handoff.
  EXPECT_NEAR(a->best.transfer_ns, 2 * 2048 / (6000.0 / 3e6) + 1.4e6, 1);
  EXPECT_NEAR(a->best.step_ns, 12e6 + a->best.transfer_ns, 1);
  EXPECT_THAT(absl::StrJoin(a->assumptions, "\n"), HasSubstr("plus 1.400 ms of handoff"));
  EXPECT_NEAR(nlohmann::json::parse(RenderAdvice(*a, OutputFormat::kJson))["handoff_ms"].get<double>(), 1.4, 1e-9);
  // A split whose step is shorter than its parts (clock noise) adds nothing.
  for (v1::Task& t : *link.mutable_tasks()) t.mutable_result()->mutable_split(0)->set_step_ns(5e6);
  EXPECT_EQ(Advise(TwoKinds(), o)->handoff_ns, 0);
}

// A link job with repeats: the plan is predicted under each run's link too,
// and the interval adds that spread to the profile's (Welch-Satterthwaite);
// from one run of the link the output says the interval leaves it out.
TEST(AdviseTest, ALinkJobWithRepeatsPutsTheLinksVariationInTheInterval) {
  v1::Job profile;
  profile.set_id("job-11");
  const double scale[] = {1.0, 1.02, 0.99};
  for (int r = 0; r < 3; ++r) {
    v1::Task cpu =
        Timed(absl::StrCat("job-11-t", r), v1::DEVICE_KIND_CPU, {1 * scale[r], 10 * scale[r], 1 * scale[r]}, 100, 1.0);
    cpu.set_run(r + 1);
    *profile.add_tasks() = cpu;
  }
  v1::Job link = LinkJob();
  for (double latency_us : {50.0, 400.0, 100.0}) {  // one probe per run; the median 100 us
    v1::SplitStageResult* s = link.add_tasks()->mutable_result()->add_split();
    s->set_link_latency_ns(latency_us * 1e3);
    s->set_link_gbytes_per_second(4);
  }
  const AdviseOptions o = TwoCpuStagesAcrossAgents(link);
  auto a = Advise(profile, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->link_runs.size(), 3u);
  EXPECT_TRUE(a->interval_has_link);
  EXPECT_NEAR(a->best.step_ns, 12e6 + 2 * (100e3 + 2048 / 4.0), 1e-3) << "the median profile and link";
  ASSERT_EQ(a->link_run_step_ns.size(), 3u);
  EXPECT_NEAR(a->link_run_step_ns[1], 12e6 + 2 * (400e3 + 2048 / 4.0), 1e-3) << "run 2's link, the median profile";
  auto log_variance = [](const std::vector<double>& v) {
    double mean = 0, var = 0;
    for (double x : v) mean += std::log(x) / static_cast<double>(v.size());
    for (double x : v) var += (std::log(x) - mean) * (std::log(x) - mean) / static_cast<double>(v.size() - 1);
    return var;
  };
  const double pa = log_variance(a->run_step_ns) * 4 / 3, pb = log_variance(a->link_run_step_ns) * 4 / 3;
  const double df = (pa + pb) * (pa + pb) / (pa * pa / 2 + pb * pb / 2);
  EXPECT_GT(df, 2) << "two sources give more degrees of freedom than either";
  EXPECT_NEAR(std::log(a->interval_high_ns / a->best.step_ns), StudentTQuantile(0.975, df) * std::sqrt(pa + pb), 1e-9);
  EXPECT_THAT(absl::StrJoin(a->assumptions, "\n"), HasSubstr("the median over 3 runs of its split"));
  EXPECT_THAT(RenderAdvice(*a, OutputFormat::kTable), HasSubstr(" and 3 runs' links ("));
  const auto j = nlohmann::json::parse(RenderAdvice(*a, OutputFormat::kJson));
  EXPECT_EQ(j["link_runs"], 3);
  EXPECT_EQ(j["interval_has_link"], true);
  EXPECT_NEAR(std::log(j["profile_interval_ms"][1].get<double>() * 1e6 / a->best.step_ns),
              StudentTQuantile(0.975, 2) * std::sqrt(pa), 1e-9)
      << "the profile's runs alone, beside";

  // One run of the link: the interval is the profile's alone, and says so.
  link.mutable_tasks()->DeleteSubrange(0, 2);
  auto one = Advise(profile, o);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->interval_has_link);
  EXPECT_NEAR(std::log(one->interval_high_ns / one->best.step_ns), StudentTQuantile(0.975, 2) * std::sqrt(pa), 1e-9);
  EXPECT_THAT(absl::StrJoin(one->assumptions, "\n"),
              HasSubstr("the interval leaves out the link's variation between runs (submit the link's split with "
                        "--repeats 3)"));
}

TEST(AdviseTest, AGivenPlanAcrossTwoAgentsOfOneKindUsesTheLinkOfAnotherJobsSplit) {
  v1::Job link = LinkJob();
  v1::SplitStageResult* st = link.add_tasks()->mutable_result()->add_split();
  st->set_transfer_bytes(8192);
  st->set_transfer_ns(4096);  // 2 GB/s
  AdviseOptions o = TwoCpuStagesAcrossAgents(link);
  auto a = Advise(TwoKinds(), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->plan_given);
  EXPECT_EQ(a->plans_considered, 1u);
  EXPECT_EQ(SplitFlag(a->best, 3), "0-1:cpu,2-:cpu");
  // 12 ms of cpu layers, plus one boundary: 2 x 32 B x 64 / 2 GB/s = 2.048 us.
  EXPECT_NEAR(a->best.step_ns, 12e6 + 2048, 1);
  EXPECT_EQ(a->link_source, "measured by job-8's split tasks across agents");

  // A link job whose splits probed their links: latency + bytes / bandwidth
  // per message, which scales to this boundary's size (2 x (60 us + 2048 B /
  // 4 GB/s) = 121.024 us), not the link job's bytes over its time.
  st->set_link_latency_ns(50e3);
  st->set_link_gbytes_per_second(4);
  v1::SplitStageResult* st2 = link.mutable_tasks(0)->mutable_result()->add_split();
  st2->set_link_latency_ns(70e3);  // the median of the two probes: 60 us, 4 GB/s
  st2->set_link_gbytes_per_second(4);
  auto probed = Advise(TwoKinds(), o);
  ASSERT_TRUE(probed.ok()) << probed.status();
  EXPECT_NEAR(probed->best.transfer_ns, 2 * (60e3 + 2048 / 4.0), 1e-6);
  EXPECT_NEAR(probed->best.step_ns, 12e6 + 2 * (60e3 + 2048 / 4.0), 1e-3);
  EXPECT_EQ(probed->link_source, "probed by job-8's split tasks across agents: 60.0 us one way + bytes at 4 GB/s");
  EXPECT_THAT(RenderAdvice(*probed, OutputFormat::kTable), HasSubstr("2 x (60.0 us + bytes x batch / 4 GB/s)"));
  link.mutable_tasks(0)->mutable_result()->mutable_split()->RemoveLast();
  st->set_link_latency_ns(0);
  st->set_link_gbytes_per_second(0);

  // On one agent two neighbouring stages of one kind are one stage: refused.
  o.across_agents = false;
  o.link_job = nullptr;
  auto same = Advise(TwoKinds(), o);
  EXPECT_EQ(same.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(same.status().message()), HasSubstr("give --across-agents"));
  // A plan that leaves layers out, or names a kind the job never timed, says which.
  o.plan = {"0:cpu", "1:qpu-sim"};
  EXPECT_THAT(std::string(Advise(TwoKinds(), o).status().message()), HasSubstr("the last must reach it"));
  o.plan = {"0:cpu", "1-:gpu"};
  EXPECT_THAT(std::string(Advise(TwoKinds(), o).status().message()), HasSubstr("timed no qnn layers on gpu"));
  // --link-from a job without splits across agents is refused, not assumed.
  o.plan = {"0-1:cpu", "2-:cpu"};
  o.across_agents = true;
  v1::Job none;
  none.set_id("job-9");
  o.link_job = &none;
  EXPECT_THAT(std::string(Advise(TwoKinds(), o).status().message()),
              HasSubstr("--link-from job-9: no succeeded split task across agents"));
}

TEST(AdviseTest, EnergyAndCostWeighPowerAndRates) {
  AdviseOptions o;
  o.link_gbytes_per_second = 1.0;
  o.objective = Objective::kEnergy;
  auto energy = Advise(TwoKinds(), o);
  ASSERT_TRUE(energy.ok());
  // qpu-sim at 10 W for 11 ms (0.11 J) beats any plan using the 100 W cpu.
  EXPECT_EQ(SplitFlag(energy->best, 3), "0-:qpu-sim");
  EXPECT_NEAR(energy->best.energy_joules, 0.11, 1e-9);
  o.objective = Objective::kCost;
  auto cost = Advise(TwoKinds(), o);
  ASSERT_TRUE(cost.ok());
  // The cpu at 1 USD/h for 12 ms is cheaper than holding the 100 USD/h qpu-sim at all.
  EXPECT_EQ(SplitFlag(cost->best, 3), "0-:cpu");
  const auto j = nlohmann::json::parse(RenderAdvice(*cost, OutputFormat::kJson));
  EXPECT_EQ(j["objective"], "cost");
  EXPECT_EQ(j["best"]["split_flag"], "0-:cpu");
  EXPECT_EQ(j["single_devices"].size(), 2u);
  EXPECT_FALSE(j["assumptions"].empty());
}

TEST(AdviseTest, PerLayerPowerFromTheLayerLoopsReplacesTheKindsAverage) {
  v1::Job job = TwoKinds();
  // The cpu's middle layer draws 1 W on its own, its outer layers 100 W: the
  // cpu's 10 ms middle layer costs 0.01 J, less than 2 ms at 10 W on qpu-sim.
  const double watts[] = {100, 1, 100};
  for (int l = 0; l < 3; ++l) {
    v1::LayerEnergy* e = job.mutable_tasks(0)->mutable_result()->add_layer_energy();
    e->set_layer(l);
    e->set_phase(v1::PHASE_TRAIN);
    e->set_resolved(true);
    e->set_source(v1::POWER_SOURCE_RAPL);
    e->set_average_watts(watts[l]);
  }
  AdviseOptions o;
  o.link_gbytes_per_second = 1.0;
  o.objective = Objective::kEnergy;
  auto a = Advise(job, o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(SplitFlag(a->best, 3), "0:qpu-sim,1:cpu,2-:qpu-sim");
  ASSERT_EQ(a->per_layer_power, std::vector<std::string>{"cpu"});
  EXPECT_THAT(absl::StrJoin(a->assumptions, "\n"), HasSubstr("its own training power, measured by the layer loops"));
  // One unresolved layer: the kind's average is used again, as before.
  job.mutable_tasks(0)->mutable_result()->mutable_layer_energy(1)->set_resolved(false);
  auto b = Advise(job, o);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->per_layer_power.empty());
  EXPECT_EQ(SplitFlag(b->best, 3), "0-:qpu-sim");
}

TEST(AdviseTest, AnObjectiveWithoutItsFiguresIsRefusedNotOptimisedOnZeros) {
  v1::Job job = TwoKinds();
  job.mutable_tasks(1)->mutable_result()->mutable_cost(0)->set_usd_per_hour(0);
  job.mutable_tasks(0)->mutable_result()->mutable_energy(0)->set_average_watts(0);
  AdviseOptions o;
  o.objective = Objective::kCost;
  EXPECT_THAT(std::string(Advise(job, o).status().message()), HasSubstr("--cost qpu-sim=USD_PER_HOUR"));
  o.objective = Objective::kEnergy;
  EXPECT_THAT(std::string(Advise(job, o).status().message()), HasSubstr("no training energy figure"));
  o.objective = Objective::kTime;
  auto a = Advise(job, o);
  ASSERT_TRUE(a.ok());
  const std::string table = RenderAdvice(*a, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("no hourly rate"));
  EXPECT_FALSE(a->best.cost_known && a->best.energy_known) << "the best time plan uses both kinds";
}

TEST(AdviseTest, AJobWithoutLayerTimingsSaysWhatToRun) {
  v1::Job job;
  job.set_id("job-8");
  auto a = Advise(job, AdviseOptions());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("--layers"));
}

}  // namespace
}  // namespace hetbench::report
