#include "agent/devices/cpu_discovery.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace hetbench::agent {

namespace {

// ISA extensions that decide which math kernels run.
const std::set<std::string>& InterestingFlags() {
  static const std::set<std::string> flags = {
      "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
      "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "neon"};
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
  if (dev.model().empty()) dev.set_model("unknown CPU");
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
