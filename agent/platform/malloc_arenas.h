#pragma once
/// The agent's malloc, set so a model's steps do not fault their memory in
/// again and again.
///
/// The agent runs tasks on worker threads. glibc gives such threads malloc
/// arenas of their own, and both they and the main arena give a step's large
/// freed blocks back to the system by heuristics (a dynamic mmap threshold,
/// trimming) that depend on the order of the first frees: the next step
/// faults the pages in again. On the development VM (AMD EPYC, 2 cores, cnn,
/// batch 64, one LibTorch thread) that was ~80,000 page faults a second and
/// a step of 84-89 ms, against 70-74 ms without the churn; with one arena
/// alone runs still fell either way. So the agent starts itself again with
/// one arena, the largest mmap threshold (32 MiB: smaller blocks come from
/// the heap) and a trim threshold of 4 GiB (freed memory stays for reuse, so
/// the agent's RSS stays near its largest task's peak). glibc reads them at
/// process start, before any library's threads allocate (mallopt in main is
/// too late: OpenBLAS starts its threads in a constructor). Child processes
/// (the Python runner) inherit them. An operator's own
/// settings (MALLOC_ARENA_MAX, or malloc tunables in GLIBC_TUNABLES) are
/// kept as they are.

#include <string>

namespace hetbench::agent {

/// The environment variable that marks the malloc settings as the agent's own.
inline constexpr char kAgentMallocMarker[] = "HETBENCH_AGENT_MALLOC";
inline constexpr char kAgentMallocNote[] =
    "glibc malloc, one arena, mmap threshold 32 MiB, trim threshold 4 GiB (set by the agent)";

struct MallocPlan {
  bool reexec = false;  // start again with the settings and the marker
  std::string note;     // what the task records (RunEnvironment.malloc)
};

/// The decision from the environment's values (null = unset).
MallocPlan PlanMalloc(const char* arena_max, const char* tunables, const char* marker);

/// Call first in main(): follows PlanMalloc, re-executing
/// /proc/self/exe with `argv` and MALLOC_ARENA_MAX=1,
/// MALLOC_MMAP_THRESHOLD_=32 MiB, MALLOC_TRIM_THRESHOLD_=4 GiB when it says
/// so (if that fails, falls back to mallopt and says so). Returns the note, as AgentMallocNote() then does.
std::string SetAgentMalloc(char** argv);

/// The note of SetAgentMalloc, or "" when it was not called (tests,
/// benches: their tasks run on the main thread).
std::string AgentMallocNote();

}  // namespace hetbench::agent
