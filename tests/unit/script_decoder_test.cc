// A brought decoder (agent/serving/script_decoder.h): a TorchScript module
// scripted here by python3-torch serves a generative run. A counting module
// shows the contract exactly (each request's keys land in its own cache row
// at its positions, and a row reads only its own history); the GPT-2 module
// scripts/decoder_torchscript.py writes decodes with its cache as a full
// recomputation does; modules that break the contract are refused at load,
// naming what and the fix; an error in a request fails the run with it.
#include "agent/serving/script_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "agent/serving/generative.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "common/serving_spec.h"
#include "tests/testing/temp_dir.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

// Modules in the test's directory: counter.pt (next token = the sum of the
// row's tokens so far, mod 97, as one-hot logits; keys hold the tokens,
// values ones; a position of 12 or more raises), and variants that break
// one rule each.
constexpr char kModules[] = R"PY(
import sys
from typing import List
import torch

class Counter(torch.nn.Module):
    def __init__(self, context: int = 16, vocabulary: int = 97, logits: int = 97, write: bool = True):
        super().__init__()
        self.layers = 1
        self.heads = 1
        self.head_width = 1
        self.context = context
        self.vocabulary = vocabulary
        self.logits = logits
        self.write = write
        self.scale = torch.nn.Parameter(torch.ones(1))

    def forward(self, tokens, positions, slots, keys: List[torch.Tensor], values: List[torch.Tensor]):
        if int(positions.max()) >= 12:
            raise RuntimeError("position 12 is too far for this counter")
        n = tokens.size(0)
        t = tokens.size(1)
        rows = slots.unsqueeze(1).expand(n, t)
        if self.write:
            keys[0][rows, 0, positions, 0] = tokens.float() * self.scale
            values[0][rows, 0, positions, 0] = torch.ones(n, t)
        last = positions[:, -1]
        seen = torch.arange(self.context).unsqueeze(0) <= last.unsqueeze(1)
        sums = (keys[0][slots, 0, :, 0] * seen.float()).sum(1)
        next_tokens = sums.round().long() % self.vocabulary
        return torch.nn.functional.one_hot(next_tokens, self.logits).float()

class Shapeless(torch.nn.Module):
    def forward(self, tokens, positions, slots, keys: List[torch.Tensor], values: List[torch.Tensor]):
        return tokens.float()

d = sys.argv[1]
torch.jit.script(Counter()).save(d + '/counter.pt')
torch.jit.script(Counter(logits=96)).save(d + '/short_logits.pt')
torch.jit.script(Counter(write=False)).save(d + '/no_cache.pt')
torch.jit.script(Shapeless()).save(d + '/shapeless.pt')
open(d + '/garbage.pt', 'w').write('not a zip archive')
)PY";

class ScriptDecoderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("script-decoder");
    std::ofstream(dir_->path() + "/make.py") << kModules;
    ASSERT_EQ(std::system(("/usr/bin/python3 " + dir_->path() + "/make.py " + dir_->path()).c_str()), 0)
        << "python3-torch is installed by install-deps";
    ASSERT_EQ(std::system(("/usr/bin/python3 " HETBENCH_DECODER_SCRIPT " " + dir_->path() +
                           "/gpt2.pt --layers 2 --heads 4 --head-width 8 --context 64 --vocabulary 50 > /dev/null")
                              .c_str()),
              0);
  }
  static void TearDownTestSuite() { delete dir_; }

  static v1::DecoderSpec Spec(const std::string& file, int context, int vocabulary) {
    v1::DecoderSpec d;
    d.set_torchscript(dir_->path() + "/" + file);
    d.set_context(context);
    d.set_vocabulary(vocabulary);
    return d;
  }
  static std::unique_ptr<ScriptDecoder> Load(const std::string& file, int context, int vocabulary) {
    absl::StatusOr<std::unique_ptr<ScriptDecoder>> d = ScriptDecoder::Load(Spec(file, context, vocabulary), torch::kCPU);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }
  static std::string Refusal(const std::string& file, int context, int vocabulary) {
    absl::StatusOr<std::unique_ptr<ScriptDecoder>> d = ScriptDecoder::Load(Spec(file, context, vocabulary), torch::kCPU);
    EXPECT_FALSE(d.ok()) << file;
    return d.ok() ? "" : std::string(d.status().message());
  }

  static testing::TempDir* dir_;
};
testing::TempDir* ScriptDecoderTest::dir_ = nullptr;

TEST_F(ScriptDecoderTest, EachRequestKeepsItsOwnCacheRowAndTheModuleReadsOnlyThatRow) {
  const std::unique_ptr<ScriptDecoder> d = Load("counter.pt", 16, 97);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->shape().layers, 1);
  EXPECT_EQ(d->shape().context, 16);
  KvCache cache = d->NewCache(3);
  EXPECT_EQ(d->Prefill(cache, 2, {3, 5}), 8);
  EXPECT_EQ(d->Prefill(cache, 0, {40}), 40);
  // Both rows step together, each at its own position, each summing its own history.
  EXPECT_EQ(d->Step(cache, {2, 0}, {8, 40}, {2, 1}), (std::vector<int64_t>{16, 80}));
  EXPECT_EQ(d->Step(cache, {0}, {80}, {2}), (std::vector<int64_t>{160 % 97}));
  EXPECT_EQ(d->Step(cache, {2}, {16}, {3}), (std::vector<int64_t>{32}));
  EXPECT_EQ(cache.keys[0].index({1}).abs().sum().item<double>(), 0.0) << "slot 1 was never used";
  EXPECT_TRUE(d->Failure().ok());
  EXPECT_THAT(d->Describe(), HasSubstr("torchscript __torch__.Counter (file hash "));
  EXPECT_THAT(d->Describe(), HasSubstr("1 layers, width 1, 1 heads, vocabulary 97, context 16, 0.0 M parameters"));
}

TEST_F(ScriptDecoderTest, TheBroughtGpt2DecoderGivesTheTokensOfAFullRecomputation) {
  const std::unique_ptr<ScriptDecoder> d = Load("gpt2.pt", 64, 50);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->shape().width, 32);
  EXPECT_EQ(d->shape().heads, 4);
  // Two requests decoding together in slots 1 and 0 of three.
  KvCache cache = d->NewCache(3);
  std::vector<int64_t> a = {3, 14, 15, 9, 26}, b = {40, 2};
  const size_t a_prompt = a.size(), b_prompt = b.size();
  a.push_back(d->Prefill(cache, 1, a));
  b.push_back(d->Prefill(cache, 0, b));
  for (int i = 0; i < 10; ++i) {
    const std::vector<int64_t> next =
        d->Step(cache, {1, 0}, {a.back(), b.back()},
                {static_cast<int>(a.size()) - 1, static_cast<int>(b.size()) - 1});
    a.push_back(next[0]);
    b.push_back(next[1]);
  }
  // Each token again from its whole sequence, without the cache.
  for (const auto& [seq, prompt] : {std::pair{a, a_prompt}, std::pair{b, b_prompt}}) {
    for (size_t k = prompt; k < seq.size(); ++k) {
      KvCache fresh = d->NewCache(1);
      EXPECT_EQ(d->Prefill(fresh, 0, {seq.begin(), seq.begin() + static_cast<std::ptrdiff_t>(k)}), seq[k]) << k;
    }
  }
  EXPECT_NE(std::vector<int64_t>(a.begin() + 5, a.end()), std::vector<int64_t>(b.begin() + 2, b.end()))
      << "the tokens depend on their context";
  EXPECT_TRUE(d->Failure().ok());
}

TEST_F(ScriptDecoderTest, AGenerativeRunServesTheBroughtModule) {
  const std::unique_ptr<ScriptDecoder> d = Load("gpt2.pt", 64, 50);
  ASSERT_NE(d, nullptr);
  v1::JobSpec spec;
  spec.add_models("decoder");
  v1::ServingSpec* s = spec.mutable_serving();
  s->set_scenario("offline");
  s->set_min_duration_seconds(0.05);
  s->set_min_queries(16);
  *s->mutable_decoder() = Spec("gpt2.pt", 64, 50);
  s->mutable_decoder()->set_prompt_tokens_max(12);
  s->mutable_decoder()->set_output_tokens_max(8);
  spec = WithDefaults(spec);
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  EXPECT_FALSE(spec.serving().decoder().has_layers()) << "the module's own: never filled in";
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> issued{0}, total{0};
  const ServingControl control{&cancel, &issued, &total, SteadyNowNs() - 1'000'000'000};
  v1::TaskResult result;
  std::vector<ServedRequest> requests;
  ASSERT_TRUE(RunGenerative(spec, 0, 4, *d, "brought", control, &result, &requests).ok());
  EXPECT_EQ(result.serving().queries_answered(), 16);
  ASSERT_EQ(requests.size(), 16u);
  for (const ServedRequest& r : requests) EXPECT_GT(r.tpot_ns, 0);
  EXPECT_THAT(result.serving().generative().decoder(), HasSubstr("torchscript __torch__.Decoder"));
  EXPECT_THAT(result.serving().generative().decoder(), HasSubstr("2 layers, width 32, 4 heads"));
}

TEST_F(ScriptDecoderTest, AnErrorInARequestFailsTheRunWithTheModulesMessage) {
  const std::unique_ptr<ScriptDecoder> d = Load("counter.pt", 16, 97);
  ASSERT_NE(d, nullptr);
  KvCache cache = d->NewCache(1);
  EXPECT_EQ(d->Prefill(cache, 0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}), 0) << "a failed call gives token 0";
  EXPECT_THAT(std::string(d->Failure().message()),
              HasSubstr("serving.decoder.torchscript: the module failed a request: "));
  EXPECT_THAT(std::string(d->Failure().message()), HasSubstr("position 12 is too far for this counter"));

  const std::unique_ptr<ScriptDecoder> fresh = Load("counter.pt", 16, 97);
  v1::JobSpec spec;
  spec.add_models("decoder");
  spec.mutable_serving()->set_scenario("offline");
  spec.mutable_serving()->set_min_queries(8);
  *spec.mutable_serving()->mutable_decoder() = Spec("counter.pt", 16, 97);
  spec.mutable_serving()->mutable_decoder()->set_prompt_tokens_min(10);
  spec.mutable_serving()->mutable_decoder()->set_prompt_tokens_max(10);
  spec.mutable_serving()->mutable_decoder()->set_output_tokens_max(6);
  spec = WithDefaults(spec);
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> issued{0}, total{0};
  const ServingControl control{&cancel, &issued, &total, SteadyNowNs()};
  v1::TaskResult result;
  std::vector<ServedRequest> requests;
  const absl::Status run = RunGenerative(spec, 0, 2, *fresh, "counter", control, &result, &requests);
  EXPECT_THAT(std::string(run.message()), HasSubstr("position 12 is too far")) << run;
}

TEST_F(ScriptDecoderTest, AModuleThatBreaksTheContractIsRefusedNamingWhatAndTheFix) {
  EXPECT_THAT(Refusal("missing.pt", 16, 97), HasSubstr("cannot read it on this agent; copy the file there"));
  EXPECT_THAT(Refusal("garbage.pt", 16, 97), HasSubstr("garbage.pt': not a TorchScript module: "));
  EXPECT_THAT(Refusal("shapeless.pt", 16, 97), HasSubstr("the module has no int attribute `layers`; a decoder module "
                                                         "states layers, heads, head_width, context and vocabulary"));
  EXPECT_EQ(Refusal("counter.pt", 32, 97),
            "serving.decoder.context = 32: the brought module's context is 16; set it to 16");
  EXPECT_EQ(Refusal("counter.pt", 16, 100),
            "serving.decoder.vocabulary = 100: the brought module's vocabulary is 97; set it to 97");
  EXPECT_THAT(Refusal("short_logits.pt", 16, 97),
              HasSubstr("the probe prompt failed: forward returned logits [1, 96], expected [1, 97] (rows, vocabulary)"));
  EXPECT_THAT(Refusal("no_cache.pt", 16, 97), HasSubstr("the probe prompt (slot 1, positions 0-1) left keys[0] "
                                                        "without them or wrote another slot"));
  // The path is quoted short whatever its length.
  const std::string refusal = Refusal(std::string(300, 'x') + ".pt", 16, 97);
  EXPECT_LT(refusal.size(), 200u) << refusal;
}

}  // namespace
}  // namespace hetbench::agent
