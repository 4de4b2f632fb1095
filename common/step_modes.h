#pragma once
/// Why a phase is noisy, when the reason is a machine that switches speed:
/// this VM (and others) flips small-GEMM models between a fast state and one
/// ~1.6x slower for tens of seconds, in any program. A phase's step times
/// then have two modes, and the slow steps come in stretches of the run.
/// FindStepModes finds them from the step times in the order they ran; the
/// coordinator adds what it found to a "too noisy" reason.
///
/// The test is deliberately strict, so an ordinary long tail is not called
/// two modes: the best split of the log step times (Otsu's) must leave two
/// groups whose separation (Ashman's D) is at least 4 (a single normal split
/// at its mean gives 2.65), whose medians differ by at least 15%, and each
/// holding at least 5% of the steps.

#include <cstdint>
#include <string>
#include <vector>

namespace hetbench {

struct StepModes {
  bool two_modes = false;
  double fast_ns = 0, slow_ns = 0;  // each mode's median step time
  double slow_share = 0;            // of the steps
  double separation = 0;            // Ashman's D of the log step times
  /// Runs of slow steps (step indexes in run order, inclusive), each at
  /// least max(5, 2% of the steps) long, isolated fast steps inside ignored.
  struct Stretch {
    int64_t first = 0, last = 0;
  };
  std::vector<Stretch> stretches;
  int64_t slow_in_stretches = 0;  // slow steps inside the stretches
};

/// The modes of `in_order` (step durations in the order the steps ran);
/// fewer than 40 steps are never called two modes.
StepModes FindStepModes(const std::vector<int64_t>& in_order);

/// "step times have two modes: 12.10 ms (62% of steps) and 19.36 ms (38%,
/// 1.60x), the slow ones in 2 stretches (1.2-5.0 s, 9.0-12.4 s into the
/// phase): ...": the stretches placed in time by their share of the phase's
/// `steps` over its `window_seconds` (or "scattered" when most slow steps
/// are in none); "" without two modes.
std::string DescribeStepModes(const StepModes& m, int64_t steps, double window_seconds);

/// A phase whose steps moved between levels in run order without two clean
/// modes (the slow state itself wide, or more than two speeds): the run's
/// windows of w = max(10, steps / 25) consecutive steps, each window's median
/// log step time, cut by binary segmentation into at most 4 segments of 2
/// windows or more. A cut is kept when the two sides' levels (the mean of
/// their windows' medians) differ by at least 15% and by at least 4 standard
/// errors, a window median's error taken from the spread of consecutive
/// steps' differences (so the shifts themselves do not widen it); neighbours
/// left less than 15% apart by later cuts are merged, and each cut then moved
/// to where it best parts its neighbours. A segment's figure is the median of
/// its steps. Fewer than 4 windows (40 steps) are never cut.
struct StepLevels {
  struct Segment {
    int64_t first = 0, last = 0;  // step indexes in run order, inclusive
    double median_ns = 0;
  };
  std::vector<Segment> segments;  // 2 or more when the steps shifted, else empty
};
StepLevels FindStepLevels(const std::vector<int64_t>& in_order);

/// "step times shifted during the run: 4.51 ms (0.0-0.8 s), 6.40 ms (0.8-2.6 s,
/// 1.42x the fastest), 4.95 ms (2.6-2.7 s into the phase): the machine's speed
/// changed during the run; run it again to see whether the slow level
/// persists"; "" without shifts.
std::string DescribeStepLevels(const StepLevels& l, int64_t steps, double window_seconds);

}  // namespace hetbench
