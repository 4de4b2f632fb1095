#pragma once
/// The answer a report opens with: per model and phase, which device and
/// batch size is fastest, most frugal (joules per sample) and cheapest (USD
/// per 1,000 samples), by how much over the runner-up, with the range that
/// the step-time quartiles give the ratio, from VALID phases only (the
/// INVALID ones counted and left out, never ranked).

#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench::report {

struct AnswerLine {
  std::string model, phase;
  std::string text;  // "fastest: a1/cpu0 (cpu), batch 64: 8,581.6 samples/s, 1.68x batch 32 [1.2-2.4] ..."
};

/// One line per model and phase with a measured figure.
std::vector<AnswerLine> Answers(const v1::Job& job);

}  // namespace hetbench::report
