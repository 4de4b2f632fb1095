// The serving section's multi_stream scenario and the generative model
// "decoder" (common/serving_spec.h): defaults, refusals that name the field
// and the fix, and the verdict on TTFT and TPOT against their SLOs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "common/serving_spec.h"
#include "common/serving_stats.h"
#include "common/spec_yaml.h"

namespace hetbench {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string Problems(const v1::JobSpec& spec) { return std::string(ValidateJobSpec(spec).message()); }

v1::JobSpec Decoder(const std::string& scenario = "server") {
  v1::JobSpec spec;
  spec.add_models("decoder");
  spec.mutable_serving()->set_scenario(scenario);
  if (scenario == "server") {
    spec.mutable_serving()->set_target_qps(2);
    spec.mutable_serving()->set_ttft_ms(500);
  }
  return WithDefaults(spec);
}

TEST(GenerativeSpecTest, MultiStreamDefaultsToEightSamplesPerQueryAndP99) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_serving()->set_scenario("multi_stream");
  spec = WithDefaults(spec);
  EXPECT_EQ(spec.serving().samples_per_query(), 8);
  EXPECT_EQ(spec.serving().percentile(), 99);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  EXPECT_THAT(JobSpecToYaml(spec), AllOf(HasSubstr("scenario: multi_stream"), HasSubstr("samples_per_query: 8")));
  spec.mutable_serving()->set_samples_per_query(0);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.samples_per_query = 0: must be in [1, 1024], e.g. 8"));
  v1::JobSpec server;
  server.add_models("mlp");
  server.mutable_serving()->set_scenario("server");
  server.mutable_serving()->set_target_qps(10);
  server.mutable_serving()->set_latency_bound_ms(10);
  server.mutable_serving()->set_samples_per_query(4);
  EXPECT_THAT(Problems(WithDefaults(server)),
              HasSubstr("serving.samples_per_query: only for scenario multi_stream; remove it"));
}

TEST(GenerativeSpecTest, TheDecoderDefaultsToGpt2SmallAndSecondsLongRuns) {
  const v1::JobSpec spec = Decoder();
  const v1::DecoderSpec& d = spec.serving().decoder();
  EXPECT_EQ(d.layers(), 12);
  EXPECT_EQ(d.width(), 768);
  EXPECT_EQ(d.heads(), 12);
  EXPECT_EQ(d.vocabulary(), 50257);
  EXPECT_EQ(d.context(), 1024);
  EXPECT_EQ(d.prompt_tokens_min(), 32);
  EXPECT_EQ(d.prompt_tokens_max(), 128);
  EXPECT_EQ(d.output_tokens_min(), 16);
  EXPECT_EQ(d.output_tokens_max(), 64);
  EXPECT_EQ(spec.serving().min_queries(), 64);
  EXPECT_EQ(spec.serving().percentile(), 90);
  EXPECT_FALSE(spec.serving().has_max_queue_delay_ms()) << "continuous batching has no queue delay";
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
  // The effective spec reads back the same.
  auto again = ParseJobSpecYaml(JobSpecToYaml(spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->serving().SerializeAsString(), spec.serving().SerializeAsString());
}

TEST(GenerativeSpecTest, ShortPromptRangesKeepTheirMinimumBelowTheirMaximum) {
  v1::JobSpec spec;
  spec.add_models("decoder");
  spec.mutable_serving()->set_scenario("offline");
  spec.mutable_serving()->mutable_decoder()->set_prompt_tokens_max(8);
  spec.mutable_serving()->mutable_decoder()->set_output_tokens_max(4);
  spec = WithDefaults(spec);
  EXPECT_EQ(spec.serving().decoder().prompt_tokens_min(), 8);
  EXPECT_EQ(spec.serving().decoder().output_tokens_min(), 4);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << Problems(spec);
}

TEST(GenerativeSpecTest, BadDecoderInputIsRefusedNamingTheFieldAndTheFix) {
  v1::JobSpec spec = Decoder();
  spec.mutable_serving()->mutable_decoder()->set_context(128);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.decoder: prompt_tokens_max + output_tokens_max = 192 tokens: beyond "
                                        "serving.decoder.context = 128; raise the context or shorten the requests"));
  spec = Decoder();
  spec.mutable_serving()->mutable_decoder()->set_width(100);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.decoder.width = 100: must divide by serving.decoder.heads = 12"));
  spec = Decoder();
  spec.mutable_serving()->mutable_decoder()->set_output_tokens_min(1);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.decoder.output_tokens_min = 1: must be in [2, 32768]"));
  spec = Decoder();
  spec.mutable_serving()->mutable_decoder()->set_prompt_tokens_min(200);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.decoder.prompt_tokens_min = 200: above prompt_tokens_max = 128"));
  spec = Decoder();
  spec.add_models("mlp");
  EXPECT_THAT(Problems(spec), HasSubstr("serve the decoder in a job of its own"));
  spec = Decoder();
  spec.mutable_serving()->set_max_queue_delay_ms(2);
  EXPECT_THAT(Problems(spec), HasSubstr("serving.max_queue_delay_ms = 2: not used by the decoder"));
  v1::JobSpec peak;  // the decoder's peak: bounded by an SLO alone
  peak.add_models("decoder");
  peak.mutable_serving()->set_scenario("peak");
  peak.mutable_serving()->set_target_qps(1);
  peak.mutable_serving()->set_ttft_ms(1000);
  EXPECT_EQ(Problems(WithDefaults(peak)), "");
  v1::JobSpec multi = peak;
  multi.mutable_serving()->set_scenario("multi_stream");
  multi.mutable_serving()->clear_target_qps();
  EXPECT_THAT(Problems(WithDefaults(multi)), HasSubstr("the decoder runs server, peak, offline or single_stream"));
  // A server run needs a bound: the end-to-end one or an SLO.
  v1::JobSpec unbounded;
  unbounded.add_models("decoder");
  unbounded.mutable_serving()->set_scenario("server");
  unbounded.mutable_serving()->set_target_qps(1);
  EXPECT_THAT(Problems(WithDefaults(unbounded)), HasSubstr("(or give serving.ttft_ms or tpot_ms)"));
}

TEST(GenerativeSpecTest, SlosOnANonGenerativeModelAndTheDecoderOutsideServingAreRefused) {
  v1::JobSpec spec;
  spec.add_models("mlp");
  spec.mutable_serving()->set_scenario("offline");
  spec.mutable_serving()->set_ttft_ms(100);
  EXPECT_THAT(Problems(WithDefaults(spec)),
              HasSubstr("serving.ttft_ms = 100: an SLO of a generative model; serve models: [decoder] or remove it"));
  spec.mutable_serving()->set_ttft_ms(0);
  spec.mutable_serving()->set_tpot_ms(-1);
  EXPECT_THAT(Problems(WithDefaults(spec)), HasSubstr("serving.tpot_ms = -1: must be in [0, 3600000] (0 = no SLO)"));
  v1::JobSpec training;
  training.add_models("decoder");
  EXPECT_THAT(Problems(WithDefaults(training)), HasSubstr("models[0] = \"decoder\": the generative model; it needs "
                                                          "serving.scenario"));
}

TEST(GenerativeSpecTest, TheYamlDecoderSectionIsReadAndItsUnknownFieldsNamed) {
  auto spec = ParseJobSpecYaml(
      "models: [decoder]\nserving:\n  scenario: offline\n  tpot_ms: 40\n  decoder: {layers: 2, width: 64, heads: 4, "
      "vocabulary: 100, context: 64, prompt_tokens_min: 4, prompt_tokens_max: 8, output_tokens_min: 2, "
      "output_tokens_max: 6}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->serving().decoder().layers(), 2);
  EXPECT_EQ(spec->serving().decoder().output_tokens_max(), 6);
  EXPECT_EQ(spec->serving().tpot_ms(), 40);
  EXPECT_TRUE(ValidateJobSpec(WithDefaults(*spec)).ok()) << Problems(WithDefaults(*spec));
  auto bad = ParseJobSpecYaml("models: [decoder]\nserving:\n  scenario: offline\n  decoder: {layer: 2}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("serving.decoder"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("layer"));
}

TEST(GenerativeSpecTest, ABroughtDecoderStatesItsOwnShapesAndNeedsTheContextAndVocabulary) {
  auto spec = ParseJobSpecYaml(
      "models: [decoder]\nserving:\n  scenario: offline\n  decoder: {torchscript: /models/gpt.pt, context: 256, "
      "vocabulary: 1000, prompt_tokens_max: 64, output_tokens_max: 32}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::JobSpec filled = WithDefaults(*spec);
  EXPECT_TRUE(ValidateJobSpec(filled).ok()) << Problems(filled);
  const v1::DecoderSpec& d = filled.serving().decoder();
  EXPECT_EQ(d.torchscript(), "/models/gpt.pt");
  EXPECT_FALSE(d.has_layers() || d.has_width() || d.has_heads()) << "the module's own: never filled in";
  EXPECT_EQ(d.context(), 256);
  // The effective spec says it and reads back the same.
  const std::string yaml = JobSpecToYaml(filled);
  EXPECT_THAT(yaml, HasSubstr("torchscript: /models/gpt.pt"));
  auto again = ParseJobSpecYaml(yaml);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->serving().decoder().SerializeAsString(), d.SerializeAsString());

  v1::JobSpec bad = Decoder("offline");  // GPT-2 small's shapes filled in, then a module brought
  bad.mutable_serving()->mutable_decoder()->set_torchscript("/models/gpt.pt");
  EXPECT_THAT(Problems(bad), AllOf(HasSubstr("serving.decoder.layers: the brought module states its own (its "
                                             "attributes); remove it when serving.decoder.torchscript is set"),
                                   HasSubstr("serving.decoder.width: the brought module"),
                                   HasSubstr("serving.decoder.heads: the brought module")));
  v1::JobSpec bare;
  bare.add_models("decoder");
  bare.mutable_serving()->set_scenario("offline");
  bare.mutable_serving()->mutable_decoder()->set_torchscript("/models/gpt.pt");
  bare = WithDefaults(bare);
  EXPECT_THAT(Problems(bare), AllOf(HasSubstr("serving.decoder.context: required with serving.decoder.torchscript: "
                                              "the module's own `context` (the agent checks they agree), e.g. 1024"),
                                    HasSubstr("serving.decoder.vocabulary: required with")));
  bare.mutable_serving()->mutable_decoder()->set_torchscript("/models/\ngpt.pt");
  EXPECT_THAT(Problems(bare), HasSubstr("serving.decoder.torchscript: contains a control character"));
  bare.mutable_serving()->mutable_decoder()->set_torchscript(std::string(5000, 'x'));
  EXPECT_THAT(Problems(bare), HasSubstr("serving.decoder.torchscript: 5000 bytes: a path on the agent of at most 4096"));
  auto not_a_path = ParseJobSpecYaml("models: [decoder]\nserving:\n  scenario: offline\n  decoder: {torchscript: [a]}\n");
  ASSERT_FALSE(not_a_path.ok());
  EXPECT_THAT(std::string(not_a_path.status().message()), HasSubstr("serving.decoder.torchscript (line 4): expected a path"));
}

// A generative run's verdict from its requests, as the coordinator judges it.
struct Judged {
  v1::ServingRun run;
  v1::PhaseResult phase;
};
Judged Judge(const v1::JobSpec& spec, int n, const GenerativeTimes& g) {
  Judged j;
  j.run.set_queries_scheduled(n);
  j.run.set_queries_answered(n);
  j.phase.set_phase(v1::PHASE_SERVE);
  j.phase.mutable_stats()->set_count(n);
  j.phase.mutable_stats()->set_items(n * 10);
  j.phase.mutable_stats()->set_window_seconds(10);
  const std::vector<int64_t> e2e(static_cast<size_t>(n), 900'000'000);
  JudgeServing(spec, e2e, &j.run, &j.phase, nullptr, &g);
  return j;
}

GenerativeTimes Times(int n, int64_t ttft_ms, int64_t tpot_ms, int ttft_over = 0, int64_t over_ms = 0) {
  GenerativeTimes g;
  g.ttft.assign(static_cast<size_t>(n - ttft_over), ttft_ms * 1'000'000);
  for (int i = 0; i < ttft_over; ++i) g.ttft.push_back(over_ms * 1'000'000);
  g.tpot.assign(static_cast<size_t>(n), tpot_ms * 1'000'000);
  g.ttft_stored = g.tpot_stored = n;
  return g;
}

TEST(GenerativeSpecTest, RequestsWithinTheirSlosAreValidWithExactPercentiles) {
  v1::JobSpec spec = Decoder("offline");
  spec.mutable_serving()->set_ttft_ms(500);
  spec.mutable_serving()->set_tpot_ms(50);
  GenerativeTimes g = Times(64, 100, 20);
  g.ttft.back() = 300'000'000;  // the slowest request: the p99 (rank 64 of 64)
  const Judged j = Judge(spec, 64, g);
  EXPECT_TRUE(j.phase.valid()) << j.phase.DebugString();
  EXPECT_EQ(j.run.generative().ttft_p50_ns(), 100'000'000);
  EXPECT_EQ(j.run.generative().ttft_p99_ns(), 300'000'000);
  EXPECT_EQ(j.run.generative().ttft_at_percentile_ns(), 100'000'000);  // p90: rank 58
  EXPECT_EQ(j.run.generative().tpot_p90_ns(), 20'000'000);
  EXPECT_EQ(j.run.generative().ttft_ms(), 500);
}

TEST(GenerativeSpecTest, ATtftOverItsSloAndTooFewRequestsAreEachSaid) {
  v1::JobSpec spec = Decoder("offline");
  spec.mutable_serving()->set_ttft_ms(500);
  Judged j = Judge(spec, 100, Times(100, 100, 20, 20, 800));
  EXPECT_FALSE(j.phase.valid());
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(HasSubstr("TTFT p90 800.000 ms is over serving.ttft_ms = 500 (20 of 100 requests over it)")));
  // 2 of 70 over: p90 is within the SLO, but not yet at 99% confidence.
  j = Judge(spec, 70, Times(70, 100, 20, 2, 800));
  EXPECT_THAT(j.phase.invalid_reasons(),
              ElementsAre(AllOf(HasSubstr("more requests for TTFT p90 within serving.ttft_ms at 99% confidence"),
                                HasSubstr("(2 of 70 over it; early stopping)"))));
  const EarlyStopping es = EarlyStop(70, 2, 90);
  EXPECT_FALSE(es.met);
}

TEST(GenerativeSpecTest, ARequestWithoutItsTtftOrTpotSampleMakesTheRunInvalid) {
  GenerativeTimes g = Times(64, 100, 20);
  g.tpot.pop_back();
  g.tpot_stored = 63;
  const Judged j = Judge(Decoder("offline"), 64, g);
  EXPECT_FALSE(j.phase.valid());
  EXPECT_THAT(
      j.phase.invalid_reasons(),
      ElementsAre(HasSubstr("TPOT: 63 samples stored for 64 requests (63 kept exactly): every request needs one")));
}

TEST(GenerativeSpecTest, WithoutSlosGoodputIsNotJudgedAndTheRunStandsOnItsMinimums) {
  const Judged j = Judge(Decoder("offline"), 64, Times(64, 5000, 900));
  EXPECT_TRUE(j.phase.valid()) << j.phase.DebugString();
  EXPECT_THAT(j.phase.invalid_reasons(), IsEmpty());
  EXPECT_EQ(j.run.generative().ttft_ms(), 0);
  EXPECT_THAT(j.run.generative().DebugString(), Not(HasSubstr("goodput")));  // the agent's, not the judge's
}

}  // namespace
}  // namespace hetbench
