#pragma once
/// What a bench prints beside its figures: the CPU they were taken on
/// (figures from different CPUs are never compared).

#include <fstream>
#include <string>

namespace hetbench::bench {

/// /proc/cpuinfo's first "model name" with its family and model numbers
/// ("AMD EPYC (family 26, model 2)"): a VM may name two different CPUs
/// alike. "unknown CPU" without a model name.
inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string name, family, model;
  const auto value = [](const std::string& line) {
    const size_t colon = line.find(':');
    return colon == std::string::npos || colon + 2 > line.size() ? std::string() : line.substr(colon + 2);
  };
  for (std::string line; std::getline(in, line) && !line.empty();) {  // the first processor's block
    if (line.rfind("model name", 0) == 0) {
      name = value(line);
    } else if (line.rfind("cpu family", 0) == 0) {
      family = value(line);
    } else if (line.rfind("model\t", 0) == 0) {
      model = value(line);
    }
  }
  if (name.empty()) return "unknown CPU";
  return family.empty() || model.empty() ? name : name + " (family " + family + ", model " + model + ")";
}

}  // namespace hetbench::bench
