#include "spec_yaml.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_spec.h"
#include "common/names.h"
#include "common/serving_yaml.h"
#include "common/validate_yaml.h"
#include "common/yaml_fields.h"

namespace hetbench {
namespace {

using yaml::As;
using yaml::CheckCount;
using yaml::CheckKeys;
using yaml::CheckUniqueKeys;
using yaml::ModelName;
using yaml::Where;
using yaml::EmitServing;
using yaml::EmitValidate;
using yaml::ParseServing;
using yaml::ParseValidate;

absl::Status ParseTarget(const YAML::Node& n, const std::string& path, v1::TargetSelector* t) {
  if (n.IsScalar()) {  // shorthand: targets: [cpu, gpu]
    auto kind = ParseDeviceKind(n.Scalar());
    if (!kind) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(n, path), ": unknown device kind '", n.Scalar(), "'; use cpu, gpu, tpu, dpu or qpu-sim"));
    }
    t->set_device_kind(*kind);
    return absl::OkStatus();
  }
  if (auto s = CheckKeys(n, path, {"device_kind", "agent_id", "device_id", "labels", "executor"}); !s.ok()) return s;
  if (n["device_kind"]) {
    auto name = As<std::string>(n["device_kind"], path + ".device_kind", "a string");
    if (!name.ok()) return name.status();
    auto kind = ParseDeviceKind(*name);
    if (!kind) {
      return absl::InvalidArgumentError(absl::StrCat(Where(n["device_kind"], path + ".device_kind"),
                                                     ": unknown device kind '", *name,
                                                     "'; use cpu, gpu, tpu, dpu or qpu-sim"));
    }
    t->set_device_kind(*kind);
  }
  if (n["agent_id"]) HB_ASSIGN(t->set_agent_id, As<std::string>(n["agent_id"], path + ".agent_id", "a string"));
  if (n["device_id"]) HB_ASSIGN(t->set_device_id, As<std::string>(n["device_id"], path + ".device_id", "a string"));
  if (n["executor"]) HB_ASSIGN(t->set_executor, As<std::string>(n["executor"], path + ".executor", "a string"));
  if (n["labels"]) {
    const YAML::Node labels = n["labels"];
    if (!labels.IsMap())
      return absl::InvalidArgumentError(absl::StrCat(Where(labels, path + ".labels"), ": expected a mapping"));
    if (auto s = CheckUniqueKeys(labels, path + ".labels"); !s.ok()) return s;
    for (const auto& kv : labels) {
      auto v = As<std::string>(kv.second, path + ".labels." + kv.first.as<std::string>(), "a string");
      if (!v.ok()) return v.status();
      (*t->mutable_labels())[kv.first.as<std::string>()] = *v;
    }
  }
  return absl::OkStatus();
}

// The spec's "models" section.
absl::Status ParseModels(const YAML::Node& m, v1::JobSpec& spec) {
  if (m.IsScalar()) {
    HB_ASSIGN(spec.add_models, ModelName(m, "models"));
  } else if (m.IsSequence()) {
    if (auto s = CheckCount(m, "models", SpecLimits::kMaxModels); !s.ok()) return s;
    for (size_t i = 0; i < m.size(); ++i) {
      HB_ASSIGN(spec.add_models, ModelName(m[i], absl::StrCat("models[", i, "]")));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(Where(m, "models"), ": expected a list like [mlp, cnn]"));
  }
  return absl::OkStatus();
}

// The spec's "layers" section.
absl::Status ParseLayers(const YAML::Node& l, v1::JobSpec& spec) {
  if (auto s = CheckKeys(l, "layers", {"enabled", "steps", "energy_seconds"}); !s.ok()) return s;
  if (l["enabled"]) HB_ASSIGN(spec.mutable_layers()->set_enabled, As<bool>(l["enabled"], "layers.enabled", "true or false"));
  if (l["steps"]) HB_ASSIGN(spec.mutable_layers()->set_steps, As<int32_t>(l["steps"], "layers.steps", "an integer"));
  if (l["energy_seconds"]) {
    HB_ASSIGN(spec.mutable_layers()->set_energy_seconds,
              As<double>(l["energy_seconds"], "layers.energy_seconds", "a number of seconds"));
  }
  return absl::OkStatus();
}

// The spec's "parallel" section.
absl::Status ParseParallel(const YAML::Node& p, v1::JobSpec& spec) {
  if (auto s = CheckKeys(p, "parallel", {"devices", "strategy", "gang_timeout_seconds", "collective_timeout_seconds"});
      !s.ok()) {
    return s;
  }
  v1::ParallelSpec* out = spec.mutable_parallel();
  if (const YAML::Node d = p["devices"]) {
    if (!d.IsSequence()) {
      return absl::InvalidArgumentError(absl::StrCat(Where(d, "parallel.devices"), ": expected a list like [1, 2, 4]"));
    }
    if (auto s = CheckCount(d, "parallel.devices", 16); !s.ok()) return s;
    for (size_t i = 0; i < d.size(); ++i) {
      HB_ASSIGN(out->add_devices, As<int32_t>(d[i], absl::StrCat("parallel.devices[", i, "]"), "an integer"));
    }
  }
  if (p["strategy"]) HB_ASSIGN(out->set_strategy, As<std::string>(p["strategy"], "parallel.strategy", "a string"));
  if (p["gang_timeout_seconds"]) {
    HB_ASSIGN(out->set_gang_timeout_seconds,
              As<double>(p["gang_timeout_seconds"], "parallel.gang_timeout_seconds", "a number"));
  }
  if (p["collective_timeout_seconds"]) {
    HB_ASSIGN(out->set_collective_timeout_seconds,
              As<double>(p["collective_timeout_seconds"], "parallel.collective_timeout_seconds", "a number"));
  }
  return absl::OkStatus();
}

// The spec's "split" section.
absl::Status ParseSplit(const YAML::Node& sp, v1::JobSpec& spec) {
  if (auto s = CheckKeys(sp, "split", {"stages", "across_agents", "gang_timeout_seconds", "collective_timeout_seconds"});
      !s.ok()) {
    return s;
  }
  v1::SplitSpec* out = spec.mutable_split();
  if (sp["across_agents"]) {
    HB_ASSIGN(out->set_across_agents, As<bool>(sp["across_agents"], "split.across_agents", "true or false"));
  }
  if (sp["gang_timeout_seconds"]) {
    HB_ASSIGN(out->set_gang_timeout_seconds,
              As<double>(sp["gang_timeout_seconds"], "split.gang_timeout_seconds", "a number"));
  }
  if (sp["collective_timeout_seconds"]) {
    HB_ASSIGN(out->set_collective_timeout_seconds,
              As<double>(sp["collective_timeout_seconds"], "split.collective_timeout_seconds", "a number"));
  }
  const YAML::Node st = sp["stages"];
  if (!st || !st.IsSequence()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(sp, "split.stages"), ": expected a list like [{layers: \"0-3\", target: cpu}, ...]"));
  }
  if (auto s = CheckCount(st, "split.stages", 8); !s.ok()) return s;
  for (size_t i = 0; i < st.size(); ++i) {
    const std::string path = absl::StrCat("split.stages[", i, "]");
    if (auto s = CheckKeys(st[i], path, {"layers", "target"}); !s.ok()) return s;
    v1::SplitStage* stage = spec.mutable_split()->add_stages();
    if (st[i]["layers"]) HB_ASSIGN(stage->set_layers, As<std::string>(st[i]["layers"], path + ".layers", "a string"));
    if (st[i]["target"]) {
      if (auto s = ParseTarget(st[i]["target"], path + ".target", stage->mutable_target()); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// The spec's "qpu" section.
absl::Status ParseQpu(const YAML::Node& q, v1::JobSpec& spec) {
  if (auto s = CheckKeys(q, "qpu", {"qubits", "layers", "depth", "fused", "precision", "circuits", "backend"}); !s.ok()) return s;
  v1::QpuSpec* out = spec.mutable_qpu();
  if (q["qubits"]) HB_ASSIGN(out->set_qubits, As<int32_t>(q["qubits"], "qpu.qubits", "an integer"));
  if (q["layers"]) HB_ASSIGN(out->set_layers, As<int32_t>(q["layers"], "qpu.layers", "an integer"));
  if (q["depth"]) HB_ASSIGN(out->set_depth, As<int32_t>(q["depth"], "qpu.depth", "an integer"));
  if (q["fused"]) HB_ASSIGN(out->set_fused, As<bool>(q["fused"], "qpu.fused", "true or false"));
  if (q["precision"]) HB_ASSIGN(out->set_precision, As<std::string>(q["precision"], "qpu.precision", "a string"));
  if (q["circuits"]) HB_ASSIGN(out->set_circuits, As<int32_t>(q["circuits"], "qpu.circuits", "an integer"));
  if (q["backend"]) HB_ASSIGN(out->set_backend, As<std::string>(q["backend"], "qpu.backend", "a string"));
  return absl::OkStatus();
}

// The spec's "torchscript" section.
absl::Status ParseTorchScript(const YAML::Node& ts, v1::JobSpec& spec) {
  if (auto s = CheckKeys(ts, "torchscript", {"path", "input_shape"}); !s.ok()) return s;
  if (ts["path"]) HB_ASSIGN(spec.mutable_torchscript()->set_path, As<std::string>(ts["path"], "torchscript.path", "a path"));
  if (const YAML::Node shape = ts["input_shape"]) {
    if (!shape.IsSequence()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(shape, "torchscript.input_shape"), ": expected a list like [1, 28, 28]"));
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      HB_ASSIGN(spec.mutable_torchscript()->add_input_shape,
                As<int64_t>(shape[i], absl::StrCat("torchscript.input_shape[", i, "]"), "an integer"));
    }
  }
  return absl::OkStatus();
}

// The spec's "batch_sizes" section.
absl::Status ParseBatchSizes(const YAML::Node& b, v1::JobSpec& spec) {
  if (b.IsScalar()) {
    HB_ASSIGN(spec.add_batch_sizes, As<int32_t>(b, "batch_sizes", "an integer"));
  } else if (b.IsSequence()) {
    if (auto s = CheckCount(b, "batch_sizes", SpecLimits::kMaxBatchSizes); !s.ok()) return s;
    for (size_t i = 0; i < b.size(); ++i) {
      HB_ASSIGN(spec.add_batch_sizes, As<int32_t>(b[i], absl::StrCat("batch_sizes[", i, "]"), "an integer"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(Where(b, "batch_sizes"), ": expected a list of integers"));
  }
  return absl::OkStatus();
}

// The spec's "targets" section.
absl::Status ParseTargets(const YAML::Node& t, v1::JobSpec& spec) {
  if (!t.IsSequence()) return absl::InvalidArgumentError(absl::StrCat(Where(t, "targets"), ": expected a list"));
  if (t.size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(t, "targets"), ": empty: give at least one, e.g. [cpu], or leave targets out for any CPU"));
  }
  if (auto s = CheckCount(t, "targets", SpecLimits::kMaxTargets); !s.ok()) return s;
  for (size_t i = 0; i < t.size(); ++i) {
    if (auto s = ParseTarget(t[i], absl::StrCat("targets[", i, "]"), spec.add_targets()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The spec's "train" section.
absl::Status ParseTrain(const YAML::Node& tr, v1::JobSpec& spec) {
  if (auto s = CheckKeys(
          tr, "train", {"warmup_steps", "min_steps", "min_duration_seconds", "max_steps", "epochs", "learning_rate"});
      !s.ok()) {
    return s;
  }
  v1::TrainSpec* t = spec.mutable_train();
  if (tr["warmup_steps"])
    HB_ASSIGN(t->set_warmup_steps, As<int32_t>(tr["warmup_steps"], "train.warmup_steps", "an integer"));
  if (tr["min_steps"]) HB_ASSIGN(t->set_min_steps, As<int64_t>(tr["min_steps"], "train.min_steps", "an integer"));
  if (tr["max_steps"]) HB_ASSIGN(t->set_max_steps, As<int64_t>(tr["max_steps"], "train.max_steps", "an integer"));
  if (tr["min_duration_seconds"]) {
    HB_ASSIGN(t->set_min_duration_seconds,
              As<double>(tr["min_duration_seconds"], "train.min_duration_seconds", "a number"));
  }
  if (tr["epochs"]) HB_ASSIGN(t->set_epochs, As<double>(tr["epochs"], "train.epochs", "a number"));
  if (tr["learning_rate"])
    HB_ASSIGN(t->set_learning_rate, As<double>(tr["learning_rate"], "train.learning_rate", "a number"));
  return absl::OkStatus();
}

// The spec's "inference" section.
absl::Status ParseInference(const YAML::Node& inf, v1::JobSpec& spec) {
  if (auto s = CheckKeys(inf, "inference", {"warmup_batches", "max_batches"}); !s.ok()) return s;
  v1::InferenceSpec* i = spec.mutable_inference();
  if (inf["warmup_batches"])
    HB_ASSIGN(i->set_warmup_batches, As<int32_t>(inf["warmup_batches"], "inference.warmup_batches", "an integer"));
  if (inf["max_batches"])
    HB_ASSIGN(i->set_max_batches, As<int64_t>(inf["max_batches"], "inference.max_batches", "an integer"));
  return absl::OkStatus();
}

// The spec's "validity" section.
absl::Status ParseValidity(const YAML::Node& v, v1::JobSpec& spec) {
  if (auto s = CheckKeys(v, "validity", {"max_iqr_over_median"}); !s.ok()) return s;
  if (v["max_iqr_over_median"]) {
    HB_ASSIGN(spec.mutable_validity()->set_max_iqr_over_median,
              As<double>(v["max_iqr_over_median"], "validity.max_iqr_over_median", "a number"));
  }
  return absl::OkStatus();
}

// The spec's "power" section.
absl::Status ParsePower(const YAML::Node& pw, v1::JobSpec& spec) {
  if (auto s = CheckKeys(pw, "power", {"idle_baseline_seconds"}); !s.ok()) return s;
  if (pw["idle_baseline_seconds"]) {
    HB_ASSIGN(spec.mutable_power()->set_idle_baseline_seconds,
              As<double>(pw["idle_baseline_seconds"], "power.idle_baseline_seconds", "a number"));
  }
  return absl::OkStatus();
}

// The spec's "cost" section.
absl::Status ParseCost(const YAML::Node& c, v1::JobSpec& spec) {
  if (auto s = CheckKeys(c, "cost", {"usd_per_hour", "electricity_usd_per_kwh"}); !s.ok()) return s;
  if (const YAML::Node rates = c["usd_per_hour"]) {
    if (!rates.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(rates, "cost.usd_per_hour"), ": expected a mapping like {cpu: 0.10, gpu: 2.50}"));
    }
    if (auto s = CheckUniqueKeys(rates, "cost.usd_per_hour"); !s.ok()) return s;
    for (const auto& kv : rates) {
      const std::string key = kv.first.as<std::string>();
      auto v = As<double>(kv.second, "cost.usd_per_hour." + key, "a number");
      if (!v.ok()) return v.status();
      (*spec.mutable_cost()->mutable_usd_per_hour())[key] = *v;
    }
  }
  if (c["electricity_usd_per_kwh"]) {
    HB_ASSIGN(spec.mutable_cost()->set_electricity_usd_per_kwh,
              As<double>(c["electricity_usd_per_kwh"], "cost.electricity_usd_per_kwh", "a number"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::JobSpec> ParseRoot(const YAML::Node& root) {
  v1::JobSpec spec;
  if (!root || root.IsNull()) return absl::InvalidArgumentError("job spec: the document is empty");
  if (auto s = CheckKeys(root, "", {"name",    "model",    "batch_sizes", "targets",      "train",    "inference",
                                    "seed",    "threads",  "dataset",     "power",        "cost",     "validity",
                                    "models",  "layers",   "torchscript", "qpu",          "parallel", "split",
                                    "serving", "validate", "repeats",     "one_at_a_time"});
      !s.ok()) {
    return s;
  }
  if (root["name"]) HB_ASSIGN(spec.set_name, As<std::string>(root["name"], "name", "a string"));
  if (root["model"]) HB_ASSIGN(spec.set_model, ModelName(root["model"], "model"));
  // Sections in a fixed order: the first error found is the one reported.
  using Section = absl::Status (*)(const YAML::Node&, v1::JobSpec&);
  static constexpr std::pair<const char*, Section> kFirst[] = {
      {"models", ParseModels},
      {"layers", ParseLayers},
      {"parallel", ParseParallel},
      {"split", ParseSplit},
      {"qpu", ParseQpu},
      {"torchscript", ParseTorchScript}};
  static constexpr std::pair<const char*, Section> kThen[] = {
      {"batch_sizes", ParseBatchSizes},
      {"targets", ParseTargets},
      {"train", ParseTrain},
      {"inference", ParseInference},
      {"validity", ParseValidity},
      {"power", ParsePower},
      {"cost", ParseCost},
      {"serving", ParseServing},
      {"validate", ParseValidate}};
  auto parse = [&](const auto& sections) -> absl::Status {
    for (const auto& [key, section] : sections) {
      if (const YAML::Node n = root[key]) {
        if (auto s = section(n, spec); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  };
  if (auto s = parse(kFirst); !s.ok()) return s;
  if (root["dataset"]) HB_ASSIGN(spec.set_dataset, As<std::string>(root["dataset"], "dataset", "a string"));
  if (root["seed"]) HB_ASSIGN(spec.set_seed, As<uint64_t>(root["seed"], "seed", "a non-negative integer"));
  if (root["threads"]) HB_ASSIGN(spec.set_threads, As<int32_t>(root["threads"], "threads", "an integer"));
  if (root["repeats"]) HB_ASSIGN(spec.set_repeats, As<int32_t>(root["repeats"], "repeats", "an integer"));
  if (root["one_at_a_time"]) {
    HB_ASSIGN(spec.set_one_at_a_time, As<bool>(root["one_at_a_time"], "one_at_a_time", "true or false"));
  }
  if (auto s = parse(kThen); !s.ok()) return s;
  return spec;
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpecYaml(const std::string& yaml_text) {
  try {
    return ParseRoot(YAML::Load(yaml_text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: not valid YAML: ", e.what()));
  }
}

std::string JobSpecToYaml(const v1::JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << spec.name();
  if (!spec.model().empty()) out << YAML::Key << "model" << YAML::Value << spec.model();
  out << YAML::Key << "models" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& m : spec.models()) {
    if (m == "null") {
      out << YAML::DoubleQuoted << m;  // unquoted, YAML would read it back as no value
    } else {
      out << m;
    }
  }
  out << YAML::EndSeq;
  out << YAML::Key << "dataset" << YAML::Value << spec.dataset();
  out << YAML::Key << "batch_sizes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int b : spec.batch_sizes()) out << b;
  out << YAML::EndSeq;
  out << YAML::Key << "targets" << YAML::Value << YAML::BeginSeq;
  for (const auto& t : spec.targets()) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "device_kind" << YAML::Value << DeviceKindName(t.device_kind());
    if (!t.agent_id().empty()) out << YAML::Key << "agent_id" << YAML::Value << t.agent_id();
    if (!t.device_id().empty()) out << YAML::Key << "device_id" << YAML::Value << t.device_id();
    if (!t.executor().empty()) out << YAML::Key << "executor" << YAML::Value << t.executor();
    if (!t.labels().empty()) {
      out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap;
      std::map<std::string, std::string> sorted(t.labels().begin(), t.labels().end());
      for (const auto& [k, v] : sorted) out << YAML::Key << k << YAML::Value << v;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  const auto& t = spec.train();
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "warmup_steps" << YAML::Value << t.warmup_steps();
  out << YAML::Key << "min_steps" << YAML::Value << t.min_steps();
  out << YAML::Key << "min_duration_seconds" << YAML::Value << t.min_duration_seconds();
  out << YAML::Key << "max_steps" << YAML::Value << t.max_steps();
  out << YAML::Key << "epochs" << YAML::Value << t.epochs();
  out << YAML::Key << "learning_rate" << YAML::Value << t.learning_rate();
  out << YAML::EndMap;
  out << YAML::Key << "inference" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "warmup_batches" << YAML::Value << spec.inference().warmup_batches();
  out << YAML::Key << "max_batches" << YAML::Value << spec.inference().max_batches();
  out << YAML::EndMap;
  out << YAML::Key << "validity" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_iqr_over_median" << YAML::Value << spec.validity().max_iqr_over_median();
  out << YAML::EndMap;
  out << YAML::Key << "power" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "idle_baseline_seconds" << YAML::Value << spec.power().idle_baseline_seconds();
  out << YAML::EndMap;
  out << YAML::Key << "cost" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "usd_per_hour" << YAML::Value << YAML::Flow << YAML::BeginMap;
  std::map<std::string, double> rates(spec.cost().usd_per_hour().begin(), spec.cost().usd_per_hour().end());
  for (const auto& [k, v] : rates) out << YAML::Key << k << YAML::Value << v;
  out << YAML::EndMap;
  out << YAML::Key << "electricity_usd_per_kwh" << YAML::Value << spec.cost().electricity_usd_per_kwh();
  out << YAML::EndMap;
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << spec.layers().enabled();
  out << YAML::Key << "steps" << YAML::Value << spec.layers().steps();
  out << YAML::Key << "energy_seconds" << YAML::Value << spec.layers().energy_seconds();
  out << YAML::EndMap;
  if (!spec.torchscript().path().empty() || spec.torchscript().input_shape_size() > 0) {
    out << YAML::Key << "torchscript" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "path" << YAML::Value << spec.torchscript().path();
    out << YAML::Key << "input_shape" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int64_t d : spec.torchscript().input_shape()) out << d;
    out << YAML::EndSeq << YAML::EndMap;
  }
  const v1::QpuSpec& q = spec.qpu();
  out << YAML::Key << "qpu" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "qubits" << YAML::Value << q.qubits() << YAML::Key << "layers" << YAML::Value << q.layers();
  out << YAML::Key << "depth" << YAML::Value << q.depth() << YAML::Key << "fused" << YAML::Value << q.fused();
  out << YAML::Key << "precision" << YAML::Value << q.precision();
  out << YAML::Key << "circuits" << YAML::Value << q.circuits();
  if (!q.backend().empty()) out << YAML::Key << "backend" << YAML::Value << q.backend();
  out << YAML::EndMap;
  const v1::ParallelSpec& par = spec.parallel();
  if (par.devices_size() > 0) {
    out << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "devices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (int32_t d : par.devices()) out << d;
    out << YAML::EndSeq;
    out << YAML::Key << "strategy" << YAML::Value << par.strategy();
    out << YAML::Key << "gang_timeout_seconds" << YAML::Value << par.gang_timeout_seconds();
    out << YAML::Key << "collective_timeout_seconds" << YAML::Value << par.collective_timeout_seconds();
    out << YAML::EndMap;
  }
  if (spec.split().stages_size() > 0) {
    out << YAML::Key << "split" << YAML::Value << YAML::BeginMap << YAML::Key << "stages" << YAML::Value
        << YAML::BeginSeq;
    for (const v1::SplitStage& st : spec.split().stages()) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "layers" << YAML::Value << st.layers();
      out << YAML::Key << "target" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "device_kind" << YAML::Value << DeviceKindName(st.target().device_kind());
      if (!st.target().agent_id().empty()) out << YAML::Key << "agent_id" << YAML::Value << st.target().agent_id();
      out << YAML::EndMap << YAML::EndMap;
    }
    out << YAML::EndSeq;
    if (spec.split().across_agents()) {
      out << YAML::Key << "across_agents" << YAML::Value << true;
      out << YAML::Key << "gang_timeout_seconds" << YAML::Value << spec.split().gang_timeout_seconds();
      out << YAML::Key << "collective_timeout_seconds" << YAML::Value << spec.split().collective_timeout_seconds();
    }
    out << YAML::EndMap;
  }
  EmitServing(spec, out);
  EmitValidate(spec, out);
  out << YAML::Key << "seed" << YAML::Value << spec.seed();
  out << YAML::Key << "threads" << YAML::Value << spec.threads();
  if (spec.repeats() != 0) out << YAML::Key << "repeats" << YAML::Value << spec.repeats();
  if (spec.one_at_a_time()) out << YAML::Key << "one_at_a_time" << YAML::Value << true;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace hetbench
