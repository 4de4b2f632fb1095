#include "server/validation/pairs.h"

#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/validate_spec.h"
#include "server/validation/robust.h"

namespace hetbench::server {

namespace {

DeviceKey KeyOf(const v1::Task& t) {
  return {t.agent_id().empty() ? t.target().agent_id() : t.agent_id(),
          t.device_id().empty() ? t.target().device_id() : t.device_id()};
}

struct PairTest {
  std::string partner;  // "agent/device"
  v1::ValidationTest test;
  DeviceKey key;  // the partner's
};

// The test one rank's task reported, or what its end says.
v1::ValidationTest TestOfRank(const v1::Task& t) {
  for (const v1::ValidationTest& x : t.result().validation().tests()) {
    if (x.name() == kAllReduceTest) return x;
  }
  v1::ValidationTest out;
  out.set_name(kAllReduceTest);
  out.set_unit("GB/s");
  out.set_higher_is_better(true);
  const bool failed = t.state() == v1::TASK_STATE_FAILED;
  out.set_outcome(failed ? v1::TEST_OUTCOME_FAILED : v1::TEST_OUTCOME_SKIPPED);
  out.set_reason(failed ? absl::StrCat("the pair's task failed: ", t.error())
                        : absl::StrCat("the pair's task ended ", TaskStateName(t.state()), " without a result"));
  return out;
}

int Severity(v1::TestOutcome o) {
  switch (o) {
    case v1::TEST_OUTCOME_FAILED:
      return 3;
    case v1::TEST_OUTCOME_TIMED_OUT:
      return 2;
    case v1::TEST_OUTCOME_SKIPPED:
      return 1;
    default:
      return 0;
  }
}

double MedianOf(const v1::ValidationTest& t) { return Median({t.values().begin(), t.values().end()}); }

bool Measured(const v1::ValidationTest& t) { return t.outcome() == v1::TEST_OUTCOME_MEASURED && t.values_size() > 0; }

PairFigure Choose(const std::vector<PairTest>& pairs) {
  const PairTest* best = nullptr;
  const PairTest* worst = nullptr;
  std::vector<std::string> each;
  for (const PairTest& p : pairs) {
    if (Measured(p.test)) {
      each.push_back(absl::StrFormat("with %s %.4g %s", p.partner, MedianOf(p.test), p.test.unit()));
      if (best == nullptr || MedianOf(p.test) > MedianOf(best->test)) best = &p;
    } else {
      each.push_back(absl::StrCat("with ", p.partner, " ", TestOutcomeName(p.test.outcome()), ": ", p.test.reason()));
      if (worst == nullptr || Severity(p.test.outcome()) > Severity(worst->test.outcome())) worst = &p;
    }
  }
  PairFigure out;
  out.pairs = absl::StrJoin(each, "; ");
  if (best != nullptr) {
    out.test = best->test;
    if (pairs.size() > 1) out.pairs = absl::StrCat("best of ", pairs.size(), " pairs: ", out.pairs);
    return out;
  }
  out.test = worst->test;
  out.test.set_reason(pairs.size() > 1 ? absl::StrCat("every pair: ", out.pairs) : out.pairs);
  return out;
}

}  // namespace

std::map<DeviceKey, PairFigure> BestPairTests(const v1::Job& job) {
  // Gang id -> its two ranks' tasks, found by id, not by position: judged the same in any task order.
  std::map<std::string, std::array<const v1::Task*, 2>> gangs;
  for (const v1::Task& t : job.tasks()) {
    if (t.gang().world_size() != 2 || t.gang().rank() < 0 || t.gang().rank() > 1) continue;
    gangs[t.gang().id()][static_cast<size_t>(t.gang().rank())] = &t;
  }
  std::map<DeviceKey, std::map<std::string, PairTest>> by_device;  // by partner: listed in one order
  for (const auto& [id, ranks] : gangs) {
    if (ranks[0] == nullptr || ranks[1] == nullptr) continue;
    for (size_t r = 0; r < 2; ++r) {
      const DeviceKey partner = KeyOf(*ranks[1 - r]);
      const std::string name = absl::StrCat(partner.first, "/", partner.second);
      by_device[KeyOf(*ranks[r])].emplace(name, PairTest{name, TestOfRank(*ranks[r]), partner});
    }
  }
  std::map<DeviceKey, PairFigure> out;
  for (const auto& [key, pairs] : by_device) {
    std::vector<PairTest> list;
    for (const auto& [partner, p] : pairs) list.push_back(p);
    out[key] = Choose(list);
    for (const auto& [partner, p] : pairs) out[key].partners.push_back(p.key);
  }
  return out;
}

void ExplainAwayPairs(const std::map<DeviceKey, PairFigure>& figures, const std::vector<v1::DeviceVerdict*>& devices) {
  auto flagged_test = [](v1::DeviceVerdict* d) -> v1::TestVerdict* {
    for (v1::TestVerdict& t : *d->mutable_tests()) {
      if (t.test() == kAllReduceTest) {
        return t.verdict() == v1::VERDICT_DEGRADED || t.verdict() == v1::VERDICT_FAIL ? &t : nullptr;
      }
    }
    return nullptr;
  };
  std::map<DeviceKey, v1::TestVerdict*> flagged;  // as judged, before any is cleared
  for (v1::DeviceVerdict* d : devices) {
    if (v1::TestVerdict* t = flagged_test(d)) flagged[{d->agent_id(), d->device_id()}] = t;
  }
  std::vector<std::pair<v1::TestVerdict*, std::string>> clear;
  for (const auto& [key, test] : flagged) {
    auto it = figures.find(key);
    if (it == figures.end() || it->second.partners.size() < 2) continue;
    std::vector<std::string> names;
    for (const DeviceKey& p : it->second.partners) {
      if (flagged.count(p) == 0) break;
      names.push_back(absl::StrCat(p.first, "/", p.second));
    }
    if (names.size() == it->second.partners.size()) clear.emplace_back(test, absl::StrJoin(names, " and "));
  }
  for (auto& [test, names] : clear) {
    test->set_reason(absl::StrCat("not judged: every partner (", names, ") is flagged on its all-reduce too, so ",
                                  "these pairs cannot tell whose link it is; was ", VerdictName(test->verdict()), ": ",
                                  test->reason()));
    test->set_verdict(v1::VERDICT_PASS);
  }
}

}  // namespace hetbench::server
