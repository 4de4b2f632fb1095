#include "agent/executors/sample_buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace hetbench::agent {
namespace {

TEST(SampleBufferTest, RefusesBeyondCapacity) {
  SampleBuffer b(3);
  EXPECT_TRUE(b.Push({1, 1, 1, 1}));
  EXPECT_TRUE(b.Push({2, 2, 1, 1}));
  EXPECT_TRUE(b.Push({3, 3, 1, 1}));
  EXPECT_FALSE(b.Push({4, 4, 1, 1}));
  EXPECT_EQ(b.published(), 3u);
  EXPECT_EQ(b.at(2).start_ns, 3);
}

// A producer and a consumer at full speed across many chunks: the consumer
// sees every record exactly once, in order, with its contents intact.
TEST(SampleBufferTest, ConcurrentProducerAndConsumerSeeEveryRecordInOrder) {
  constexpr size_t kN = 5 * SampleBuffer::kChunk + 123;
  SampleBuffer b(kN);
  b.Reserve(SampleBuffer::kChunk);  // the rest is allocated lazily by the producer
  std::thread producer([&] {
    for (size_t i = 0; i < kN; ++i) {
      ASSERT_TRUE(b.Push({static_cast<int64_t>(i), static_cast<int64_t>(i * 3), static_cast<int32_t>(i % 7), 1}));
    }
  });
  size_t seen = 0;
  bool intact = true;
  while (seen < kN) {
    const size_t upto = b.published();
    for (; seen < upto; ++seen) {
      const SampleRecord& r = b.at(seen);
      intact = intact && r.start_ns == static_cast<int64_t>(seen) && r.duration_ns == static_cast<int64_t>(seen * 3) &&
               r.items == static_cast<int32_t>(seen % 7);
    }
  }
  producer.join();
  EXPECT_EQ(seen, kN);
  EXPECT_TRUE(intact);
}

}  // namespace
}  // namespace hetbench::agent
