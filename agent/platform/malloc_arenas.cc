#include "agent/platform/malloc_arenas.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace hetbench::agent {

namespace {
std::string& Note() {
  static std::string note;
  return note;
}
}  // namespace

MallocPlan PlanMalloc(const char* arena_max, const char* tunables, const char* marker) {
  MallocPlan plan;
  if (marker != nullptr && arena_max != nullptr && std::string_view(arena_max) == "1") {
    plan.note = kAgentMallocNote;
  } else if (arena_max != nullptr) {
    plan.note = "glibc malloc as the environment sets it (MALLOC_ARENA_MAX=" +
                std::string(std::string_view(arena_max).substr(0, 16)) + ")";
  } else if (tunables != nullptr && std::string_view(tunables).find("malloc") != std::string_view::npos) {
    plan.note = "glibc malloc as the environment sets it (GLIBC_TUNABLES)";
  } else {
    plan.reexec = true;
  }
  return plan;
}

std::string SetAgentMalloc(char** argv) {
  MallocPlan plan = PlanMalloc(getenv("MALLOC_ARENA_MAX"), getenv("GLIBC_TUNABLES"), getenv(kAgentMallocMarker));
  if (plan.reexec) {
    setenv("MALLOC_ARENA_MAX", "1", 1);
    setenv("MALLOC_MMAP_THRESHOLD_", "33554432", 1);    // 32 MiB, glibc's largest
    setenv("MALLOC_TRIM_THRESHOLD_", "4294967296", 1);  // 4 GiB: freed memory stays for reuse
    setenv(kAgentMallocMarker, "1", 1);
    execv("/proc/self/exe", argv);
    // Only on failure: threads that allocated before main keep their arenas.
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    plan.note =
        "glibc malloc set by mallopt (re-exec failed: threads started before main may have arenas of their own)";
  }
  Note() = plan.note;
  return Note();
}

std::string AgentMallocNote() { return Note(); }

}  // namespace hetbench::agent
