#include "job_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "common/serving_spec.h"
#include "common/validate_spec.h"

namespace hetbench {

namespace {

// The zoo, once: each model, whether it is one stack of top-level layers (so
// it can be split into stages and trained data-parallel), and whether the
// Python runner (agent/runners/torch_runner.py) implements it too. The C++
// zoo (RunnerFingerprintTest, WorkloadTest) and the runner's probe are
// checked against this table.
struct ModelEntry {
  const char* name;
  bool layer_stack;
  bool python_runner;
};
constexpr ModelEntry kZoo[] = {
    {"mlp", true, true},         {"cnn", true, true},          {"rnn", true, true},           {"lstm", true, true},
    {"autoencoder", true, true}, {"conv6", true, false},       {"vgg16", true, false},        {"resnet18", true, false},
    {"cyclegan", false, false},  {"transformer", true, false}, {"torchscript", false, false}, {"qnn", true, false},
    {"qsim", false, false},
};

std::vector<std::string> ZooNames(bool ModelEntry::*only) {
  std::vector<std::string> out;
  for (const ModelEntry& m : kZoo) {
    if (only == nullptr || m.*only) out.emplace_back(m.name);
  }
  return out;
}

}  // namespace

const std::vector<std::string>& KnownModels() {
  static const std::vector<std::string> models = ZooNames(nullptr);
  return models;
}

const std::vector<std::string>& PythonRunnerModels() {
  static const std::vector<std::string> models = ZooNames(&ModelEntry::python_runner);
  return models;
}

const std::vector<std::string>& KnownExecutors() {
  static const std::vector<std::string> kExecutors = {"torch", "python", "statevector"};
  return kExecutors;
}

std::string DefaultExecutor(const v1::Device& device) {
  if (device.executors_size() > 0) return device.executors(0);
  return device.kind() == v1::DEVICE_KIND_QPU_SIM ? "statevector" : "torch";
}

std::vector<std::string> UpgradeOldSpellings(v1::JobSpec* spec) {
  std::vector<std::string> notices;
  auto executor = [&](v1::TargetSelector* t, const std::string& field) {
    if (t->executor() != "qsim") return;  // "qsim" is the circuit model; the executor is "statevector"
    t->set_executor("statevector");
    notices.push_back(absl::StrCat(field, ".executor: \"qsim\" is now spelled \"statevector\" (accepted)"));
  };
  for (int i = 0; i < spec->targets_size(); ++i) executor(spec->mutable_targets(i), absl::StrCat("targets[", i, "]"));
  for (int i = 0; i < spec->split().stages_size(); ++i) {
    executor(spec->mutable_split()->mutable_stages(i)->mutable_target(), absl::StrCat("split.stages[", i, "].target"));
  }
  return notices;
}

bool IsKnownExecutor(const std::string& name) {
  const auto& k = KnownExecutors();
  return std::find(k.begin(), k.end(), name) != k.end();
}

const std::vector<std::string>& KnownDatasets() {
  static const std::vector<std::string> kDatasets = {"fashion-mnist"};
  return kDatasets;
}

v1::JobSpec WithDefaults(v1::JobSpec spec) {
  FillValidateDefaults(&spec);  // its models and targets, before the benchmark's defaults
  // `model: X` stays as written (errors name the field the user wrote) and
  // becomes models: [X]; both set differently is left for ValidateJobSpec.
  if (spec.models().empty()) spec.add_models(spec.model().empty() ? "mlp" : spec.model());
  if (spec.name().empty()) spec.set_name(absl::StrJoin(spec.models(), "+"));
  if (spec.layers().enabled() && spec.layers().steps() == 0) spec.mutable_layers()->set_steps(20);
  const bool qsim = std::find(spec.models().begin(), spec.models().end(), "qsim") != spec.models().end();
  v1::QpuSpec* q = spec.mutable_qpu();
  if (q->qubits() == 0) q->set_qubits(qsim && spec.models_size() == 1 ? 20 : 8);
  if (q->layers() == 0) q->set_layers(2);
  if (q->depth() == 0) q->set_depth(10);
  if (q->precision().empty()) q->set_precision("complex64");
  if (q->circuits() == 0) q->set_circuits(10);
  if (spec.batch_sizes().empty()) spec.add_batch_sizes(128);
  if (spec.targets().empty()) spec.add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
  if (spec.dataset().empty()) spec.set_dataset("fashion-mnist");
  if (!spec.has_seed()) spec.set_seed(42);
  if (spec.repeats() == 0 && !IsValidate(spec)) spec.set_repeats(1);
  v1::TrainSpec* t = spec.mutable_train();
  if (!t->has_warmup_steps()) t->set_warmup_steps(10);
  if (!t->has_min_duration_seconds()) t->set_min_duration_seconds(1.0);
  if (t->max_steps() == 0) t->set_max_steps(1'000'000);
  if (t->epochs() == 0) t->set_epochs(1.0);
  if (t->learning_rate() == 0) t->set_learning_rate(1e-3);
  if (!spec.validity().has_max_iqr_over_median()) spec.mutable_validity()->set_max_iqr_over_median(0.25);
  spec.mutable_layers();
  spec.mutable_power();  // present even when empty, so the effective spec has one shape
  spec.mutable_cost();
  v1::InferenceSpec* inf = spec.mutable_inference();
  if (!inf->has_warmup_batches()) inf->set_warmup_batches(2);
  if (spec.parallel().devices_size() > 0) {
    v1::ParallelSpec* p = spec.mutable_parallel();
    if (p->strategy().empty()) p->set_strategy("data");
    if (p->gang_timeout_seconds() == 0) p->set_gang_timeout_seconds(600);
    if (p->collective_timeout_seconds() == 0) p->set_collective_timeout_seconds(30);
  }
  if (spec.split().across_agents()) {
    v1::SplitSpec* sp = spec.mutable_split();
    if (sp->gang_timeout_seconds() == 0) sp->set_gang_timeout_seconds(600);
    if (sp->collective_timeout_seconds() == 0) sp->set_collective_timeout_seconds(30);
  }
  FillServingDefaults(&spec);
  return spec;
}

namespace {

// Valid UTF-8 without control characters: what a name, label or path may
// hold (protobuf refuses to send invalid UTF-8, and a NUL or newline would
// not survive the YAML and log lines the spec ends up in).
bool IsPrintableUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    if (len == 1 && (c < 0x20 || c == 0x7f)) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0)) return false;
    i += len;
  }
  return true;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

absl::StatusOr<LayerRange> ParseLayerRange(const std::string& text) {
  const std::string s(absl::StripAsciiWhitespace(text));
  auto number = [](absl::string_view v, int* out) {
    return !v.empty() && v.size() <= 4 && absl::SimpleAtoi(v, out) && *out >= 0;
  };
  LayerRange r;
  const size_t dash = s.find('-');
  if (dash == std::string::npos) {
    if (!number(s, &r.begin)) return absl::InvalidArgumentError("not a layer range; write \"2\", \"0-3\" or \"4-\"");
    r.end = r.begin + 1;
    return r;
  }
  int last = 0;
  if (!number(absl::string_view(s).substr(0, dash), &r.begin)) {
    return absl::InvalidArgumentError("not a layer range; write \"2\", \"0-3\" or \"4-\"");
  }
  const absl::string_view tail = absl::string_view(s).substr(dash + 1);
  if (tail.empty()) return r;  // open: to the last layer
  if (!number(tail, &last) || last < r.begin) {
    return absl::InvalidArgumentError("not a layer range; write \"2\", \"0-3\" (first <= last) or \"4-\"");
  }
  r.end = last + 1;
  return r;
}

std::optional<v1::SplitStage> ParseStageFlag(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::optional<v1::DeviceKind> kind = ParseDeviceKind(text.substr(colon + 1));
  if (!kind) return std::nullopt;
  v1::SplitStage stage;
  stage.set_layers(text.substr(0, colon));
  stage.mutable_target()->set_device_kind(*kind);
  return stage;
}

const std::vector<std::string>& LayerStackModels() {
  static const std::vector<std::string> models = ZooNames(&ModelEntry::layer_stack);
  return models;
}

bool IsLayerStackModel(const std::string& model) { return Contains(LayerStackModels(), model); }

namespace {

// The problems found in a spec, each naming its field and the fix.
struct Problems {
  std::vector<std::string> list;
  template <typename... Parts>
  void operator()(const Parts&... parts) {
    list.push_back(absl::StrCat(parts...));
  }
};

// Free text must be printable UTF-8 (found by fuzzing: a NUL in a name did not survive the YAML round trip).
void Printable(Problems& bad, const std::string& field, const std::string& value) {
  if (!IsPrintableUtf8(value)) bad(field, ": contains a control character or invalid UTF-8; use printable text");
}

// List counts: checked before any entry, so the work done on a hostile spec does not grow with its size.
void CheckCounts(const v1::JobSpec& spec, Problems& bad) {
  if (spec.models_size() > SpecLimits::kMaxModels) {
    bad("models: ", spec.models_size(), " entries: at most ", SpecLimits::kMaxModels, " allowed");
  }
  if (spec.batch_sizes_size() > SpecLimits::kMaxBatchSizes) {
    bad("batch_sizes: ", spec.batch_sizes_size(), " entries: at most ", SpecLimits::kMaxBatchSizes, " allowed");
  }
  if (spec.targets_size() > SpecLimits::kMaxTargets) {
    bad("targets: ", spec.targets_size(), " entries: at most ", SpecLimits::kMaxTargets, " allowed");
  }
  if (spec.cost().usd_per_hour_size() > 256) {
    bad("cost.usd_per_hour: ", spec.cost().usd_per_hour_size(), " entries: at most 256 allowed");
  }
  for (int i = 0; i < spec.targets_size() && i <= SpecLimits::kMaxTargets; ++i) {
    if (spec.targets(i).labels_size() > 64) {
      bad("targets[", i, "].labels: ", spec.targets(i).labels_size(), " entries: at most 64 allowed");
    }
  }
  if (spec.torchscript().input_shape_size() > 8) {
    bad("torchscript.input_shape: ", spec.torchscript().input_shape_size(),
        " dimensions: give 1 to 8, without the batch, e.g. [1, 28, 28]");
  }
}

// The name and free text.
void CheckText(const v1::JobSpec& spec, Problems& bad) {
  if (spec.name().size() > SpecLimits::kMaxNameLength) {
    bad("name: ", spec.name().size(), " characters: must be at most ", SpecLimits::kMaxNameLength);
  }
  Printable(bad, "name", spec.name());
  Printable(bad, "torchscript.path", spec.torchscript().path());
  Printable(bad, "serving.decoder.torchscript", spec.serving().decoder().torchscript());
  for (int i = 0; i < spec.targets_size(); ++i) {
    Printable(bad, absl::StrCat("targets[", i, "].agent_id"), spec.targets(i).agent_id());
    Printable(bad, absl::StrCat("targets[", i, "].device_id"), spec.targets(i).device_id());
    for (const auto& [k, v] : spec.targets(i).labels()) Printable(bad, absl::StrCat("targets[", i, "].labels"), k + v);
  }
  for (const auto& [k, v] : spec.cost().usd_per_hour()) Printable(bad, "cost.usd_per_hour", k);
}

// models, and the torchscript section a "torchscript" model needs.
void CheckModels(const v1::JobSpec& spec, Problems& bad) {
  const bool from_model = !spec.model().empty() && spec.models_size() == 1 && spec.models(0) == spec.model();
  if (!spec.model().empty() && !from_model) {
    bad("model = \"", spec.model(), "\" and models: both set; list every model under models");
  }
  if (spec.models_size() == 0) bad("models: empty: give at least one, e.g. [mlp]");
  for (int i = 0; i < spec.models_size(); ++i) {
    const std::string& m = spec.models(i);
    if (!Contains(KnownModels(), m) && !IsServingOnlyModel(m) && m != kValidateModel) {
      bad(from_model ? "model" : absl::StrCat("models[", i, "]"), " = \"", m,
          "\": unknown model; use one of: ", absl::StrJoin(KnownModels(), ", "));
    }
    for (int j = 0; j < i; ++j) {
      if (spec.models(j) == m) {
        bad("models[", i, "] = \"", m, "\": repeats models[", j, "]; list each model once");
        break;
      }
    }
  }
  const bool wants_script = Contains({spec.models().begin(), spec.models().end()}, "torchscript");
  const v1::TorchScriptSpec& ts = spec.torchscript();
  if (wants_script) {
    if (ts.path().empty())
      bad("torchscript.path: empty: the model \"torchscript\" needs the .pt file's path on the agent");
    if (ts.input_shape_size() == 0 || ts.input_shape_size() > 8) {
      bad("torchscript.input_shape: ", ts.input_shape_size(),
          " dimensions: give 1 to 8, without the batch, e.g. [1, 28, 28]");
    }
    int64_t numel = 1;
    for (int i = 0; i < ts.input_shape_size(); ++i) {
      const int64_t d = ts.input_shape(i);
      if (d < 1 || d > 1'000'000) {
        bad("torchscript.input_shape[", i, "] = ", d, ": must be in [1, 1000000]");
      } else {
        numel *= d;
        if (numel > 100'000'000) {
          bad("torchscript.input_shape: more than 100000000 values per sample");
          break;
        }
      }
    }
  } else if (!ts.path().empty() || ts.input_shape_size() > 0) {
    bad("torchscript: set, but models does not list \"torchscript\"; add it or remove the torchscript section");
  }
}

// The quantum simulator and the layer profile.
void CheckQpuAndLayers(const v1::JobSpec& spec, Problems& bad) {
  const v1::QpuSpec& q = spec.qpu();
  if (q.qubits() < 1 || q.qubits() > 34) bad("qpu.qubits = ", q.qubits(), ": must be in [1, 34]");
  if (q.layers() < 0 || q.layers() > 100) bad("qpu.layers = ", q.layers(), ": must be in [0, 100]");
  if (q.depth() < 1 || q.depth() > 10000) bad("qpu.depth = ", q.depth(), ": must be in [1, 10000]");
  if (q.circuits() < 1 || q.circuits() > 100000) bad("qpu.circuits = ", q.circuits(), ": must be in [1, 100000]");
  if (q.precision() != "complex64" && q.precision() != "complex128") {
    bad("qpu.precision = \"", q.precision(), "\": use complex64 or complex128");
  }
  if (!q.backend().empty() && q.backend() != "native" && q.backend() != "tensor") {
    bad("qpu.backend = \"", q.backend(), "\": use native (SIMD kernels) or tensor (LibTorch tensor ops)");
  }
  if (spec.layers().steps() < 0 || spec.layers().steps() > 10000) {
    bad("layers.steps = ", spec.layers().steps(), ": must be in [0, 10000] (0 = default 20)");
  }
  if (!(spec.layers().energy_seconds() >= 0 && spec.layers().energy_seconds() <= 60)) {
    bad("layers.energy_seconds = ", spec.layers().energy_seconds(),
        ": must be in [0, 60] seconds per layer and phase (0 = off)");
  }
  if (spec.layers().energy_seconds() > 0 && !spec.layers().enabled()) {
    bad("layers.energy_seconds = ", spec.layers().energy_seconds(),
        ": needs layers.enabled (CLI --layers): it repeats the profiled layers");
  }
}

// The dataset, batch sizes and target selectors.
void CheckDataAndTargets(const v1::JobSpec& spec, Problems& bad) {
  if (!Contains(KnownDatasets(), spec.dataset())) {
    bad("dataset = \"", spec.dataset(), "\": unknown dataset; use one of: ", absl::StrJoin(KnownDatasets(), ", "));
  }
  if (spec.batch_sizes_size() == 0) bad("batch_sizes: empty: give at least one batch size, e.g. [128]");
  for (int i = 0; i < spec.batch_sizes_size(); ++i) {
    const int b = spec.batch_sizes(i);
    if (b < 1) bad("batch_sizes[", i, "] = ", b, ": must be >= 1");
    if (b > SpecLimits::kMaxBatchSize) bad("batch_sizes[", i, "] = ", b, ": must be <= ", SpecLimits::kMaxBatchSize);
    for (int j = 0; j < i; ++j) {
      if (spec.batch_sizes(j) == b) {
        bad("batch_sizes[", i, "] = ", b, ": repeats batch_sizes[", j, "]; list each batch size once");
        break;
      }
    }
  }
  if (spec.targets_size() == 0) bad("targets: empty: give at least one, e.g. [{device_kind: cpu}]");
  for (int i = 0; i < spec.targets_size(); ++i) {
    const v1::TargetSelector& t = spec.targets(i);
    if (!v1::DeviceKind_IsValid(t.device_kind())) {
      bad("targets[", i, "].device_kind = ", static_cast<int>(t.device_kind()),
          ": unknown kind; use cpu, gpu, tpu, dpu or qpu-sim");
    }
    if (t.agent_id().size() > 256 || t.device_id().size() > 256)
      bad("targets[", i, "]: an id longer than 256 characters");
    if (!t.device_id().empty() && t.agent_id().empty())
      bad("targets[", i, "].device_id: give targets[", i, "].agent_id too");
    if (!t.executor().empty() && !IsKnownExecutor(t.executor())) {
      bad("targets[", i, "].executor = \"", t.executor(), "\": unknown; use ", absl::StrJoin(KnownExecutors(), ", "),
          " or leave it out for the device's default");
    }
    if (t.executor() == "python") {
      for (const std::string& m : spec.models()) {
        if (Contains(KnownModels(), m) && !Contains(PythonRunnerModels(), m)) {
          bad("targets[", i, "].executor = \"python\" with model \"", m, "\": the Python runner implements ",
              absl::StrJoin(PythonRunnerModels(), ", "), "; run ", m, " with the torch executor (leave :python out)");
        }
      }
    }
  }
}

// parallel: data-parallel gangs; returns the ranks per model x target x batch size.
int64_t CheckParallel(const v1::JobSpec& spec, Problems& bad) {
  const v1::ParallelSpec& par = spec.parallel();
  int64_t ranks_per_combination = 1;
  if (par.devices_size() > 0 || !par.strategy().empty()) {
    if (par.devices_size() == 0) bad("parallel.devices: empty: give the device counts, e.g. [1, 2, 4]");
    if (par.devices_size() > 16) bad("parallel.devices: ", par.devices_size(), " entries: at most 16 allowed");
    ranks_per_combination = 0;
    for (int i = 0; i < par.devices_size() && i < 16; ++i) {
      const int n = par.devices(i);
      if (n < 1 || n > SpecLimits::kMaxGangSize) {
        bad("parallel.devices[", i, "] = ", n, ": must be in [1, ", SpecLimits::kMaxGangSize, "]");
      } else {
        ranks_per_combination += n;
      }
      for (int j = 0; j < i; ++j) {
        if (par.devices(j) == n) {
          bad("parallel.devices[", i, "] = ", n, ": repeats parallel.devices[", j, "]; list each count once");
          break;
        }
      }
    }
    if (par.strategy() != "data") {
      bad("parallel.strategy = \"", par.strategy(), "\": only \"data\" (data-parallel training) is supported");
    }
    if (!(par.gang_timeout_seconds() > 0) || par.gang_timeout_seconds() > SpecLimits::kMaxDurationSeconds) {
      bad("parallel.gang_timeout_seconds = ", par.gang_timeout_seconds(), ": must be in (0, ",
          SpecLimits::kMaxDurationSeconds, "]");
    }
    if (!(par.collective_timeout_seconds() >= 1) || par.collective_timeout_seconds() > 3600) {
      bad("parallel.collective_timeout_seconds = ", par.collective_timeout_seconds(), ": must be in [1, 3600]");
    }
    for (const std::string& m : spec.models()) {
      if (!IsLayerStackModel(m)) {
        bad("parallel: model \"", m, "\" cannot train data-parallel; use a layer-stack model (",
            absl::StrJoin(LayerStackModels(), ", "), ")");
      }
    }
  }
  return ranks_per_combination;
}

// split: stages on one agent or across agents (a gang of its stages).
void CheckSplit(const v1::JobSpec& spec, int64_t* ranks_per_combination, Problems& bad) {
  const v1::ParallelSpec& par = spec.parallel();
  const v1::SplitSpec& split = spec.split();
  if (split.stages_size() > 0) {
    if (par.devices_size() > 0) bad("split and parallel: both set; a job is either split or data-parallel");
    if (split.stages_size() < 2 || split.stages_size() > 8) {
      bad("split.stages: ", split.stages_size(), " stages: give 2 to 8");
    }
    int expect = 0;
    for (int i = 0; i < split.stages_size() && i < 8; ++i) {
      auto range = ParseLayerRange(split.stages(i).layers());
      const std::string field = absl::StrCat("split.stages[", i, "].layers = \"", split.stages(i).layers(), "\"");
      if (!range.ok()) {
        bad(field, ": ", range.status().message());
        break;
      }
      if (range->begin != expect) {
        bad(field, ": must start at layer ", expect, " (stages are contiguous, from layer 0)");
        break;
      }
      const bool last = i + 1 == split.stages_size();
      if (range->end < 0 && !last) {
        bad(field, ": an open range (\"N-\") must be the last stage");
        break;
      }
      if (last && range->end >= 0) {
        // A closed last stage is checked against the model's depth on the agent.
      }
      expect = range->end;
      const v1::TargetSelector& t = split.stages(i).target();
      if (!v1::DeviceKind_IsValid(t.device_kind())) bad("split.stages[", i, "].target.device_kind: unknown kind");
    }
    for (const std::string& m : spec.models()) {
      if (!IsLayerStackModel(m)) {
        bad("split: model \"", m, "\" is not one layer stack; use one of ", absl::StrJoin(LayerStackModels(), ", "));
      }
    }
    if (spec.targets_size() > 1) {
      bad("split with ", spec.targets_size(), " targets: a split job has one target, the agent's first stage device");
    }
    if (split.across_agents()) {
      *ranks_per_combination = split.stages_size();  // a task per stage
      if (!(split.gang_timeout_seconds() > 0) || split.gang_timeout_seconds() > SpecLimits::kMaxDurationSeconds) {
        bad("split.gang_timeout_seconds = ", split.gang_timeout_seconds(), ": must be in (0, ",
            SpecLimits::kMaxDurationSeconds, "]");
      }
      if (!(split.collective_timeout_seconds() >= 1) || split.collective_timeout_seconds() > 3600) {
        bad("split.collective_timeout_seconds = ", split.collective_timeout_seconds(), ": must be in [1, 3600]");
      }
    }
  } else if (split.across_agents() || split.gang_timeout_seconds() != 0 || split.collective_timeout_seconds() != 0) {
    bad("split.across_agents and its timeouts need split.stages (e.g. --split 0-2:cpu,3-:cpu --split-across-agents)");
  }
}

// The number of tasks the spec expands to.
void CheckTaskCount(const v1::JobSpec& spec, int64_t ranks_per_combination, Problems& bad) {
  const v1::ParallelSpec& par = spec.parallel();
  const int64_t rates = std::max(spec.serving().qps_sweep_size(), 1);
  const int64_t repeats = std::clamp<int64_t>(spec.repeats(), 1, SpecLimits::kMaxRepeats);
  const int64_t tasks = static_cast<int64_t>(spec.batch_sizes_size()) * spec.targets_size() *
                        std::max(spec.models_size(), 1) * std::max<int64_t>(ranks_per_combination, 1) * rates *
                        repeats;
  if (tasks > SpecLimits::kMaxTasks) {
    bad(par.devices_size() > 0 ? "models x targets x batch_sizes x sum(parallel.devices)"
        : rates > 1            ? "models x targets x batch_sizes x serving.qps_sweep"
                               : "models x targets x batch_sizes",
        repeats > 1 ? " x repeats" : "", " = ", tasks, " tasks: at most ", SpecLimits::kMaxTasks,
        " per job; split the job");
  }
}

// train and inference bounds.
void CheckTrainAndInference(const v1::JobSpec& spec, Problems& bad) {
  const v1::TrainSpec& t = spec.train();
  if (t.warmup_steps() < 0 || t.warmup_steps() > SpecLimits::kMaxWarmupSteps) {
    bad("train.warmup_steps = ", t.warmup_steps(), ": must be in [0, ", SpecLimits::kMaxWarmupSteps, "]");
  }
  if (t.max_steps() < 1 || t.max_steps() > SpecLimits::kMaxMeasuredSteps) {
    bad("train.max_steps = ", t.max_steps(), ": must be in [1, ", SpecLimits::kMaxMeasuredSteps, "]");
  }
  if (t.min_steps() < 0) {
    bad("train.min_steps = ", t.min_steps(), ": must be >= 0 (0 means one pass of train.epochs)");
  } else if (t.min_steps() > t.max_steps()) {
    bad("train.min_steps = ", t.min_steps(), ": must be <= train.max_steps = ", t.max_steps());
  }
  if (!(t.min_duration_seconds() >= 0.0) || t.min_duration_seconds() > SpecLimits::kMaxDurationSeconds) {
    bad("train.min_duration_seconds = ", t.min_duration_seconds(), ": must be in [0, ", SpecLimits::kMaxDurationSeconds,
        "]");
  }
  if (!(t.epochs() > 0.0) || t.epochs() > SpecLimits::kMaxEpochs) {
    bad("train.epochs = ", t.epochs(), ": must be in (0, ", SpecLimits::kMaxEpochs, "]");
  }
  if (!(t.learning_rate() > 0.0) || t.learning_rate() > 10.0) {
    bad("train.learning_rate = ", t.learning_rate(), ": must be in (0, 10]");
  }
  const v1::InferenceSpec& inf = spec.inference();
  if (inf.warmup_batches() < 0 || inf.warmup_batches() > 10000) {
    bad("inference.warmup_batches = ", inf.warmup_batches(), ": must be in [0, 10000]");
  }
  if (inf.max_batches() < 0) bad("inference.max_batches = ", inf.max_batches(), ": must be >= 0 (0 = whole test set)");
}

// threads, power, cost and validity.
void CheckRest(const v1::JobSpec& spec, Problems& bad) {
  if (IsValidate(spec) && spec.repeats() > 1) {
    bad("repeats = ", spec.repeats(), ": a validation job repeats its own tests (validate.repetitions); remove repeats");
  } else if (spec.repeats() < 0 || spec.repeats() > SpecLimits::kMaxRepeats) {
    bad("repeats = ", spec.repeats(), ": must be in [1, ", SpecLimits::kMaxRepeats, "] (runs of every task)");
  }
  if (IsValidate(spec) && spec.one_at_a_time()) {
    bad("one_at_a_time: a benchmark's field (a validation job schedules its own tests); remove it");
  }
  if (spec.threads() < 0 || spec.threads() > SpecLimits::kMaxThreads) {
    bad("threads = ", spec.threads(), ": must be in [0, ", SpecLimits::kMaxThreads, "] (0 = all cores)");
  }
  if (!(spec.power().idle_baseline_seconds() >= 0) || spec.power().idle_baseline_seconds() > 600) {
    bad("power.idle_baseline_seconds = ", spec.power().idle_baseline_seconds(), ": must be in [0, 600]");
  }
  for (const auto& [key, rate] : spec.cost().usd_per_hour()) {
    const bool label = key.rfind("label:", 0) == 0 && key.find('=') != std::string::npos && key.size() > 8;
    if (!label && !ParseDeviceKind(key)) {
      bad("cost.usd_per_hour[\"", key,
          "\"]: unknown key; use a device kind (cpu, gpu, tpu, dpu, qpu-sim) or "
          "label:<key>=<value>");
    }
    if (!(rate >= 0) || rate > 1e6) bad("cost.usd_per_hour[\"", key, "\"] = ", rate, ": must be in [0, 1000000]");
  }
  const double spread = spec.validity().max_iqr_over_median();
  if (!(spread > 0) || spread > 100) {
    bad("validity.max_iqr_over_median = ", spread, ": must be in (0, 100]");
  }
  const double price = spec.cost().electricity_usd_per_kwh();
  if (!(price >= 0) || price > 100) bad("cost.electricity_usd_per_kwh = ", price, ": must be in [0, 100]");
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  Problems bad;
  CheckCounts(spec, bad);
  if (!bad.list.empty()) return absl::InvalidArgumentError(absl::StrCat("job spec: ", absl::StrJoin(bad.list, "; ")));
  CheckText(spec, bad);
  CheckModels(spec, bad);
  CheckQpuAndLayers(spec, bad);
  CheckDataAndTargets(spec, bad);
  int64_t ranks_per_combination = CheckParallel(spec, bad);
  CheckSplit(spec, &ranks_per_combination, bad);
  CheckTaskCount(spec, ranks_per_combination, bad);
  CheckTrainAndInference(spec, bad);
  CheckRest(spec, bad);
  CheckServing(spec, &bad.list);
  CheckValidate(spec, &bad.list);
  if (bad.list.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("job spec: ", absl::StrJoin(bad.list, "; ")));
}

}  // namespace hetbench
