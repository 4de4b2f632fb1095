#include "bench/fleet/faults.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/job_spec.h"
#include "common/names.h"
#include "common/validate_spec.h"
#include "server/validation/judge.h"

namespace hetbench::fleet {

namespace {

// A uniform number in [0, 1) from a string.
double Unit(const std::string& key) { return static_cast<double>(Fnv1a(key) >> 11) * (1.0 / 9007199254740992.0); }

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// A normal draw that depends on `key` only (the device's persistent offset).
double NormalOf(const std::string& key) {
  std::mt19937_64 rng(Fnv1a(key));
  return std::normal_distribution<double>(0, 1)(rng);
}

// The nominal figure of a test on a kind's profile (a round scale per test; simulated).
double Nominal(const std::string& test, const Profile& p) {
  if (test == "matmul") return p.samples_per_second / 400;                   // "GFLOP/s"
  if (test == "memory_bandwidth") return 20 + p.samples_per_second / 20000;  // "GB/s"
  if (test == "gate_bandwidth") return 8 + p.samples_per_second / 1000;
  if (test == "power_sensor") return 10;  // readings/s at the sampler's 10 Hz
  if (test == "train_cnn" || test == "infer_cnn") return p.samples_per_second / 8 * (test == "infer_cnn" ? 3 : 1);
  return p.samples_per_second * (test == "infer_mlp" ? 3 : 1);
}

// The factor a fault puts on a test's figure.
double FaultFactor(Fault f, const std::string& test) {
  if (test == "power_sensor") return 1;
  if (test == kAllReduceTest || f == Fault::kSlowLink) return test == kAllReduceTest && f == Fault::kSlowLink ? 0.8 : 1;
  switch (f) {
    case Fault::kSlow5:
      return 0.95;
    case Fault::kSlow10:
      return 0.90;
    case Fault::kSlow30:
      return 0.70;
    case Fault::kPowerCap:  // compute-bound tests only; memory streams at full speed
      return test == "memory_bandwidth" || test == "gate_bandwidth" ? 1.0 : 0.85;
    default:
      return 1;
  }
}

// The task's validate section with its defaults.
v1::ValidateSpec EffectiveValidate(const v1::Assign& assign) {
  v1::JobSpec spec = assign.spec();
  FillValidateDefaults(&spec);
  return spec.validate();
}

v1::ValidationRun SimulatedRun(const v1::ValidateSpec& v, const std::string& sku) {
  v1::ValidationRun run;
  run.set_sku(sku);
  run.set_level(v.level());
  run.set_simulated(true);
  return run;
}

}  // namespace

const std::vector<Fault>& AllFaults() {
  static const std::vector<Fault> all = {Fault::kNone,     Fault::kSlow5, Fault::kSlow10, Fault::kSlow30,
                                         Fault::kPowerCap, Fault::kNoisy, Fault::kWrong,  Fault::kHang,
                                         Fault::kSlowLink};
  return all;
}

std::string FaultName(Fault f) {
  switch (f) {
    case Fault::kSlow5:
      return "slow5";
    case Fault::kSlow10:
      return "slow10";
    case Fault::kSlow30:
      return "slow30";
    case Fault::kPowerCap:
      return "powercap";
    case Fault::kNoisy:
      return "noisy";
    case Fault::kWrong:
      return "wrong";
    case Fault::kHang:
      return "hang";
    case Fault::kSlowLink:
      return "slowlink";
    default:
      return "none";
  }
}

absl::StatusOr<Degrade> ParseDegrade(const std::string& text) {
  Degrade d;
  double total = 0;
  if (text.empty()) return d;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::vector<std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    Fault fault = Fault::kNone;
    for (Fault f : AllFaults()) {
      if (f != Fault::kNone && kv[0] == FaultName(f)) fault = f;
    }
    double share = 0;
    if (fault == Fault::kNone || kv.size() != 2 || !absl::SimpleAtod(kv[1], &share) || !(share > 0 && share <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--degrade ", QuotedInput(std::string(entry)),
                       ": give FAULT=SHARE with FAULT one of slow5, slow10, slow30, powercap, noisy, wrong, hang, slowlink "
                       "and SHARE in (0, 1]"));
    }
    total += share;
    d.shares.emplace_back(fault, share);
  }
  if (total > 1 + 1e-9)
    return absl::InvalidArgumentError(absl::StrCat("--degrade: the shares add up to ", total, " > 1"));
  return d;
}

Fault FaultOf(const Degrade& d, const std::string& agent_id, const std::string& device_id) {
  const double u = Unit(absl::StrCat("fault|", agent_id, "|", device_id));
  double acc = 0;
  for (const auto& [fault, share] : d.shares) {
    acc += share;
    if (u < acc) return fault;
  }
  return Fault::kNone;
}

v1::ValidationRun SimulatedValidation(const v1::Assign& assign, v1::DeviceKind kind, const Profile& profile,
                                      const std::string& agent_id, const std::string& sku, Fault fault,
                                      uint64_t rng_seed) {
  const v1::ValidateSpec v = EffectiveValidate(assign);
  v1::ValidationRun run = SimulatedRun(v, sku);
  std::mt19937_64 rng(rng_seed);
  const double rep_sd = profile.jitter / 3 * (fault == Fault::kNoisy ? 4 : 1);
  std::normal_distribution<double> noise(0, rep_sd);
  bool hung = false;
  for (const std::string& name : SuiteFor(kind, v.level())) {
    if (v.tests_size() > 0 && std::find(v.tests().begin(), v.tests().end(), name) == v.tests().end()) continue;
    v1::ValidationTest* t = run.add_tests();
    t->set_name(name);
    t->set_higher_is_better(true);
    t->set_time_box_seconds(v.time_box_seconds());
    t->set_unit(name == "matmul"                                         ? "GFLOP/s"
                : name == "memory_bandwidth" || name == "gate_bandwidth" ? "GB/s"
                : name == "power_sensor"                                 ? "readings/s"
                : name == "statevector_check"                            ? ""
                                                                         : "samples/s");
    if (fault == Fault::kHang && !hung) {  // the first test hangs; the box ends it, the others run
      hung = true;
      t->set_outcome(v1::TEST_OUTCOME_TIMED_OUT);
      t->set_reason("simulated hang: did not return before its time box");
      t->set_seconds(v.time_box_seconds() + 1);
      continue;
    }
    t->set_outcome(v1::TEST_OUTCOME_MEASURED);
    t->set_seconds(0.5);
    if (name == "statevector_check" || name == "train_mlp" || name == "train_cnn") {
      // The fingerprint: the same numbers on every healthy device of the SKU.
      const int steps = name == "statevector_check" ? 64 : 8;
      for (int s = 0; s < steps; ++s) {
        float loss = static_cast<float>(2.3 * std::exp(-0.05 * s) + 0.001 * Unit(absl::StrCat(sku, name, s)));
        if (fault == Fault::kWrong && s >= 5) loss = std::nextafter(loss, 10.0f);  // one ulp off from step 5
        t->add_loss_bits(Bits(loss));
      }
      if (name == "statevector_check") continue;
    }
    const double device =
        1 + kDeviceSpread * NormalOf(absl::StrCat("device|", agent_id, "|", assign.device_id(), "|", name));
    const double center = Nominal(name, profile) * device * FaultFactor(fault, name);
    for (int r = 0; r < v.repetitions(); ++r) t->add_values(std::max(center * (1 + noise(rng)), 1e-9));
  }
  return run;
}

v1::ValidationRun SimulatedAllReduce(const v1::Assign& assign, const std::string& sku, Fault fault, Fault peer_fault,
                                     uint64_t rng_seed) {
  const v1::ValidateSpec v = EffectiveValidate(assign);
  v1::ValidationRun run = SimulatedRun(v, sku);
  v1::ValidationTest* t = run.add_tests();
  t->set_name(kAllReduceTest);
  t->set_unit("GB/s");
  t->set_higher_is_better(true);
  t->set_time_box_seconds(v.time_box_seconds());
  if (fault == Fault::kHang || peer_fault == Fault::kHang) {
    const bool self = fault == Fault::kHang;
    t->set_outcome(self ? v1::TEST_OUTCOME_TIMED_OUT : v1::TEST_OUTCOME_FAILED);
    t->set_reason(self ? "simulated hang: did not return before its time box"
                       : "simulated: the peer did not answer within the gang's timeout");
    t->set_seconds(v.time_box_seconds() + (self ? 1 : 0));
    return run;
  }
  t->set_outcome(v1::TEST_OUTCOME_MEASURED);
  t->set_seconds(0.5);
  const double link = std::min(FaultFactor(fault, kAllReduceTest), FaultFactor(peer_fault, kAllReduceTest));
  const double pair = 1 + kDeviceSpread * NormalOf(absl::StrCat("pair|", assign.gang().gang_id()));
  std::mt19937_64 rng(rng_seed);
  std::normal_distribution<double> noise(0, 0.01 / 3 * (fault == Fault::kNoisy ? 4 : 1));
  for (int r = 0; r < v.repetitions(); ++r) t->add_values(std::max(12.5 * link * pair * (1 + noise(rng)), 1e-9));
  return run;
}

std::string TallyAgainstFaults(const v1::Job& job, const Degrade& degrade) {
  std::map<Fault, int64_t> devices, flagged, failed;
  std::map<std::string, int64_t> missed;  // "fault/kind" of faulty devices that passed
  int64_t hangs_boxed = 0;
  int64_t unpaired_links = 0;  // a slow link on a device in no all-reduce pair: nothing can see it
  for (const v1::DeviceVerdict& d : job.validation().devices()) {
    if (d.task_id().empty()) continue;
    const Fault f = FaultOf(degrade, d.agent_id(), d.device_id());
    if (f == Fault::kSlowLink &&
        std::none_of(d.tests().begin(), d.tests().end(), [](const v1::TestVerdict& t) { return t.test() == kAllReduceTest; })) {
      ++unpaired_links;
      continue;
    }
    ++devices[f];
    if (d.verdict() == v1::VERDICT_DEGRADED || d.verdict() == v1::VERDICT_FAIL) {
      ++flagged[f];
      if (f == Fault::kNone) {
        std::cerr << "false positive: " << d.agent_id() << "/" << d.device_id() << " " << VerdictName(d.verdict())
                  << ": " << d.reason() << "\n";
      }
    } else if (f != Fault::kNone) {
      ++missed[absl::StrCat(FaultName(f), "/", DeviceKindName(d.kind()))];
    }
    if (d.verdict() == v1::VERDICT_FAIL) ++failed[f];
    if (f == Fault::kHang && d.verdict() == v1::VERDICT_FAIL &&
        d.reason().find("still running at its time box") != std::string::npos) {
      ++hangs_boxed;
    }
  }
  // The same stored results judged again, in another order: the same verdicts.
  v1::Job again = job;
  std::mt19937 shuffle(11);
  std::shuffle(again.mutable_tasks()->begin(), again.mutable_tasks()->end(), shuffle);
  const bool identical = server::JudgeValidation(again).SerializeAsString() == job.validation().SerializeAsString();
  std::string per_fault, missed_list;
  for (const auto& [what, n] : missed) absl::StrAppend(&missed_list, missed_list.empty() ? "" : ",", what, ":", n);
  for (Fault f : AllFaults()) {
    if (devices[f] == 0) continue;
    absl::StrAppendFormat(&per_fault, " %s=%lld/%lld",
                          f == Fault::kNone ? "false_positives" : "detected_" + FaultName(f),
                          static_cast<long long>(flagged[f]), static_cast<long long>(devices[f]));
  }
  return absl::StrFormat(
      "%s false_positive_rate=%.4f wrong_failed=%lld/%lld hangs_ended_by_box=%lld/%lld rejudged_identical=%s missed=%s "
      "slowlink_unpaired=%lld",
      per_fault, devices[Fault::kNone] > 0 ? static_cast<double>(flagged[Fault::kNone]) / devices[Fault::kNone] : 0.0,
      static_cast<long long>(failed[Fault::kWrong]), static_cast<long long>(devices[Fault::kWrong]),
      static_cast<long long>(hangs_boxed), static_cast<long long>(devices[Fault::kHang]), identical ? "true" : "false",
      missed_list.empty() ? "none" : missed_list, static_cast<long long>(unpaired_links));
}

}  // namespace hetbench::fleet
