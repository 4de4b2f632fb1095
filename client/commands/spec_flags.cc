#include "client/commands/spec_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/job_spec.h"
#include "common/names.h"

namespace hetbench::client {

namespace {
constexpr const char* kScalarFlags[] = {"--layer-steps",  "--layer-energy-seconds", "--warmup-steps",  "--min-steps", "--max-steps",
                                        "--min-duration", "--epochs",        "--lr",        "--infer-max-batches",
                                        "--seed",         "--threads",       "--idle-baseline",
                                        "--electricity-usd-per-kwh", "--gang-timeout", "--peak-precision",
                                        "--latency-bound-ms", "--serve-duration", "--serve-min-queries",
                                        "--serve-instances", "--max-queue-delay-ms", "--samples-per-query",
                                        "--ttft-ms", "--tpot-ms", "--replicas", "--repeats"};
}  // namespace

void AddSpecFlags(CLI::App* submit, SpecFlags* f) {
  submit->add_option("-m,--model", f->models, "model(s) of the zoo; repeat or comma-separate (default mlp)")
      ->delimiter(',');
  submit->add_flag("--layers", f->layers, "also time every top-level layer (forward, backward, inference)");
  submit->add_option("--layer-steps", f->layer_steps, "steps of per-layer timing (default 20)");
  submit->add_option("--layer-energy-seconds", f->layer_energy_seconds,
                     "with --layers: run each layer alone this long per phase, so a slow power sensor sees it");
  submit->add_option("--torchscript", f->torchscript_path, "TorchScript file on the agent (model \"torchscript\")");
  submit->add_option("--input-shape", f->input_shape, "TorchScript input shape without the batch, e.g. 1,28,28")
      ->delimiter(',');
  submit->add_option("--name", f->name, "job name");
  submit->add_option("--dataset", f->dataset, "dataset (fashion-mnist)");
  submit->add_option("-b,--batch-size", f->batch_sizes, "batch size; repeat or comma-separate for a sweep")
      ->delimiter(',');
  submit
      ->add_option("-t,--target", f->targets,
                   "device kind to run on (cpu, gpu, tpu, dpu, qpu-sim), optionally :executor "
                   "(cpu:python runs the PyTorch runner); repeatable")
      ->delimiter(',');
  submit->add_option("--warmup-steps", f->warmup_steps, "training steps before measuring");
  submit->add_option("--min-steps", f->min_steps, "measured training steps (0 = one pass of --epochs)");
  submit->add_option("--max-steps", f->max_steps, "cap on measured training steps");
  submit->add_option("--min-duration", f->min_duration, "minimum measured training seconds");
  submit->add_option("--epochs", f->epochs, "training budget in epochs when --min-steps is 0");
  submit->add_option("--lr", f->lr, "Adam learning rate");
  submit->add_option("--infer-max-batches", f->infer_max_batches, "measured inference batches (0 = whole test set)");
  submit->add_option("--seed", f->seed, "random seed");
  submit->add_option("--threads", f->threads, "threads per task (0 = all cores)");
  submit->add_option("--repeats", f->repeats,
                     "runs of every task, interleaved across targets (A B A B), a configuration's runs one after "
                     "another, so compare counts the noise between runs (default 1)");
  submit->add_flag("--one-at-a-time", f->one_at_a_time,
                   "run the job's tasks one at a time, in order, not side by side on free devices (agents on one "
                   "host would measure each other's load)");
  submit->add_option("--idle-baseline", f->idle_baseline, "seconds of idle power measured before each task");
  submit->add_option("--cost", f->costs, "device cost: KIND=USD_PER_HOUR or label:K=V=USD_PER_HOUR (repeatable)");
  submit->add_option("--parallel", f->parallel, "data-parallel training: a gang per device count, e.g. 1,2,4")
      ->delimiter(',');
  submit->add_option("--gang-timeout", f->gang_timeout,
                     "seconds a gang (or a split across agents) may wait for all its devices (default 600)");
  submit->add_option("--split", f->split, "split execution: LAYERS:KIND per stage, e.g. 0-1:cpu,2-:qpu-sim")
      ->delimiter(',');
  submit->add_flag("--split-across-agents", f->split_across_agents,
                   "with --split: each stage a task of its own, on any agent; activations and gradients cross over "
                   "c10d (Gloo)");
  submit->add_option("--electricity-usd-per-kwh", f->electricity, "electricity price, shown apart from device cost");
  submit->add_option("--serve", f->scenario,
                     "a serving run in place of training: server, single_stream, multi_stream, offline or peak (the "
                     "batch size is the batcher's largest batch; the decoder's most requests decoding at once)");
  submit->add_option("--qps", f->qps,
                     "serving: queries per second (server: Poisson arrivals; several: a task per rate; peak: the "
                     "search's first rate)")
      ->delimiter(',');
  submit->add_option("--peak-precision", f->peak_precision,
                     "serving peak: stop when the bracket is within this share of the peak (default 0.1)");
  submit->add_option("--latency-bound-ms", f->latency_bound_ms, "serving: the p99 (server) latency bound, ms");
  submit->add_option("--serve-duration", f->serve_duration, "serving: minimum run seconds (default 2)");
  submit->add_option("--serve-min-queries", f->serve_min_queries, "serving: minimum queries (default 1024)");
  submit->add_option("--serve-instances", f->serve_instances, "serving: concurrent model instances (default 1)");
  submit->add_option("--max-queue-delay-ms", f->max_queue_delay_ms,
                     "serving: the batcher waits at most this for a batch to fill (default 1)");
  submit->add_option("--samples-per-query", f->samples_per_query,
                     "serving multi_stream: samples in each query (default 8)");
  submit->add_option("--replicas", f->replicas,
                     "serving server: agents serving one schedule together, each on an agent of its own; the "
                     "result merges their latencies exactly (default 1)");
  submit->add_option("--ttft-ms", f->ttft_ms, "serving the decoder: the time-to-first-token SLO, ms");
  submit->add_option("--tpot-ms", f->tpot_ms, "serving the decoder: the time-per-output-token SLO, ms");
}

void NoteGivenFlags(const CLI::App& submit, SpecFlags* f) {
  for (const char* flag : kScalarFlags) {
    if (submit.count(flag) > 0) f->given.insert(flag);
  }
}

absl::StatusOr<v1::JobSpec> ApplySpecFlags(v1::JobSpec spec, const SpecFlags& f) {
  auto given = [&f](const char* flag) { return f.given.count(flag) > 0; };
  if (!f.models.empty()) {
    spec.clear_model();
    spec.clear_models();
    if (f.models.size() == 1) {
      spec.set_model(f.models[0]);  // errors then name `model`, the field the user wrote
    } else {
      for (const std::string& m : f.models) spec.add_models(m);
    }
  }
  if (f.layers) spec.mutable_layers()->set_enabled(true);
  if (given("--layer-steps")) spec.mutable_layers()->set_steps(f.layer_steps);
  if (given("--layer-energy-seconds")) spec.mutable_layers()->set_energy_seconds(f.layer_energy_seconds);
  if (!f.torchscript_path.empty()) {
    spec.mutable_torchscript()->set_path(f.torchscript_path);
    if (f.models.empty() && spec.models().empty() && spec.model().empty()) spec.add_models("torchscript");
  }
  if (!f.input_shape.empty()) {
    spec.mutable_torchscript()->clear_input_shape();
    for (int64_t d : f.input_shape) spec.mutable_torchscript()->add_input_shape(d);
  }
  if (!f.name.empty()) spec.set_name(f.name);
  if (!f.dataset.empty()) spec.set_dataset(f.dataset);
  if (!f.batch_sizes.empty()) {
    spec.clear_batch_sizes();
    for (int b : f.batch_sizes) spec.add_batch_sizes(b);
  }
  if (!f.targets.empty()) {
    spec.clear_targets();
    for (const std::string& t : f.targets) {
      // kind[:executor], e.g. cpu, tpu, cpu:python
      std::vector<std::string> parts = absl::StrSplit(t, absl::MaxSplits(':', 1));
      auto kind = ParseDeviceKind(parts[0]);
      if (!kind) {
        return absl::InvalidArgumentError(absl::StrCat("--target ", t,
                                                       ": unknown device kind; use cpu, gpu, tpu, dpu or qpu-sim "
                                                       "(optionally :executor, e.g. cpu:python)"));
      }
      v1::TargetSelector* target = spec.add_targets();
      target->set_device_kind(*kind);
      if (parts.size() > 1) target->set_executor(parts[1]);
    }
  }
  if (given("--warmup-steps")) spec.mutable_train()->set_warmup_steps(f.warmup_steps);
  if (given("--min-steps")) spec.mutable_train()->set_min_steps(f.min_steps);
  if (given("--max-steps")) spec.mutable_train()->set_max_steps(f.max_steps);
  if (given("--min-duration")) spec.mutable_train()->set_min_duration_seconds(f.min_duration);
  if (given("--epochs")) spec.mutable_train()->set_epochs(f.epochs);
  if (given("--lr")) spec.mutable_train()->set_learning_rate(f.lr);
  if (given("--infer-max-batches")) spec.mutable_inference()->set_max_batches(f.infer_max_batches);
  if (given("--seed")) spec.set_seed(static_cast<uint64_t>(f.seed));
  if (given("--threads")) spec.set_threads(f.threads);
  if (given("--repeats")) spec.set_repeats(f.repeats);
  if (f.one_at_a_time) spec.set_one_at_a_time(true);
  if (given("--idle-baseline")) spec.mutable_power()->set_idle_baseline_seconds(f.idle_baseline);
  if (given("--electricity-usd-per-kwh")) spec.mutable_cost()->set_electricity_usd_per_kwh(f.electricity);
  if (!f.parallel.empty()) {
    spec.mutable_parallel()->clear_devices();
    for (int n : f.parallel) spec.mutable_parallel()->add_devices(n);
  }
  if (given("--gang-timeout")) {
    if (f.split_across_agents) {
      spec.mutable_split()->set_gang_timeout_seconds(f.gang_timeout);
    } else {
      spec.mutable_parallel()->set_gang_timeout_seconds(f.gang_timeout);
    }
  }
  if (f.split_across_agents) spec.mutable_split()->set_across_agents(true);
  if (!f.split.empty()) {
    spec.mutable_split()->clear_stages();
    for (const std::string& st : f.split) {
      std::optional<v1::SplitStage> stage = ParseStageFlag(st);
      if (!stage) {
        return absl::InvalidArgumentError(
            absl::StrCat("--split ", st, ": expected LAYERS:KIND, e.g. 0-3:cpu or 4-:qpu-sim"));
      }
      *spec.mutable_split()->add_stages() = *std::move(stage);
    }
  }
  v1::ServingSpec* sv = spec.mutable_serving();
  if (!f.scenario.empty()) sv->set_scenario(f.scenario);
  if (f.qps.size() == 1) sv->set_target_qps(f.qps[0]);
  if (f.qps.size() > 1) {
    sv->clear_target_qps();
    for (double q : f.qps) sv->add_qps_sweep(q);
  }
  if (given("--peak-precision")) sv->set_peak_precision(f.peak_precision);
  if (given("--latency-bound-ms")) sv->set_latency_bound_ms(f.latency_bound_ms);
  if (given("--serve-duration")) sv->set_min_duration_seconds(f.serve_duration);
  if (given("--serve-min-queries")) sv->set_min_queries(f.serve_min_queries);
  if (given("--serve-instances")) sv->set_instances(f.serve_instances);
  if (given("--max-queue-delay-ms")) sv->set_max_queue_delay_ms(f.max_queue_delay_ms);
  if (given("--samples-per-query")) sv->set_samples_per_query(f.samples_per_query);
  if (given("--ttft-ms")) sv->set_ttft_ms(f.ttft_ms);
  if (given("--replicas")) sv->set_replicas(f.replicas);
  if (given("--tpot-ms")) sv->set_tpot_ms(f.tpot_ms);
  if (sv->ByteSizeLong() == 0) spec.clear_serving();
  for (const std::string& c : f.costs) {
    const auto eq = c.rfind('=');
    double rate = 0;
    if (eq == std::string::npos || eq == 0 || !absl::SimpleAtod(c.substr(eq + 1), &rate)) {
      return absl::InvalidArgumentError(absl::StrCat("--cost ", c, ": expected KIND=USD_PER_HOUR, e.g. gpu=2.48"));
    }
    (*spec.mutable_cost()->mutable_usd_per_hour())[c.substr(0, eq)] = rate;
  }
  return spec;
}

}  // namespace hetbench::client
