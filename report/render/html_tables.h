#pragma once
/// The HTML report's folded tables (speedup/energy/cost, the reference study,
/// the roofline, per-layer times, serving) as real HTML tables that fit the
/// page: each picks and labels columns of the CSV view the CLI writes (so the
/// page and `-o csv` hold the same figures), numbers right-aligned, units in
/// the headers, INVALID rows shaded. Internal to RenderHtmlReport.

#include <string>
#include <vector>

#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report::render {

/// One column of an HTML table taken from a CSV view.
struct HtmlColumn {
  std::string csv;     // the CSV header it reads
  std::string header;  // as the page shows it, unit included
  double scale = 1;    // the CSV number times this (ns -> us: 1e-3)
  int decimals = -1;   // >= 0: printed with this many decimals; < 0: the CSV's text
};

/// Parses RFC 4180 CSV (quoted fields, doubled quotes) into rows of cells.
std::vector<std::vector<std::string>> ParseCsv(const std::string& csv);

/// The chosen columns of `csv` as a <table id=ID>; a row whose "valid" cell is
/// "false" is shaded and marked. "" when the CSV has no rows.
std::string CsvAsHtmlTable(const std::string& csv, const std::vector<HtmlColumn>& columns, const std::string& id);
/// The same from rows already parsed (the first row the header).
std::string RowsAsHtmlTable(const std::vector<std::vector<std::string>>& rows, const std::vector<HtmlColumn>& columns,
                            const std::string& id);

/// The "Tables" section: each table folded in <details>, with its notes.
std::string HtmlTablesSection(const v1::Job& job, v1::DeviceKind baseline_kind, bool compare_mismatched);

}  // namespace hetbench::report::render
