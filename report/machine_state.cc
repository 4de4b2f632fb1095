#include "report/machine_state.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace hetbench::report {

std::string MachineDiffered(const std::vector<const v1::Task*>& a, const std::vector<const v1::Task*>& b) {
  if (a.empty() || b.empty()) return "";
  const v1::Task& first = *a[0];
  const std::string& kernel = first.result().machine_probe().kernel();
  if (kernel.empty()) return "";
  // One side's probe: the geometric mean over its runs of each run's
  // before and after medians. Runs on another device or thread count, or
  // without a probe, make the probes incomparable: no judgement then.
  auto side_log = [&](const std::vector<const v1::Task*>& runs, double* out) {
    double sum = 0;
    for (const v1::Task* t : runs) {
      const v1::MachineProbe& p = t->result().machine_probe();
      if (p.kernel() != kernel || t->agent_id() != first.agent_id() || t->device_id() != first.device_id() ||
          p.before_ns() <= 0) {
        return false;
      }
      const double before = std::log(static_cast<double>(p.before_ns()));
      sum += p.after_ns() > 0 ? (before + std::log(static_cast<double>(p.after_ns()))) / 2 : before;
    }
    *out = sum / static_cast<double>(runs.size());
    return true;
  };
  double log_a = 0, log_b = 0;
  if (!side_log(a, &log_a) || !side_log(b, &log_b)) return "";
  if (std::abs(log_b - log_a) <= std::log1p(kProbeBeyond)) return "";
  return absl::StrFormat("%s: its probe took %.2fx as long around B's runs as around A's", kMachineDiffered,
                         std::exp(log_b - log_a));
}

}  // namespace hetbench::report
