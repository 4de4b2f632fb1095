// The agent's malloc settings. The decision from the environment, and the
// mechanism it relies on, in fresh processes (threadsafe death tests run the
// test binary again for one test, with the environment of the moment):
// MALLOC_ARENA_MAX=1 at process start keeps threads that allocate on the
// main arena, and without it each gets its own. glibc's malloc_info lists
// one <heap> per arena.
#include "agent/platform/malloc_arenas.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

TEST(MallocArenasTest, TheAgentSetsOneArenaUnlessTheOperatorSetTheArenas) {
  EXPECT_TRUE(PlanMalloc(nullptr, nullptr, nullptr).reexec);
  EXPECT_TRUE(PlanMalloc(nullptr, "glibc.rtld.nns=2", nullptr).reexec);
  MallocPlan own = PlanMalloc("1", nullptr, "1");
  EXPECT_FALSE(own.reexec);
  EXPECT_EQ(own.note, kAgentMallocNote);
  MallocPlan operators = PlanMalloc("4", nullptr, nullptr);
  EXPECT_FALSE(operators.reexec);
  EXPECT_EQ(operators.note, "glibc malloc as the environment sets it (MALLOC_ARENA_MAX=4)");
  EXPECT_FALSE(PlanMalloc(nullptr, "glibc.malloc.trim_threshold=0", nullptr).reexec);
  // An operator's 1 without the marker is the operator's; a long value is not echoed whole.
  EXPECT_THAT(PlanMalloc("1", nullptr, nullptr).note, HasSubstr("as the environment sets it"));
  EXPECT_EQ(PlanMalloc(std::string(1000, '7').c_str(), nullptr, nullptr).note.size(),
            std::string("glibc malloc as the environment sets it (MALLOC_ARENA_MAX=)").size() + 16);
  EXPECT_EQ(AgentMallocNote(), "") << "the test binary never called SetAgentMalloc";
}

// Allocates from 3 threads at once, then exits with the number of arenas.
[[noreturn]] void ExitWithArenaCount() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) free(malloc(4096 + i));
    });
  }
  for (std::thread& t : threads) t.join();
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  malloc_info(0, f);
  fclose(f);
  int heaps = 0;
  for (std::string s(text, size); s.find("<heap nr=") != std::string::npos; s = s.substr(s.find("<heap nr=") + 1)) {
    ++heaps;
  }
  _exit(heaps);
}

bool MoreThanOne(int status) { return WIFEXITED(status) && WEXITSTATUS(status) > 1; }

TEST(MallocArenasDeathTest, OneArenaAtProcessStartKeepsEveryThreadOnTheMainArena) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  unsetenv("GLIBC_TUNABLES");
  setenv("MALLOC_ARENA_MAX", "1", 1);
  EXPECT_EXIT(ExitWithArenaCount(), ::testing::ExitedWithCode(1), "");
  unsetenv("MALLOC_ARENA_MAX");
  EXPECT_EXIT(ExitWithArenaCount(), MoreThanOne, "");
}

}  // namespace
}  // namespace hetbench::agent
