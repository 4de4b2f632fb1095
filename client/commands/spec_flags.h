#pragma once
/// `hetbench submit`'s flags that make a job spec, apart from the command so
/// they are unit-tested: a flag given overrides the field of the -f file.

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::client {

struct SpecFlags {
  std::vector<std::string> models;
  bool layers = false;
  int layer_steps = -1;
  double layer_energy_seconds = -1;
  std::string torchscript_path;
  std::vector<int64_t> input_shape;
  std::string name, dataset;
  std::vector<int> batch_sizes;
  std::vector<std::string> targets;  // kind[:executor]
  int64_t min_steps = -1, max_steps = -1, infer_max_batches = -1;
  int warmup_steps = -1, threads = -1, repeats = 0;
  double min_duration = -1, epochs = -1, lr = -1;
  int64_t seed = -1;
  double idle_baseline = 0, electricity = 0;
  std::vector<std::string> costs;  // KIND=USD_PER_HOUR
  std::vector<int> parallel;       // device counts of data-parallel gangs
  double gang_timeout = -1;
  std::vector<std::string> split;  // LAYERS:KIND per stage, e.g. 0-3:cpu
  bool one_at_a_time = false;      // the job's tasks one at a time (JobSpec.one_at_a_time)
  bool split_across_agents = false;  // each stage a rank on its own device, any agent
  std::string scenario;              // --serve: a serving run
  std::vector<double> qps;           // one rate, or several: a task each (serving.qps_sweep)
  double latency_bound_ms = 0, serve_duration = 0, max_queue_delay_ms = 0, peak_precision = 0;
  double ttft_ms = 0, tpot_ms = 0;  // generative SLOs
  int64_t serve_min_queries = 0;
  int serve_instances = 0, samples_per_query = 0, replicas = 0;
  /// Scalar flags given on the command line ("--min-steps"): those override.
  std::set<std::string> given;
};

/// Adds the flags to `submit`, bound to `f`.
void AddSpecFlags(CLI::App* submit, SpecFlags* f);
/// Fills `f->given` after parsing.
void NoteGivenFlags(const CLI::App& submit, SpecFlags* f);
/// `base` (the -f file's spec, or empty) with the flags applied. Errors name
/// the flag and what it takes (a usage error).
absl::StatusOr<v1::JobSpec> ApplySpecFlags(v1::JobSpec base, const SpecFlags& f);

}  // namespace hetbench::client
