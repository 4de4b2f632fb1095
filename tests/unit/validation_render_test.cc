// A validation job's views: the verdict tables, the CSV, the HTML page with a
// strip plot per test (outliers named, untrusted strings escaped), and
// baseline files shown and compared.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "report/render.h"
#include "report/render/html.h"
#include "report/render/validation.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Job Judged() {
  v1::Job job;
  job.set_id("job-000009");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->mutable_validate()->set_level("quick");
  *job.mutable_spec() = WithDefaults(job.spec());
  v1::ValidationReport* r = job.mutable_validation();
  for (int i = 0; i < 4; ++i) {
    v1::DeviceVerdict* d = r->add_devices();
    d->set_agent_id(i == 3 ? "<script>x</script>" : absl::StrCat("a", i));
    d->set_device_id("cpu0");
    d->set_kind(v1::DEVICE_KIND_CPU);
    d->set_sku("cpu|Test <CPU>|-|2|all|1");
    d->set_task_id(absl::StrCat("job-000009-t", i));
    d->set_verdict(i == 2 ? v1::VERDICT_DEGRADED : v1::VERDICT_PASS);
    d->set_reason(i == 2 ? "2 tests DEGRADED" : "2 tests passed");
    v1::TestVerdict* t = d->add_tests();
    t->set_test("matmul");
    t->set_unit("GFLOP/s");
    t->set_value(i == 2 ? 90 : 100);
    t->set_baseline_median(100);
    t->set_baseline_spread(1);
    t->set_ratio(i == 2 ? 0.9 : 1.0);
    t->set_ratio_low(t->ratio() - 0.01);
    t->set_ratio_high(t->ratio() + 0.01);
    t->set_threshold(0.97);
    t->set_verdict(i == 2 ? v1::VERDICT_DEGRADED : v1::VERDICT_PASS);
    t->set_reason("r");
    t->set_baseline_source("this job: 4 devices of the SKU");
  }
  v1::DeviceVerdict* gpu = r->add_devices();
  gpu->set_agent_id("a0");
  gpu->set_kind(v1::DEVICE_KIND_GPU);
  gpu->set_verdict(v1::VERDICT_SKIPPED);
  gpu->set_reason("no gpu device: no NVIDIA driver");
  v1::NodeVerdict* n = r->add_nodes();
  n->set_agent_id("a2");
  n->set_verdict(v1::VERDICT_DEGRADED);
  n->set_devices(1);
  return job;
}

TEST(ValidationRenderTest, TheTableSaysEachVerdictAndTheThresholds) {
  const std::string table = RenderValidation(Judged(), OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("validation job-000009 (quick; 4 devices on 1 node; measured)"));
  EXPECT_THAT(table, HasSubstr("DEGRADED"));
  EXPECT_THAT(table, HasSubstr("(gpu)"));
  EXPECT_THAT(table, HasSubstr("no gpu device: no NVIDIA driver"));
  EXPECT_THAT(table, HasSubstr("0.900  0.890-0.910  0.970"));
  EXPECT_THAT(table, HasSubstr("a device when 2 of its tests are"));
  EXPECT_EQ(RenderReport(Judged(), OutputFormat::kTable), table);  // `report` of a validation job
}

TEST(ValidationRenderTest, CsvHasEveryFigureInItsOwnColumn) {
  const std::string csv = RenderValidation(Judged(), OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("job,agent,device,kind,sku,device_verdict,test,test_verdict,unit,value,baseline_median"));
  EXPECT_THAT(csv, HasSubstr("DEGRADED,matmul,DEGRADED,GFLOP/s,90,100,1,0.9,0.89,0.91,0.97"));
}

TEST(ValidationRenderTest, ThePageDrawsAStripPerTestAndEscapesWhatAgentsSent) {
  const std::string html = RenderHtmlReport(Judged(), {});
  EXPECT_THAT(html, HasSubstr("<h1>hetbench validation:"));
  EXPECT_THAT(html, HasSubstr("<figure id=\"strip-matmul\"><svg"));
  EXPECT_THAT(html, HasSubstr(">a2/cpu0</text>"));  // the outlier is named
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("Test <CPU>")));
}

TEST(ValidationRenderTest, BaselinesAreShownAndCompared) {
  v1::Baseline a, b;
  for (auto* x : {&a, &b}) {
    x->set_schema("hetbench.baseline.v1");
    v1::MetricBaseline* m = x->add_skus()->add_metrics();
    x->mutable_skus(0)->set_sku("cpu|X|-|2|all|1");
    m->set_test("matmul");
    m->set_unit("GFLOP/s");
    m->set_median(x == &a ? 100 : 95);
    m->set_spread(1);
    m->set_devices(3);
    m->set_runs(2);
  }
  a.set_name("nightly");
  a.set_version(1);
  EXPECT_THAT(RenderBaseline(a), HasSubstr("baseline nightly v1"));
  EXPECT_THAT(RenderBaseline(a), HasSubstr("matmul"));
  EXPECT_THAT(RenderBaselineDiff(a, b), HasSubstr("0.950"));
}

}  // namespace
}  // namespace hetbench::report
