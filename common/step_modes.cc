#include "common/step_modes.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hetbench {

namespace {

constexpr int64_t kMinSteps = 40;
constexpr double kMinSeparation = 4.0;
constexpr double kMinRatio = 1.15;
constexpr double kMinShare = 0.05;

struct Moments {
  double mean = 0, var = 0;
};

Moments Of(const std::vector<double>& v, size_t begin, size_t end) {
  Moments m;
  const double n = static_cast<double>(end - begin);
  for (size_t i = begin; i < end; ++i) m.mean += v[i];
  m.mean /= n;
  for (size_t i = begin; i < end; ++i) m.var += (v[i] - m.mean) * (v[i] - m.mean);
  m.var /= n;
  return m;
}

double Median(const std::vector<double>& sorted, size_t begin, size_t end) {
  const size_t n = end - begin, mid = begin + n / 2;
  return n % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

}  // namespace

StepModes FindStepModes(const std::vector<int64_t>& in_order) {
  StepModes m;
  const auto n = static_cast<int64_t>(in_order.size());
  if (n < kMinSteps) return m;
  std::vector<double> logs;
  logs.reserve(in_order.size());
  for (int64_t d : in_order) logs.push_back(std::log(static_cast<double>(std::max<int64_t>(d, 1))));
  std::vector<double> sorted = logs;
  std::sort(sorted.begin(), sorted.end());
  // Otsu: the split of the sorted logs with the largest between-group variance.
  std::vector<double> prefix(sorted.size() + 1, 0);
  for (size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
  const auto lo = static_cast<size_t>(std::ceil(kMinShare * static_cast<double>(n)));
  size_t best = 0;
  double best_between = -1;
  for (size_t k = std::max<size_t>(lo, 1); k + lo <= sorted.size(); ++k) {
    const double w0 = static_cast<double>(k), w1 = static_cast<double>(sorted.size() - k);
    const double mu0 = prefix[k] / w0, mu1 = (prefix.back() - prefix[k]) / w1;
    const double between = w0 * w1 * (mu0 - mu1) * (mu0 - mu1);
    if (between > best_between) {
      best_between = between;
      best = k;
    }
  }
  if (best == 0) return m;
  const Moments fast = Of(sorted, 0, best), slow = Of(sorted, best, sorted.size());
  const double spread = std::sqrt(fast.var + slow.var);
  m.separation = spread > 0 ? std::sqrt(2.0) * (slow.mean - fast.mean) / spread : 0;
  m.fast_ns = std::exp(Median(sorted, 0, best));
  m.slow_ns = std::exp(Median(sorted, best, sorted.size()));
  m.slow_share = static_cast<double>(sorted.size() - best) / static_cast<double>(n);
  m.two_modes = m.separation >= kMinSeparation && m.slow_ns >= kMinRatio * m.fast_ns;
  if (!m.two_modes) return m;
  // The slow steps in run order: stretches of them, bridging up to 2 fast steps.
  const double threshold = (sorted[best - 1] + sorted[best]) / 2;
  const int64_t min_length = std::max<int64_t>(5, n / 50);
  int64_t first = -1, last = -1, gap = 0;
  auto close = [&] {
    if (first >= 0 && last - first + 1 >= min_length) {
      m.stretches.push_back({first, last});
      for (int64_t i = first; i <= last; ++i) m.slow_in_stretches += logs[static_cast<size_t>(i)] >= threshold ? 1 : 0;
    }
    first = last = -1;
    gap = 0;
  };
  for (int64_t i = 0; i < n; ++i) {
    if (logs[static_cast<size_t>(i)] >= threshold) {
      if (first < 0) first = i;
      last = i;
      gap = 0;
    } else if (first >= 0 && ++gap > 2) {
      close();
    }
  }
  close();
  return m;
}

std::string DescribeStepModes(const StepModes& m, int64_t steps, double window_seconds) {
  if (!m.two_modes) return "";
  std::string out = absl::StrFormat("step times have two modes: %.2f ms (%.0f%% of steps) and %.2f ms (%.0f%%, %.2fx)",
                                    m.fast_ns * 1e-6, 100 * (1 - m.slow_share), m.slow_ns * 1e-6,
                                    100 * m.slow_share, m.slow_ns / m.fast_ns);
  const int64_t slow = static_cast<int64_t>(std::llround(m.slow_share * static_cast<double>(steps)));
  if (m.stretches.empty() || m.slow_in_stretches * 2 < slow) {
    absl::StrAppend(&out, ", the slow steps scattered through the run, not in stretches");
    return out;
  }
  std::vector<std::string> when;
  const double per_step = steps > 0 ? window_seconds / static_cast<double>(steps) : 0;
  for (size_t i = 0; i < m.stretches.size() && i < 3; ++i) {
    const StepModes::Stretch& s = m.stretches[i];
    when.push_back(absl::StrFormat("%.1f-%.1f s", static_cast<double>(s.first) * per_step,
                                   static_cast<double>(s.last + 1) * per_step));
  }
  if (m.stretches.size() > 3) when.push_back(absl::StrCat(m.stretches.size() - 3, " more"));
  absl::StrAppend(&out, ", the slow ones in ", m.stretches.size(), m.stretches.size() == 1 ? " stretch (" : " stretches (",
                  absl::StrJoin(when, ", "),
                  " into the phase): the machine switched between two speeds during the run; run it again to see "
                  "whether the slow state persists");
  return out;
}

}  // namespace hetbench
