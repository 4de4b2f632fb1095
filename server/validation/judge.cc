#include "server/validation/judge.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/stats.h"
#include "common/validate_spec.h"
#include "server/validation/pairs.h"

namespace hetbench::server {

namespace {

int Rank(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_FAIL:
      return 4;
    case v1::VERDICT_DEGRADED:
      return 3;
    case v1::VERDICT_PASS:
      return 2;
    case v1::VERDICT_SKIPPED:
      return 1;
    default:
      return 0;
  }
}

std::string G(double v) { return absl::StrFormat("%.4g", v); }

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// One device of the job, as its task ended.
struct Device {
  const v1::Task* task = nullptr;
  const v1::ValidationRun* run = nullptr;  // null: the task ended without a validation result
  v1::DeviceVerdict verdict;
};

// What the devices of one SKU measured for one test.
struct Learned {
  std::string unit;
  bool higher_is_better = true;
  std::vector<double> medians;
  std::vector<double> own_spreads;   // each device's robust spread of its median (see Learn)
  std::vector<double> own_relative;  // each device's repetitions' robust spread / their median
  double median = 0;
  double spread = 0;
  double typical_relative = 0;  // the median of own_relative: how much a device of the SKU wobbles
};

using LearnedBySku = std::map<std::string, std::map<std::string, Learned>>;

// A test is unstable when its repetitions' relative spread exceeds this many
// times its SKU's typical one, and this floor.
constexpr double kUnstableMultiple = 3;
constexpr double kUnstableFloor = 0.02;

// The test's figures when it measured some.
bool Measured(const v1::ValidationTest& t) { return t.outcome() == v1::TEST_OUTCOME_MEASURED && t.values_size() > 0; }

LearnedBySku Learn(const std::vector<Device>& devices, const v1::ValidateSpec& v) {
  LearnedBySku out;
  for (const Device& d : devices) {
    if (d.run == nullptr) continue;
    for (const v1::ValidationTest& t : d.run->tests()) {
      if (!Measured(t)) continue;
      Learned& l = out[d.run->sku()][t.name()];
      l.unit = t.unit();
      l.higher_is_better = t.higher_is_better();
      std::vector<double> values(t.values().begin(), t.values().end());
      const double m = Median(values);
      l.medians.push_back(m);
      // The spread of one device's median over its repetitions: the
      // repetitions' robust spread x 1.2533 / sqrt(n) (the median's
      // standard error for normal data).
      const double own = RobustSpread(values, m, 0);
      l.own_spreads.push_back(own * 1.2533 / std::sqrt(static_cast<double>(values.size())));
      l.own_relative.push_back(m != 0 ? own / std::fabs(m) : 0);
    }
  }
  for (auto& [sku, tests] : out) {
    for (auto& [name, l] : tests) {
      l.median = Median(l.medians);
      const double between = l.medians.size() >= 2 ? RobustSpread(l.medians, l.median, 0) : 0;
      l.spread = std::max({between, Median(l.own_spreads), v.spread_floor() * std::fabs(l.median)});
      l.typical_relative = Median(l.own_relative);
    }
  }
  return out;
}

// The baseline one metric is judged against.
struct Reference {
  double median = 0;
  double spread = 0;
  std::string source;
  double typical_relative = 0;  // fleet baselines: how much a device of the SKU wobbles; 0: not known
};

std::optional<Reference> ReferenceFor(const v1::ValidateSpec& v, const LearnedBySku& learned, const std::string& sku,
                                      const std::string& test, std::string* why_none) {
  const v1::Baseline& saved = v.baseline();
  for (const v1::SkuBaseline& s : saved.skus()) {
    if (s.sku() != sku) continue;
    for (const v1::MetricBaseline& m : s.metrics()) {
      if (m.test() != test) continue;
      Reference r;
      r.median = m.median();
      r.spread = std::max(m.spread(), v.spread_floor() * std::fabs(m.median()));
      r.source = absl::StrCat("baseline ", saved.name().empty() ? "from " + saved.source_job_id() : saved.name(),
                              saved.version() > 0 ? absl::StrCat(" v", saved.version()) : "", " (", m.devices(),
                              m.devices() == 1 ? " device)" : " devices)");
      return r;
    }
  }
  const auto sku_it = learned.find(sku);
  const int n = sku_it == learned.end() || sku_it->second.count(test) == 0
                    ? 0
                    : static_cast<int>(sku_it->second.at(test).medians.size());
  if (n < kMinFleetDevices) {
    *why_none = absl::StrCat("not compared: ", n, n == 1 ? " device" : " devices",
                             " of this SKU measured it (a fleet baseline needs ", kMinFleetDevices,
                             "); save one with `hetbench baseline save` and pass --baseline");
    return std::nullopt;
  }
  const Learned& l = sku_it->second.at(test);
  return Reference{l.median, l.spread, absl::StrCat("this job: ", n, " devices of the SKU"), l.typical_relative};
}

v1::TestVerdict JudgeMetric(const v1::ValidationTest& t, const std::optional<Reference>& ref,
                            const std::string& why_none, const v1::ValidateSpec& v) {
  v1::TestVerdict out;
  out.set_test(t.name());
  out.set_unit(t.unit());
  std::vector<double> sorted(t.values().begin(), t.values().end());
  std::sort(sorted.begin(), sorted.end());
  const double value = Median(sorted);
  out.set_value(value);
  if (!ref.has_value()) {
    out.set_verdict(v1::VERDICT_PASS);
    out.set_reason(why_none);
    return out;
  }
  const bool up = t.higher_is_better();
  const MedianInterval ci = MedianCi(sorted, v.confidence());
  auto ratio = [&](double x) { return up ? x / ref->median : (x > 0 ? ref->median / x : 0); };
  out.set_baseline_median(ref->median);
  out.set_baseline_spread(ref->spread);
  out.set_baseline_source(ref->source);
  out.set_ratio(ratio(value));
  out.set_ratio_low(up ? ratio(ci.low) : ratio(ci.high));
  out.set_ratio_high(up ? ratio(ci.high) : ratio(ci.low));
  const double margin = std::max(v.min_effect(), v.spread_multiple() * ref->spread / std::fabs(ref->median));
  out.set_threshold(1 - margin);
  const std::string interval =
      absl::StrFormat("%.3f-%.3f at %.1f%%", out.ratio_low(), out.ratio_high(), 100 * ci.coverage);
  // Unstable: its repetitions spread far more than its siblings' do (a
  // flaky device, a noisy neighbour), whatever its median.
  const double own = value != 0 ? RobustSpread(sorted, value, 0) / std::fabs(value) : 0;
  if (ref->typical_relative > 0 && own > std::max(kUnstableMultiple * ref->typical_relative, kUnstableFloor)) {
    out.set_verdict(v1::VERDICT_DEGRADED);
    out.set_reason(absl::StrFormat("unstable: its repetitions spread %.1f%% of their median, its SKU's devices "
                                   "%.1f%% (over %g x and %.0f%%); ratio %.3f (%s)",
                                   100 * own, 100 * ref->typical_relative, kUnstableMultiple, 100 * kUnstableFloor,
                                   out.ratio(), ref->source));
    return out;
  }
  if (out.ratio() < out.threshold() && out.ratio_high() < 1) {
    out.set_verdict(v1::VERDICT_DEGRADED);
    out.set_reason(absl::StrFormat("%s %s is %.3f of its baseline %s (%s; DEGRADED below %.3f; %s)", G(value), t.unit(),
                                   out.ratio(), G(ref->median), interval, out.threshold(), ref->source));
  } else {
    out.set_verdict(v1::VERDICT_PASS);
    out.set_reason(absl::StrFormat("%s %s is %.3f of its baseline %s (%s; DEGRADED below %.3f)", G(value), t.unit(),
                                   out.ratio(), G(ref->median), interval, out.threshold()));
  }
  return out;
}

v1::TestVerdict JudgeTest(const v1::ValidationTest& t, const v1::ValidateSpec& v, const LearnedBySku& learned,
                          const std::string& sku) {
  switch (t.outcome()) {
    case v1::TEST_OUTCOME_MEASURED:
      if (t.values_size() > 0) {
        std::string why_none;
        const std::optional<Reference> ref = ReferenceFor(v, learned, sku, t.name(), &why_none);
        v1::TestVerdict out = JudgeMetric(t, ref, why_none, v);
        if (t.name() == "power_sensor" && out.verdict() == v1::VERDICT_DEGRADED) {
          // The sampler sets the reading rate: a sensor is judged by its failed reads and by its counter
          // against its power (the agent FAILs those); its rate is reported.
          out.set_verdict(v1::VERDICT_PASS);
          out.set_reason(absl::StrCat("reported, not judged (the sampler sets the rate): ", out.reason()));
        }
        return out;
      }
      break;
    default:
      break;
  }
  v1::TestVerdict out;
  out.set_test(t.name());
  out.set_unit(t.unit());
  switch (t.outcome()) {
    case v1::TEST_OUTCOME_MEASURED:
      out.set_verdict(v1::VERDICT_PASS);
      out.set_reason(t.detail().empty() ? "ran" : t.detail());
      break;
    case v1::TEST_OUTCOME_SKIPPED:
      out.set_verdict(v1::VERDICT_SKIPPED);
      out.set_reason(t.reason());
      break;
    case v1::TEST_OUTCOME_TIMED_OUT:
      out.set_verdict(v1::VERDICT_FAIL);
      out.set_reason(absl::StrCat("still running at its time box (", G(t.time_box_seconds()), " s)",
                                  t.reason().empty() ? "" : ": ", t.reason()));
      break;
    default:
      out.set_verdict(v1::VERDICT_FAIL);
      out.set_reason(t.reason().empty() ? "failed" : t.reason());
      break;
  }
  return out;
}

v1::TestVerdict* VerdictOf(Device& d, const std::string& test) {
  for (v1::TestVerdict& t : *d.verdict.mutable_tests()) {
    if (t.test() == test) return &t;
  }
  return nullptr;
}

const v1::ValidationTest* TestOf(const Device& d, const std::string& test) {
  for (const v1::ValidationTest& t : d.run->tests()) {
    if (t.name() == test && t.loss_bits_size() > 0) return &t;
  }
  return nullptr;
}

// The first step where two fingerprints differ, and the largest relative difference.
struct Difference {
  int first_step = -1;
  double max_relative = 0;
};
Difference Compare(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  Difference d;
  if (a.size() != b.size()) {
    d.first_step = static_cast<int>(std::min(a.size(), b.size()));
    d.max_relative = INFINITY;
    return d;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (d.first_step < 0) d.first_step = static_cast<int>(i);
    const double x = FromBits(a[i]), y = FromBits(b[i]);
    const double rel = std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), 1e-30});
    d.max_relative = std::isfinite(rel) ? std::max(d.max_relative, rel) : INFINITY;
  }
  return d;
}

std::string Sku(const std::string& sku) { return QuotedInput(sku); }

// Silent data corruption: devices of one SKU must agree bit for bit on each
// fingerprinted test; the plurality wins, the others FAIL; a tie gives no
// verdict (a note says so). The SKUs' pluralities must agree within the
// cross-kind tolerance: with three SKUs or more, one that disagrees with
// every other while they agree among themselves FAILs; otherwise a note.
void JudgeFingerprints(std::vector<Device>& devices, const v1::ValidateSpec& v, v1::ValidationReport* report) {
  std::map<std::string, std::map<std::string, std::map<std::vector<uint32_t>, std::vector<size_t>>>> groups;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].run == nullptr) continue;
    for (const v1::ValidationTest& t : devices[i].run->tests()) {
      if (t.outcome() != v1::TEST_OUTCOME_MEASURED || t.loss_bits_size() == 0) continue;
      groups[t.name()][devices[i].run->sku()][{t.loss_bits().begin(), t.loss_bits().end()}].push_back(i);
    }
  }
  for (auto& [test, by_sku] : groups) {
    std::map<std::string, std::vector<uint32_t>> plurality;  // per SKU, when it has one
    std::map<std::string, size_t> plurality_size;
    for (auto& [sku, by_print] : by_sku) {
      size_t best = 0, second = 0, total = 0;
      const std::vector<uint32_t>* winner = nullptr;
      for (const auto& [print, members] : by_print) {
        total += members.size();
        if (members.size() > best) {
          second = best;
          best = members.size();
          winner = &print;
        } else if (members.size() > second) {
          second = members.size();
        }
      }
      if (by_print.size() > 1 && best == second) {
        report->add_notes(absl::StrCat(test, ": the ", total, " devices of SKU ", Sku(sku),
                                       " disagree with no plurality (", best, " vs ", second,
                                       "): no verdict on silent data corruption"));
        continue;
      }
      // A saved baseline's fingerprint (train_mlp) decides for an SKU the job saw once.
      if (by_print.size() == 1 && best == 1 && test == "train_mlp") {
        for (const v1::SkuBaseline& s : v.baseline().skus()) {
          if (s.sku() != sku || s.loss_bits_size() == 0) continue;
          const std::vector<uint32_t> saved(s.loss_bits().begin(), s.loss_bits().end());
          const Difference diff = Compare(*winner, saved);
          if (diff.first_step >= 0) {
            Device& d = devices[by_print.begin()->second.front()];
            if (v1::TestVerdict* tv = VerdictOf(d, test)) {
              tv->set_verdict(v1::VERDICT_FAIL);
              tv->set_reason(absl::StrFormat(
                  "wrong result: its loss differs from the saved baseline's from step %d (up to %.3g relative); "
                  "the same seed on the same SKU gave other numbers",
                  diff.first_step, diff.max_relative));
            }
          }
        }
      }
      // A TPU's fingerprint comes from the Python runner's data generator, not LibTorch's: compared
      // within its SKU only, never across SKUs.
      if (!absl::StartsWith(sku, "tpu|")) {
        plurality[sku] = *winner;
        plurality_size[sku] = best;
      }
      for (const auto& [print, members] : by_print) {
        if (&print == winner) continue;
        const Difference diff = Compare(print, *winner);
        for (size_t i : members) {
          v1::TestVerdict* tv = VerdictOf(devices[i], test);
          if (tv == nullptr) continue;
          tv->set_verdict(v1::VERDICT_FAIL);
          tv->set_reason(absl::StrFormat(
              "wrong result: its fingerprint differs from the plurality of its SKU (%d of %d devices) from step %d "
              "(up to %.3g relative); devices of one SKU agree bit for bit",
              static_cast<int>(best), static_cast<int>(total), diff.first_step, diff.max_relative));
        }
      }
    }
    if (plurality.size() < 2) continue;
    // Across SKUs: within the tolerance.
    std::vector<std::string> skus;
    for (const auto& [sku, print] : plurality) skus.push_back(sku);
    std::map<std::string, int> agrees;
    std::map<std::pair<std::string, std::string>, Difference> diffs;
    for (size_t a = 0; a < skus.size(); ++a) {
      for (size_t b = a + 1; b < skus.size(); ++b) {
        const Difference d = Compare(plurality[skus[a]], plurality[skus[b]]);
        diffs[{skus[a], skus[b]}] = d;
        if (d.max_relative <= v.cross_kind_tolerance()) {
          ++agrees[skus[a]];
          ++agrees[skus[b]];
        }
      }
    }
    for (const std::string& sku : skus) {
      if (agrees[sku] > 0) continue;
      // It agrees with no other SKU. The others must agree among themselves for it to be the wrong one.
      const bool others_agree = skus.size() >= 3 && std::all_of(skus.begin(), skus.end(), [&](const std::string& o) {
                                  return o == sku || agrees[o] >= static_cast<int>(skus.size()) - 2;
                                });
      double worst = 0;
      for (const auto& [pair, d] : diffs) {
        if (pair.first == sku || pair.second == sku) worst = std::max(worst, d.max_relative);
      }
      if (!others_agree) {
        report->add_notes(absl::StrFormat(
            "%s: SKU %s's loss differs from the other SKUs' by up to %.3g relative (cross_kind_tolerance %.3g); "
            "with %d SKUs that do not all agree otherwise, no verdict on which is wrong",
            test, Sku(sku), worst, v.cross_kind_tolerance(), static_cast<int>(skus.size())));
        continue;
      }
      for (Device& d : devices) {
        if (d.run == nullptr || d.run->sku() != sku) continue;
        if (v1::TestVerdict* tv = VerdictOf(d, test); tv != nullptr && tv->verdict() != v1::VERDICT_FAIL) {
          tv->set_verdict(v1::VERDICT_FAIL);
          tv->set_reason(absl::StrFormat(
              "wrong result: its SKU's loss differs from every other SKU's by more than cross_kind_tolerance %.3g "
              "(up to %.3g relative), while the other %d agree",
              v.cross_kind_tolerance(), worst, static_cast<int>(skus.size()) - 1));
        }
      }
    }
  }
}

// The device's verdict: its worst test's, except that DEGRADED needs
// min_degraded_tests of its performance tests below their thresholds (a
// device with fewer compared ones needs them all; fewer: PASS, said so).
// The power sensor's reading rate is not a performance figure (JudgeTest
// reports it without judging it). The all-reduce DEGRADED alone makes the
// device DEGRADED: it is the one test of the node's link.
void Summarize(v1::DeviceVerdict* d, int min_degraded_tests) {
  v1::Verdict worst = v1::VERDICT_UNSPECIFIED;
  std::string reason;
  std::vector<std::string> below;
  int compared = 0, passed = 0;
  bool link_below = false;  // the all-reduce measures the node's link, not its device: alone it is enough
  for (const v1::TestVerdict& t : d->tests()) {
    const bool sensor = t.test() == "power_sensor";
    if (t.verdict() == v1::VERDICT_DEGRADED) {
      below.push_back(absl::StartsWith(t.reason(), "unstable")
                          ? absl::StrCat(t.test(), " unstable")
                          : absl::StrFormat("%s %.3f", t.test(), t.ratio()));
      link_below = link_below || t.test() == kAllReduceTest;
    }
    if (!sensor && t.baseline_median() > 0) ++compared;
    if (t.verdict() == v1::VERDICT_PASS) ++passed;
    if (Rank(t.verdict()) > Rank(worst)) {
      worst = t.verdict();
      reason = absl::StrCat(t.test(), ": ", t.reason());
    }
  }
  const int need = std::max(1, std::min(min_degraded_tests, compared));
  if (worst == v1::VERDICT_DEGRADED && static_cast<int>(below.size()) < need && !link_below) {
    worst = v1::VERDICT_PASS;
    reason = absl::StrCat(passed, " tests passed; ", below.size(), below.size() == 1 ? " test" : " tests",
                          " DEGRADED (", absl::StrJoin(below, ", "), "): a device needs ", need,
                          " (validate.min_degraded_tests)");
  } else if (worst == v1::VERDICT_DEGRADED) {
    reason = absl::StrCat(below.size(), below.size() == 1 ? " test" : " tests", " DEGRADED (",
                          absl::StrJoin(below, ", "), "); ", reason);
  }
  if (worst == v1::VERDICT_UNSPECIFIED) {
    worst = v1::VERDICT_SKIPPED;
    reason = "no test ran";
  } else if (worst == v1::VERDICT_PASS && below.empty()) {
    reason = absl::StrCat(passed, passed == 1 ? " test passed" : " tests passed");
  }
  d->set_verdict(worst);
  if (d->reason().empty()) d->set_reason(reason);
}

}  // namespace

std::string CheckValidationRun(const v1::ValidationRun& run) {
  if (run.tests_size() > 64) return absl::StrCat("validation.tests: ", run.tests_size(), " tests: at most 64");
  if (run.sku().size() > 1024 || run.level().size() > 64) return "validation.sku: at most 1024 bytes";
  for (int i = 0; i < run.tests_size(); ++i) {
    const v1::ValidationTest& t = run.tests(i);
    if (t.values_size() > 10000) return absl::StrCat("validation.tests[", i, "].values: at most 10000");
    if (t.loss_bits_size() > 4096) return absl::StrCat("validation.tests[", i, "].loss_bits: at most 4096 steps");
    if (t.name().size() > 64 || t.unit().size() > 64 || t.reason().size() > 1024 || t.detail().size() > 1024) {
      return absl::StrCat("validation.tests[", i, "]: name and unit at most 64 bytes, reason and detail 1024");
    }
    for (double x : t.values()) {
      if (!std::isfinite(x) || x < 0) return absl::StrCat("validation.tests[", i, "].values: finite and >= 0 only");
    }
  }
  return "";
}

v1::ValidationReport JudgeValidation(const v1::Job& job) {
  const v1::ValidateSpec& v = job.spec().validate();
  v1::ValidationReport report;
  for (const v1::DeviceVerdict& d : job.validation().devices()) {
    if (d.task_id().empty()) *report.add_devices() = d;  // found absent at submit
  }
  std::vector<Device> devices;
  // A device's all-reduce figure is its best pair's (pairs.h): added to a copy of its suite's run.
  const auto pair_tests = BestPairTests(job);
  std::deque<v1::ValidationRun> merged;
  for (const v1::Task& t : job.tasks()) {
    if (t.gang().world_size() > 1) continue;  // an all-reduce pair's rank: in pair_tests
    Device d;
    d.task = &t;
    if (t.result().has_validation()) d.run = &t.result().validation();
    v1::DeviceVerdict& out = d.verdict;
    out.set_agent_id(t.agent_id().empty() ? t.target().agent_id() : t.agent_id());
    out.set_device_id(t.device_id().empty() ? t.target().device_id() : t.device_id());
    out.set_kind(t.device_kind() != v1::DEVICE_KIND_UNSPECIFIED ? t.device_kind() : t.target().device_kind());
    out.set_task_id(t.id());
    if (d.run != nullptr) {
      out.set_sku(d.run->sku());
      out.set_simulated(d.run->simulated());
      if (auto it = pair_tests.find({out.agent_id(), out.device_id()}); it != pair_tests.end()) {
        merged.push_back(*d.run);
        *merged.back().add_tests() = it->second.test;
        d.run = &merged.back();
      }
    }
    devices.push_back(std::move(d));
  }
  std::sort(devices.begin(), devices.end(), [](const Device& a, const Device& b) {
    return std::tie(a.verdict.agent_id(), a.verdict.device_id(), a.verdict.task_id()) <
           std::tie(b.verdict.agent_id(), b.verdict.device_id(), b.verdict.task_id());
  });
  const LearnedBySku learned = Learn(devices, v);
  for (Device& d : devices) {
    if (d.run == nullptr) {
      const bool failed = d.task->state() == v1::TASK_STATE_FAILED;
      d.verdict.set_verdict(failed ? v1::VERDICT_FAIL : v1::VERDICT_SKIPPED);
      d.verdict.set_reason(
          failed ? absl::StrCat("the task failed: ", d.task->error())
                 : absl::StrCat("the task ended ", TaskStateName(d.task->state()), " before the suite ran"));
      continue;
    }
    for (const v1::ValidationTest& t : d.run->tests()) {
      v1::TestVerdict* verdict = d.verdict.add_tests();
      *verdict = JudgeTest(t, v, learned, d.run->sku());
      if (t.name() != kAllReduceTest || t.outcome() != v1::TEST_OUTCOME_MEASURED) continue;
      auto it = pair_tests.find({d.verdict.agent_id(), d.verdict.device_id()});  // which pair the figure is
      if (it != pair_tests.end()) verdict->set_reason(absl::StrCat(verdict->reason(), "; ", it->second.pairs));
    }
  }
  std::vector<v1::DeviceVerdict*> judged;
  for (Device& d : devices) {
    if (d.run != nullptr) judged.push_back(&d.verdict);
  }
  ExplainAwayPairs(pair_tests, judged);
  JudgeFingerprints(devices, v, &report);
  std::map<std::string, v1::NodeVerdict> nodes;
  for (Device& d : devices) {
    if (d.run != nullptr) Summarize(&d.verdict, std::max(1, v.min_degraded_tests()));
    report.set_simulated(report.simulated() || d.verdict.simulated());
    *report.add_devices() = d.verdict;
  }
  for (const v1::DeviceVerdict& d : report.devices()) {
    if (d.agent_id().empty()) continue;
    v1::NodeVerdict& n = nodes[d.agent_id()];
    n.set_agent_id(d.agent_id());
    n.set_devices(n.devices() + 1);
    if (Rank(d.verdict()) > Rank(n.verdict())) {
      n.set_verdict(d.verdict());
      n.set_reason(absl::StrCat(d.device_id().empty() ? DeviceKindName(d.kind()) : d.device_id(), " ",
                                VerdictName(d.verdict()), ": ", d.reason()));
    }
  }
  for (auto& [id, n] : nodes) *report.add_nodes() = std::move(n);
  for (const auto& [sku, tests] : learned) {
    v1::SkuBaseline* b = report.add_baselines();
    b->set_sku(sku);
    int devices_of_sku = 0;
    for (const auto& [name, l] : tests) {
      v1::MetricBaseline* m = b->add_metrics();
      m->set_test(name);
      m->set_unit(l.unit);
      m->set_median(l.median);
      m->set_spread(l.spread);
      m->set_devices(static_cast<int>(l.medians.size()));
      m->set_higher_is_better(l.higher_is_better);
      m->set_runs(1);
      devices_of_sku = std::max(devices_of_sku, m->devices());
    }
    b->set_devices(devices_of_sku);
    for (const Device& d : devices) {  // the plurality's train_mlp fingerprint: the first device that passed it
      if (d.run == nullptr || d.run->sku() != sku) continue;
      b->set_simulated(d.run->simulated());
      const v1::ValidationTest* t = TestOf(d, "train_mlp");
      const v1::TestVerdict* tv = nullptr;
      for (const v1::TestVerdict& x : d.verdict.tests()) {
        if (x.test() == "train_mlp") tv = &x;
      }
      if (t != nullptr && tv != nullptr && tv->verdict() != v1::VERDICT_FAIL) {
        *b->mutable_loss_bits() = t->loss_bits();
        break;
      }
    }
  }
  return report;
}

}  // namespace hetbench::server
