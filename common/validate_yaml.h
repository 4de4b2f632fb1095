#pragma once
/// The job spec's `validate:` section in YAML (spec_yaml.cc calls these).
/// A saved baseline is not written in YAML: `hetbench validate --baseline
/// FILE` reads the JSON `hetbench baseline save` wrote.

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::yaml {

absl::Status ParseValidate(const YAML::Node& node, v1::JobSpec& spec);
/// Writes the section when the spec has a level (a baseline as its name and version only).
void EmitValidate(const v1::JobSpec& spec, YAML::Emitter& out);

}  // namespace hetbench::yaml
