// The HTML report's tables made from the CSV views (report/render/html_tables.h):
// RFC 4180 parsing, chosen and scaled columns, INVALID rows marked, text escaped.
#include "report/render/html_tables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetbench::report::render {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(HtmlTablesTest, ParsesQuotedFieldsWithCommasQuotesAndEmptyCells) {
  const auto rows = ParseCsv("a,b,c\n\"x, y\",\"say \"\"hi\"\"\",\n1,,3\r\n");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[1], ElementsAre("x, y", "say \"hi\"", ""));
  EXPECT_THAT(rows[2], ElementsAre("1", "", "3"));
}

TEST(HtmlTablesTest, PicksScalesAndMarksColumns) {
  const std::string csv =
      "task_id,p50_ns,joules_per_sample,valid,name\n"
      "t0,1234567,0.0021,true,<script>\n"
      "t1,2000000,,false,relu\n";
  const std::string html = CsvAsHtmlTable(csv,
                                          {{"task_id", "task"},
                                           {"p50_ns", "p50 (ms)", 1e-6, 3},
                                           {"joules_per_sample", "energy (mJ/sample)", 1e3, 1},
                                           {"valid", "verdict"},
                                           {"name", "name"},
                                           {"absent", "not in the CSV"}},
                                          "t");
  EXPECT_THAT(html, HasSubstr("<th>p50 (ms)</th>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">1.235</td>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">2.1</td>"));
  EXPECT_THAT(html, HasSubstr("<tr class=\"invalid-row\"><td>t1</td>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"invalid\">INVALID</td>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"valid\">VALID</td>"));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, HasSubstr("<td>-</td>"));  // an empty cell and a column the CSV lacks
  EXPECT_EQ(CsvAsHtmlTable("task_id\n", {{"task_id", "task"}}, "t"), "");
}

}  // namespace
}  // namespace hetbench::report::render
