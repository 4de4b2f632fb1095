// How honest is `hetbench compare` on this machine? Runs one job's task
// (mlp by default) many times through the agent's real executor, each run as
// long as a user's job by default (one epoch, the whole test set; --steps
// and --infer-batches shorten it, labelled run_shape=shortened), and compares
// runs two by two with the CLI's method (report/compare.cc: ComparePhase, so a
// side the coordinator's rules judge INVALID gives no verdict, as in the CLI):
//  - A/A: two runs of the same task. Any "slower"/"faster" is a false alarm;
//  - A/B: a normal run against one slowed by --slowdown (5%): each step of
//    the slowed run spins that fraction of its own time more, inside the timed
//    window. This knob exists only in this bench (a Workload wrapper); no job
//    spec, flag or agent can set it.
// --order interleaved (default): a pair's runs alternate A B A B, B A B A
// on odd pairs, so drift favours neither (one job's repeats across two
// targets). --order apart: every pair's A runs, then every pair's B runs,
// as the same job submitted again minutes later; the agent's machine probe
// (agent/executors/machine_probe.h) is taken around each run as in the
// agent, and RESULT_PROBE counts the verdicts compare withheld because it
// differed between the sides, and what they would have been.
// Prints one line per pair and the rates; asserts nothing. With 3
// runs a side or more, each line names the runs beyond +/-10% of their
// side's median run ("far A3 1.27x"), and RESULT_FAR_RUNS counts them.
// One LibTorch thread by default: on a machine whose every core the runs
// take (2 threads on this 2-core VM), the OS's own work shifts whole runs by
// several percent, a noise no test over one run's steps can see; --threads 0
// measures that case too (the README gives both).
#include "report/compare.h"

#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/data/fashion_mnist.h"
#include "agent/devices/cpu_discovery.h"
#include "agent/executors/torch_executor.h"
#include "agent/models/workload.h"
#include "bench/compare_dump.h"
#include "bench/machine.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/stats.h"

namespace hetbench {
namespace {

using bench::DumpedRun;
using bench::FromDump;
using bench::ReadDump;
using bench::Run;

// Spins until `fraction` x the time since `t0` has passed again.
void Stretch(int64_t t0, double fraction) {
  const int64_t t1 = SteadyNowNs();
  const int64_t until = t1 + static_cast<int64_t>(static_cast<double>(t1 - t0) * fraction);
  while (SteadyNowNs() < until) {
  }
}

// The real workload, each step and inference batch made `fraction` slower.
class SlowedWorkload final : public agent::Workload {
 public:
  SlowedWorkload(std::unique_ptr<agent::Workload> inner, double fraction)
      : inner_(std::move(inner)), fraction_(fraction) {}
  const agent::ImageDataset& Data() const override { return inner_->Data(); }
  std::string Architecture() const override { return inner_->Architecture(); }
  std::vector<torch::Tensor> Parameters() const override { return inner_->Parameters(); }
  uint64_t InitialHash() const override { return inner_->InitialHash(); }
  void SetTraining(bool on) override { inner_->SetTraining(on); }
  bool Trainable() const override { return inner_->Trainable(); }
  torch::Tensor TrainStep(const torch::Tensor& x, const torch::Tensor& y) override {
    const int64_t t0 = SteadyNowNs();
    torch::Tensor loss = inner_->TrainStep(x, y);
    Stretch(t0, fraction_);
    return loss;
  }
  torch::Tensor Infer(const torch::Tensor& x) override {
    const int64_t t0 = SteadyNowNs();
    torch::Tensor out = inner_->Infer(x);
    Stretch(t0, fraction_);
    return out;
  }
  void Score(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& out,
             agent::QualityTotals* q) override {
    inner_->Score(x, y, out, q);
  }
  void TrainForwards(const torch::Tensor& x) override { inner_->TrainForwards(x); }
  std::string InputNote() const override { return inner_->InputNote(); }

 private:
  std::unique_ptr<agent::Workload> inner_;
  double fraction_;
};

// The phase's stats and verdict from its steps, as the coordinator makes them
// (ComputeTimingStats, JudgeValidity), so the comparison sees what the CLI sees.
void Judge(const v1::JobSpec& spec, const v1::TaskResult& r, v1::Phase phase, const std::vector<StepSample>& steps,
           int64_t bs, v1::Task* task) {
  if (steps.empty()) return;
  v1::PhaseResult* p = task->mutable_result()->add_phases();
  p->set_phase(phase);
  *p->mutable_stats() = ComputeTimingStats(steps);
  const int64_t expected = phase == v1::PHASE_TRAIN
                               ? r.min_train_steps()
                               : ExpectedInferenceBatches(spec, static_cast<int>(bs), r.dataset_test_size());
  JudgeValidity(spec, expected, p, &r.calibration());
}

// A run's spec: the job's defaults, or shortened to `steps` measured steps and `infer_batches` batches.
v1::JobSpec BenchSpec(int64_t steps, int64_t infer_batches) {
  v1::JobSpec spec;
  spec.set_seed(42);
  if (steps > 0) {  // shortened runs: exactly `steps` measured steps
    spec.mutable_train()->set_warmup_steps(20);
    spec.mutable_train()->set_min_steps(steps);
    spec.mutable_train()->set_max_steps(steps);
    spec.mutable_train()->set_min_duration_seconds(0);
  }
  if (infer_batches > 0) spec.mutable_inference()->set_max_batches(infer_batches);
  return WithDefaults(spec);
}

Run RunOnce(agent::TorchExecutor& exec, const v1::Device& cpu, const std::string& model, int64_t steps, int64_t bs,
            int64_t infer_batches) {
  v1::Assign a;
  a.set_task_id("bench");
  a.set_attempt(1);
  a.set_batch_size(static_cast<int32_t>(bs));
  a.set_model(model);
  *a.mutable_spec() = BenchSpec(steps, infer_batches);
  agent::TaskControl control(agent::SampleCapacity(a), SteadyNowNs());
  auto r = exec.Run(a, cpu, &control);
  Run out;
  if (!r.ok()) {
    std::fprintf(stderr, "executor: %s\n", r.status().ToString().c_str());
    return out;
  }
  std::vector<StepSample> train, infer;
  for (size_t i = 0; i < control.samples.published(); ++i) {
    const auto& rec = control.samples.at(i);
    if (rec.items <= 0) continue;
    const double per_sample = static_cast<double>(rec.duration_ns) / rec.items;
    const bool is_train = rec.phase == v1::PHASE_TRAIN;
    (is_train ? out.train : out.infer).push_back(per_sample);
    (is_train ? train : infer).push_back({rec.start_ns, rec.duration_ns, rec.items});
  }
  out.task.set_state(v1::TASK_STATE_SUCCEEDED);
  *out.task.mutable_result()->mutable_machine_probe() = r->machine_probe();  // the machine around this run
  Judge(a.spec(), *r, v1::PHASE_TRAIN, train, bs, &out.task);
  Judge(a.spec(), *r, v1::PHASE_INFER, infer, bs, &out.task);
  return out;
}

}  // namespace
}  // namespace hetbench

int main(int argc, char** argv) {
  using namespace hetbench;  // NOLINT
  int pairs = 20, threads = 1, runs = 1, spread_jobs = 100, probe_every_ms = 250;
  int64_t steps = 0, bs = 64, infer_batches = 0;  // 0: the job's defaults
  double slowdown = 0.05, threshold = 0.02;
  std::string model = "mlp", dump, order = "interleaved", replay, pairing = "on";
  CLI::App app{"hetbench compare's honesty: false alarms over A/A pairs, detection of an injected slowdown"};
  app.add_option("--pairs", pairs, "A/A pairs, and as many A/B pairs")->capture_default_str();
  app.add_option("--model", model, "model of the zoo")->capture_default_str();
  app.add_option("--steps", steps,
                 "measured training steps per run; 0 = the job's default (one epoch and 1 s at least, after 10 warmup "
                 "steps), as a user's job runs; a number shortens the runs (labelled in the RESULT line)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", bs, "batch size")->capture_default_str();
  app.add_option("--infer-batches", infer_batches,
                 "measured inference batches per run; 0 = the job's default (the whole test set)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slowdown", slowdown, "fraction injected into the B run of each A/B pair")->capture_default_str();
  app.add_option("--threshold", threshold, "compare's threshold")->capture_default_str();
  app.add_option("--threads", threads, "LibTorch threads (0 = all cores, the job default)")->capture_default_str();
  app.add_option("--runs", runs,
                 "runs per side of each pair: 1 compares steps (compare A B), 2 or more compares runs as the CLI does "
                 "(CompareRunPhase)")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  app.add_option("--order", order,
                 "interleaved: a pair's runs alternate A B A B (one job's repeats across two targets); apart: every "
                 "pair's A runs, then every pair's B runs (the same job submitted again minutes later)")
      ->capture_default_str()
      ->check(CLI::IsMember({"interleaved", "apart"}));
  app.add_option("--pairing", pairing,
                 "on: each run's start time is its place in the order taken, as the store records a task's start, so "
                 "compare pairs runs that took turns (interleaved) as it pairs a store's; off: starts unknown, runs "
                 "never paired (labelled in the RESULT line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--spread-jobs", spread_jobs,
                 "as compare's --spread-jobs: the newest N earlier sides (each a job of --runs runs, A/A pairs' and "
                 "then A/B pairs' in the order run) from which a comparison by runs learns the machine's run-to-run "
                 "spread; 0: the runs' own spread only (labelled in the RESULT line)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  app.add_option("--probe-every-ms", probe_every_ms,
                 "the agent's machine_probe_every_ms: the probe read between a run's steps this often, as well as "
                 "around the run; 0: around it only (labelled in the RESULT_PROBE line); with --replay, 0 sets the "
                 "file's readings during runs aside")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  app.add_option(
      "--dump", dump,
      "write every run's per-sample step times here (CSV: kind,pair,side,run,phase,ns_per_sample,probe_before_ns,"
      "probe_after_ns: a row per step, the run's machine probe repeated), to judge the same runs offline by "
      "another method");
  app.add_option("--replay", replay,
                 "judge the runs of a --dump file again instead of running (a changed method on the same runs): "
                 "--pairs and --runs are the file's; --order, --batch, --steps and --infer-batches must be the ones "
                 "it was taken with; the "
                 "steps' starts are laid end to end and their counts taken as expected (labelled in the RESULT line)")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  std::vector<DumpedRun> replayed;
  size_t next_replayed = 0;
  const v1::JobSpec replay_spec = BenchSpec(steps, infer_batches);  // every replayed run's
  if (!replay.empty()) {
    auto read = ReadDump(replay);
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", std::string(read.status().message()).c_str());
      return 2;
    }
    replayed = std::move(*read);
    pairs = runs = 0;
    for (const DumpedRun& d : replayed) pairs = std::max(pairs, d.pair + 1), runs = std::max(runs, d.run);
    if (pairs == 0) {
      std::fprintf(stderr, "--replay %s: no runs in it\n", replay.c_str());
      return 2;
    }
  }

  auto cpu = agent::DiscoverCpu("/proc", agent::AffinityCores());
  if (!cpu.ok()) {
    std::fprintf(stderr, "setup failed: %s\n", cpu.status().ToString().c_str());
    return 1;
  }
  agent::TorchExecutorConfig config;
  config.data_dir = HETBENCH_DATA_DIR;
  config.calibrate = false;
  config.threads = threads;
  config.machine_probe_every_ms = probe_every_ms;
  agent::TorchExecutor normal(config);
  agent::TorchExecutorConfig slow_config = config;
  slow_config.make_workload = [slowdown](const std::string& m, const v1::JobSpec& spec,
                                         const agent::ImageDataset& ds)
      -> absl::StatusOr<std::unique_ptr<agent::Workload>> {
    auto w = agent::MakeWorkload(m, spec, ds);
    if (!w.ok()) return w.status();
    return std::unique_ptr<agent::Workload>(new SlowedWorkload(std::move(*w), slowdown));
  };
  agent::TorchExecutor slowed(slow_config);

  // The run's shape: a user's job by default, or shortened (labelled in the RESULT line).
  const std::string shape = absl::StrCat(
      steps > 0 ? absl::StrCat(steps, " train steps (shortened)")
                : "train steps as the job's default (one epoch and 1 s at least)",
      " and ",
      infer_batches > 0 ? absl::StrCat(infer_batches, " inference batches (shortened)") : "the whole test set");
  const char* run_shape = !replay.empty() ? "replayed" : steps > 0 || infer_batches > 0 ? "shortened" : "job_defaults";
  if (replay.empty()) {
    std::printf(
        "CPU %s; model %s, batch %ld, %s per run, threshold %.3g, injected slowdown %.3g, %d run(s) per side (%s), "
        "%d LibTorch thread(s) (0 = all cores)\n",
        bench::CpuModel().c_str(), model.c_str(), static_cast<long>(bs), shape.c_str(), threshold, slowdown, runs,
        order.c_str(), threads);
  } else {  // the CPU, thread count, shape and slowdown are the taking run's: its log says them
    std::printf(
        "replayed from %s (%d pairs, %d run(s) per side, %s, batch %ld, threshold %.3g): the runs of the "
        "CPU and settings its log names, judged by this build\n",
        replay.c_str(), pairs, runs, order.c_str(), static_cast<long>(bs), threshold);
  }
  std::printf("%-4s %-4s %-5s %8s %17s %9s %-10s\n", "kind", "pair", "phase", "B/A", "95% CI", "p", "verdict");
  FILE* dump_file = dump.empty() ? nullptr : std::fopen(dump.c_str(), "w");
  if (!dump.empty() && dump_file == nullptr) {
    std::fprintf(stderr, "--dump: cannot write %s\n", dump.c_str());
    return 1;
  }
  if (dump_file != nullptr) {
    std::fprintf(dump_file, "kind,pair,side,run,phase,ns_per_sample,probe_before_ns,probe_after_ns\n");
  }
  int aa_tests = 0, aa_alarms = 0, ab_tests = 0, ab_detected = 0, aa_withheld = 0, ab_withheld = 0;
  int aa_one_tests = 0, aa_one_alarms = 0, ab_one_tests = 0, ab_one_detected = 0;  // --runs > 1: run 0 alone
  // --runs >= 3: comparisons with a run far from its side's median run, and the A/B ones judged and missed.
  int aa_far = 0, ab_far = 0, ab_missed_far = 0, aa_left = 0, ab_left = 0, aa_within = 0, ab_within = 0;
  int aa_cut = 0, ab_cut = 0;  // comparisons with runs cut to their steps in one machine state
  // Withheld because the machine probe differed, and of those, the ones that would have been an alarm (A/A) or
  // a detection (A/B) without that rule.
  int aa_probe = 0, ab_probe = 0, aa_probe_change = 0, ab_probe_change = 0;
  // Each pair's sides as jobs, as the store holds them, in the order run: where later comparisons learn the
  // machine's run-to-run spread (as compare --spread-jobs); and how many comparisons did.
  std::deque<v1::Job> done_jobs;
  int aa_moderated = 0, ab_moderated = 0, aa_beyond = 0, ab_beyond = 0;
  int aa_paired = 0, ab_paired = 0;  // comparisons of runs paired by time (ComparePairedRuns)
  int64_t taken = 0;                 // runs taken so far: the next one's start time with --pairing on
  for (int kind = 0; kind < 2; ++kind) {
    agent::TorchExecutor& second = kind == 0 ? normal : slowed;
    std::vector<std::vector<Run>> runs_a(pairs), runs_b(pairs);
    // Run r of pair p's side A or B, named as the CLI names a run in its
    // messages ("run B (pair-3-B, run 2) train INVALID").
    auto run_side = [&](int p, int r, bool side_b) {
      std::vector<Run>& side = side_b ? runs_b[p] : runs_a[p];
      if (replay.empty()) {
        side.push_back(RunOnce(side_b ? second : normal, *cpu, model, steps, bs, infer_batches));
      } else {  // the file's next run if it is this one, else an empty run (the executor failed when it was taken)
        const bool here = next_replayed < replayed.size() &&
                          replayed[next_replayed].kind == (kind == 0 ? "AA" : "AB") &&
                          replayed[next_replayed].pair == p && replayed[next_replayed].side_b == side_b &&
                          replayed[next_replayed].run == r + 1;
        side.push_back(here ? FromDump(replayed[next_replayed++], replay_spec, bs) : Run{});
        if (probe_every_ms == 0) side.back().task.mutable_result()->mutable_machine_probe()->clear_during();
      }
      if (pairing == "on") side.back().task.set_started_unix_seconds(static_cast<double>(++taken));
      const char* name = side_b ? "B" : "A";
      side.back().task.set_id(absl::StrCat("pair-", p, "-", name));
      side.back().task.set_job_id(absl::StrCat(kind == 0 ? "aa-" : "ab-", p, "-", name));
      side.back().task.set_run(r + 1);
      if (dump_file == nullptr) return;
      const v1::MachineProbe& probe = side.back().task.result().machine_probe();
      for (auto [phase, values] : {std::pair{"train", &side.back().train}, std::pair{"infer", &side.back().infer}}) {
        for (double v : *values) {
          std::fprintf(dump_file, "%s,%d,%s,%d,%s,%.1f,%ld,%ld\n", kind == 0 ? "AA" : "AB", p, name, r + 1, phase, v,
                       static_cast<long>(probe.before_ns()), static_cast<long>(probe.after_ns()));
        }
      }
      for (const v1::ProbeReading& read : probe.during()) {  // after the run's steps: step, median, time
        std::fprintf(dump_file, "%s,%d,%s,%d,%s,%ld,%ld,%ld\n", kind == 0 ? "AA" : "AB", p, name, r + 1,
                     read.phase() == v1::PHASE_TRAIN ? "probe-train" : "probe-infer", static_cast<long>(read.step()),
                     static_cast<long>(read.median_ns()), static_cast<long>(read.at_ns()));
      }
    };
    if (order == "apart") {
      // Every pair's side A (its runs one after another, as a job with
      // repeats runs one configuration), then every pair's side B: the same
      // job submitted again a few minutes later.
      for (bool side_b : {false, true}) {
        for (int p = 0; p < pairs; ++p) {
          for (int r = 0; r < runs; ++r) run_side(p, r, side_b);
        }
      }
    }
    for (int p = 0; p < pairs; ++p) {
      if (order == "interleaved") {
        // `runs` runs per side, alternating A B A B (B A B A on odd pairs) so drift favours neither.
        for (int r = 0; r < runs; ++r) {
          run_side(p, r, (p + r) % 2 != 0);
          run_side(p, r, (p + r) % 2 == 0);
        }
      }
      const std::vector<Run>& a = runs_a[p];
      const std::vector<Run>& b = runs_b[p];
      v1::Job sides[2];
      for (int side = 0; side < 2; ++side) {
        for (const Run& run : side == 0 ? a : b) *sides[side].add_tasks() = run.task;
        sides[side].set_id(sides[side].tasks(0).job_id());
        sides[side].mutable_spec()->set_model(model);
        sides[side].mutable_spec()->set_repeats(runs);
      }
      std::vector<const v1::Job*> earlier;
      for (size_t j = done_jobs.size() - std::min<size_t>(done_jobs.size(), spread_jobs); j < done_jobs.size(); ++j) {
        earlier.push_back(&done_jobs[j]);
      }
      for (int phase = 0; phase < 2; ++phase) {
        const v1::Phase ph = phase == 0 ? v1::PHASE_TRAIN : v1::PHASE_INFER;
        auto steps_of = [phase](const Run& run) { return phase == 0 ? run.train : run.infer; };
        std::vector<std::vector<double>> ra, rb;
        report::RunPair pair;
        pair.key = report::PairKey(sides[0], a[0].task);
        for (const Run& run : a) ra.push_back(steps_of(run)), pair.a.push_back(&run.task);
        for (const Run& run : b) rb.push_back(steps_of(run)), pair.b.push_back(&run.task);
        // As the CLI compares: one run a side, its steps (an INVALID side, too noisy or too short, or a machine
        // probe that differed, gives no verdict); else runs (CompareRunPhase: CompareRuns, then the same rules).
        auto judge = [&](bool anyway) {
          return runs == 1 ? report::ComparePhase(a[0].task, b[0].task, ph, ra[0], rb[0], threshold, anyway)
                           : report::CompareRunPhase(pair, ph, ra, rb, threshold, anyway, earlier);
        };
        const report::StepComparison c = judge(/*anyway=*/false);
        if (runs > 1) {
          // The same data by one run a side (the first of each), as `compare A B` sees it.
          const report::StepComparison one = report::ComparePhase(a[0].task, b[0].task, ph, ra[0], rb[0], threshold, false);
          if (one.verdict != "too few steps") {
            (kind == 0 ? aa_one_tests : ab_one_tests) += 1;
            if (report::IsChange(one) && (kind == 0 || one.verdict == "slower")) {
              (kind == 0 ? aa_one_alarms : ab_one_detected) += 1;
            }
          }
        }
        if (c.verdict == "too few steps" || c.verdict == "too few runs") continue;
        // Withheld because the machine probe differed between the sides: what the verdict would have been
        // without that rule (a comparison with an INVALID side stays withheld by its own rule).
        if (c.invalid.find(report::kMachineDiffered) != std::string::npos) {
          const report::StepComparison anyway = judge(/*anyway=*/true);
          const bool change = anyway.verdict.rfind("slower", 0) == 0 || anyway.verdict.rfind("faster", 0) == 0;
          const bool invalid_side = c.invalid.find("INVALID") != std::string::npos;
          (kind == 0 ? aa_probe : ab_probe) += 1;
          (kind == 0 ? aa_probe_change : ab_probe_change) +=
              change && !invalid_side && (kind == 0 || anyway.verdict[0] == 's') ? 1 : 0;
        }
        if (kind == 0) {
          ++aa_tests;
          aa_alarms += report::IsChange(c) ? 1 : 0;
          aa_withheld += c.invalid.empty() ? 0 : 1;
        } else {
          ++ab_tests;
          const bool found = report::IsChange(c) && c.verdict == "slower";
          ab_detected += found ? 1 : 0;
          ab_withheld += c.invalid.empty() ? 0 : 1;
          ab_missed_far += !found && c.invalid.empty() && !c.far_runs.empty() ? 1 : 0;
        }
        // The runs beyond +/-10% of their side's median run: "far A3 1.27x B3 1.30x".
        std::string far;
        for (const report::StepComparison::FarRun& f : c.far_runs) {
          absl::StrAppend(&far, far.empty() ? " far" : "",
                          absl::StrFormat(" %s%d %.2fx", f.side_b ? "B" : "A", f.run + 1, f.ratio_to_median));
        }
        (kind == 0 ? aa_far : ab_far) += c.far_runs.empty() ? 0 : 1;
        // The runs left out, taken in another machine state by their probe: "left B2 1.19x".
        for (const report::MachineJudgement::LeftOut& l : c.left_out) {
          absl::StrAppend(&far, &l == &c.left_out[0] ? " left" : "",
                          absl::StrFormat(" %s%d %.2fx", l.side_b ? "B" : "A", l.run + 1, l.ratio_to_median));
        }
        (kind == 0 ? aa_left : ab_left) += c.left_out.empty() ? 0 : 1;
        // The runs cut to their steps in one machine state by the probe read during them: "cut A2 612/938".
        for (const report::CutRun& cut : c.cut) {
          absl::StrAppend(&far, &cut == &c.cut[0] ? " cut" : "",
                          absl::StrFormat(" %s%d %d/%d", cut.side_b ? "B" : "A", cut.run + 1, cut.kept, cut.steps));
        }
        (kind == 0 ? aa_cut : ab_cut) += c.cut.empty() ? 0 : 1;
        // Compared within machine states, which the rules above would have withheld: "within 2 states".
        if (!c.states_a.empty()) {
          int states = 0;
          for (const auto* side : {&c.states_a, &c.states_b}) {
            for (int st : *side) states = std::max(states, st + 1);
          }
          absl::StrAppend(&far, absl::StrFormat(" within %d states", states));
          (kind == 0 ? aa_within : ab_within) += 1;
        }
        // The run-to-run spread moderated by earlier sides: "spread of 23 jobs", "paired, spread of 40 pairs".
        (kind == 0 ? aa_paired : ab_paired) += c.paired_runs.empty() ? 0 : 1;
        if (c.spread_prior.df > 0) {
          absl::StrAppend(&far, c.paired_runs.empty() ? "" : " paired,",
                          absl::StrFormat(c.spread.beyond_prior ? " beyond the spread of %d %s" : " spread of %d %s",
                                          c.spread_prior.jobs, c.spread_prior.paired ? "pairs" : "jobs"));
          (kind == 0 ? aa_moderated : ab_moderated) += c.spread.beyond_prior ? 0 : 1;
          (kind == 0 ? aa_beyond : ab_beyond) += c.spread.beyond_prior ? 1 : 0;
        }
        std::printf("%-4s %-4d %-5s %8.4f %8.4f-%8.4f %9.2g %s%s\n", kind == 0 ? "A/A" : "A/B", p,
                    phase == 0 ? "train" : "infer", c.ratio, c.ci_low, c.ci_high, c.p_value, c.verdict.c_str(),
                    far.c_str());
        std::fflush(stdout);
      }
      for (v1::Job& side : sides) done_jobs.push_back(std::move(side));
    }
  }
  if (runs > 1) {
    std::printf("RESULT_ONE_RUN aa_comparisons=%d aa_false_alarms=%d aa_false_alarm_rate=%.3f ab_comparisons=%d "
                "ab_detected=%d ab_detection_rate=%.3f (the same pairs, the first run a side by compare A B's "
                "method)\n",
                aa_one_tests, aa_one_alarms, aa_one_tests ? static_cast<double>(aa_one_alarms) / aa_one_tests : 0.0,
                ab_one_tests, ab_one_detected, ab_one_tests ? static_cast<double>(ab_one_detected) / ab_one_tests : 0.0);
  }
  // A withheld verdict ("not comparable": a side INVALID) is neither an alarm nor a detection.
  std::printf(
      "RESULT aa_comparisons=%d aa_false_alarms=%d aa_false_alarm_rate=%.3f aa_withheld=%d ab_comparisons=%d "
      "ab_detected=%d ab_detection_rate=%.3f ab_withheld=%d slowdown=%.3g threshold=%.3g runs=%d order=%s "
      "run_shape=%s spread_jobs=%d pairing=%s\n",
      aa_tests, aa_alarms, aa_tests ? static_cast<double>(aa_alarms) / aa_tests : 0.0, aa_withheld, ab_tests,
      ab_detected, ab_tests ? static_cast<double>(ab_detected) / ab_tests : 0.0, ab_withheld, slowdown, threshold, runs,
      order.c_str(), run_shape, spread_jobs, pairing.c_str());
  std::printf(
      "RESULT_PROBE aa_withheld_by_probe=%d aa_would_have_alarmed=%d ab_withheld_by_probe=%d "
      "ab_would_have_found=%d aa_with_runs_left_out=%d ab_with_runs_left_out=%d aa_within_states=%d "
      "ab_within_states=%d aa_with_runs_cut=%d ab_with_runs_cut=%d probe_every_ms=%d order=%s (comparisons "
      "withheld because the machine probe differed by more than +/-%g%% between the sides; comparisons judged "
      "without runs whose probe lay beyond it of the comparison's median; comparisons made within machine "
      "states, which those rules would have withheld; comparisons with runs cut to their steps in one state by "
      "the probe read during them, every probe_every_ms, 0: around runs only)\n",
      aa_probe, aa_probe_change, ab_probe, ab_probe_change, aa_left, ab_left, aa_within, ab_within, aa_cut, ab_cut,
      probe_every_ms, order.c_str(), report::kProbeBeyond * 100);
  if (runs > 1) {
    std::printf(
        "RESULT_SPREAD aa_moderated=%d ab_moderated=%d aa_beyond=%d ab_beyond=%d aa_paired=%d ab_paired=%d "
        "pairing=%s spread_jobs=%d (comparisons whose run-to-run variance was moderated by the spread of earlier "
        "sides' runs, %d of them with 2 runs or more needed; beyond: the runs spread beyond it, their own variance "
        "used alone; paired: runs that took turns compared couple by couple, the prior from earlier pairs of "
        "sides whose runs took turns)\n",
        aa_moderated, ab_moderated, aa_beyond, ab_beyond, aa_paired, ab_paired, pairing.c_str(), spread_jobs,
        report::kMinSpreadJobs);
  }
  if (runs >= 3) {
    std::printf(
        "RESULT_FAR_RUNS aa_with_far_runs=%d ab_with_far_runs=%d ab_missed_with_far_runs=%d (comparisons "
        "with a run beyond +/-%g%% of its side's median run: another machine state)\n",
        aa_far, ab_far, ab_missed_far, report::kFarRunBeyond * 100);
  }
  if (dump_file != nullptr) std::fclose(dump_file);
  if (next_replayed < replayed.size()) {  // runs not where this order expects them: the figures are not the file's
    std::fprintf(stderr,
                 "--replay %s: %d of its %d runs were not where --order %s expects them; take the --order it was "
                 "taken with\n",
                 replay.c_str(), static_cast<int>(replayed.size() - next_replayed), static_cast<int>(replayed.size()),
                 order.c_str());
    return 2;
  }
  return 0;
}
