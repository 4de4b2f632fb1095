#include "agent/serving/script_decoder.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/names.h"

namespace hetbench::agent {

namespace {

// The module's int attribute `name`, in [lo, hi].
absl::StatusOr<int> ShapeAttribute(const torch::jit::Module& m, const char* name, int lo, int hi,
                                   const std::string& where) {
  if (!m.hasattr(name) || !m.attr(name).isInt()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the module has no int attribute `", name,
        "`; a decoder module states layers, heads, head_width, context and vocabulary (docs/serving.md)"));
  }
  const int64_t v = m.attr(name).toInt();
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the module's `", name, "` is ", v, ": must be in [", lo, ", ", hi, "]"));
  }
  return static_cast<int>(v);
}

std::string Shape(const torch::Tensor& t) { return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]"); }

// The module's class name as results show it: the file is the user's, so
// only identifier characters, at most 120 of them.
std::string ShownName(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') out.push_back(c);
    if (out.size() == 120) break;
  }
  return out.empty() ? "?" : out;
}

// What a module raised: TorchScript's interpreter puts "The following
// operation failed..." and its traceback first and the raised error last
// (at most 300 characters of it, control characters shown as '?').
std::string RaisedMessage(const std::string& what) {
  std::vector<absl::string_view> lines = absl::StrSplit(what, '\n', absl::SkipWhitespace());
  if (lines.empty()) return "(no message)";
  std::string last(absl::StripAsciiWhitespace(lines.back()).substr(0, 300));
  for (char& c : last) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // the module's text: no terminal controls
  }
  return last;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScriptDecoder>> ScriptDecoder::Load(const v1::DecoderSpec& spec,
                                                                   const torch::Device& device) {
  const std::string where = absl::StrCat("serving.decoder.torchscript = ", QuotedInput(spec.torchscript()));
  std::ifstream file(spec.torchscript(), std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(where, ": cannot read it on this agent; copy the file there"));
  std::stringstream bytes;
  bytes << file.rdbuf();
  const uint64_t hash = Fnv1a(bytes.str());
  torch::jit::Module module;
  try {
    bytes.seekg(0);
    module = torch::jit::load(bytes, device);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a TorchScript module: ", FirstLine(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a TorchScript module: ", FirstLine(e.what())));
  }
  module.eval();
  if (!module.find_method("forward")) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the module has no forward method"));
  }
  auto d = std::unique_ptr<ScriptDecoder>(new ScriptDecoder(std::move(module), device));
  d->file_hash_ = hash;
  d->name_ = ShownName(d->module_.type()->name() ? d->module_.type()->name()->qualifiedName() : "?");
  int head_width = 0;
  const std::pair<const char*, std::pair<int*, std::pair<int, int>>> attributes[] = {
      {"layers", {&d->shape_.layers, {1, 96}}},       {"heads", {&d->shape_.heads, {1, 256}}},
      {"head_width", {&head_width, {1, 4096}}},       {"context", {&d->shape_.context, {4, 32768}}},
      {"vocabulary", {&d->shape_.vocabulary, {2, 1'000'000}}}};
  for (const auto& [name, into] : attributes) {
    absl::StatusOr<int> v = ShapeAttribute(d->module_, name, into.second.first, into.second.second, where);
    if (!v.ok()) return v.status();
    *into.first = *v;
  }
  d->shape_.width = d->shape_.heads * head_width;
  if (d->shape_.context != spec.context()) {
    return absl::InvalidArgumentError(absl::StrCat("serving.decoder.context = ", spec.context(),
                                                   ": the brought module's context is ", d->shape_.context,
                                                   "; set it to ", d->shape_.context));
  }
  if (d->shape_.vocabulary != spec.vocabulary()) {
    return absl::InvalidArgumentError(absl::StrCat("serving.decoder.vocabulary = ", spec.vocabulary(),
                                                   ": the brought module's vocabulary is ", d->shape_.vocabulary,
                                                   "; set it to ", d->shape_.vocabulary));
  }
  for (const at::Tensor& p : d->module_.parameters()) d->parameters_ += p.numel();

  // A probe request: a 2-token prompt into slot 1 of two, then one step.
  KvCache cache = d->NewCache(2);
  absl::StatusOr<std::vector<int64_t>> first = d->TryForward(cache, {1, 2}, {0, 1}, {1}, 1, 2);
  if (!first.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": the probe prompt failed: ", first.status().message()));
  for (size_t l = 0; l < cache.keys.size(); ++l) {
    for (const auto& [what, t] : {std::pair{"keys", cache.keys[l]}, std::pair{"values", cache.values[l]}}) {
      const torch::Tensor written = t.index({1, torch::indexing::Slice(), torch::indexing::Slice(0, 2)});
      if (written.abs().sum().item<double>() == 0.0 || t[0].abs().sum().item<double>() != 0.0) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": the probe prompt (slot 1, positions 0-1) left ", what, "[", l,
            "] without them or wrote another slot; forward writes each row's keys and values into the cache rows "
            "`slots` names, at `positions`"));
      }
    }
  }
  absl::StatusOr<std::vector<int64_t>> next = d->TryForward(cache, {(*first)[0]}, {2}, {1}, 1, 1);
  if (!next.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": the probe step failed: ", next.status().message()));
  return d;
}

std::string ScriptDecoder::Describe() const {
  return absl::StrFormat("torchscript %s (file hash %016x): %s; brought weights", name_, file_hash_,
                         DescribeDecoder(shape_, parameters_));
}

absl::StatusOr<std::vector<int64_t>> ScriptDecoder::TryForward(KvCache& cache, const std::vector<int64_t>& tokens,
                                                               const std::vector<int64_t>& positions,
                                                               const std::vector<int64_t>& slots, int64_t n,
                                                               int64_t t) const {
  torch::NoGradGuard no_grad;
  try {
    c10::List<at::Tensor> keys, values;
    for (size_t l = 0; l < cache.keys.size(); ++l) {
      keys.push_back(cache.keys[l]);
      values.push_back(cache.values[l]);
    }
    const c10::IValue out = module_.forward({torch::tensor(tokens, torch::kInt64).view({n, t}).to(device_),
                                             torch::tensor(positions, torch::kInt64).view({n, t}).to(device_),
                                             torch::tensor(slots, torch::kInt64).to(device_), keys, values});
    // A module may also put new tensors in the lists: the cache is what they hold now.
    for (size_t l = 0; l < cache.keys.size(); ++l) {
      cache.keys[l] = keys.get(l);
      cache.values[l] = values.get(l);
    }
    if (!out.isTensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat("forward returned a ", out.tagKind(), ", not the logits [n, vocabulary]"));
    }
    const torch::Tensor logits = out.toTensor();
    if (logits.dim() != 2 || logits.size(0) != n || logits.size(1) != shape_.vocabulary) {
      return absl::InvalidArgumentError(absl::StrCat("forward returned logits ", Shape(logits), ", expected [", n,
                                                     ", ", shape_.vocabulary, "] (rows, vocabulary)"));
    }
    const torch::Tensor next = logits.argmax(-1).to(torch::kCPU).to(torch::kInt64).contiguous();
    return std::vector<int64_t>(next.data_ptr<int64_t>(), next.data_ptr<int64_t>() + n);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(RaisedMessage(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(RaisedMessage(e.what()));
  }
}

std::vector<int64_t> ScriptDecoder::Forward(KvCache& cache, const std::vector<int64_t>& tokens,
                                            const std::vector<int64_t>& positions, const std::vector<int64_t>& slots,
                                            int64_t n, int64_t t) const {
  absl::StatusOr<std::vector<int64_t>> next = TryForward(cache, tokens, positions, slots, n, t);
  if (next.ok()) return *std::move(next);
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) {
    failure_ = absl::InvalidArgumentError(absl::StrCat("serving.decoder.torchscript: the module failed a request: ",
                                                       next.status().message()));
  }
  return std::vector<int64_t>(static_cast<size_t>(n), 0);
}

int64_t ScriptDecoder::Prefill(KvCache& cache, int slot, const std::vector<int64_t>& prompt) const {
  std::vector<int64_t> positions(prompt.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
  return Forward(cache, prompt, positions, {slot}, 1, static_cast<int64_t>(prompt.size()))[0];
}

std::vector<int64_t> ScriptDecoder::Step(KvCache& cache, const std::vector<int>& slots,
                                         const std::vector<int64_t>& tokens, const std::vector<int>& positions) const {
  const auto n = static_cast<int64_t>(slots.size());
  return Forward(cache, tokens, {positions.begin(), positions.end()}, {slots.begin(), slots.end()}, n, 1);
}

absl::Status ScriptDecoder::Failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

}  // namespace hetbench::agent
