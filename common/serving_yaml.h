#pragma once
/// The job spec's `serving:` section in YAML, its `decoder:` part included
/// (spec_yaml.cc calls these).

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::yaml {

absl::Status ParseServing(const YAML::Node& node, v1::JobSpec& spec);
/// Writes the section when the spec has one.
void EmitServing(const v1::JobSpec& spec, YAML::Emitter& out);

}  // namespace hetbench::yaml
