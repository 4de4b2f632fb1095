#include "agent/devices/cpu_discovery.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace hetbench::agent {

namespace {

// ISA extensions that decide which math kernels run.
const std::set<std::string>& InterestingFlags() {
  static const std::set<std::string> flags = {
      "sse4_2",      "avx",      "avx2",     "fma",      "f16c",  "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
      "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve",     "sve2",     "neon"};
  return flags;
}

std::string Trim(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

}  // namespace

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

absl::StatusOr<v1::Device> DiscoverCpu(const std::string& proc_root, int usable_cores) {
  std::ifstream cpuinfo(proc_root + "/cpuinfo");
  if (!cpuinfo) return absl::NotFoundError(absl::StrCat(proc_root, "/cpuinfo: cannot be read"));
  v1::Device dev;
  dev.set_id("cpu0");
  dev.set_kind(v1::DEVICE_KIND_CPU);
  int processors = 0;
  std::set<std::string> flags;
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (key == "processor") {
      ++processors;
    } else if ((key == "model name" || key == "Model" || key == "cpu model") && dev.model().empty()) {
      dev.set_model(value);
    } else if ((key == "flags" || key == "Features") && flags.empty()) {
      for (absl::string_view f : absl::StrSplit(value, ' ', absl::SkipEmpty())) {
        std::string flag(f);
        if (InterestingFlags().count(flag)) flags.insert(flag);
      }
    } else if (key == "CPU implementer" && !dev.attributes().contains("cpu_implementer")) {
      (*dev.mutable_attributes())["cpu_implementer"] = value;
    } else if (key == "CPU part" && !dev.attributes().contains("cpu_part")) {
      (*dev.mutable_attributes())["cpu_part"] = value;
    }
  }
  if (processors == 0) return absl::DataLossError(absl::StrCat(proc_root, "/cpuinfo: lists no processor"));
  if (dev.model().empty()) {
    // arm64 kernels print no model name; name the core from implementer/part.
    static const std::map<std::string, std::string> kArmParts = {
        {"0x41/0xd08", "ARM Cortex-A72"},   {"0x41/0xd0c", "ARM Neoverse-N1"}, {"0x41/0xd40", "ARM Neoverse-V1"},
        {"0x41/0xd42", "ARM Cortex-A78AE"}, {"0x41/0xd49", "ARM Neoverse-N2"}, {"0x41/0xd4f", "ARM Neoverse-V2"}};
    const auto& attrs = dev.attributes();
    auto impl = attrs.find("cpu_implementer");
    auto part = attrs.find("cpu_part");
    std::string model = "unknown CPU";
    if (impl != attrs.end() && part != attrs.end()) {
      auto it = kArmParts.find(impl->second + "/" + part->second);
      model = it != kArmParts.end() ? it->second
                                    : absl::StrCat("Arm CPU implementer ", impl->second, " part ", part->second);
    }
    dev.set_model(model);
  }
  dev.set_cores(usable_cores > 0 ? std::min(usable_cores, processors) : processors);
  for (const std::string& f : flags) dev.add_isa_flags(f);

  std::ifstream meminfo(proc_root + "/meminfo");
  while (meminfo && std::getline(meminfo, line)) {
    if (absl::StartsWith(line, "MemTotal:")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t kib = 0;
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) dev.set_memory_bytes(kib * 1024);
      break;
    }
  }
  return dev;
}

}  // namespace hetbench::agent
