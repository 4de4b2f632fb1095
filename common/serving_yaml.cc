#include "common/serving_yaml.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/yaml_fields.h"

namespace hetbench::yaml {

namespace {

// The fields of serving.decoder, in the order DecoderSpec declares them.
struct DecoderField {
  const char* key;
  void (v1::DecoderSpec::*set)(int32_t);
  int32_t (v1::DecoderSpec::*get)() const;
  bool (v1::DecoderSpec::*has)() const;
};
#define HB_DECODER_FIELD(f) {#f, &v1::DecoderSpec::set_##f, &v1::DecoderSpec::f, &v1::DecoderSpec::has_##f}
constexpr DecoderField kDecoderFields[] = {
    HB_DECODER_FIELD(layers),            HB_DECODER_FIELD(width),
    HB_DECODER_FIELD(heads),             HB_DECODER_FIELD(vocabulary),
    HB_DECODER_FIELD(context),           HB_DECODER_FIELD(prompt_tokens_min),
    HB_DECODER_FIELD(prompt_tokens_max), HB_DECODER_FIELD(output_tokens_min),
    HB_DECODER_FIELD(output_tokens_max)};
#undef HB_DECODER_FIELD

absl::Status ParseDecoder(const YAML::Node& d, v1::DecoderSpec* o) {
  std::set<std::string> keys = {"torchscript"};
  for (const DecoderField& f : kDecoderFields) keys.insert(f.key);
  if (auto s = CheckKeys(d, "serving.decoder", keys); !s.ok()) return s;
  if (d["torchscript"]) {
    HB_ASSIGN(o->set_torchscript, As<std::string>(d["torchscript"], "serving.decoder.torchscript", "a path"));
  }
  for (const DecoderField& f : kDecoderFields) {
    if (!d[f.key]) continue;
    auto v = As<int32_t>(d[f.key], absl::StrCat("serving.decoder.", f.key), "an integer");
    if (!v.ok()) return v.status();
    (o->*f.set)(*v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseServing(const YAML::Node& sv, v1::JobSpec& spec) {
  if (auto s = CheckKeys(sv, "serving",
                         {"scenario", "target_qps", "latency_bound_ms", "percentile", "min_duration_seconds",
                          "min_queries", "max_queue_delay_ms", "instances", "max_issue_delay_share", "warmup_batches",
                          "fixed_service_us", "qps_sweep", "peak_precision", "peak_max_runs", "samples_per_query",
                          "ttft_ms", "tpot_ms", "decoder", "replicas", "replica_timeout_seconds"});
      !s.ok()) {
    return s;
  }
  v1::ServingSpec* o = spec.mutable_serving();
  if (sv["scenario"]) HB_ASSIGN(o->set_scenario, As<std::string>(sv["scenario"], "serving.scenario", "a string"));
  const std::pair<const char*, void (v1::ServingSpec::*)(double)> numbers[] = {
      {"target_qps", &v1::ServingSpec::set_target_qps},
      {"latency_bound_ms", &v1::ServingSpec::set_latency_bound_ms},
      {"percentile", &v1::ServingSpec::set_percentile},
      {"min_duration_seconds", &v1::ServingSpec::set_min_duration_seconds},
      {"max_queue_delay_ms", &v1::ServingSpec::set_max_queue_delay_ms},
      {"max_issue_delay_share", &v1::ServingSpec::set_max_issue_delay_share},
      {"fixed_service_us", &v1::ServingSpec::set_fixed_service_us},
      {"peak_precision", &v1::ServingSpec::set_peak_precision},
      {"ttft_ms", &v1::ServingSpec::set_ttft_ms},
      {"tpot_ms", &v1::ServingSpec::set_tpot_ms},
      {"replica_timeout_seconds", &v1::ServingSpec::set_replica_timeout_seconds}};
  for (const auto& [key, set] : numbers) {
    if (!sv[key]) continue;
    auto v = As<double>(sv[key], absl::StrCat("serving.", key), "a number");
    if (!v.ok()) return v.status();
    (o->*set)(*v);
  }
  if (sv["min_queries"]) HB_ASSIGN(o->set_min_queries, As<int64_t>(sv["min_queries"], "serving.min_queries", "an integer"));
  if (sv["instances"]) HB_ASSIGN(o->set_instances, As<int32_t>(sv["instances"], "serving.instances", "an integer"));
  if (sv["peak_max_runs"]) {
    HB_ASSIGN(o->set_peak_max_runs, As<int32_t>(sv["peak_max_runs"], "serving.peak_max_runs", "an integer"));
  }
  if (const YAML::Node rates = sv["qps_sweep"]) {
    if (!rates.IsSequence()) {
      return absl::InvalidArgumentError(absl::StrCat(Where(rates, "serving.qps_sweep"), ": expected a list like [100, 200, 400]"));
    }
    if (auto s = CheckCount(rates, "serving.qps_sweep", 64); !s.ok()) return s;
    for (size_t i = 0; i < rates.size(); ++i) {
      HB_ASSIGN(o->add_qps_sweep, As<double>(rates[i], absl::StrCat("serving.qps_sweep[", i, "]"), "a number"));
    }
  }
  if (sv["warmup_batches"]) {
    HB_ASSIGN(o->set_warmup_batches, As<int32_t>(sv["warmup_batches"], "serving.warmup_batches", "an integer"));
  }
  if (sv["samples_per_query"]) {
    HB_ASSIGN(o->set_samples_per_query,
              As<int32_t>(sv["samples_per_query"], "serving.samples_per_query", "an integer"));
  }
  if (sv["replicas"]) HB_ASSIGN(o->set_replicas, As<int32_t>(sv["replicas"], "serving.replicas", "an integer"));
  if (const YAML::Node d = sv["decoder"]) return ParseDecoder(d, o->mutable_decoder());
  return absl::OkStatus();
}

void EmitServing(const v1::JobSpec& spec, YAML::Emitter& out) {
  if (!spec.has_serving() || spec.serving().ByteSizeLong() == 0) return;
  const v1::ServingSpec& sv = spec.serving();
  out << YAML::Key << "serving" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "scenario" << YAML::Value << sv.scenario();
  if (sv.target_qps() != 0) out << YAML::Key << "target_qps" << YAML::Value << sv.target_qps();
  if (sv.latency_bound_ms() != 0) out << YAML::Key << "latency_bound_ms" << YAML::Value << sv.latency_bound_ms();
  if (sv.has_percentile()) out << YAML::Key << "percentile" << YAML::Value << sv.percentile();
  if (sv.has_min_duration_seconds()) {
    out << YAML::Key << "min_duration_seconds" << YAML::Value << sv.min_duration_seconds();
  }
  if (sv.has_min_queries()) out << YAML::Key << "min_queries" << YAML::Value << sv.min_queries();
  if (sv.has_max_queue_delay_ms()) out << YAML::Key << "max_queue_delay_ms" << YAML::Value << sv.max_queue_delay_ms();
  if (sv.has_instances()) out << YAML::Key << "instances" << YAML::Value << sv.instances();
  if (sv.has_max_issue_delay_share()) {
    out << YAML::Key << "max_issue_delay_share" << YAML::Value << sv.max_issue_delay_share();
  }
  if (sv.has_warmup_batches()) out << YAML::Key << "warmup_batches" << YAML::Value << sv.warmup_batches();
  if (sv.fixed_service_us() != 0) out << YAML::Key << "fixed_service_us" << YAML::Value << sv.fixed_service_us();
  if (sv.qps_sweep_size() > 0) {
    out << YAML::Key << "qps_sweep" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (double q : sv.qps_sweep()) out << q;
    out << YAML::EndSeq;
  }
  if (sv.has_peak_precision()) out << YAML::Key << "peak_precision" << YAML::Value << sv.peak_precision();
  if (sv.has_peak_max_runs()) out << YAML::Key << "peak_max_runs" << YAML::Value << sv.peak_max_runs();
  if (sv.has_samples_per_query()) out << YAML::Key << "samples_per_query" << YAML::Value << sv.samples_per_query();
  if (sv.has_replicas()) out << YAML::Key << "replicas" << YAML::Value << sv.replicas();
  if (sv.has_replica_timeout_seconds()) {
    out << YAML::Key << "replica_timeout_seconds" << YAML::Value << sv.replica_timeout_seconds();
  }
  if (sv.ttft_ms() != 0) out << YAML::Key << "ttft_ms" << YAML::Value << sv.ttft_ms();
  if (sv.tpot_ms() != 0) out << YAML::Key << "tpot_ms" << YAML::Value << sv.tpot_ms();
  if (sv.has_decoder()) {
    const v1::DecoderSpec& d = sv.decoder();
    out << YAML::Key << "decoder" << YAML::Value << YAML::BeginMap;
    if (!d.torchscript().empty()) out << YAML::Key << "torchscript" << YAML::Value << d.torchscript();
    for (const DecoderField& f : kDecoderFields) {
      if ((d.*f.has)()) out << YAML::Key << f.key << YAML::Value << (d.*f.get)();
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}


}  // namespace hetbench::yaml
