#pragma once
/// A brought decoder: a TorchScript module on the agent's file system that
/// serves a generative run in place of the built-in Decoder (spec:
/// serving.decoder.torchscript; the contract is DecoderSpec's comment in
/// common.proto and docs/serving.md; scripts/decoder_torchscript.py writes
/// one). The agent owns the KV cache and the greedy choice; the module
/// computes logits and fills the cache rows it is given.
///
/// Threads: as DecoderModel. Forward calls from several instances at once
/// are TorchScript's own (its interpreter is reentrant); the first error a
/// call meets is kept under a mutex and reported by Failure().

#include <torch/script.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/serving/decoder.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

class ScriptDecoder final : public DecoderModel {
 public:
  /// Reads and loads `spec.torchscript()` onto `device`, reads its shape
  /// attributes and checks them against the spec, then runs one probe
  /// request (a 2-token prompt and one step) and checks what forward
  /// returned. Errors name serving.decoder.torchscript (the path quoted
  /// short) or the field that disagrees, and the fix.
  static absl::StatusOr<std::unique_ptr<ScriptDecoder>> Load(const v1::DecoderSpec& spec,
                                                             const torch::Device& device);

  const DecoderShape& shape() const override { return shape_; }
  /// "torchscript NAME (file hash H): 2 layers, width 64, ...; brought weights"
  std::string Describe() const override;
  KvCache NewCache(int slots) const override { return ZeroCache(shape_, slots, device_); }
  int64_t Prefill(KvCache& cache, int slot, const std::vector<int64_t>& prompt) const override;
  std::vector<int64_t> Step(KvCache& cache, const std::vector<int>& slots, const std::vector<int64_t>& tokens,
                            const std::vector<int>& positions) const override;
  absl::Status Failure() const override;

 private:
  ScriptDecoder(torch::jit::Module module, const torch::Device& device) : module_(std::move(module)), device_(device) {}
  // forward on n rows of t tokens each; the greedy next token of each row,
  // or zeros after an error (kept for Failure()).
  std::vector<int64_t> Forward(KvCache& cache, const std::vector<int64_t>& tokens,
                               const std::vector<int64_t>& positions, const std::vector<int64_t>& slots,
                               int64_t n, int64_t t) const;
  // As Forward, the error returned instead of kept.
  absl::StatusOr<std::vector<int64_t>> TryForward(KvCache& cache, const std::vector<int64_t>& tokens,
                                                  const std::vector<int64_t>& positions,
                                                  const std::vector<int64_t>& slots, int64_t n, int64_t t) const;

  mutable torch::jit::Module module_;  // forward is const in meaning; the API's method lookup is not
  torch::Device device_;
  DecoderShape shape_;
  std::string name_;
  uint64_t file_hash_ = 0;
  int64_t parameters_ = 0;
  mutable absl::Mutex mu_;
  mutable absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetbench::agent
