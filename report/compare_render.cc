// compare's output: the table, CSV and JSON (hetbench.compare/v1) of the
// comparisons report/compare.cc makes.
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "report/compare.h"
#include "report/render.h"
#include "report/render/common.h"
#include "report/run_spread.h"

namespace hetbench::report {

namespace {

// "runs paired by time (... A1-B1, A2-B2 ...) ..." when the runs were paired, else "".
std::string PairedNote(const StepComparison& c) {
  if (c.paired_runs.empty()) return "";
  std::vector<std::string> couples;
  for (const auto& [a, b] : c.paired_runs) couples.push_back(absl::StrCat("A", a + 1, "-B", b + 1));
  return absl::StrCat("runs paired by time (they took turns on one machine: ", absl::StrJoin(couples, ", "),
                      "), so the drift each couple shared cancels");
}

}  // namespace

std::string RunNotesLine(const PairResult& r) {
  std::vector<std::string> notes;
  const std::string spread = SpreadNote(r.result.spread_prior, r.result.spread);
  // Where nothing was found: how large a change would have been.
  const std::string detectable =
      r.result.verdict == "no change" && r.result.detectable > 0
          ? absl::StrFormat(
                "with these runs' spread a change of about %.1f%% would be found four times in five, a "
                "smaller one may pass as no change (more repeats narrow it)",
                100 * r.result.detectable)
          : "";
  const std::string paired = PairedNote(r.result);
  for (const std::string* note :
       {&r.result.left_out_note, &r.result.far_runs_note, &paired, &r.result.unpaired_note, &spread, &detectable}) {
    if (!note->empty()) notes.push_back(*note);
  }
  if (notes.empty()) return "";
  return absl::StrCat(r.pair.key, ", ", PhaseName(r.phase), ": ", absl::StrJoin(notes, "; "));
}

namespace {

// A pair's "machine_probe" object: the probe ratio, the runs left out, cut and grouped into states.
nlohmann::ordered_json MachineProbeJson(const PairResult& r) {
  nlohmann::ordered_json probe = {{"ratio_b_over_a", r.result.probe_ratio},
                                  {"runs_left_out", nlohmann::ordered_json::array()}};
  for (const MachineJudgement::LeftOut& l : r.result.left_out) {
    const std::vector<const v1::Task*>& tasks = l.side_b ? r.pair.b : r.pair.a;
    probe["runs_left_out"].push_back({{"side", l.side_b ? "b" : "a"},
                                      {"run", l.run + 1},
                                      {"task", l.run < tasks.size() ? tasks[l.run]->id() : ""},
                                      {"ratio_to_median_reading", l.ratio_to_median}});
  }
  if (!r.result.cut.empty()) {  // runs cut to their steps in one machine state
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const CutRun& c : r.result.cut) {
      runs.push_back({{"side", c.side_b ? "b" : "a"},
                      {"run", c.run + 1},
                      {"steps_kept", c.kept},
                      {"steps", c.steps},
                      {"ratio_to_median_reading", c.ratio}});
    }
    probe["runs_cut"] = runs;
  }
  if (!r.result.states_a.empty()) {  // compared within machine states
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const auto* states : {&r.result.states_a, &r.result.states_b}) {
      const bool b = states == &r.result.states_b;
      for (size_t i = 0; i < states->size(); ++i) {
        if ((*states)[i] >= 0) {
          runs.push_back({{"side", b ? "b" : "a"}, {"run", i + 1}, {"state", (*states)[i] + 1}});
        }
      }
    }
    probe["within_states"] = runs;
  }
  return probe;
}

// compare -o json: hetbench.compare/v1 (report/schemas/compare.v1.json).
std::string ComparisonJson(const std::string& name_a, const std::string& name_b, const std::vector<PairResult>& results,
                           const std::vector<std::string>& unpaired, double threshold) {
  nlohmann::ordered_json doc;
  doc["schema"] = "hetbench.compare/v1";
  doc["a"] = name_a;
  doc["b"] = name_b;
  doc["threshold"] = threshold;
  doc["method"] = {{"ratio",
                    "the statistic of the time per sample, b over a: the median; for a serving phase the "
                    "run's reported latency percentile (nearest rank); with runs (runs_a, runs_b >= 2) "
                    "the geometric mean of the runs' statistics"},
                   {"interval",
                    "runs >= 2 a side: 95% Student t interval, standard error from a hierarchical bootstrap (runs, "
                    "then steps within runs); variance pooled over both sides on k_a + k_b - 2 degrees of freedom "
                    "when every run was on one agent and device (variance: pooled), else on the runs' "
                    "Welch-Satterthwaite degrees of freedom (variance: per side); a run whose machine probe, read "
                    "during it, moved beyond 5% is cut to its steps in one machine state (machine_probe.runs_cut); "
                    "runs whose machine probe reading "
                    "lay beyond 5% of the comparison's median are left out (machine_probe.runs_left_out); when "
                    "that would withhold the verdict and the runs fell in two or more machine states each holding "
                    "runs of both sides, the change is estimated within states by least squares on the runs' log "
                    "statistics, residual variance on runs - states - 1 degrees of freedom "
                    "(machine_probe.within_states); far_runs "
                    "names the runs more than 10% from their side's median run (3 runs or more a side), which stay "
                    "in; a side of one run: 95% percentile bootstrap over the steps (queries) of both runs, which "
                    "ignores run-to-run variance; runs that took turns on one machine (variance: paired, "
                    "paired_runs), when runs next to each other in other jobs give a prior: Student's t on "
                    "each couple's difference of log statistics, n - 1 degrees of freedom plus the prior's"},
                   {"test",
                    "runs >= 2 a side: that t test; a side of one run: two-sided Mann-Whitney U, normal "
                    "approximation, tie-corrected"},
                   {"verdict",
                    "runs >= 2 a side: slower/faster when the interval excludes 1 and the ratio lies beyond 1 "
                    "+/- threshold; a side of one run: when the whole interval lies beyond 1 +/- "
                    "threshold; \"not comparable\" when a run compared has an INVALID phase or the machine "
                    "probe differed between the sides (marked instead with --compare-anyway)"}};
  doc["pairs"] = nlohmann::ordered_json::array();
  for (const PairResult& r : results) {
    nlohmann::ordered_json p;
    p["key"] = r.pair.key;
    p["task_a"] = r.pair.a[0]->id();
    p["task_b"] = r.pair.b[0]->id();
    bool simulated = false;
    for (const auto* side : {&r.pair.a, &r.pair.b}) {
      for (const v1::Task* t : *side) simulated = simulated || t->result().environment().simulated();
    }
    p["simulated"] = simulated;
    if (!r.pair.refused.empty()) {
      p["refused"] = r.pair.refused;
    } else {
      p["phase"] = PhaseName(r.phase);
      p["steps_a"] = r.result.n_a;
      p["steps_b"] = r.result.n_b;
      p["runs_a"] = r.result.runs_a;
      p["runs_b"] = r.result.runs_b;
      p["median_ns_per_sample_a"] = r.result.median_a_ns;
      p["median_ns_per_sample_b"] = r.result.median_b_ns;
      p["statistic"] = StatisticName(r.result.quantile);
      p["statistic_ns_a"] = r.result.stat_a_ns;
      p["statistic_ns_b"] = r.result.stat_b_ns;
      p["ratio"] = r.result.ratio;
      p["ci95"] = {r.result.ci_low, r.result.ci_high};
      p["p_value"] = r.result.p_value;
      p["verdict"] = r.result.verdict;
      if (!r.result.invalid.empty()) p["invalid"] = r.result.invalid;
      if (!r.result.note.empty()) p["note"] = r.result.note;
      if (!r.result.far_runs.empty()) {
        nlohmann::ordered_json runs = nlohmann::ordered_json::array();
        for (const StepComparison::FarRun& s : r.result.far_runs) {
          const std::vector<const v1::Task*>& tasks = s.side_b ? r.pair.b : r.pair.a;
          runs.push_back({{"side", s.side_b ? "b" : "a"},
                          {"run", s.run + 1},
                          {"task", s.run < tasks.size() ? tasks[s.run]->id() : ""},
                          {"ratio_to_median_run", s.ratio_to_median}});
        }
        p["far_runs"] = runs;
      }
      if (r.result.note.empty()) {
        p["variance"] = !r.result.paired_runs.empty() ? "paired" : r.result.pooled ? "pooled" : "per side";
        if (!r.result.paired_runs.empty()) {
          nlohmann::ordered_json couples = nlohmann::ordered_json::array();
          for (const auto& [a, b] : r.result.paired_runs) couples.push_back({{"run_a", a + 1}, {"run_b", b + 1}});
          p["paired_runs"] = couples;
        }
        if (!r.result.unpaired_note.empty()) p["unpaired_because"] = r.result.unpaired_note;
        p["degrees_of_freedom"] = r.result.df;
        if (r.result.detectable > 0) p["detectable_change"] = r.result.detectable;
        if (const RunSpreadPrior& prior = r.result.spread_prior; prior.df > 0) {
          p["run_spread_prior"] = {{"other_jobs", prior.jobs},
                                   {"spread", std::sqrt(prior.variance)},
                                   {"degrees_of_freedom", prior.df},
                                   {"used", !r.result.spread.beyond_prior}};
          if (prior.paired) p["run_spread_prior"]["of"] = "paired differences";
        }
      }
      if (r.result.probe_ratio > 0) p["machine_probe"] = MachineProbeJson(r);
    }
    doc["pairs"].push_back(p);
  }
  doc["unpaired"] = unpaired;
  return doc.dump(2) + "\n";
}

}  // namespace

std::string RenderComparison(const std::string& name_a, const std::string& name_b,
                             const std::vector<PairResult>& results, const std::vector<std::string>& unpaired,
                             double threshold, const std::string& format) {
  const std::string method = absl::StrFormat(
      "ratio: the statistic of time per sample (median; a serving phase's reported percentile), B over A (> 1: B is "
      "slower). RUNS 2 or more a side: runs are the unit: the geometric mean of the runs' statistics, 95%% CI "
      "Student's t with a hierarchical bootstrap's standard error (runs, then steps within them; the sides' variances "
      "pooled when all runs were on one agent and device; runs that took turns on one machine, paired, each couple's "
      "difference the unit), p its t test; runs whose machine probe lay beyond "
      "%g%% of the comparison's median reading left out (or, when that would withhold the verdict, the change "
      "estimated within machine states), and runs more than %g%% from their side's median run (3 "
      "runs or more a side), named below the table. One run a side: 95%% CI percentile bootstrap over the steps of "
      "both runs, p Mann-Whitney U; that verdict ignores run-to-run variance. Verdict: with runs, slower/faster "
      "when the CI excludes 1 and the ratio lies beyond 1 +/- %.3g; with one run a side, only when the whole CI "
      "lies beyond it; none when a run compared has an INVALID phase or the machine differed",
      kProbeBeyond * 100, kFarRunBeyond * 100, threshold);
  if (format == "json") return ComparisonJson(name_a, name_b, results, unpaired, threshold);
  std::vector<std::vector<std::string>> rows;
  if (format == "csv") {  // one value per cell, numbers unrounded
    for (const PairResult& r : results) {
      if (!r.pair.refused.empty()) {
        rows.push_back({r.pair.key, "", "", "", "", "", "", "", "", "", "", absl::StrCat("refused: ", r.pair.refused),
                        "", "", "", ""});
        continue;
      }
      const StepComparison& c = r.result;
      rows.push_back({r.pair.key, PhaseName(r.phase), absl::StrCat(c.runs_a), absl::StrCat(c.runs_b),
                      StatisticName(c.quantile), render::CsvNumber(c.stat_a_ns / 1e6),
                      render::CsvNumber(c.stat_b_ns / 1e6), render::CsvNumber(c.ratio), render::CsvNumber(c.ci_low),
                      render::CsvNumber(c.ci_high), render::CsvNumber(c.p_value), c.verdict, c.note, c.far_runs_note,
                      c.probe_ratio > 0 ? render::CsvNumber(c.probe_ratio) : "", c.left_out_note});
    }
    return render::CsvLines(
        "pair,phase,runs_a,runs_b,statistic,a_ms_per_sample,b_ms_per_sample,ratio,ci95_low,"
        "ci95_high,p_value,verdict,note,far_runs,probe_ratio_b_over_a,runs_left_out",
        rows);
  }
  bool one_run = false;
  for (const PairResult& r : results) {
    if (!r.pair.refused.empty()) {
      rows.push_back({r.pair.key, "-", "-", "-", "-", "-", "-", "-", "-", absl::StrCat("refused: ", r.pair.refused)});
      continue;
    }
    const StepComparison& c = r.result;
    one_run = one_run || !c.note.empty();
    rows.push_back({r.pair.key, PhaseName(r.phase), absl::StrCat(c.runs_a, "/", c.runs_b), StatisticName(c.quantile),
                    absl::StrFormat("%.4f", c.stat_a_ns / 1e6), absl::StrFormat("%.4f", c.stat_b_ns / 1e6),
                    absl::StrFormat("%.3f", c.ratio), absl::StrFormat("%.3f-%.3f", c.ci_low, c.ci_high),
                    absl::StrFormat("%.2g", c.p_value), c.note.empty() ? c.verdict : absl::StrCat(c.verdict, " *")});
  }
  std::string out = absl::StrCat("compare ", name_a, " (A) with ", name_b, " (B)\n",
                                 FormatTable({"PAIR", "PHASE", "RUNS_A/B", "STATISTIC", "A_MS/SAMPLE", "B_MS/SAMPLE",
                                              "B/A", "95% CI", "P", "VERDICT"},
                                             rows),
                                 method, "\n");
  if (one_run) {
    absl::StrAppend(&out,
                    "* a side of one run: the verdict ignores run-to-run variance, which on a busy machine can exceed "
                    "the threshold; submit with --repeats 3 (or compare JOB,JOB,... sides) to compare runs\n");
  }
  for (const PairResult& r : results) {
    if (const std::string notes = RunNotesLine(r); !notes.empty()) absl::StrAppend(&out, notes, "\n");
  }
  for (const std::string& u : unpaired) absl::StrAppend(&out, "unpaired: ", u, "\n");
  return out;
}

}  // namespace hetbench::report
