#include "common/step_modes.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/stats.h"

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

namespace {

constexpr int64_t kMinWindow = 10;
constexpr int64_t kWindowsWanted = 25;
constexpr size_t kMaxSegments = 4;
constexpr double kMinStandardErrors = 4.0;

// The median of a copy (common/stats' MedianInPlace reorders its input).
double MedianOf(std::vector<double> v) { return MedianInPlace(v); }

// The level of windows [begin, end): the mean of their medians (each window's
// median already sets its spikes aside; a mean, unlike a median, moves with
// every window, so a cut lands where the level changes).
double Level(const std::vector<double>& window_medians, size_t begin, size_t end) {
  double sum = 0;
  for (size_t j = begin; j < end; ++j) sum += window_medians[j];
  return sum / static_cast<double>(end - begin);
}

}  // namespace

StepLevels FindStepLevels(const std::vector<int64_t>& in_order) {
  StepLevels out;
  const auto n = static_cast<int64_t>(in_order.size());
  const int64_t w = std::max(kMinWindow, n / kWindowsWanted);
  const int64_t windows = n / w;
  if (windows < 4) return out;
  std::vector<double> logs;
  logs.reserve(in_order.size());
  for (int64_t d : in_order) logs.push_back(std::log(static_cast<double>(std::max<int64_t>(d, 1))));
  std::vector<double> medians;
  for (int64_t j = 0; j < windows; ++j) {
    medians.push_back(MedianOf(std::vector<double>(logs.begin() + j * w, logs.begin() + (j + 1) * w)));
  }
  // A step's spread from consecutive differences (robust: 1.4826 x MAD / sqrt(2)),
  // a window median's error from it (the median of w draws: 1.2533 sigma / sqrt(w)).
  std::vector<double> diffs;
  for (size_t i = 1; i < logs.size(); ++i) diffs.push_back(logs[i] - logs[i - 1]);
  const double mid = MedianOf(diffs);
  for (double& d : diffs) d = std::abs(d - mid);
  const double step_sd = 1.4826 * MedianOf(diffs) / std::sqrt(2.0);
  const double window_se = std::max(1.2533 * step_sd / std::sqrt(static_cast<double>(w)), 1e-6);
  // Binary segmentation: cut the segment whose best cut is strongest, while cuts pass.
  std::vector<size_t> cuts = {0, static_cast<size_t>(windows)};
  while (cuts.size() - 1 < kMaxSegments) {
    double best_z = 0;
    size_t best_at = 0;
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      for (size_t at = cuts[s] + 2; at + 2 <= cuts[s + 1]; ++at) {
        const double gap = std::abs(Level(medians, cuts[s], at) - Level(medians, at, cuts[s + 1]));
        const double se = window_se * std::sqrt(1.0 / static_cast<double>(at - cuts[s]) +
                                                1.0 / static_cast<double>(cuts[s + 1] - at));
        const double z = gap / se;
        if (gap >= std::log(kMinRatio) && z >= kMinStandardErrors && z > best_z) {
          best_z = z;
          best_at = at;
        }
      }
    }
    if (best_at == 0) break;
    cuts.insert(std::upper_bound(cuts.begin(), cuts.end(), best_at), best_at);
  }
  // A cut made inside a larger segment can leave neighbours less than 15% apart
  // (a wide slow state cut where its tail met the fast steps): merge them.
  const auto merge_close = [&] {
    for (bool merged = true; merged && cuts.size() > 2;) {
      merged = false;
      for (size_t s = 1; s + 1 < cuts.size(); ++s) {
        if (std::abs(Level(medians, cuts[s - 1], cuts[s]) - Level(medians, cuts[s], cuts[s + 1])) <
            std::log(kMinRatio)) {
          cuts.erase(cuts.begin() + static_cast<std::ptrdiff_t>(s));
          merged = true;
          break;
        }
      }
    }
  };
  merge_close();
  if (cuts.size() < 3) return out;
  // Each cut moved to where it best parts its two neighbours, as they stand now.
  for (size_t s = 1; s + 1 < cuts.size(); ++s) {
    double best_z = -1;
    for (size_t at = cuts[s - 1] + 2; at + 2 <= cuts[s + 1]; ++at) {
      const double z =
          std::abs(Level(medians, cuts[s - 1], at) - Level(medians, at, cuts[s + 1])) /
          std::sqrt(1.0 / static_cast<double>(at - cuts[s - 1]) + 1.0 / static_cast<double>(cuts[s + 1] - at));
      if (z > best_z) {
        best_z = z;
        cuts[s] = at;
      }
    }
  }
  merge_close();  // a moved cut may have brought two neighbours closer
  if (cuts.size() < 3) return out;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    const bool last = s + 2 == cuts.size();  // the last segment keeps the steps after the last whole window
    const int64_t first = static_cast<int64_t>(cuts[s]) * w;
    const int64_t end = last ? n : static_cast<int64_t>(cuts[s + 1]) * w;
    out.segments.push_back(
        {first, end - 1, std::exp(MedianOf(std::vector<double>(logs.begin() + first, logs.begin() + end)))});
  }
  return out;
}

std::string DescribeStepLevels(const StepLevels& l, int64_t steps, double window_seconds) {
  if (l.segments.size() < 2) return "";
  double fastest = l.segments[0].median_ns;
  for (const StepLevels::Segment& s : l.segments) fastest = std::min(fastest, s.median_ns);
  const double per_step = steps > 0 ? window_seconds / static_cast<double>(steps) : 0;
  std::vector<std::string> parts;
  for (const StepLevels::Segment& s : l.segments) {
    std::string part =
        absl::StrFormat("%.2f ms (%.1f-%.1f s", s.median_ns * 1e-6, static_cast<double>(s.first) * per_step,
                        static_cast<double>(s.last + 1) * per_step);
    if (s.median_ns > fastest * 1.005) absl::StrAppendFormat(&part, ", %.2fx the fastest", s.median_ns / fastest);
    parts.push_back(part + ")");
  }
  return absl::StrCat("step times shifted during the run: ", absl::StrJoin(parts, ", "),
                      " into the phase: the machine's speed changed during the run; run it again to see whether the "
                      "slow level persists");
}

}  // namespace hetbench
