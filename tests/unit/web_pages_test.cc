// The web UI's own pages (report/render/web.h): the history figure's time
// axis in dates at the step its span needs, and the login form's warnings and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "report/history.h"
#include "report/render/web.h"

namespace hetbench::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<HistoryRow> Rows(const v1::Job& job, double apart_seconds) {
  std::vector<HistoryRow> rows(3);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].job = &job;
    rows[i].task = &job.tasks(0);
    rows[i].series = "cpu (x), torch, batch 64, mlp/abc";
    rows[i].finished_unix = 1.8e9 + apart_seconds * static_cast<double>(i);
    rows[i].samples_per_second_p50 = 1000;
    rows[i].p25 = 900;
    rows[i].p75 = 1100;
  }
  return rows;
}

TEST(WebPagesTest, TheHistoryAxisIsInDatesAtTheStepItsSpanNeeds) {
  v1::Job job;
  job.set_id("job-000001");
  job.add_tasks()->set_id("job-000001-t0");
  // 1.8e9 is 2027-01-15 08:00:00 UTC. Runs 5 minutes apart: clock times of that day, 2 minutes apart.
  const std::string minutes = RenderHistoryPage(Rows(job, 300), "mlp", "cpu", 0.02);
  EXPECT_THAT(minutes, HasSubstr("run finished (UTC, 2027-01-15)"));
  EXPECT_THAT(minutes, HasSubstr(">08:02<"));
  EXPECT_THAT(minutes, HasSubstr(">08:10<"));
  // 6 hours apart: still one day, ticks every 2 hours.
  const std::string hours = RenderHistoryPage(Rows(job, 6 * 3600), "mlp", "cpu", 0.02);
  EXPECT_THAT(hours, HasSubstr(">14:00<"));
  EXPECT_THAT(hours, Not(HasSubstr(">14:30<")));
  // 5 days apart: dates, every 2 days.
  const std::string days = RenderHistoryPage(Rows(job, 5 * 86400), "mlp", "cpu", 0.02);
  EXPECT_THAT(days, HasSubstr(">2027-01-16<"));
  EXPECT_THAT(days, HasSubstr("run finished (UTC)"));
  EXPECT_THAT(days, Not(HasSubstr("0.0025")));
}

TEST(WebPagesTest, TheLoginFormWarnsOverPlainHttpAndNeverEchoesAToken) {
  const std::string plain = RenderLoginPage(true, true, "not a token of this coordinator");
  EXPECT_THAT(plain, HasSubstr("name=\"token\""));
  EXPECT_THAT(plain, HasSubstr("This page is plain HTTP"));
  EXPECT_THAT(plain, HasSubstr("not a token of this coordinator"));
  EXPECT_THAT(plain, HasSubstr("action=\"/logout\""));
  EXPECT_THAT(RenderLoginPage(true, false, ""), Not(HasSubstr("plain HTTP")));
  EXPECT_THAT(RenderLoginPage(true, false, "<b>x</b>"), HasSubstr("&lt;b&gt;x&lt;/b&gt;"));
  EXPECT_THAT(RenderLoginPage(false, true, ""), HasSubstr("has no bearer tokens: its pages are open"));
}

}  // namespace
}  // namespace hetbench::report
