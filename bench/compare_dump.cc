#include "bench/compare_dump.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/phase_validity.h"
#include "common/stats.h"

namespace hetbench::bench {

absl::StatusOr<std::vector<DumpedRun>> ReadDump(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--replay: cannot read ", path));
  std::vector<DumpedRun> runs;
  std::string line;
  std::getline(in, line);  // the header
  for (int number = 2; std::getline(in, line); ++number) {
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    DumpedRun row;
    double ns = 0;
    long before = 0, after = 0;
    const bool reading = f.size() == 8 && (f[4] == "probe-train" || f[4] == "probe-infer");
    if (f.size() != 8 || (f[0] != "AA" && f[0] != "AB") || (f[2] != "A" && f[2] != "B") ||
        (f[4] != "train" && f[4] != "infer" && !reading) || !absl::SimpleAtoi(f[1], &row.pair) ||
        !absl::SimpleAtoi(f[3], &row.run) || !absl::SimpleAtod(f[5], &ns) || !absl::SimpleAtoi(f[6], &before) ||
        !absl::SimpleAtoi(f[7], &after)) {
      return absl::InvalidArgumentError(absl::StrCat("--replay ", path, " line ", number,
                                                     ": not kind,pair,side,run,phase,ns_per_sample,probe_before_ns,"
                                                     "probe_after_ns (a --dump file)"));
    }
    row.kind = f[0];
    row.side_b = f[2] == "B";
    const bool same_run = !runs.empty() && runs.back().kind == row.kind && runs.back().pair == row.pair &&
                          runs.back().side_b == row.side_b && runs.back().run == row.run;
    if (reading) {  // a reading during the run just read: its step, median and time in the last three columns
      if (!same_run) {
        return absl::InvalidArgumentError(
            absl::StrCat("--replay ", path, " line ", number, ": a probe reading of no run above it"));
      }
      v1::ProbeReading& r = runs.back().during.emplace_back();
      r.set_phase(f[4] == "probe-train" ? v1::PHASE_TRAIN : v1::PHASE_INFER);
      r.set_step(static_cast<int64_t>(ns));
      r.set_median_ns(before);
      r.set_at_ns(after);
      continue;
    }
    if (!same_run) {
      row.probe_before = before;
      row.probe_after = after;
      runs.push_back(row);
    }
    (f[4] == "train" ? runs.back().train : runs.back().infer).push_back(ns);
  }
  return runs;
}

Run FromDump(const DumpedRun& d, const v1::JobSpec& spec, int64_t bs) {
  Run out;
  out.train = d.train;
  out.infer = d.infer;
  out.task.set_state(v1::TASK_STATE_SUCCEEDED);
  v1::MachineProbe* probe = out.task.mutable_result()->mutable_machine_probe();
  probe->set_kernel("replayed");
  probe->set_before_ns(d.probe_before);
  probe->set_after_ns(d.probe_after);
  for (const v1::ProbeReading& r : d.during) *probe->add_during() = r;
  for (const auto* values : {&d.train, &d.infer}) {
    std::vector<StepSample> steps;
    int64_t start = 0;
    for (double v : *values) {
      const auto ns = static_cast<int64_t>(v * static_cast<double>(bs));
      steps.push_back({start, ns, static_cast<int32_t>(bs)});
      start += ns;
    }
    if (steps.empty()) continue;
    v1::PhaseResult* p = out.task.mutable_result()->add_phases();
    p->set_phase(values == &d.train ? v1::PHASE_TRAIN : v1::PHASE_INFER);
    *p->mutable_stats() = ComputeTimingStats(steps);
    JudgeValidity(spec, static_cast<int64_t>(steps.size()), p);
  }
  return out;
}

}  // namespace hetbench::bench
