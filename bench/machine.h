#pragma once
/// What a bench prints beside its figures: the CPU they were taken on
/// (figures from different CPUs are never compared).

#include <fstream>
#include <string>

namespace hetbench::bench {

/// /proc/cpuinfo's first "model name" ("AMD EPYC"), or "unknown CPU".
inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

}  // namespace hetbench::bench
