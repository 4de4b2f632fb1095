#pragma once
/// The generative model of a serving run: a decoder-only transformer behind
/// DecoderModel, with a key/value cache with one row per slot so that
/// requests of different lengths decode together (continuous batching:
/// generative.h). Greedy decoding. Two implement it: the built-in Decoder
/// (GPT-2's block: pre-norm causal self-attention and a 4x GELU MLP, learned
/// positions, the output head tied to the token embedding; weights drawn
/// from a seed) and a brought TorchScript module (script_decoder.h).
///
/// Threads: the weights are read-only after construction; a KvCache belongs
/// to one thread at a time. Prefill and Step run without autograd.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hetbench::agent {

struct DecoderShape {
  int layers = 12;
  int width = 768;
  int heads = 12;
  int vocabulary = 50257;
  int context = 1024;
};

/// "12 layers, width 768, 12 heads, vocabulary 50257, context 1024, 124.4 M parameters"
std::string DescribeDecoder(const DecoderShape& shape, int64_t parameters);

/// Keys and values of `slots` sequences of up to `context` tokens, per
/// layer [slots, heads, context, head width].
struct KvCache {
  std::vector<torch::Tensor> keys, values;
  int slots = 0;
};

/// A cache of `shape` for `slots` sequences on `device`, float32 zeros.
KvCache ZeroCache(const DecoderShape& shape, int slots, const torch::Device& device);

class DecoderModel {
 public:
  virtual ~DecoderModel() = default;

  virtual const DecoderShape& shape() const = 0;
  /// What it is, for the result: its shapes and parameters, where it came from.
  virtual std::string Describe() const = 0;
  /// Caches [slots, heads, context, width / heads] per layer, zeros.
  virtual KvCache NewCache(int slots) const = 0;

  /// Runs `prompt` (token ids, 1 to context tokens) into cache row `slot`
  /// at positions [0, prompt size), and returns the first generated token.
  virtual int64_t Prefill(KvCache& cache, int slot, const std::vector<int64_t>& prompt) const = 0;

  /// One decoding step for several sequences at once: sequence i feeds
  /// `tokens[i]` at position `positions[i]` of cache row `slots[i]` (its
  /// earlier positions already filled), attending only to its own row up to
  /// that position. Returns each sequence's next token.
  virtual std::vector<int64_t> Step(KvCache& cache, const std::vector<int>& slots, const std::vector<int64_t>& tokens,
                                    const std::vector<int>& positions) const = 0;

  /// OK, or the first error a Prefill or Step met (they then return token
  /// 0): the run is failed with it when it ends. The built-in never fails.
  virtual absl::Status Failure() const { return absl::OkStatus(); }
};

/// The built-in decoder.
class Decoder final : public DecoderModel {
 public:
  /// Weights N(0, 0.02) from `seed` (norms 1 and 0, biases 0), on `device`.
  Decoder(const DecoderShape& shape, uint64_t seed, const torch::Device& device);

  const DecoderShape& shape() const override { return shape_; }
  int64_t Parameters() const;
  /// DescribeDecoder's line, "; weights from the seed".
  std::string Describe() const override;
  KvCache NewCache(int slots) const override;
  int64_t Prefill(KvCache& cache, int slot, const std::vector<int64_t>& prompt) const override;
  std::vector<int64_t> Step(KvCache& cache, const std::vector<int>& slots, const std::vector<int64_t>& tokens,
                            const std::vector<int>& positions) const override;

 private:
  struct Block {
    torch::Tensor ln1_w, ln1_b, qkv_w, qkv_b, out_w, out_b, ln2_w, ln2_b, fc_w, fc_b, proj_w, proj_b;
  };
  // Attention of q [n, heads, t, hw] over k, v [n, heads, s, hw] with `mask`
  // (true where a key is hidden; broadcast to [n, heads, t, s]).
  torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& mask) const;
  // The MLP half of block `b` on x [n, t, width], with its residual.
  torch::Tensor Mlp(const Block& b, const torch::Tensor& x) const;
  // The greedy next token of each row of h [n, width] (after the last block).
  std::vector<int64_t> Next(const torch::Tensor& h) const;

  DecoderShape shape_;
  torch::Device device_;
  torch::Tensor token_embedding_, position_embedding_, final_w_, final_b_;
  std::vector<Block> blocks_;
};

}  // namespace hetbench::agent
