// The all-reduce pairs of a validation job: which agents pair (a ring per
// kind, so each agent has two partners), the gangs the job table makes of
// them, and the verdicts: a node whose link is slow, or that fails every
// pair, is the one flagged, not its partners.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/validate_spec.h"
#include "server/service/job_table.h"
#include "server/validation/expand.h"
#include "server/validation/judge.h"
#include "server/validation/pairs.h"

namespace hetbench::server {
namespace {

using ::testing::HasSubstr;

constexpr char kSku[] = "cpu|Test CPU|-|2|all|0.0.0";

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.mutable_validate()->set_level("quick");
  return WithDefaults(spec);
}

std::vector<v1::TargetSelector> Pinned(int agents, v1::DeviceKind kind = v1::DEVICE_KIND_CPU) {
  std::vector<v1::TargetSelector> out;
  for (int i = 0; i < agents; ++i) {
    v1::TargetSelector t;
    t.set_agent_id(absl::StrCat("a", i));
    t.set_device_id(kind == v1::DEVICE_KIND_CPU ? "cpu0" : "qpu0");
    t.set_device_kind(kind);
    out.push_back(t);
  }
  return out;
}

TEST(AllReducePairsTest, TwoAgentsPairOnceMoreMakeARingAndOneAgentNone) {
  const v1::ValidateSpec v = Spec().validate();
  EXPECT_TRUE(AllReducePairs(v, Pinned(1)).empty());
  EXPECT_EQ(AllReducePairs(v, Pinned(2)), (std::vector<std::pair<size_t, size_t>>{{0, 1}}));
  const auto ring = AllReducePairs(v, Pinned(4));
  ASSERT_EQ(ring.size(), 4u);
  for (size_t agent = 0; agent < 4; ++agent) {
    std::set<size_t> partners;
    for (const auto& [x, y] : ring) {
      if (x == agent) partners.insert(y);
      if (y == agent) partners.insert(x);
    }
    EXPECT_EQ(partners.size(), 2u) << "every agent has two different partners: a" << agent;
  }
}

TEST(AllReducePairsTest, OnlyKindsThatRunItAndOnlyWhenTheTestsAskForIt) {
  v1::ValidateSpec v = Spec().validate();
  EXPECT_TRUE(AllReducePairs(v, Pinned(3, v1::DEVICE_KIND_QPU_SIM)).empty()) << "no collective on the simulator";
  std::vector<v1::TargetSelector> two_per_agent = Pinned(2);
  v1::TargetSelector second = two_per_agent[0];
  second.set_device_id("cpu1");
  two_per_agent.insert(two_per_agent.begin() + 1, second);  // a0/cpu0, a0/cpu1, a1/cpu0
  EXPECT_EQ(AllReducePairs(v, two_per_agent), (std::vector<std::pair<size_t, size_t>>{{0, 2}}))
      << "one device per agent: the agent's first of the kind";
  v.add_tests("matmul");
  EXPECT_TRUE(AllReducePairs(v, Pinned(3)).empty());
  v.add_tests(kAllReduceTest);
  EXPECT_EQ(AllReducePairs(v, Pinned(3)).size(), 3u);
}

TEST(AllReducePairsTest, TheJobTableMakesAGangOfTwoPinnedRanksPerPair) {
  JobTable table;
  v1::JobSpec spec = Spec();
  spec.clear_targets();
  for (const v1::TargetSelector& t : Pinned(3)) *spec.add_targets() = t;
  LiveJob& live = table.Create(spec, "", 1000);
  ASSERT_EQ(live.job.tasks_size(), 3);
  table.AddPairGangs(live, AllReducePairs(spec.validate(), Pinned(3)), 1000);
  ASSERT_EQ(live.job.tasks_size(), 9);
  for (int i = 3; i < 9; ++i) {
    const v1::Task& t = live.job.tasks(i);
    EXPECT_EQ(t.index(), i);
    EXPECT_EQ(t.gang().world_size(), 2);
    EXPECT_EQ(t.gang().rank(), (i - 3) % 2);
    EXPECT_EQ(t.gang().id(), absl::StrCat(live.job.id(), "-g", (i - 3) / 2));
    EXPECT_EQ(t.state(), v1::TASK_STATE_QUEUED);
    EXPECT_EQ(table.FindTask(t.id()), &t);
  }
  EXPECT_EQ(live.job.tasks(7).target().agent_id(), "a2");  // the ring closes: (a2, a0)
  EXPECT_EQ(live.job.tasks(8).target().agent_id(), "a0");
}

// Eight repetitions around `center`.
v1::ValidationTest Bandwidth(double center) {
  v1::ValidationTest t;
  t.set_name(kAllReduceTest);
  t.set_unit("GB/s");
  t.set_higher_is_better(true);
  t.set_outcome(v1::TEST_OUTCOME_MEASURED);
  for (double w : {-0.004, 0.002, 0.0, 0.003, -0.002, 0.001, -0.001, 0.004}) t.add_values(center * (1 + w));
  return t;
}

v1::ValidationTest Failed(const std::string& why) {
  v1::ValidationTest t;
  t.set_name(kAllReduceTest);
  t.set_unit("GB/s");
  t.set_outcome(v1::TEST_OUTCOME_FAILED);
  t.set_reason(why);
  return t;
}

// `n` agents with a passing suite (two tests) and the ring of pairs; a pair's
// figure is 4 GB/s, or what `pair_test` says for a pair with an agent in `odd`.
v1::Job Ring(int n, const std::set<int>& odd, const std::function<v1::ValidationTest()>& pair_test) {
  v1::Job job;
  job.set_id("job-000001");
  *job.mutable_spec() = Spec();
  for (int i = 0; i < n; ++i) {
    v1::Task* t = job.add_tasks();
    t->set_id(absl::StrCat(job.id(), "-t", i));
    t->set_index(i);
    *t->mutable_target() = Pinned(n)[i];
    t->set_agent_id(t->target().agent_id());
    t->set_device_id("cpu0");
    t->set_device_kind(v1::DEVICE_KIND_CPU);
    t->set_state(v1::TASK_STATE_SUCCEEDED);
    v1::ValidationRun* run = t->mutable_result()->mutable_validation();
    run->set_sku(kSku);
    for (const char* name : {"matmul", "infer_mlp"}) {
      v1::ValidationTest m = Bandwidth(100 * (1 + 0.001 * (i % 3)));
      m.set_name(name);
      m.set_unit("GFLOP/s");
      *run->add_tests() = m;
    }
  }
  int gang = 0;
  for (const auto& [a, b] : AllReducePairs(job.spec().validate(), Pinned(n))) {
    const bool involved = odd.count(static_cast<int>(a)) > 0 || odd.count(static_cast<int>(b)) > 0;
    for (size_t agent : {a, b}) {
      v1::Task* t = job.add_tasks();
      t->set_index(job.tasks_size() - 1);
      t->set_id(absl::StrCat(job.id(), "-t", t->index()));
      *t->mutable_target() = Pinned(n)[agent];
      t->set_agent_id(t->target().agent_id());
      t->set_device_id("cpu0");
      t->set_state(v1::TASK_STATE_SUCCEEDED);
      t->mutable_gang()->set_id(absl::StrCat(job.id(), "-g", gang));
      t->mutable_gang()->set_rank(agent == a ? 0 : 1);
      t->mutable_gang()->set_world_size(2);
      v1::ValidationRun* run = t->mutable_result()->mutable_validation();
      run->set_sku(kSku);
      *run->add_tests() = involved ? pair_test() : Bandwidth(4.0);
    }
    ++gang;
  }
  return job;
}

const v1::DeviceVerdict& Of(const v1::ValidationReport& r, const std::string& agent) {
  for (const v1::DeviceVerdict& d : r.devices()) {
    if (d.agent_id() == agent) return d;
  }
  static const v1::DeviceVerdict none;
  ADD_FAILURE() << "no verdict for " << agent;
  return none;
}

const v1::TestVerdict* TestVerdictOf(const v1::DeviceVerdict& d, const std::string& test) {
  for (const v1::TestVerdict& t : d.tests()) {
    if (t.test() == test) return &t;
  }
  return nullptr;
}

TEST(AllReducePairsTest, ASlowLinkFlagsItsNodeAloneNotItsPartners) {
  const v1::ValidationReport r = JudgeValidation(Ring(6, {2}, [] { return Bandwidth(2.4); }));
  ASSERT_EQ(r.devices_size(), 6) << "the pairs' tasks are not devices of their own";
  for (int i = 0; i < 6; ++i) {
    const v1::DeviceVerdict& d = Of(r, absl::StrCat("a", i));
    const v1::TestVerdict* t = TestVerdictOf(d, kAllReduceTest);
    ASSERT_NE(t, nullptr) << i;
    if (i == 2) {
      EXPECT_EQ(d.verdict(), v1::VERDICT_DEGRADED) << "its link alone is enough: " << d.reason();
      EXPECT_NEAR(t->ratio(), 0.6, 0.01);
    } else {
      EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << i << ": " << d.reason();
      EXPECT_NEAR(t->value(), 4.0, 0.05) << i << ": its other pair's figure";
    }
  }
}

TEST(AllReducePairsTest, ANodeBetweenTwoSlowLinksIsNotJudgedTheyAre) {
  const v1::ValidationReport r = JudgeValidation(Ring(8, {2, 4}, [] { return Bandwidth(2.4); }));
  for (const char* slow : {"a2", "a4"}) EXPECT_EQ(Of(r, slow).verdict(), v1::VERDICT_DEGRADED) << slow;
  const v1::DeviceVerdict& between = Of(r, "a3");  // both of its pairs are with a slow node
  EXPECT_EQ(between.verdict(), v1::VERDICT_PASS) << between.reason();
  const v1::TestVerdict* t = TestVerdictOf(between, kAllReduceTest);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->reason(), HasSubstr("not judged: every partner (a2/cpu0 and a4/cpu0) is flagged"));
  for (const char* fine : {"a0", "a1", "a5", "a6", "a7"}) EXPECT_EQ(Of(r, fine).verdict(), v1::VERDICT_PASS) << fine;
}

TEST(AllReducePairsTest, ANodeThatFailsEveryPairFailsItsPartnersPass) {
  const v1::ValidationReport r =
      JudgeValidation(Ring(5, {3}, [] { return Failed("with a2/cpu0: Connection closed by peer"); }));
  const v1::DeviceVerdict& bad = Of(r, "a3");
  EXPECT_EQ(bad.verdict(), v1::VERDICT_FAIL);
  EXPECT_THAT(bad.reason(), HasSubstr("every pair"));
  for (const char* partner : {"a2", "a4"}) {
    const v1::DeviceVerdict& d = Of(r, partner);
    EXPECT_EQ(d.verdict(), v1::VERDICT_PASS) << partner << ": " << d.reason();
  }
  // The partners' figures say which pair failed.
  const auto best = BestPairTests(Ring(5, {3}, [] { return Failed("peer gone"); }));
  EXPECT_THAT(best.at({"a2", "cpu0"}).pairs, HasSubstr("with a3/cpu0 failed: peer gone"));
  const v1::TestVerdict* t = TestVerdictOf(Of(r, "a2"), kAllReduceTest);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->reason(), HasSubstr("best of 2 pairs: with a1/cpu0 4.002 GB/s; with a3/cpu0 failed: "));
}

TEST(AllReducePairsTest, APairWhoseTaskFailedWithoutAResultCountsAsFailed) {
  v1::Job job = Ring(3, {}, nullptr);
  v1::Task* rank = job.mutable_tasks(3);  // a0's rank in (a0, a1)
  rank->set_state(v1::TASK_STATE_FAILED);
  rank->set_error("lost: agent a0 disconnected");
  rank->clear_result();
  const auto best = BestPairTests(job);
  EXPECT_EQ(best.at({"a0", "cpu0"}).test.outcome(), v1::TEST_OUTCOME_MEASURED) << "its other pair measured";
  EXPECT_THAT(best.at({"a0", "cpu0"}).pairs, HasSubstr("the pair's task failed: lost: agent a0"));
}

TEST(AllReducePairsTest, TheSameResultsInAnyTaskOrderGiveTheSameVerdicts) {
  v1::Job job = Ring(5, {1}, [] { return Bandwidth(3.0); });
  const std::string once = JudgeValidation(job).SerializeAsString();
  std::mt19937 shuffle(7);
  for (int i = 0; i < 3; ++i) {
    std::shuffle(job.mutable_tasks()->begin(), job.mutable_tasks()->end(), shuffle);
    EXPECT_EQ(JudgeValidation(job).SerializeAsString(), once) << "shuffle " << i;
  }
}

}  // namespace
}  // namespace hetbench::server
