// The machine probe read during runs (v1::MachineProbe.during): which steps
// CutToMachineState keeps, that the steps themselves never decide, and what
// cutting does to compare's false alarms and detection on synthetic runs
// whose machine flips between two states in the middle of runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "report/compare.h"
#include "report/machine_state.h"
#include "tests/testing/stored_runs.h"

namespace hetbench::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Run `run` of job `job` on one agent's cpu0; its probe read `before` and
// `after` the run and `during` (step, ns) before those training steps.
v1::Task Probed(const std::string& job, int run, int64_t before, int64_t after,
                const std::vector<std::pair<int64_t, int64_t>>& during) {
  v1::Task t = testing::StoredTask(job, run);
  v1::MachineProbe* p = t.mutable_result()->mutable_machine_probe();
  p->set_kernel("sgemm 64x512x512 float32, LibTorch, 2 threads");
  p->set_before_ns(before);
  p->set_after_ns(after);
  for (auto [step, ns] : during) {
    v1::ProbeReading* r = p->add_during();
    r->set_phase(v1::PHASE_TRAIN);
    r->set_step(step);
    r->set_median_ns(ns);
  }
  return t;
}

std::vector<double> Steps(int n, double ns) { return std::vector<double>(static_cast<size_t>(n), ns); }

TEST(MachineCutTest, ARunThatFlippedKeepsItsStepsInTheComparisonsState) {
  // A's run 2 flipped to the slow state between its readings before steps 60
  // and 80: steps 0-59 are in the fast state, 60-79 held the flip, 80-99 slow.
  const v1::Task a1 = Probed("a", 1, 150'000, 150'000, {{20, 150'000}, {40, 151'000}, {60, 150'000}, {80, 150'000}});
  const v1::Task a2 = Probed("a", 2, 150'000, 180'000, {{20, 150'000}, {40, 149'000}, {60, 151'000}, {80, 180'000}});
  const v1::Task b1 = Probed("b", 1, 150'000, 151'000, {{20, 150'000}, {40, 150'000}, {60, 150'000}, {80, 151'000}});
  const v1::Task b2 = Probed("b", 2, 151'000, 150'000, {});  // read around the run only: as given
  std::vector<double> flipped = Steps(100, 1.0);
  for (size_t i = 60; i < 100; ++i) flipped[i] = 1.3;
  const CutRuns cut = CutToMachineState({&a1, &a2}, {&b1, &b2}, v1::PHASE_TRAIN, {Steps(100, 1.0), flipped},
                                        {Steps(100, 1.0), Steps(100, 1.0)});
  ASSERT_EQ(cut.cut.size(), 1u);
  EXPECT_FALSE(cut.cut[0].side_b);
  EXPECT_EQ(cut.cut[0].run, 1u);
  EXPECT_EQ(cut.cut[0].kept, 60u);
  EXPECT_EQ(cut.cut[0].steps, 100u);
  EXPECT_EQ(cut.steps[0][1], Steps(60, 1.0));
  // Its probe now reads the kept steps' state before and after; so does whole
  // A run 1's, from its phase's readings; B's run 2, read around only, is the run given.
  EXPECT_EQ(cut.tasks[0][1]->result().machine_probe().before_ns(), 150'000);
  EXPECT_EQ(cut.tasks[0][1]->result().machine_probe().after_ns(), 150'000);
  EXPECT_NE(cut.tasks[0][0], &a1);
  EXPECT_EQ(cut.tasks[0][0]->result().machine_probe().after_ns(), 150'000);
  EXPECT_EQ(cut.steps[0][0], Steps(100, 1.0));
  EXPECT_EQ(cut.tasks[1][1], &b2);
  EXPECT_EQ(a2.result().machine_probe().after_ns(), 180'000);  // the run given is untouched
  EXPECT_THAT(cut.note, HasSubstr("A run 2 60 of 100 steps"));
}

TEST(MachineCutTest, CompareNamesTheRunsCutInItsNoteAndJson) {
  const v1::Task a1 = Probed("a", 1, 150'000, 150'000, {{20, 150'000}, {40, 151'000}, {60, 150'000}, {80, 150'000}});
  const v1::Task a2 = Probed("a", 2, 150'000, 180'000, {{20, 150'000}, {40, 149'000}, {60, 151'000}, {80, 180'000}});
  const v1::Task b1 = Probed("b", 1, 150'000, 151'000, {{20, 150'000}, {40, 150'000}, {60, 150'000}, {80, 151'000}});
  const v1::Task b2 = Probed("b", 2, 151'000, 150'000, {{20, 150'000}, {40, 150'000}, {60, 151'000}, {80, 150'000}});
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0, 0.01);
  std::vector<std::vector<double>> steps_a(2), steps_b(2);
  for (int i = 0; i < 100; ++i) {
    steps_a[0].push_back(1e5 * noise(rng));
    steps_a[1].push_back(1e5 * noise(rng) * (i >= 60 ? 1.3 : 1.0));
    steps_b[0].push_back(1e5 * noise(rng));
    steps_b[1].push_back(1e5 * noise(rng));
  }
  PairResult r;
  r.pair.a = {&a1, &a2};
  r.pair.b = {&b1, &b2};
  r.pair.key = "mlp, cpu, torch, batch 64";
  r.phase = v1::PHASE_TRAIN;
  r.result = CompareRunPhase(r.pair, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false);
  ASSERT_EQ(r.result.cut.size(), 1u);
  EXPECT_EQ(r.result.verdict, "no change");  // the slow stretch of A's run 2 is not a change
  EXPECT_THAT(RunNotesLine(r), HasSubstr("runs cut to their steps in one machine state"));
  const nlohmann::json doc = nlohmann::json::parse(RenderComparison("a", "b", {r}, {}, 0.02, "json"));
  const nlohmann::json& cut = doc["pairs"][0]["machine_probe"]["runs_cut"];
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0]["side"], "a");
  EXPECT_EQ(cut[0]["run"], 2);
  EXPECT_EQ(cut[0]["steps_kept"], 60);
  EXPECT_EQ(cut[0]["steps"], 100);
}

TEST(MachineCutTest, ARunIsPlacedByItsPhasesReadingsNotByThoseAroundTheRun) {
  // A's run 3 flipped to the slow state during its inference, after the
  // reading before inference's first batch: its training was all in the
  // comparison's state and counts; its inference, between readings 1.2x
  // apart, is left out.
  std::vector<v1::Task> a, b;
  std::vector<std::vector<double>> steps_a, steps_b;
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> noise(0, 0.01);
  for (int r = 1; r <= 3; ++r) {
    a.push_back(Probed("a", r, 150'000, r == 3 ? 180'000 : 150'000, {{50, 150'000}, {100, 151'000}}));
    b.push_back(Probed("b", r, 150'000, 151'000, {{50, 150'000}, {100, 150'000}}));
    for (v1::Task* t : {&a.back(), &b.back()}) {
      v1::ProbeReading* infer = t->mutable_result()->mutable_machine_probe()->add_during();
      infer->set_phase(v1::PHASE_INFER);
      infer->set_step(0);
      infer->set_median_ns(150'000);
    }
    steps_a.emplace_back();
    steps_b.emplace_back();
    for (int i = 0; i < 150; ++i) {
      steps_a.back().push_back(1e5 * noise(rng));
      steps_b.back().push_back(1.05e5 * noise(rng));
    }
  }
  RunPair pair;
  for (const v1::Task& t : a) pair.a.push_back(&t);
  for (const v1::Task& t : b) pair.b.push_back(&t);
  pair.key = "mlp, cpu, torch, batch 64";
  const StepComparison train = CompareRunPhase(pair, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false);
  EXPECT_TRUE(train.left_out.empty()) << train.left_out_note;
  EXPECT_TRUE(train.cut.empty());
  EXPECT_EQ(train.verdict, "slower");
  const StepComparison infer = CompareRunPhase(pair, v1::PHASE_INFER, steps_a, steps_b, 0.02, false);
  ASSERT_EQ(infer.left_out.size(), 1u) << infer.left_out_note;
  EXPECT_FALSE(infer.left_out[0].side_b);
  EXPECT_EQ(infer.left_out[0].run, 2u);
}

TEST(MachineCutTest, AMomentsStallOfTheProbeIsNoState) {
  // One reading 2.5x its neighbours, which agree: something held a core for a
  // moment; run 1 stays whole. Two readings in the slow state are a state: run 2 is cut.
  const v1::Task a1 = Probed("a", 1, 175'000, 176'000, {{25, 176'000}, {50, 438'000}, {75, 175'000}});
  const v1::Task a2 = Probed("a", 2, 175'000, 176'000, {{25, 176'000}, {50, 210'000}, {75, 211'000}});
  const v1::Task b1 = Probed("b", 1, 175'000, 175'000, {{25, 175'000}, {50, 176'000}, {75, 175'000}});
  const CutRuns cut =
      CutToMachineState({&a1, &a2}, {&b1}, v1::PHASE_TRAIN, {Steps(100, 1.0), Steps(100, 1.0)}, {Steps(100, 1.0)});
  ASSERT_EQ(cut.cut.size(), 1u);
  EXPECT_EQ(cut.cut[0].run, 1u);
  EXPECT_EQ(cut.cut[0].kept, 25u);
  EXPECT_EQ(cut.steps[0][0].size(), 100u);
}

TEST(MachineCutTest, ARunMostlyInAnotherStateKeepsItsOwnStateAndTheStretchBeforeTheFirstReadingCounts) {
  // B's run 1 spent 10 of its 100 steps in the comparison's (fast) state: too
  // few, so it keeps the 80 steps of its own (slow) state.
  const v1::Task a1 = Probed("a", 1, 150'000, 150'000, {{50, 150'000}});
  const v1::Task a2 = Probed("a", 2, 150'000, 150'000, {{50, 150'000}});
  const v1::Task b1 = Probed("b", 1, 150'000, 180'000, {{10, 150'000}, {20, 181'000}, {60, 180'000}});
  const CutRuns cut =
      CutToMachineState({&a1, &a2}, {&b1}, v1::PHASE_TRAIN, {Steps(100, 1.0), Steps(100, 1.0)}, {Steps(100, 1.3)});
  ASSERT_EQ(cut.cut.size(), 1u);
  EXPECT_EQ(cut.cut[0].kept, 80u);
  EXPECT_NEAR(cut.cut[0].ratio, 1.2, 0.01);
  EXPECT_EQ(cut.tasks[1][0]->result().machine_probe().before_ns(), 180'000);
}

TEST(MachineCutTest, TheStepsNeverDecide) {
  // B's steps are bimodal (its last 140 steps 1.3x: a slowdown of the model, not
  // the machine), its probe steady: nothing is cut, and the slowdown is found.
  std::vector<v1::Task> a, b;
  std::vector<std::vector<double>> steps_a, steps_b;
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0, 0.01);
  for (int r = 1; r <= 3; ++r) {
    a.push_back(Probed("a", r, 150'000, 150'000, {{50, 151'000}, {100, 150'000}, {150, 149'000}}));
    b.push_back(Probed("b", r, 150'000, 150'000, {{50, 150'000}, {100, 151'000}, {150, 150'000}}));
    steps_a.emplace_back();
    steps_b.emplace_back();
    for (int i = 0; i < 200; ++i) {
      steps_a.back().push_back(1e5 * noise(rng));
      steps_b.back().push_back(1e5 * noise(rng) * (i >= 60 ? 1.3 : 1.0));
    }
  }
  RunPair pair;
  for (const v1::Task& t : a) pair.a.push_back(&t);
  for (const v1::Task& t : b) pair.b.push_back(&t);
  pair.key = "mlp, cpu, torch, batch 64";
  const StepComparison c = CompareRunPhase(pair, v1::PHASE_TRAIN, steps_a, steps_b, 0.02, false);
  EXPECT_TRUE(c.cut.empty());
  EXPECT_EQ(c.verdict, "slower");
}

// One trial: 3 runs a side of `n` steps, the machine in the fast or the slow
// state (steps 1.3x, the probe 1.2x) and flipping at a random step of half
// the runs; B's steps `slowdown` slower. `during`: the probe read every 25
// steps as well as around each run.
StepComparison FlippingTrial(std::mt19937_64& rng, double slowdown, bool during) {
  constexpr int n = 200;
  std::bernoulli_distribution slow_start(0.4), flips(0.5);
  std::uniform_int_distribution<int> flip_at(1, n - 1);
  std::lognormal_distribution<double> run_shift(0, 0.01), step_noise(0, 0.01), reading_noise(0, 0.01);
  std::vector<v1::Task> runs[2];
  std::vector<std::vector<double>> steps[2];
  for (int r = 1; r <= 3; ++r) {
    for (int side = 0; side < 2; ++side) {  // A B A B: one machine, one stretch of time
      const bool start_slow = slow_start(rng);
      const int flip = flips(rng) ? flip_at(rng) : n + 1;
      auto slow = [&](int step) { return start_slow != (step >= flip); };
      auto reading = [&](int step) {
        return static_cast<int64_t>(150'000 * (slow(step) ? 1.2 : 1.0) * reading_noise(rng));
      };
      std::vector<std::pair<int64_t, int64_t>> readings;
      if (during) {
        for (int s = 25; s < n; s += 25) readings.push_back({s, reading(s)});
      }
      runs[side].push_back(Probed(side == 0 ? "a" : "b", r, reading(0), reading(n - 1), readings));
      const double shift = run_shift(rng) * (side == 1 ? 1 + slowdown : 1);
      std::vector<double>& s = steps[side].emplace_back();
      for (int i = 0; i < n; ++i) s.push_back(1e5 * shift * step_noise(rng) * (slow(i) ? 1.3 : 1.0));
    }
  }
  RunPair pair;
  for (int side = 0; side < 2; ++side) {
    for (const v1::Task& t : runs[side]) (side == 0 ? pair.a : pair.b).push_back(&t);
  }
  pair.key = "mlp, cpu, torch, batch 64";
  return CompareRunPhase(pair, v1::PHASE_TRAIN, steps[0], steps[1], 0.02, false);
}

TEST(MachineCutTest, ReadingTheProbeDuringRunsFindsMoreOfASlowdownWithoutMoreFalseAlarms) {
  // 150 A/A and 150 A/B (5% slower) trials, the probe read around each run
  // only and during it too (the same seeds: the same machine states).
  constexpr int kTrials = 150;
  int alarms[2] = {0, 0}, found[2] = {0, 0}, withheld[2] = {0, 0};
  for (int during = 0; during < 2; ++during) {
    std::mt19937_64 rng(20261130);
    for (int t = 0; t < kTrials; ++t) {
      const StepComparison aa = FlippingTrial(rng, 0, during == 1);
      const StepComparison ab = FlippingTrial(rng, 0.05, during == 1);
      alarms[during] += aa.verdict == "slower" || aa.verdict == "faster";
      found[during] += ab.verdict == "slower";
      withheld[during] += ab.verdict.rfind("not comparable", 0) == 0 || ab.verdict == "too few runs";
    }
  }
  RecordProperty("alarms_around", alarms[0]);
  RecordProperty("alarms_during", alarms[1]);
  RecordProperty("found_around", found[0]);
  RecordProperty("found_during", found[1]);
  std::printf("around only: %d A/A alarms, %d found, %d withheld; during: %d, %d, %d (of %d)\n", alarms[0], found[0],
              withheld[0], alarms[1], found[1], withheld[1], kTrials);
  EXPECT_LE(alarms[1], kTrials * 8 / 100);
  EXPECT_GE(found[1], found[0] + kTrials / 10);
  EXPECT_LT(withheld[1], withheld[0]);
}

}  // namespace
}  // namespace hetbench::report
