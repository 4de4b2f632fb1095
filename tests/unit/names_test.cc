// Names and quoting shared by every binary (common/names.h).
#include "common/names.h"

#include <gtest/gtest.h>

namespace hetbench {
namespace {

TEST(QuotedInputTest, ShortInputIsQuotedWholeLongInputByAPrefixAndItsLength) {
  EXPECT_EQ(QuotedInput("mlp"), "'mlp'");
  EXPECT_EQ(QuotedInput(std::string(64, 'a')), "'" + std::string(64, 'a') + "'");
  EXPECT_EQ(QuotedInput(std::string(65, 'a')), "'" + std::string(32, 'a') + "...' (65 characters)");
  EXPECT_EQ(QuotedInput(std::string("a\nb\x01\xff", 5)), "'a?b??'") << "control and non-ASCII bytes";
}

TEST(NamesTest, PhaseAndDeviceKindNamesRoundTrip) {
  EXPECT_EQ(PhaseName(v1::PHASE_TRAIN), "train");
  for (v1::DeviceKind k : {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_QPU_SIM}) {
    EXPECT_EQ(ParseDeviceKind(DeviceKindName(k)), k);
  }
}

}  // namespace
}  // namespace hetbench
