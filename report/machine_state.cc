#include "report/machine_state.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace hetbench::report {
namespace {

double MedianOf(std::vector<double> v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 != 0) return upper;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

}  // namespace

bool MachineJudgement::Kept(bool side_b, size_t run) const {
  return std::none_of(left_out.begin(), left_out.end(),
                      [&](const LeftOut& l) { return l.side_b == side_b && l.run == run; });
}

MachineJudgement JudgeMachine(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b,
                              bool leave_out) {
  MachineJudgement out;
  if (a.empty() || b.empty()) return out;
  const v1::Task& first = *a[0];
  const std::string& kernel = first.result().machine_probe().kernel();
  if (kernel.empty()) return out;
  // Each run's readings (log ns a call): before, and after when it was taken.
  std::vector<std::vector<double>> readings[2];
  for (int side = 0; side < 2; ++side) {
    for (const v1::Task* t : side == 0 ? a : b) {
      const v1::MachineProbe& p = t->result().machine_probe();
      if (p.kernel() != kernel || t->agent_id() != first.agent_id() || t->device_id() != first.device_id() ||
          p.before_ns() <= 0) {
        return out;  // incomparable probes: no judgement
      }
      std::vector<double> r = {std::log(static_cast<double>(p.before_ns()))};
      if (p.after_ns() > 0) r.push_back(std::log(static_cast<double>(p.after_ns())));
      readings[side].push_back(std::move(r));
    }
  }
  const double beyond = std::log1p(kProbeBeyond);
  std::vector<bool> keep[2] = {std::vector<bool>(a.size(), true), std::vector<bool>(b.size(), true)};
  std::string too_few;  // leaving out would leave a side fewer than 2 runs
  if (leave_out) {
    std::vector<double> all;
    for (const auto& side : readings) {
      for (const auto& run : side) all.insert(all.end(), run.begin(), run.end());
    }
    const double median = MedianOf(all);
    std::vector<MachineJudgement::LeftOut> left;
    size_t kept[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      for (size_t i = 0; i < readings[side].size(); ++i) {
        double farthest = 0;
        for (double r : readings[side][i]) farthest = std::abs(r - median) > std::abs(farthest) ? r - median : farthest;
        if (std::abs(farthest) > beyond) {
          left.push_back({side == 1, i, std::exp(farthest)});
          keep[side][i] = false;
        } else {
          ++kept[side];
        }
      }
    }
    for (int side = 0; side < 2 && too_few.empty(); ++side) {
      if (kept[side] >= 2) continue;
      const size_t runs = readings[side].size();
      too_few = absl::StrFormat(
          "%s: %d of %s's %d runs were taken in another state (a probe reading beyond +/-%g%% of the comparison's "
          "median)",
          kMachineDiffered, static_cast<int>(runs - kept[side]), side == 0 ? "A" : "B", static_cast<int>(runs),
          kProbeBeyond * 100);
    }
    if (too_few.empty()) {
      out.left_out = std::move(left);
    } else {  // judged on all runs: withheld, by the sides' medians below when they differ, else by too_few
      keep[0].assign(a.size(), true);
      keep[1].assign(b.size(), true);
    }
  }
  double median[2];
  for (int side = 0; side < 2; ++side) {
    std::vector<double> v;
    for (size_t i = 0; i < readings[side].size(); ++i) {
      if (keep[side][i]) v.insert(v.end(), readings[side][i].begin(), readings[side][i].end());
    }
    median[side] = MedianOf(std::move(v));
  }
  out.probe_ratio = std::exp(median[1] - median[0]);
  if (std::abs(median[1] - median[0]) > beyond) {
    out.differed = absl::StrFormat("%s: its probe took %.2fx as long around B's runs as around A's", kMachineDiffered,
                                   out.probe_ratio);
  } else {
    out.differed = too_few;
  }
  return out;
}

}  // namespace hetbench::report
