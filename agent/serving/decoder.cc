#include "agent/serving/decoder.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace hetbench::agent {

namespace {

namespace F = torch::nn::functional;
using torch::indexing::Slice;

}  // namespace

std::string DescribeDecoder(const DecoderShape& shape, int64_t parameters) {
  return absl::StrFormat("%d layers, width %d, %d heads, vocabulary %d, context %d, %.1f M parameters", shape.layers,
                         shape.width, shape.heads, shape.vocabulary, shape.context,
                         static_cast<double>(parameters) * 1e-6);
}

Decoder::Decoder(const DecoderShape& shape, uint64_t seed, const torch::Device& device)
    : shape_(shape), device_(device) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  auto normal = [&](std::vector<int64_t> size) { return (at::randn(size, gen, f32) * 0.02).to(device_); };
  auto ones = [&](int64_t n) { return torch::ones({n}, f32.device(device_)); };
  auto zeros = [&](int64_t n) { return torch::zeros({n}, f32.device(device_)); };
  const int64_t w = shape_.width;
  token_embedding_ = normal({shape_.vocabulary, w});
  position_embedding_ = normal({shape_.context, w});
  for (int l = 0; l < shape_.layers; ++l) {
    Block b;
    b.ln1_w = ones(w);
    b.ln1_b = zeros(w);
    b.qkv_w = normal({w, 3 * w});
    b.qkv_b = zeros(3 * w);
    b.out_w = normal({w, w});
    b.out_b = zeros(w);
    b.ln2_w = ones(w);
    b.ln2_b = zeros(w);
    b.fc_w = normal({w, 4 * w});
    b.fc_b = zeros(4 * w);
    b.proj_w = normal({4 * w, w});
    b.proj_b = zeros(w);
    blocks_.push_back(std::move(b));
  }
  final_w_ = ones(w);
  final_b_ = zeros(w);
}

int64_t Decoder::Parameters() const {
  int64_t n = token_embedding_.numel() + position_embedding_.numel() + final_w_.numel() + final_b_.numel();
  for (const Block& b : blocks_) {
    for (const torch::Tensor* t : {&b.ln1_w, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.out_w, &b.out_b, &b.ln2_w, &b.ln2_b,
                                   &b.fc_w, &b.fc_b, &b.proj_w, &b.proj_b}) {
      n += t->numel();
    }
  }
  return n;
}

KvCache ZeroCache(const DecoderShape& shape, int slots, const torch::Device& device) {
  KvCache c;
  c.slots = slots;
  const int64_t hw = shape.width / shape.heads;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  for (int l = 0; l < shape.layers; ++l) {
    c.keys.push_back(torch::zeros({slots, shape.heads, shape.context, hw}, opts));
    c.values.push_back(torch::zeros({slots, shape.heads, shape.context, hw}, opts));
  }
  return c;
}

std::string Decoder::Describe() const { return DescribeDecoder(shape_, Parameters()) + "; weights from the seed"; }

KvCache Decoder::NewCache(int slots) const { return ZeroCache(shape_, slots, device_); }

torch::Tensor Decoder::Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& mask) const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
}

torch::Tensor Decoder::Mlp(const Block& b, const torch::Tensor& x) const {
  const torch::Tensor h = F::layer_norm(x, F::LayerNormFuncOptions({shape_.width}).weight(b.ln2_w).bias(b.ln2_b));
  return x + torch::addmm(b.proj_b, torch::gelu(torch::addmm(b.fc_b, h.flatten(0, 1), b.fc_w)), b.proj_w).view_as(x);
}

std::vector<int64_t> Decoder::Next(const torch::Tensor& h) const {
  const torch::Tensor last = F::layer_norm(h, F::LayerNormFuncOptions({shape_.width}).weight(final_w_).bias(final_b_));
  const torch::Tensor tokens = torch::matmul(last, token_embedding_.t()).argmax(-1).to(torch::kCPU);
  std::vector<int64_t> out(static_cast<size_t>(tokens.size(0)));
  const auto acc = tokens.accessor<int64_t, 1>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = acc[static_cast<int64_t>(i)];
  return out;
}

int64_t Decoder::Prefill(KvCache& cache, int slot, const std::vector<int64_t>& prompt) const {
  torch::NoGradGuard no_grad;
  const auto t = static_cast<int64_t>(prompt.size());
  const int64_t heads = shape_.heads, hw = shape_.width / shape_.heads;
  const torch::Tensor ids = torch::tensor(prompt, torch::kInt64).to(device_);
  torch::Tensor x = (token_embedding_.index_select(0, ids) + position_embedding_.slice(0, 0, t)).unsqueeze(0);
  const torch::Tensor causal = torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(device_)).triu(1);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    const torch::Tensor h = F::layer_norm(x, F::LayerNormFuncOptions({shape_.width}).weight(b.ln1_w).bias(b.ln1_b));
    const std::vector<torch::Tensor> qkv =
        torch::addmm(b.qkv_b, h.flatten(0, 1), b.qkv_w).view({1, t, 3, heads, hw}).permute({2, 0, 3, 1, 4}).unbind(0);
    cache.keys[l].index_put_({slot, Slice(), Slice(0, t)}, qkv[1][0]);
    cache.values[l].index_put_({slot, Slice(), Slice(0, t)}, qkv[2][0]);
    const torch::Tensor a = Attend(qkv[0], qkv[1], qkv[2], causal).transpose(1, 2).reshape({t, shape_.width});
    x = x + torch::addmm(b.out_b, a, b.out_w).view_as(x);
    x = Mlp(b, x);
  }
  return Next(x[0].slice(0, t - 1, t))[0];
}

std::vector<int64_t> Decoder::Step(KvCache& cache, const std::vector<int>& slots, const std::vector<int64_t>& tokens,
                                   const std::vector<int>& positions) const {
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(slots.size());
  const int64_t heads = shape_.heads, hw = shape_.width / shape_.heads;
  std::vector<int64_t> rows(slots.begin(), slots.end()), pos(positions.begin(), positions.end());
  const torch::Tensor row_t = torch::tensor(rows, torch::kInt64).to(device_);
  const torch::Tensor pos_t = torch::tensor(pos, torch::kInt64).to(device_);
  const torch::Tensor ids = torch::tensor(tokens, torch::kInt64).to(device_);
  int64_t longest = 0;
  for (int64_t p : pos) longest = std::max(longest, p + 1);
  // Each row sees its own positions up to its current one.
  const torch::Tensor hidden =
      (torch::arange(longest, torch::TensorOptions().dtype(torch::kInt64).device(device_)).unsqueeze(0) >
       pos_t.unsqueeze(1))
          .view({n, 1, 1, longest});
  torch::Tensor x = (token_embedding_.index_select(0, ids) + position_embedding_.index_select(0, pos_t)).unsqueeze(1);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    const torch::Tensor h = F::layer_norm(x, F::LayerNormFuncOptions({shape_.width}).weight(b.ln1_w).bias(b.ln1_b));
    const std::vector<torch::Tensor> qkv =
        torch::addmm(b.qkv_b, h.flatten(0, 1), b.qkv_w).view({n, 3, heads, hw}).unbind(1);  // each [n, heads, hw]
    cache.keys[l].index_put_({row_t, Slice(), pos_t}, qkv[1]);
    cache.values[l].index_put_({row_t, Slice(), pos_t}, qkv[2]);
    const torch::Tensor k = cache.keys[l].index_select(0, row_t).slice(2, 0, longest);
    const torch::Tensor v = cache.values[l].index_select(0, row_t).slice(2, 0, longest);
    const torch::Tensor a = Attend(qkv[0].unsqueeze(2), k, v, hidden).reshape({n, shape_.width});
    x = x + torch::addmm(b.out_b, a, b.out_w).view_as(x);
    x = Mlp(b, x);
  }
  return Next(x.squeeze(1));
}

}  // namespace hetbench::agent
