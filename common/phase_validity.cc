#include "common/phase_validity.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/step_modes.h"

namespace hetbench {

int64_t EffectiveMinSteps(const v1::JobSpec& spec, int batch_size, int64_t dataset_size) {
  if (spec.train().min_steps() > 0) return spec.train().min_steps();
  const double steps = std::ceil(spec.train().epochs() * static_cast<double>(dataset_size) /
                                 static_cast<double>(std::max(batch_size, 1)));
  return std::max<int64_t>(1, static_cast<int64_t>(steps) - spec.train().warmup_steps());
}

int64_t ExpectedInferenceBatches(const v1::JobSpec& spec, int batch_size, int64_t test_size) {
  const int64_t all = (test_size + std::max(batch_size, 1) - 1) / std::max(batch_size, 1);
  const int64_t max = spec.inference().max_batches();
  return max > 0 ? std::min(max, all) : all;
}

void JudgeValidity(const v1::JobSpec& spec, int64_t expected_steps, v1::PhaseResult* phase,
                   const v1::Calibration* calibration, const std::vector<int64_t>* in_order) {
  phase->clear_invalid_reasons();
  const v1::TimingStats& s = phase->stats();
  if (phase->phase() == v1::PHASE_TRAIN && expected_steps <= 0) {
    phase->add_invalid_reasons("the agent did not say how many training steps it aimed for (result.min_train_steps)");
  } else if (s.count() < expected_steps) {
    phase->add_invalid_reasons(absl::StrCat("only ", s.count(), " of ", expected_steps, " steps measured"));
  }
  if (phase->phase() == v1::PHASE_TRAIN && s.count() < spec.train().max_steps() &&
      s.window_seconds() + 1e-9 < spec.train().min_duration_seconds()) {
    phase->add_invalid_reasons(absl::StrFormat("measured %.3f s, below train.min_duration_seconds = %g",
                                               s.window_seconds(), spec.train().min_duration_seconds()));
  }
  const double limit = spec.validity().max_iqr_over_median();
  if (s.p50_ns() > 0 && s.iqr_ns() / s.p50_ns() > limit) {
    std::string reason = absl::StrFormat("too noisy: IQR/median = %.3f > validity.max_iqr_over_median = %g",
                                         s.iqr_ns() / s.p50_ns(), limit);
    if (in_order != nullptr) {
      std::string why = DescribeStepModes(FindStepModes(*in_order), s.count(), s.window_seconds());
      if (why.empty()) why = DescribeStepLevels(FindStepLevels(*in_order), s.count(), s.window_seconds());
      if (!why.empty()) absl::StrAppend(&reason, "; ", why);
    }
    phase->add_invalid_reasons(reason);
  }
  if (calibration != nullptr && calibration->blas_below()) {
    phase->add_invalid_reasons(absl::StrCat("math library below the CPU: ", calibration->blas_check()));
  }
  phase->set_valid(phase->invalid_reasons().empty());
}

}  // namespace hetbench
