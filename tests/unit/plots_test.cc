// The SVG writer, the report's figures and the HTML page, checked on their
// text: what each figure holds (bars, whiskers, bands, labels), what it says
// about its data (measured or modeled, simulated), and that the page needs
// nothing from outside itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "report/render/html.h"
#include "report/render/answer.h"
#include "report/render/plots.h"
#include "report/render/svg.h"

namespace hetbench::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgTest, TicksAreRoundAndCoverTheRange) {
  EXPECT_THAT(svg::NiceTicks(0, 1730, 5), ElementsAre(0, 500, 1000, 1500, 2000));
  EXPECT_THAT(svg::NiceTicks(0.2, 0.9, 4), ElementsAre(0.2, 0.4, 0.6, 0.8, 1.0));
  EXPECT_EQ(svg::TickText(1200), "1,200");
  EXPECT_EQ(svg::TickText(0.25), "0.25");
  EXPECT_EQ(svg::TickText(3e6), "3e+06");
  EXPECT_EQ(svg::Escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

TEST(SvgTest, BarsHaveWhiskersNotesAMissingMarkAndEveryLabel) {
  svg::BarChart c;
  c.title = "Energy <per> sample";
  c.y_label = "mJ per sample";
  c.categories = {"mlp", "cnn"};
  c.series = {"n1/cpu0 (cpu)", "n1/gpu0 (gpu)"};
  c.bars = {{{2.0, 1.5, 2.5, "measured (rapl)"}, {4.0, 3.0, 5.0, "modeled*"}},
            {{0.5, 0.4, 0.6, "measured (nvml)"}, {}}};
  const std::string out = svg::Render(c);
  EXPECT_EQ(Count(out, "<rect class=\"bar\""), 3);
  EXPECT_EQ(Count(out, "<path d=\"M"), 3);  // one whisker per bar
  EXPECT_EQ(Count(out, ">n/a<"), 1);
  EXPECT_THAT(out, HasSubstr("Energy &lt;per&gt; sample"));
  EXPECT_THAT(out, HasSubstr(">mJ per sample<"));
  EXPECT_THAT(out, HasSubstr(">modeled*<"));
  EXPECT_THAT(out, HasSubstr(">measured (rapl)<"));
  EXPECT_THAT(out, HasSubstr(">n1/gpu0 (gpu)<"));  // legend
  EXPECT_THAT(out, HasSubstr("#0072B2"));
  EXPECT_THAT(out, HasSubstr("#E69F00"));
  EXPECT_THAT(out, HasSubstr("width=\"800.0\""));
}

TEST(SvgTest, TallerBarsAreTallerAndALogAxisSpansDecades) {
  svg::BarChart c;
  c.title = "t";
  c.y_label = "samples/s";
  c.categories = {"a", "b"};
  c.series = {"s"};
  c.bars = {{{10, svg::kNone, svg::kNone, ""}, {10000, svg::kNone, svg::kNone, ""}}};
  c.log_y = true;
  const std::string out = svg::Render(c);
  std::regex height("class=\"bar\" x=\"[0-9.]+\" y=\"[0-9.]+\" width=\"[0-9.]+\" height=\"([0-9.]+)\"");
  std::vector<double> h;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), height); it != std::sregex_iterator(); ++it) {
    h.push_back(std::stod((*it)[1]));
  }
  ASSERT_EQ(h.size(), 2u);
  EXPECT_GT(h[1], h[0] * 3);  // four decades against one, on a log axis
  for (const char* tick : {">10<", ">100<", ">1,000<", ">10,000<"}) EXPECT_THAT(out, HasSubstr(tick));
}

TEST(SvgTest, LinesCarryTheirBandAndStackedBarsTheirShares) {
  svg::LineChart l;
  l.title = "batch";
  l.x_label = "batch size";
  l.y_label = "ms per sample";
  l.log_x = true;
  l.lines = {{"cpu", {{32, 1.0, 0.9, 1.2}, {128, 0.5, 0.45, 0.6}}}, {"gpu", {{32, 0.1}, {128, 0.05}}}};
  const std::string line = svg::Render(l);
  EXPECT_EQ(Count(line, "class=\"band\""), 1);  // only the line with quartiles has one
  EXPECT_EQ(Count(line, "class=\"line\""), 2);
  EXPECT_EQ(Count(line, "<circle"), 4);
  EXPECT_THAT(line, HasSubstr(">32<"));
  EXPECT_THAT(line, HasSubstr(">128<"));

  svg::StackedBarChart s;
  s.title = "layers";
  s.y_label = "ms";
  s.categories = {"cpu fwd"};
  s.stacks = {"0 Linear", "1 ReLU", "2 Linear"};
  s.values = {{3.0, 0.1, 1.0}};
  const std::string stacked = svg::Render(s);
  EXPECT_EQ(Count(stacked, "class=\"segment\""), 3);
  EXPECT_THAT(stacked, HasSubstr(">73%<"));  // 3 / 4.1
  EXPECT_THAT(stacked, HasSubstr(">24%<"));
  EXPECT_THAT(stacked, Not(HasSubstr(">2%<")));  // too thin to label
}

v1::Task* AddTask(v1::Job* job, int index, v1::DeviceKind kind, const std::string& device, int batch, double step_ms) {
  v1::Task* t = job->add_tasks();
  t->set_id(job->id() + "-t" + std::to_string(index));
  t->set_state(v1::TASK_STATE_SUCCEEDED);
  t->set_agent_id("n1");
  t->set_device_id(device);
  t->set_device_kind(kind);
  t->set_batch_size(batch);
  t->set_model("mlp");
  v1::TaskResult* r = t->mutable_result();
  for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER}) {
    v1::PhaseResult* p = r->add_phases();
    p->set_phase(phase);
    v1::TimingStats* s = p->mutable_stats();
    s->set_count(100);
    s->set_items(100 * batch);
    s->set_p25_ns(step_ms * 0.9e6);
    s->set_p50_ns(step_ms * 1e6);
    s->set_p75_ns(step_ms * 1.1e6);
    s->set_samples_per_second(batch / (step_ms * 1e-3));
    p->set_valid(true);
  }
  v1::EnergyResult* e = r->add_energy();
  e->set_phase(v1::PHASE_TRAIN);
  e->set_sensor(kind == v1::DEVICE_KIND_CPU ? "rapl:package-0" : "modeled:gpu0");
  e->set_source(kind == v1::DEVICE_KIND_CPU ? v1::POWER_SOURCE_RAPL : v1::POWER_SOURCE_MODELED);
  e->set_energy_joules(50);
  e->set_average_watts(25);
  e->set_joules_per_sample(0.002);
  e->set_coverage(1);
  e->set_window_seconds(2);
  v1::PhaseWindow* w = r->add_windows();
  w->set_phase(v1::PHASE_TRAIN);
  w->set_start_ns(1'000'000'000);
  w->set_end_ns(3'000'000'000);
  r->set_data_load_seconds(0.3);
  r->set_preprocess_seconds(0.2);
  r->set_train_flops_per_sample(3e5);
  r->set_forward_flops_per_sample(1e5);
  r->mutable_calibration()->set_gemm_gflops(kind == v1::DEVICE_KIND_CPU ? 80 : 9000);
  for (int i = 0; i < 2; ++i) {
    v1::LayerTiming* l = r->add_layers();
    l->set_index(i);
    l->set_name(i == 0 ? "Linear(in_features=784, out_features=256)" : "ReLU()");
    l->mutable_forward()->set_count(20);
    l->mutable_forward()->set_p50_ns(i == 0 ? 3e5 : 1e4);
    l->mutable_inference()->set_count(20);
    l->mutable_inference()->set_p50_ns(i == 0 ? 2e5 : 1e4);
  }
  return t;
}

v1::Job SweepJob() {
  v1::Job job;
  job.set_id("job-000042");
  job.mutable_spec()->set_model("mlp");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  AddTask(&job, 0, v1::DEVICE_KIND_CPU, "cpu0", 32, 4);
  AddTask(&job, 1, v1::DEVICE_KIND_CPU, "cpu0", 128, 10);
  AddTask(&job, 2, v1::DEVICE_KIND_GPU, "gpu0", 32, 0.5);
  AddTask(&job, 3, v1::DEVICE_KIND_GPU, "gpu0", 128, 0.8);
  return job;
}

std::vector<std::string> Names(const std::vector<Plot>& plots) {
  std::vector<std::string> out;
  for (const Plot& p : plots) out.push_back(p.name);
  return out;
}

TEST(PlotsTest, ASweepOnTwoDevicesGetsEveryKindOfFigure) {
  v1::Job job = SweepJob();
  PowerTraces power;
  v1::PowerBatch& b = power[job.tasks(0).id()].emplace_back();
  b.mutable_sensor()->set_name("rapl:package-0");
  b.mutable_sensor()->set_source(v1::POWER_SOURCE_RAPL);
  for (int i = 0; i < 40; ++i) {
    b.add_t_ns(int64_t{100'000'000} * i);
    b.add_watts(std::nan(""));  // a counter: watts from its rate
    b.add_joules(25.0 * 0.1 * i);
  }
  const std::vector<Plot> plots = JobPlots(job, power);
  const std::vector<std::string> names = Names(plots);
  for (const char* want :
       {"compare-train-samples-per-second", "compare-train-time-per-sample", "compare-train-energy-per-sample",
        "compare-infer-samples-per-second", "batch-mlp-train", "batch-mlp-infer", "layers-mlp-b32", "layers-mlp-b128",
        "timeline-job-000042-t0", "roofline"}) {
    EXPECT_THAT(names, ::testing::Contains(want));
  }
  // No cost rate was given: no cost figure rather than a figure of zeros.
  EXPECT_THAT(names, Not(::testing::Contains("compare-train-cost-per-1000")));
  for (const Plot& p : plots) {
    EXPECT_THAT(p.svg, HasSubstr("<svg")) << p.name;
    EXPECT_THAT(p.svg, HasSubstr("</svg>")) << p.name;
    if (p.name == "compare-train-energy-per-sample") {
      EXPECT_THAT(p.svg, HasSubstr(">measured (rapl)<"));
      EXPECT_THAT(p.svg, HasSubstr(">modeled*<"));
      EXPECT_EQ(Count(p.svg, "class=\"bar\""), 4);
    }
    if (p.name == "timeline-job-000042-t0") {
      EXPECT_THAT(p.svg, HasSubstr("rapl:package-0 (W)"));
      EXPECT_THAT(p.svg, HasSubstr("train (measured)"));
      EXPECT_THAT(p.svg, HasSubstr(">data load<"));
      EXPECT_THAT(p.svg, HasSubstr(">preprocess<"));
      EXPECT_THAT(p.svg, HasSubstr(">warm-up<"));
      EXPECT_THAT(p.svg, HasSubstr(">25<"));  // 2.5 J per 0.1 s: a 25 W tick
      EXPECT_THAT(p.svg, Not(HasSubstr("MODELED")));  // a RAPL counter is measured
    }
    if (p.name == "roofline") {
      EXPECT_THAT(p.svg, HasSubstr("stroke-dasharray"));  // the peaks
      // A bar per batch size of the sweep, not the last one drawn over the others.
      EXPECT_THAT(p.svg, HasSubstr("mlp train, batch 32"));
      EXPECT_THAT(p.svg, HasSubstr("mlp train, batch 128"));
    }
  }
}

// A modeled power trace is never drawn as a measurement.
TEST(PlotsTest, AModeledPowerTraceSaysItIsAnEstimate) {
  v1::Job job = SweepJob();
  PowerTraces power;
  v1::PowerBatch& b = power[job.tasks(2).id()].emplace_back();
  b.mutable_sensor()->set_name("modeled:gpu0");
  b.mutable_sensor()->set_source(v1::POWER_SOURCE_MODELED);
  for (int i = 0; i < 10; ++i) {
    b.add_t_ns(int64_t{300'000'000} * i);
    b.add_watts(200);
    b.add_joules(std::nan(""));
  }
  bool seen = false;
  for (const Plot& p : JobPlots(job, power)) {
    if (p.name != "timeline-" + job.tasks(2).id()) continue;
    seen = true;
    EXPECT_THAT(p.svg, HasSubstr("modeled:gpu0 (W, MODELED: an estimate, not measured)"));
  }
  EXPECT_TRUE(seen);
}

TEST(PlotsTest, SimulatedResultsSaySoInTheirTitles) {
  v1::Job job = SweepJob();
  job.mutable_tasks(2)->mutable_result()->mutable_environment()->set_simulated(true);
  for (const Plot& p : JobPlots(job)) {
    if (p.name.rfind("compare-", 0) == 0) EXPECT_THAT(p.title, HasSubstr("SIMULATED")) << p.name;
  }
}

// The timelines JobPlots draws are the tasks TimelineTasks names: the ones the
// CLI and the web UI fetch power readings for.
TEST(PlotsTest, ABigJobGetsTwelveTimelinesAndTheyAreTheTasksTimelineTasksNames) {
  v1::Job job;
  job.set_id("job-000050");
  for (int i = 0; i < 14; ++i) AddTask(&job, i, v1::DEVICE_KIND_CPU, "cpu0", 64, 2);
  const std::vector<const v1::Task*> named = TimelineTasks(job);
  ASSERT_EQ(named.size(), 12u);
  std::vector<std::string> drawn;
  for (const Plot& p : JobPlots(job)) {
    if (p.name.rfind("timeline-", 0) == 0) drawn.push_back(p.name.substr(9));
  }
  ASSERT_EQ(drawn.size(), 12u);
  for (size_t i = 0; i < named.size(); ++i) EXPECT_EQ(drawn[i], named[i]->id());
}

// A run that flips between two speeds shows both, and where: the step times
// of the traced tasks (StepTraceTasks) over the run, INVALID marked.
TEST(PlotsTest, StepTimesOverTheRunShowASlowStretchAndTheVerdict) {
  v1::Job job = SweepJob();
  for (v1::Task& t : *job.mutable_tasks()) t.mutable_result()->set_samples_stored(400);
  job.mutable_tasks(0)->mutable_result()->mutable_phases(0)->set_valid(false);
  const std::vector<const v1::Task*> traced = StepTraceTasks(job);
  ASSERT_EQ(traced.size(), 4u);
  StepTraces steps;
  v1::SampleBatch& b = steps[job.tasks(0).id()].emplace_back();
  b.set_phase(v1::PHASE_TRAIN);
  int64_t t = 1'000'000'000;
  for (int i = 0; i < 480; ++i) {  // 1 ms steps, then 1.6 ms from step 240 on
    const int64_t d = i < 240 ? 1'000'000 : 1'600'000;
    b.add_start_ns(t);
    b.add_duration_ns(d);
    b.add_items(32);
    t += d;
  }
  bool seen = false;
  for (const Plot& p : JobPlots(job, {}, steps)) {
    if (p.name != "step-time-train") continue;
    seen = true;
    EXPECT_EQ(p.title, "Training step time over the run");
    EXPECT_THAT(p.svg, HasSubstr(job.tasks(0).id() + " n1/cpu0 (cpu) INVALID"));
    EXPECT_THAT(p.svg, HasSubstr(": 1 → 1</title>"));      // the first stretch's median (s, ms)
    EXPECT_THAT(p.svg, HasSubstr(" → 1.6</title>"));       // the slow stretch's
    EXPECT_THAT(p.svg, HasSubstr("class=\"band\""));
    EXPECT_EQ(Count(p.svg, "<circle"), 240);  // 480 steps in groups of 2
  }
  EXPECT_TRUE(seen);
  // No samples fetched: no figure.
  for (const Plot& p : JobPlots(job)) EXPECT_NE(p.name, "step-time-train");
}

TEST(PlotsTest, AJobWithoutResultsHasNoFigures) {
  v1::Job job;
  job.set_id("job-1");
  job.add_tasks()->set_state(v1::TASK_STATE_QUEUED);
  EXPECT_TRUE(JobPlots(job).empty());
}

TEST(HtmlReportTest, TheAnswerComesFirstFromValidPhasesWithTheRatiosRange) {
  v1::Job job = SweepJob();
  job.mutable_tasks(1)->mutable_result()->mutable_phases(0)->set_valid(false);  // cpu0 batch 128, train
  const std::vector<AnswerLine> answers = Answers(job);
  ASSERT_EQ(answers.size(), 2u);  // mlp train, mlp infer
  EXPECT_EQ(answers[0].phase, "train");
  // gpu0 batch 128: 160,000 samples/s; the next, gpu0 batch 32: 64,000; the
  // range divides the figures at the p25/p75 steps crosswise.
  EXPECT_THAT(answers[0].text, HasSubstr("fastest: n1/gpu0 (gpu), batch 128: 160000.0 samples/s, 2.50x the next "
                                         "(n1/gpu0 (gpu), batch 32) [2.05-3.06 at the step quartiles]"));
  EXPECT_THAT(answers[0].text, HasSubstr("most frugal: "));
  EXPECT_THAT(answers[0].text, HasSubstr("1 INVALID phase left out"));
  EXPECT_THAT(answers[1].text, Not(HasSubstr("INVALID")));
  const std::string html = RenderHtmlReport(job, {});
  EXPECT_LT(html.find("<h2>The answer</h2>"), html.find("<h2>Results</h2>"));
  for (int i = 0; i < 4; ++i) job.mutable_tasks(i)->mutable_result()->mutable_phases(0)->set_valid(false);
  EXPECT_THAT(Answers(job)[0].text, HasSubstr("no VALID phase: no answer"));
}

TEST(HtmlReportTest, AWaitingTaskSaysWhyInTheResults) {
  v1::Job job;
  job.set_id("job-000043");
  v1::Task* t = job.add_tasks();
  t->set_id("job-000043-t0");
  t->set_state(v1::TASK_STATE_QUEUED);
  t->set_pending_reason("no free cpu device: cpu0@a busy");
  const std::string html = RenderHtmlReport(job, {});
  EXPECT_THAT(html, HasSubstr("waiting: no free cpu device: cpu0@a busy"));
}

TEST(HtmlReportTest, OnePageWithEveryFigureTheFiguresTablesAndNothingFromOutside) {
  v1::Job job = SweepJob();
  job.mutable_tasks(1)->mutable_result()->mutable_phases(0)->set_valid(false);
  job.mutable_tasks(1)->mutable_result()->mutable_phases(0)->add_invalid_reasons("IQR/median 0.40 > 0.25");
  job.mutable_tasks(0)->mutable_result()->mutable_environment()->set_model_fingerprint("mlp/init=abc");
  const std::vector<Plot> plots = JobPlots(job);
  const std::string html = RenderHtmlReport(job, plots);
  EXPECT_THAT(html, HasSubstr("<span id=\"job-id\">job-000042</span>"));
  EXPECT_EQ(Count(html, "<svg"), static_cast<int>(plots.size()));
  for (const Plot& p : plots) EXPECT_THAT(html, HasSubstr("id=\"plot-" + p.name + "\""));
  EXPECT_THAT(html, HasSubstr("IQR/median 0.40 &gt; 0.25"));
  EXPECT_THAT(html, HasSubstr(">INVALID<"));
  // The INVALID phase: its row shaded, its bar marked in the figures.
  EXPECT_THAT(html, HasSubstr("<tr class=\"invalid-row\"><td>" + job.tasks(1).id() + "</td>"));
  EXPECT_THAT(html, HasSubstr("INVALID: that phase&#39;s verdict (see Results), not a comparable figure"));
  // The tables are HTML tables, folded; the figures laid out in a grid with their titles in the SVG only.
  EXPECT_THAT(html, HasSubstr("<details><summary>Speedup, power, energy and cost per task and phase</summary>\n"
                              "<table class=\"data\" id=\"table-speedup\">"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">12.50</td>"));  // gpu batch 128's speedup over cpu
  EXPECT_THAT(html, HasSubstr("<table class=\"data\" id=\"table-roofline\">"));
  EXPECT_THAT(html, Not(HasSubstr("<pre>TASK")));  // no CLI text table
  EXPECT_THAT(html, HasSubstr("<div class=\"figures\">"));
  EXPECT_THAT(html, Not(HasSubstr("<figcaption>")));
  EXPECT_THAT(html, HasSubstr("mlp/init=abc"));
  EXPECT_THAT(html, HasSubstr("hetbench get job job-000042 -o yaml"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("href=")));
  // The only URL is the SVG namespace.
  std::regex url("https?://[^\"]+");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), url); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  }
}

}  // namespace
}  // namespace hetbench::report
