#include "common/hash.h"

#include <gtest/gtest.h>

namespace hetbench {
namespace {

// The published FNV-1a 64-bit test vectors: fingerprints computed in C++ and
// by the Python runner (agent/runners/torch_runner.py) must agree.
TEST(Fnv1aTest, MatchesThePublishedVectors) {
  EXPECT_EQ(Fnv1a(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a("foobar"), 0x85944171f73967e8ULL);
}

TEST(Fnv1aTest, ContinuesAcrossChunks) {
  EXPECT_EQ(Fnv1a(Fnv1a("foo"), "bar", 3), Fnv1a("foobar"));
}

}  // namespace
}  // namespace hetbench
