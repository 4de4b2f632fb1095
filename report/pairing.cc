// Which runs compare compares with which (compare.h: PairKey, PairRuns):
// a side's succeeded tasks grouped into configurations, each configuration's
// runs paired with the other side's of the same key.
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "report/compare.h"
#include "report/render/common.h"

namespace hetbench::report {
namespace {

// A side's succeeded tasks grouped by PairKey, in order of first appearance.
struct Groups {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const v1::Task*>> runs;
};

// Runs of one configuration share their key and differ in `run`. Tasks of
// one job and run with the same key (a spec whose configurations the key
// cannot tell apart) are different configurations, told apart by their
// order: the k-th such task of each run is one group, " (k+1.)" on its key.
Groups GroupSide(const std::vector<const v1::Job*>& side) {
  Groups g;
  for (const v1::Job* side_job : side) {
    const v1::Job& job = *side_job;
    std::map<std::pair<std::string, int>, int> seen;  // (key, run) -> tasks so far
    for (const v1::Task& t : job.tasks()) {
      if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
      std::string key = PairKey(job, t);
      if (const int k = seen[{key, t.run()}]++; k > 0) absl::StrAppend(&key, " (", k + 1, ".)");
      auto [it, fresh] = g.runs.try_emplace(key);
      if (fresh) g.order.push_back(key);
      it->second.push_back(&t);
    }
  }
  return g;
}

std::string SideName(const std::vector<const v1::Job*>& side) {
  std::vector<std::string> ids;
  for (const v1::Job* j : side) ids.push_back(j->id());
  return absl::StrJoin(ids, ",");
}

}  // namespace

std::string PairKey(const v1::Job& job, const v1::Task& t) {
  const v1::RunEnvironment& e = t.result().environment();
  // A serving task pairs with one of the same scenario and rate (a peak search's rate is its result).
  const v1::ServingRun& sv = t.result().serving();
  const std::string serving =
      sv.scenario().empty() ? ""
      : sv.scenario() == "server"
          ? absl::StrFormat(", serving server at %g q/s", sv.target_qps() > 0 ? sv.target_qps() : t.target_qps())
          : absl::StrCat(", serving ", sv.scenario());
  return absl::StrCat(render::TaskModel(job, t), ", ", DeviceKindName(t.device_kind()), " (",
                      e.device_model().empty() ? "unknown model" : e.device_model(), "), ",
                      e.executor().empty() ? "torch" : e.executor(), ", batch ", t.batch_size(), serving,
                      e.simulated() ? ", SIMULATED" : "");
}

std::vector<std::pair<size_t, size_t>> InterleavedRuns(const std::vector<double>& starts_a,
                                                       const std::vector<double>& starts_b) {
  if (starts_a.empty() || starts_a.size() != starts_b.size()) return {};
  // Every run in time order, each with its side and place.
  std::vector<std::tuple<double, int, size_t>> order;
  for (int side = 0; side < 2; ++side) {
    const std::vector<double>& starts = side == 0 ? starts_a : starts_b;
    for (size_t i = 0; i < starts.size(); ++i) {
      if (!(starts[i] > 0)) return {};  // a start unknown: no time order
      order.emplace_back(starts[i], side, i);
    }
  }
  std::sort(order.begin(), order.end());
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t k = 0; k + 1 < order.size(); k += 2) {
    const auto& [t0, side0, i0] = order[k];
    const auto& [t1, side1, i1] = order[k + 1];
    if (side0 == side1) return {};  // two runs of one side next to each other: not interleaved
    out.emplace_back(side0 == 0 ? i0 : i1, side0 == 0 ? i1 : i0);
  }
  return out;
}

std::vector<RunPair> PairRuns(const std::vector<const v1::Job*>& side_a, const std::vector<const v1::Job*>& side_b,
                              bool compare_anyway, std::vector<std::string>* unpaired) {
  const Groups ga = GroupSide(side_a), gb = GroupSide(side_b);
  std::vector<RunPair> out;
  for (const std::string& key : ga.order) {
    const std::vector<const v1::Task*>& a = ga.runs.at(key);
    auto it = gb.runs.find(key);
    if (it == gb.runs.end()) {
      unpaired->push_back(absl::StrCat(a[0]->id(), " (", key, "): no such task in ", SideName(side_b)));
      continue;
    }
    RunPair p{a, it->second, key, ""};
    for (const std::vector<const v1::Task*>* side : {&p.a, &p.b}) {
      for (const v1::Task* t : *side) {
        if (!p.refused.empty() || compare_anyway || render::SameFingerprint(*a[0], *t)) continue;
        p.refused = absl::StrCat("model fingerprints differ (", a[0]->result().environment().model_fingerprint(),
                                 " vs ", t->result().environment().model_fingerprint(), " of ", t->id(),
                                 "): not the same model, weights or data; --compare-anyway compares them");
      }
    }
    out.push_back(std::move(p));
  }
  for (const std::string& key : gb.order) {
    if (ga.runs.count(key) == 0) {
      unpaired->push_back(absl::StrCat(gb.runs.at(key)[0]->id(), " (", key, "): no such task in ", SideName(side_a)));
    }
  }
  return out;
}

}  // namespace hetbench::report
