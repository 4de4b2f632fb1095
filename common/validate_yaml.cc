#include "common/validate_yaml.h"

#include <utility>

#include "common/validate_spec.h"
#include "common/yaml_fields.h"

namespace hetbench::yaml {

absl::Status ParseValidate(const YAML::Node& n, v1::JobSpec& spec) {
  if (auto s = CheckKeys(
          n, "validate",
          {"level", "time_box_seconds", "repetitions", "min_effect", "spread_multiple", "spread_floor", "confidence",
           "cross_kind_tolerance", "power_tolerance", "quarantine_degraded", "tests", "min_degraded_tests"});
      !s.ok()) {
    return s;
  }
  v1::ValidateSpec* v = spec.mutable_validate();
  if (n["level"]) HB_ASSIGN(v->set_level, As<std::string>(n["level"], "validate.level", "a string"));
  const std::pair<const char*, void (v1::ValidateSpec::*)(double)> numbers[] = {
      {"time_box_seconds", &v1::ValidateSpec::set_time_box_seconds},
      {"min_effect", &v1::ValidateSpec::set_min_effect},
      {"spread_multiple", &v1::ValidateSpec::set_spread_multiple},
      {"spread_floor", &v1::ValidateSpec::set_spread_floor},
      {"confidence", &v1::ValidateSpec::set_confidence},
      {"cross_kind_tolerance", &v1::ValidateSpec::set_cross_kind_tolerance},
      {"power_tolerance", &v1::ValidateSpec::set_power_tolerance}};
  for (const auto& [key, set] : numbers) {
    if (!n[key]) continue;
    auto value = As<double>(n[key], absl::StrCat("validate.", key), "a number");
    if (!value.ok()) return value.status();
    (v->*set)(*value);
  }
  if (n["repetitions"]) {
    HB_ASSIGN(v->set_repetitions, As<int32_t>(n["repetitions"], "validate.repetitions", "an integer"));
  }
  if (n["min_degraded_tests"]) {
    HB_ASSIGN(v->set_min_degraded_tests,
              As<int32_t>(n["min_degraded_tests"], "validate.min_degraded_tests", "an integer"));
  }
  if (n["quarantine_degraded"]) {
    HB_ASSIGN(v->set_quarantine_degraded,
              As<bool>(n["quarantine_degraded"], "validate.quarantine_degraded", "true or false"));
  }
  if (const YAML::Node tests = n["tests"]) {
    if (!tests.IsSequence()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(tests, "validate.tests"), ": expected a list like [matmul]"));
    }
    if (auto s = CheckCount(tests, "validate.tests", 64); !s.ok()) return s;
    for (size_t i = 0; i < tests.size(); ++i) {
      HB_ASSIGN(v->add_tests, As<std::string>(tests[i], absl::StrCat("validate.tests[", i, "]"), "a string"));
    }
  }
  return absl::OkStatus();
}

void EmitValidate(const v1::JobSpec& spec, YAML::Emitter& out) {
  if (!IsValidate(spec)) return;
  const v1::ValidateSpec& v = spec.validate();
  out << YAML::Key << "validate" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "level" << YAML::Value << v.level();
  if (v.has_time_box_seconds()) out << YAML::Key << "time_box_seconds" << YAML::Value << v.time_box_seconds();
  if (v.has_repetitions()) out << YAML::Key << "repetitions" << YAML::Value << v.repetitions();
  if (v.has_min_effect()) out << YAML::Key << "min_effect" << YAML::Value << v.min_effect();
  if (v.has_spread_multiple()) out << YAML::Key << "spread_multiple" << YAML::Value << v.spread_multiple();
  if (v.has_spread_floor()) out << YAML::Key << "spread_floor" << YAML::Value << v.spread_floor();
  if (v.has_confidence()) out << YAML::Key << "confidence" << YAML::Value << v.confidence();
  if (v.has_cross_kind_tolerance()) {
    out << YAML::Key << "cross_kind_tolerance" << YAML::Value << v.cross_kind_tolerance();
  }
  if (v.has_power_tolerance()) out << YAML::Key << "power_tolerance" << YAML::Value << v.power_tolerance();
  if (v.has_min_degraded_tests()) out << YAML::Key << "min_degraded_tests" << YAML::Value << v.min_degraded_tests();
  if (v.quarantine_degraded()) out << YAML::Key << "quarantine_degraded" << YAML::Value << true;
  if (v.tests_size() > 0) {
    out << YAML::Key << "tests" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& t : v.tests()) out << t;
    out << YAML::EndSeq;
  }
  if (v.has_baseline()) {
    out << YAML::Key << "baseline" << YAML::Value
        << absl::StrCat(v.baseline().name().empty() ? "from " + v.baseline().source_job_id() : v.baseline().name(),
                        v.baseline().version() > 0 ? absl::StrCat(" v", v.baseline().version()) : "", " (",
                        v.baseline().skus_size(), " SKUs; given with --baseline)");
  }
  out << YAML::EndMap;
}

}  // namespace hetbench::yaml
