#include "common/validate_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"

namespace hetbench {

namespace {

std::string Shown(double v) { return absl::StrFormat("%g", v); }

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

bool IsLevel(const std::string& level) { return level == "quick" || level == "standard"; }

// A share strictly inside (0, 1).
void Share(std::vector<std::string>* problems, const char* field, double v, const char* example) {
  if (!(v > 0 && v < 1)) {
    problems->push_back(absl::StrCat("validate.", field, " = ", Shown(v), ": must be in (0, 1), e.g. ", example));
  }
}

}  // namespace

bool IsValidate(const v1::JobSpec& spec) { return !spec.validate().level().empty(); }

const std::vector<std::string>& KnownValidationTests() {
  static const std::vector<std::string> tests = {"matmul",         "memory_bandwidth",  "train_mlp",
                                                 "infer_mlp",      "train_cnn",         "infer_cnn",
                                                 "gate_bandwidth", "statevector_check", "power_sensor",
                                                 kAllReduceTest};
  return tests;
}

bool RunsAllReduce(const v1::ValidateSpec& validate, v1::DeviceKind kind) {
  if (kind != v1::DEVICE_KIND_CPU && kind != v1::DEVICE_KIND_GPU && kind != v1::DEVICE_KIND_DPU) return false;
  return validate.tests().empty() || Contains({validate.tests().begin(), validate.tests().end()}, kAllReduceTest);
}

int64_t AllReduceBytes(const std::string& level) { return int64_t{level == "standard" ? 64 : 16} << 20; }

std::vector<std::string> SuiteFor(v1::DeviceKind kind, const std::string& level) {
  (void)level;  // both levels run the same tests; standard runs them longer (more repetitions, larger boxes)
  if (kind == v1::DEVICE_KIND_QPU_SIM) return {"gate_bandwidth", "statevector_check", "power_sensor"};
  return {"matmul", "memory_bandwidth", "train_mlp", "infer_mlp", "train_cnn", "infer_cnn", "power_sensor"};
}

void FillValidateDefaults(v1::JobSpec* spec) {
  if (!IsValidate(*spec)) return;
  v1::ValidateSpec* v = spec->mutable_validate();
  const bool quick = v->level() == "quick";
  if (!v->has_time_box_seconds()) v->set_time_box_seconds(quick ? 8 : 40);  // x 7 tests: within 60 s and 5 min a device
  if (!v->has_repetitions()) v->set_repetitions(quick ? 8 : 15);  // the fewest whose median has a 99% interval: 8
  if (!v->has_min_effect()) v->set_min_effect(0.025);
  if (!v->has_spread_multiple()) v->set_spread_multiple(3);
  if (!v->has_spread_floor()) v->set_spread_floor(0.01);
  if (!v->has_confidence()) v->set_confidence(0.99);
  if (!v->has_cross_kind_tolerance()) v->set_cross_kind_tolerance(0.01);
  if (!v->has_power_tolerance()) v->set_power_tolerance(0.1);
  if (!v->has_min_degraded_tests()) v->set_min_degraded_tests(2);
  if (spec->models().empty() && spec->model().empty()) spec->add_models(kValidateModel);
  if (spec->name().empty()) spec->set_name(absl::StrCat("validate-", v->level()));
  if (spec->targets().empty()) spec->add_targets();  // every device of every connected agent
  if (spec->batch_sizes().empty()) spec->add_batch_sizes(128);
}

void CheckBaseline(const v1::Baseline& b, const std::string& field, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  if (b.schema() != kBaselineSchema) {
    bad(field, ".schema = ", QuotedInput(b.schema()), ": this coordinator reads ", kBaselineSchema,
        "; save the baseline again with this version (hetbench baseline save JOB)");
    return;
  }
  if (b.skus_size() == 0) bad(field, ".skus: empty: a baseline holds at least one SKU");
  if (b.skus_size() > 4096) bad(field, ".skus: ", b.skus_size(), " entries: at most 4096");
  for (int i = 0; i < b.skus_size() && i < 4096; ++i) {
    const v1::SkuBaseline& s = b.skus(i);
    if (s.sku().empty() || s.sku().size() > 512) bad(field, ".skus[", i, "].sku: must be 1 to 512 characters");
    if (s.loss_bits_size() > 4096) bad(field, ".skus[", i, "].loss_bits: at most 4096 steps");
    for (int j = 0; j < s.metrics_size() && j < 64; ++j) {
      const v1::MetricBaseline& m = s.metrics(j);
      if (!Contains(KnownValidationTests(), m.test())) {
        bad(field, ".skus[", i, "].metrics[", j, "].test = ", QuotedInput(m.test()), ": unknown; use one of ",
            absl::StrJoin(KnownValidationTests(), ", "));
      }
      if (!(m.median() > 0 && std::isfinite(m.median())) || !(m.spread() >= 0 && std::isfinite(m.spread()))) {
        bad(field, ".skus[", i, "].metrics[", j, "]: median must be > 0 and spread >= 0, both finite");
      }
    }
  }
}

void CheckValidate(const v1::JobSpec& spec, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  const v1::ValidateSpec& v = spec.validate();
  if (!IsValidate(spec)) {
    if (spec.has_validate() && v.ByteSizeLong() > 0) {
      bad("validate: set, but validate.level is empty; give quick or standard, or remove the section");
    }
    for (int i = 0; i < spec.models_size(); ++i) {
      if (spec.models(i) == kValidateModel) {
        bad("models[", i, "] = \"validate\": the validation suite; it needs validate.level (quick or standard)");
      }
    }
    return;
  }
  if (!IsLevel(v.level())) {
    bad("validate.level = ", QuotedInput(v.level()), ": unknown; use quick or standard");
    return;
  }
  const double max_box = v.level() == "quick" ? 60 : 300;
  if (!(v.time_box_seconds() > 0 && v.time_box_seconds() <= max_box)) {
    bad("validate.time_box_seconds = ", Shown(v.time_box_seconds()), ": must be in (0, ", Shown(max_box),
        "] for level ", v.level(), " (each test's limit)");
  }
  if (v.repetitions() < 3 || v.repetitions() > 1000) {
    bad("validate.repetitions = ", v.repetitions(), ": must be in [3, 1000] (an interval needs at least 3)");
  }
  Share(problems, "min_effect", v.min_effect(), "0.025");
  Share(problems, "spread_floor", v.spread_floor(), "0.01");
  Share(problems, "confidence", v.confidence(), "0.99");
  Share(problems, "cross_kind_tolerance", v.cross_kind_tolerance(), "0.01");
  Share(problems, "power_tolerance", v.power_tolerance(), "0.1");
  if (!(v.spread_multiple() > 0 && v.spread_multiple() <= 100)) {
    bad("validate.spread_multiple = ", Shown(v.spread_multiple()), ": must be in (0, 100], e.g. 3");
  }
  if (v.min_degraded_tests() < 1 || v.min_degraded_tests() > 16) {
    bad("validate.min_degraded_tests = ", v.min_degraded_tests(), ": must be in [1, 16], e.g. 2");
  }
  if (v.tests_size() > 64) bad("validate.tests: ", v.tests_size(), " entries: at most 64");
  for (int i = 0; i < v.tests_size() && i < 64; ++i) {
    if (!Contains(KnownValidationTests(), v.tests(i))) {
      bad("validate.tests[", i, "] = ", QuotedInput(v.tests(i)), ": unknown test; use one of ",
          absl::StrJoin(KnownValidationTests(), ", "));
    }
  }
  if (v.has_baseline()) CheckBaseline(v.baseline(), "validate.baseline", problems);
  if (spec.models_size() != 1 || spec.models(0) != kValidateModel) {
    bad("models: a validation runs its own suite; remove models (or model)");
  }
  if (spec.batch_sizes_size() != 1) {
    bad("batch_sizes: ", spec.batch_sizes_size(), " entries: a validation takes one (its training batch, default 128)");
  }
  if (!spec.serving().scenario().empty()) bad("validate: cannot be combined with serving; remove one");
  if (spec.parallel().devices_size() > 0) bad("validate: cannot be combined with parallel; remove parallel");
  if (spec.split().stages_size() > 0) bad("validate: cannot be combined with split; remove split");
  if (spec.layers().enabled()) bad("validate: cannot be combined with layers.enabled; remove the layer profile");
  for (int i = 0; i < spec.targets_size(); ++i) {
    if (spec.targets(i).executor() == "python") {
      bad("targets[", i, "].executor = \"python\": the suite runs in the agent itself; remove the executor");
    }
  }
}

std::string SkuOf(const v1::Device& device, int threads, const std::string& agent_version) {
  auto part = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return absl::StrCat(DeviceKindName(device.kind()), "|", part(device.model()), "|", part(device.driver()), "|",
                      device.cores(), "|", threads > 0 ? absl::StrCat(threads) : std::string("all"), "|",
                      part(agent_version));
}

}  // namespace hetbench
