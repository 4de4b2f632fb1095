#pragma once
// bench_compare's --dump file read back for --replay: every run's
// per-sample step times and machine probe, judged again by a changed method.
// The file: a header, then kind,pair,side,run,phase,ns_per_sample,
// probe_before_ns,probe_after_ns, a row per step (the run's probe repeated)
// and, after a run's steps, a row per probe reading during it (phase
// probe-train or probe-infer; step, median_ns and at_ns in the last three).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::bench {

// A run as compare sees it: its steps' time per sample and its task.
struct Run {
  std::vector<double> train, infer;  // ns per sample, per step
  v1::Task task;                     // its phases judged as the coordinator judges them
};

// A run read back from a --dump file: its kind ("AA"/"AB"), pair, side, run
// number, per-sample step times and machine probe.
struct DumpedRun {
  std::string kind;
  int pair = 0, run = 0;
  bool side_b = false;
  std::vector<double> train, infer;
  int64_t probe_before = 0, probe_after = 0;
  std::vector<v1::ProbeReading> during;  // the probe read during the run (probe-train, probe-infer rows)
};

// Every run of a --dump file, in the order they were taken; a line that is
// not the dump's shape is an error naming it.
absl::StatusOr<std::vector<DumpedRun>> ReadDump(const std::string& path);

// A dumped run judged as RunOnce judges a measured one. The dump keeps each
// step's time per sample, not its start or item count: the steps are laid
// end to end at `bs` items each, and the counts taken are the ones expected
// (a run cut short stays unseen), so validity is judged on the step times.
Run FromDump(const DumpedRun& d, const v1::JobSpec& spec, int64_t bs);

}  // namespace hetbench::bench
