#include "common/serving_spec.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "common/serving_stats.h"

namespace hetbench {

namespace {

constexpr const char* kScenarios = "server, single_stream, multi_stream, offline or peak";

bool IsScenario(const std::string& s) {
  return s == "server" || s == "single_stream" || s == "multi_stream" || s == "offline" || s == "peak";
}

// The scenarios whose issuer follows a schedule without waiting for answers.
bool IsOpenLoop(const std::string& s) { return s == "server" || s == "peak"; }

// "%g" of a number the user gave, so an error shows what was read.
std::string Shown(double v) { return absl::StrFormat("%g", v); }

std::string Ms(int64_t ns) { return absl::StrFormat("%.3f ms", static_cast<double>(ns) * 1e-6); }

}  // namespace

bool IsServing(const v1::JobSpec& spec) { return !spec.serving().scenario().empty(); }

const std::vector<std::string>& ServingCalibrationModels() {
  static const std::vector<std::string> models = {"null", "fixed-service"};
  return models;
}

bool IsServingCalibrationModel(const std::string& model) {
  const auto& m = ServingCalibrationModels();
  return std::find(m.begin(), m.end(), model) != m.end();
}

bool IsGenerative(const v1::JobSpec& spec) {
  return IsServing(spec) && std::find(spec.models().begin(), spec.models().end(), kDecoderModel) != spec.models().end();
}

bool IsServingOnlyModel(const std::string& model) { return IsServingCalibrationModel(model) || model == kDecoderModel; }

void FillServingDefaults(v1::JobSpec* spec) {
  if (!IsServing(*spec)) return;
  v1::ServingSpec* s = spec->mutable_serving();
  const bool generative = IsGenerative(*spec);
  // multi_stream reports p99, as LoadGen's MultiStream; a generative run p90
  // (64 requests reach an early-stopping estimate: seconds, not minutes, here).
  if (!s->has_percentile()) {
    s->set_percentile(!generative && (IsOpenLoop(s->scenario()) || s->scenario() == "multi_stream") ? 99.0 : 90.0);
  }
  if (!s->has_min_duration_seconds()) s->set_min_duration_seconds(2.0);
  if (!s->has_min_queries()) s->set_min_queries(generative ? 64 : 1024);
  if (s->scenario() == "multi_stream" && !s->has_samples_per_query()) s->set_samples_per_query(8);
  if (!s->has_replicas()) s->set_replicas(1);
  if (s->replicas() > 1 && !s->has_replica_timeout_seconds()) s->set_replica_timeout_seconds(600);
  if (generative) {
    v1::DecoderSpec* d = s->mutable_decoder();
    if (d->torchscript().empty()) {  // GPT-2 small; a brought module states its own
      if (!d->has_layers()) d->set_layers(12);
      if (!d->has_width()) d->set_width(768);
      if (!d->has_heads()) d->set_heads(12);
      if (!d->has_vocabulary()) d->set_vocabulary(50257);
      if (!d->has_context()) d->set_context(1024);
    }
    if (!d->has_prompt_tokens_min()) d->set_prompt_tokens_min(std::min(32, d->prompt_tokens_max() > 0 ? d->prompt_tokens_max() : 32));
    if (!d->has_prompt_tokens_max()) d->set_prompt_tokens_max(std::max(128, d->prompt_tokens_min()));
    if (!d->has_output_tokens_min()) d->set_output_tokens_min(std::min(16, d->output_tokens_max() > 0 ? d->output_tokens_max() : 16));
    if (!d->has_output_tokens_max()) d->set_output_tokens_max(std::max(64, d->output_tokens_min()));
    if (!s->has_warmup_batches()) s->set_warmup_batches(2);
  }
  if (!s->has_max_queue_delay_ms() && !generative) s->set_max_queue_delay_ms(1.0);
  if (!s->has_instances()) s->set_instances(1);
  if (!s->has_max_issue_delay_share()) s->set_max_issue_delay_share(0.1);
  if (!s->has_warmup_batches()) s->set_warmup_batches(8);
  if (s->scenario() == "peak") {
    if (!s->has_peak_precision()) s->set_peak_precision(0.1);
    if (!s->has_peak_max_runs()) s->set_peak_max_runs(12);
  }
}

// serving.decoder.torchscript: a path; the shapes the module states itself
// left out, the two the requests are drawn from (context, vocabulary) given.
void CheckBroughtDecoder(const v1::DecoderSpec& d, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  if (d.torchscript().size() > 4096) {  // printable: job_spec.cc's check of every path and name
    bad("serving.decoder.torchscript: ", d.torchscript().size(), " bytes: a path on the agent of at most 4096");
  }
  const std::pair<const char*, bool> own[] = {
      {"layers", d.has_layers()}, {"width", d.has_width()}, {"heads", d.has_heads()}};
  for (const auto& [field, given] : own) {
    if (given) {
      bad("serving.decoder.", field, ": the brought module states its own (its attributes); remove it ",
          "when serving.decoder.torchscript is set");
    }
  }
  const std::pair<const char*, bool> needed[] = {{"context", d.has_context()}, {"vocabulary", d.has_vocabulary()}};
  for (const auto& [field, given] : needed) {
    if (!given) {
      bad("serving.decoder.", field, ": required with serving.decoder.torchscript: the module's own `", field,
          "` (the agent checks they agree), e.g. ", std::string(field) == "context" ? "1024" : "50257");
    }
  }
}

// The rates and the bound: target_qps or qps_sweep, a peak search's settings,
// and what a closed-loop or offline scenario must leave out.
void CheckRatesAndBound(const v1::ServingSpec& s, bool generative, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  const std::string& scenario = s.scenario();
  if (s.qps_sweep_size() > 0 && scenario != "server") {
    bad("serving.qps_sweep: only for scenario server (a task per rate); remove it");
  } else if (s.qps_sweep_size() > 64) {
    bad("serving.qps_sweep: ", s.qps_sweep_size(), " rates: at most 64");
  } else if (s.qps_sweep_size() > 0) {
    if (s.target_qps() != 0) {
      bad("serving.target_qps = ", Shown(s.target_qps()),
          " and serving.qps_sweep: both set; list every rate under qps_sweep");
    }
    for (int i = 0; i < s.qps_sweep_size(); ++i) {
      const double q = s.qps_sweep(i);
      if (!(q > 0 && q <= ServingLimits::kMaxQps)) {
        bad("serving.qps_sweep[", i, "] = ", Shown(q), ": must be a finite number in (0, ",
            static_cast<int64_t>(ServingLimits::kMaxQps), "]");
      } else if (s.min_duration_seconds() > 0 &&
                 q * s.min_duration_seconds() > static_cast<double>(ServingLimits::kMaxQueries)) {
        bad("serving.qps_sweep[", i,
            "] x min_duration_seconds = ", absl::StrFormat("%.0f", q * s.min_duration_seconds()), " queries: at most ",
            ServingLimits::kMaxQueries, " per task; lower either");
      }
    }
  }
  if (scenario == "peak") {
    if (!(s.peak_precision() > 0 && s.peak_precision() <= 1)) {
      bad("serving.peak_precision = ", Shown(s.peak_precision()), ": must be in (0, 1], e.g. 0.1");
    }
    if (s.peak_max_runs() < 1 || s.peak_max_runs() > 64) {
      bad("serving.peak_max_runs = ", s.peak_max_runs(), ": must be in [1, 64]");
    }
  } else if (s.has_peak_precision() || s.has_peak_max_runs()) {
    bad("serving.peak_precision and peak_max_runs: only for scenario peak; remove them");
  }
  if (IsOpenLoop(scenario)) {
    if (s.qps_sweep_size() == 0 && !(s.target_qps() > 0 && s.target_qps() <= ServingLimits::kMaxQps)) {
      bad("serving.target_qps = ", Shown(s.target_qps()), ": must be a finite number in (0, ",
          static_cast<int64_t>(ServingLimits::kMaxQps), "] for scenario ", scenario,
          scenario == "peak" ? " (the search's first rate), e.g. 100" : ", e.g. 100 (or give serving.qps_sweep)");
    }
    // A generative run may be bounded by its SLOs alone (TTFT, TPOT).
    const bool slo_bound = generative && s.latency_bound_ms() == 0 && (s.ttft_ms() > 0 || s.tpot_ms() > 0);
    if (!slo_bound && !(s.latency_bound_ms() > 0 && s.latency_bound_ms() <= ServingLimits::kMaxBoundMs)) {
      bad("serving.latency_bound_ms = ", Shown(s.latency_bound_ms()), ": must be in (0, ",
          static_cast<int64_t>(ServingLimits::kMaxBoundMs), "] for scenario ", scenario,
          generative ? ": the bound on each request's end-to-end latency (or give serving.ttft_ms or tpot_ms), e.g. 5000"
                     : ": the bound the reported percentile must meet, e.g. 50");
    }
  } else {
    if (s.target_qps() != 0) {
      bad("serving.target_qps = ", Shown(s.target_qps()), ": not used by scenario ", scenario,
          scenario == "offline" ? " (every query is issued at once)"
                                : " (the next query goes when the last is answered)",
          "; remove it");
    }
    if (scenario == "offline" && s.latency_bound_ms() != 0) {
      bad("serving.latency_bound_ms = ", Shown(s.latency_bound_ms()),
          ": not used by scenario offline (it counts throughput); remove it");
    } else if (!(s.latency_bound_ms() >= 0 && s.latency_bound_ms() <= ServingLimits::kMaxBoundMs)) {
      bad("serving.latency_bound_ms = ", Shown(s.latency_bound_ms()), ": must be in [0, ",
          static_cast<int64_t>(ServingLimits::kMaxBoundMs), "] (0 = no bound)");
    }
  }
}

void CheckReplicas(const v1::ServingSpec& s, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  if (s.replicas() < 1 || s.replicas() > ServingLimits::kMaxReplicas) {
    bad("serving.replicas = ", s.replicas(), ": must be in [1, ", ServingLimits::kMaxReplicas,
        "] (agents serving one schedule together)");
  } else if (s.replicas() > 1 && s.scenario() != "server") {
    bad("serving.replicas = ", s.replicas(), ": only for scenario server (one schedule split among agents); use 1");
  }
  if (s.has_replica_timeout_seconds() &&
      (s.replicas() <= 1 || !(s.replica_timeout_seconds() > 0 && s.replica_timeout_seconds() <= 86400))) {
    bad("serving.replica_timeout_seconds = ", Shown(s.replica_timeout_seconds()),
        s.replicas() <= 1 ? ": only with serving.replicas > 1; remove it" : ": must be in (0, 86400]");
  }
}

void CheckMultiStream(const v1::ServingSpec& s, std::vector<std::string>* problems) {
  if (s.scenario() == "multi_stream") {
    if (s.samples_per_query() < 1 || s.samples_per_query() > ServingLimits::kMaxSamplesPerQuery) {
      problems->push_back(absl::StrCat("serving.samples_per_query = ", s.samples_per_query(), ": must be in [1, ",
                                       ServingLimits::kMaxSamplesPerQuery, "], e.g. 8 (LoadGen's MultiStream)"));
    }
  } else if (s.has_samples_per_query()) {
    problems->push_back("serving.samples_per_query: only for scenario multi_stream; remove it");
  }
}

// The generative model "decoder": alone in the job, a scenario it runs, its
// shapes and its requests' lengths; the SLOs only with it.
void CheckGenerative(const v1::JobSpec& spec, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  const v1::ServingSpec& s = spec.serving();
  const bool generative = IsGenerative(spec);
  for (const char* slo : {"ttft_ms", "tpot_ms"}) {
    const double v = std::string(slo) == "ttft_ms" ? s.ttft_ms() : s.tpot_ms();
    if (!(v >= 0 && v <= ServingLimits::kMaxBoundMs)) {
      bad("serving.", slo, " = ", Shown(v), ": must be in [0, ", static_cast<int64_t>(ServingLimits::kMaxBoundMs),
          "] (0 = no SLO)");
    } else if (v > 0 && !generative) {
      bad("serving.", slo, " = ", Shown(v), ": an SLO of a generative model; serve models: [", kDecoderModel,
          "] or remove it");
    }
  }
  if (!generative) {
    if (s.has_decoder()) bad("serving.decoder: set, but models does not list \"", kDecoderModel, "\"; add it or remove the section");
    return;
  }
  if (spec.models_size() != 1) {
    bad("models: \"", kDecoderModel, "\" with other models: serve the decoder in a job of its own (its queries are ",
        "requests of many tokens, not one-sample queries)");
  }
  if (s.scenario() != "server" && s.scenario() != "offline" && s.scenario() != "single_stream" &&
      s.scenario() != "peak") {
    bad("serving.scenario = \"", s.scenario(), "\": the decoder runs server, peak, offline or single_stream (a ",
        "query is a request of many tokens; multi_stream has no meaning for it)");
  }
  const v1::DecoderSpec& d = s.decoder();
  auto range = [&bad](const char* field, int v, int lo, int hi) {
    if (v < lo || v > hi) bad("serving.decoder.", field, " = ", v, ": must be in [", lo, ", ", hi, "]");
    return v >= lo && v <= hi;
  };
  if (d.torchscript().empty()) {
    range("layers", d.layers(), 1, 96);
    const bool width_ok = range("width", d.width(), 8, 16384);
    const bool heads_ok = range("heads", d.heads(), 1, 256);
    if (width_ok && heads_ok && d.width() % d.heads() != 0) {
      bad("serving.decoder.width = ", d.width(), ": must divide by serving.decoder.heads = ", d.heads(),
          " (each head gets width / heads); e.g. width ", d.heads() * std::max(1, d.width() / d.heads()));
    }
  } else {
    CheckBroughtDecoder(d, problems);
  }
  range("vocabulary", d.vocabulary(), 2, 1'000'000);
  const bool context_ok = range("context", d.context(), 4, 32768);
  const bool prompt_ok = range("prompt_tokens_min", d.prompt_tokens_min(), 1, 32768) &&
                         range("prompt_tokens_max", d.prompt_tokens_max(), 1, 32768);
  const bool output_ok = range("output_tokens_min", d.output_tokens_min(), 2, 32768) &&
                         range("output_tokens_max", d.output_tokens_max(), 2, 32768);
  if (prompt_ok && d.prompt_tokens_min() > d.prompt_tokens_max()) {
    bad("serving.decoder.prompt_tokens_min = ", d.prompt_tokens_min(), ": above prompt_tokens_max = ",
        d.prompt_tokens_max(), "; lengths are drawn from [min, max]");
  }
  if (output_ok && d.output_tokens_min() > d.output_tokens_max()) {
    bad("serving.decoder.output_tokens_min = ", d.output_tokens_min(), ": above output_tokens_max = ",
        d.output_tokens_max(), "; lengths are drawn from [min, max]");
  }
  if (context_ok && prompt_ok && output_ok &&
      static_cast<int64_t>(d.prompt_tokens_max()) + d.output_tokens_max() > d.context()) {
    bad("serving.decoder: prompt_tokens_max + output_tokens_max = ", d.prompt_tokens_max() + d.output_tokens_max(),
        " tokens: beyond serving.decoder.context = ", d.context(), "; raise the context or shorten the requests");
  }
  if (s.has_max_queue_delay_ms()) {  // never filled in for the decoder: the user set it
    bad("serving.max_queue_delay_ms = ", Shown(s.max_queue_delay_ms()),
        ": not used by the decoder (continuous batching admits waiting requests at every step); remove it");
  }
}

void CheckServing(const v1::JobSpec& spec, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  const v1::ServingSpec& s = spec.serving();
  bool calibration_model = false;
  for (int i = 0; i < spec.models_size(); ++i) {
    const std::string& m = spec.models(i);
    if (IsServingOnlyModel(m)) {
      calibration_model = true;
      if (!IsServing(spec)) {
        bad("models[", i, "] = \"", m, "\": ",
            m == kDecoderModel ? "the generative model" : "a serving calibration model",
            "; it needs serving.scenario (", kScenarios, ")");
      }
    }
    if (m == "fixed-service" && !(s.fixed_service_us() > 0 && s.fixed_service_us() <= 1e6)) {
      bad("serving.fixed_service_us = ", Shown(s.fixed_service_us()),
          ": the model \"fixed-service\" needs its service time per batch, in (0, 1000000] microseconds");
    }
    if (m == "qsim" && IsServing(spec)) {
      bad("models[", i, "] = \"qsim\": a circuit benchmark, not a model that answers queries; serve qnn instead");
    }
  }
  const bool wants_fixed =
      std::find(spec.models().begin(), spec.models().end(), "fixed-service") != spec.models().end();
  if (s.fixed_service_us() != 0 && !wants_fixed) {
    bad("serving.fixed_service_us: set, but models does not list \"fixed-service\"; add it or remove the field");
  }
  if (!IsServing(spec)) {
    if (spec.has_serving() && spec.serving().ByteSizeLong() > 0 && !calibration_model) {
      bad("serving: set, but serving.scenario is empty; give ", kScenarios, ", or remove the section");
    }
    return;
  }
  if (!IsScenario(s.scenario())) {
    bad("serving.scenario = ", QuotedInput(s.scenario()), ": unknown; use ", kScenarios);
    return;
  }
  const std::string& scenario = s.scenario();
  CheckRatesAndBound(s, IsGenerative(spec), problems);
  CheckMultiStream(s, problems);
  CheckReplicas(s, problems);
  CheckGenerative(spec, problems);
  if (!(s.percentile() > 0 && s.percentile() < 100)) {
    bad("serving.percentile = ", Shown(s.percentile()), ": must be in (0, 100), e.g. 99");
  }
  if (!(s.min_duration_seconds() > 0 && s.min_duration_seconds() <= 3600)) {
    bad("serving.min_duration_seconds = ", Shown(s.min_duration_seconds()), ": must be in (0, 3600]");
  }
  if (s.min_queries() < 1 || s.min_queries() > ServingLimits::kMaxQueries) {
    bad("serving.min_queries = ", s.min_queries(), ": must be in [1, ", ServingLimits::kMaxQueries, "]");
  }
  if (!(s.max_queue_delay_ms() >= 0 && s.max_queue_delay_ms() <= 60000)) {
    bad("serving.max_queue_delay_ms = ", Shown(s.max_queue_delay_ms()), ": must be in [0, 60000]");
  }
  if (s.instances() < 1 || s.instances() > ServingLimits::kMaxInstances) {
    bad("serving.instances = ", s.instances(), ": must be in [1, ", ServingLimits::kMaxInstances, "]");
  }
  if (!(s.max_issue_delay_share() > 0 && s.max_issue_delay_share() <= 1)) {
    bad("serving.max_issue_delay_share = ", Shown(s.max_issue_delay_share()), ": must be in (0, 1], e.g. 0.1");
  }
  if (s.warmup_batches() < 0 || s.warmup_batches() > 10000) {
    bad("serving.warmup_batches = ", s.warmup_batches(), ": must be in [0, 10000]");
  }
  if (IsOpenLoop(scenario) && s.target_qps() > 0 && s.min_duration_seconds() > 0 &&
      s.target_qps() * s.min_duration_seconds() > static_cast<double>(ServingLimits::kMaxQueries)) {
    bad("serving: target_qps x min_duration_seconds = ",
        absl::StrFormat("%.0f", s.target_qps() * s.min_duration_seconds()), " queries: at most ",
        ServingLimits::kMaxQueries, " per task; lower either");
  }
  if (spec.parallel().devices_size() > 0) {
    bad("serving: cannot be combined with parallel (a serving run is one device's); remove parallel");
  }
  if (spec.split().stages_size() > 0) {
    bad("serving: cannot be combined with split (a serving run is one device's); remove split");
  }
  if (spec.layers().enabled()) bad("serving: cannot be combined with layers.enabled; remove the layer profile");
  for (int i = 0; i < spec.targets_size(); ++i) {
    if (spec.targets(i).executor() == "python") {
      bad("targets[", i,
          "].executor = \"python\": serving runs on the torch executor; remove the executor or use torch");
    }
  }
}

int64_t ServingQueryCapacity(const v1::JobSpec& spec, double qps) {
  const v1::ServingSpec& s = spec.serving();
  if (s.scenario() == "offline") return std::clamp<int64_t>(s.min_queries(), 1, ServingLimits::kMaxQueries);
  if (s.scenario() == "server") {
    const double by_time = std::ceil(qps * s.min_duration_seconds());
    const double n = std::max(by_time, static_cast<double>(s.min_queries())) * 1.25 + 64;
    return std::clamp<int64_t>(static_cast<int64_t>(std::min(n, 1e12)), 1, ServingLimits::kMaxQueries);
  }
  return ServingLimits::kMaxQueries;
}

std::vector<int64_t> ServerSchedule(const v1::JobSpec& spec, double qps) {
  const v1::ServingSpec& s = spec.serving();
  const auto min_ns = static_cast<int64_t>(s.min_duration_seconds() * 1e9);
  // Enough arrivals to cover the duration with room for the draw's spread,
  // then cut at the first point where both minimums hold.
  std::vector<int64_t> schedule =
      PoissonSchedule(spec.seed(), qps, std::numeric_limits<int64_t>::max() / 4, ServingQueryCapacity(spec, qps));
  for (size_t i = 0; i < schedule.size(); ++i) {
    if (static_cast<int64_t>(i + 1) >= s.min_queries() && schedule[i] - schedule.front() >= min_ns) {
      schedule.resize(i + 1);
      break;
    }
  }
  return schedule;
}

double ServingMaxQps(const v1::JobSpec& spec) {
  const double seconds = std::max(spec.serving().min_duration_seconds(), 1e-3);
  return std::min(ServingLimits::kMaxQps, static_cast<double>(ServingLimits::kMaxQueries - 64) / (1.25 * seconds));
}

std::vector<double> ServingRates(const v1::JobSpec& spec) {
  const v1::ServingSpec& s = spec.serving();
  if (s.scenario() == "server" && s.qps_sweep_size() > 0) return {s.qps_sweep().begin(), s.qps_sweep().end()};
  if (s.scenario() == "server" || s.scenario() == "peak") return {s.target_qps()};
  return {0.0};
}

namespace {

// A generative run's TTFT and TPOT: the percentiles into `run.generative`,
// and each SLO judged as the latency bound is (the reported percentile
// within it at 99% confidence, early stopping).
void JudgeGenerative(const v1::ServingSpec& s, const GenerativeTimes& g, int64_t requests, v1::ServingRun* run,
                     const std::function<void(const std::string&)>& reason) {
  v1::GenerativeRun* out = run->mutable_generative();
  const double p = s.percentile();
  out->set_ttft_p50_ns(NearestRank(g.ttft, 50));
  out->set_ttft_p90_ns(NearestRank(g.ttft, 90));
  out->set_ttft_p99_ns(NearestRank(g.ttft, 99));
  out->set_ttft_at_percentile_ns(NearestRank(g.ttft, p));
  out->set_tpot_p50_ns(NearestRank(g.tpot, 50));
  out->set_tpot_p90_ns(NearestRank(g.tpot, 90));
  out->set_tpot_p99_ns(NearestRank(g.tpot, 99));
  out->set_tpot_at_percentile_ns(NearestRank(g.tpot, p));
  out->set_ttft_ms(s.ttft_ms());
  out->set_tpot_ms(s.tpot_ms());
  const std::string pname = absl::StrFormat("p%g", p);
  struct Slo {
    const char* name;
    const char* field;
    double ms;
    const std::vector<int64_t>* sorted;
    int64_t stored;
    int64_t at;
  };
  const Slo slos[] = {{"TTFT", "ttft_ms", s.ttft_ms(), &g.ttft, g.ttft_stored, out->ttft_at_percentile_ns()},
                      {"TPOT", "tpot_ms", s.tpot_ms(), &g.tpot, g.tpot_stored, out->tpot_at_percentile_ns()}};
  for (const Slo& slo : slos) {
    const auto n = static_cast<int64_t>(slo.sorted->size());
    if (n != slo.stored || slo.stored != requests) {
      reason(absl::StrCat(slo.name, ": ", slo.stored, " samples stored for ", requests, " requests (", n,
                          " kept exactly): every request needs one"));
      continue;
    }
    if (slo.ms <= 0 || n == 0) continue;
    const auto bound_ns = static_cast<int64_t>(slo.ms * 1e6);
    const int64_t over =
        n - (std::upper_bound(slo.sorted->begin(), slo.sorted->end(), bound_ns) - slo.sorted->begin());
    const EarlyStopping es = EarlyStop(n, over, p);
    if (es.met) continue;
    if (slo.at > bound_ns) {
      reason(absl::StrCat(slo.name, " ", pname, " ", Ms(slo.at), " is over serving.", slo.field, " = ", Shown(slo.ms),
                          " (", over, " of ", n, " requests over it)"));
    } else {
      reason(absl::StrCat("needs at least ", es.min_queries - n, " more requests for ", slo.name, " ", pname,
                          " within serving.", slo.field, " at 99% confidence (", over, " of ", n,
                          " over it; early stopping)"));
    }
  }
}

}  // namespace

void JudgeServing(const v1::JobSpec& spec, const std::vector<int64_t>& sorted_latencies, v1::ServingRun* run,
                  v1::PhaseResult* phase, const v1::Calibration* calibration, const GenerativeTimes* generative) {
  const v1::ServingSpec& s = spec.serving();
  const v1::TimingStats& stats = phase->stats();
  const auto n = static_cast<int64_t>(sorted_latencies.size());
  const double p = s.percentile();
  const auto bound_ns = static_cast<int64_t>(s.latency_bound_ms() * 1e6);
  run->set_percentile(p);
  run->set_latency_bound_ms(s.latency_bound_ms());
  run->set_exact(n == stats.count());
  run->set_latency_p50_ns(NearestRank(sorted_latencies, 50));
  run->set_latency_p90_ns(NearestRank(sorted_latencies, 90));
  run->set_latency_p99_ns(NearestRank(sorted_latencies, 99));
  run->set_latency_at_percentile_ns(NearestRank(sorted_latencies, p));
  run->set_early_stopping_ns(EarlyStoppingEstimate(sorted_latencies, p));
  int64_t over = 0;
  if (bound_ns > 0) {
    over =
        n - (std::upper_bound(sorted_latencies.begin(), sorted_latencies.end(), bound_ns) - sorted_latencies.begin());
  }
  run->set_over_bound(over);
  if (stats.window_seconds() > 0) {
    run->set_samples_per_second(static_cast<double>(stats.items()) / stats.window_seconds());
  }
  // Queries overlap: the phase's rate is over its window, not items over the summed latencies.
  phase->mutable_stats()->set_samples_per_second(run->samples_per_second());

  phase->clear_invalid_reasons();
  auto reason = [phase](auto... parts) { phase->add_invalid_reasons(absl::StrCat(parts...)); };
  const std::string pname = absl::StrFormat("p%g", p);
  if (!run->exact()) {
    reason("the latencies were not all kept (", stats.count(), " stored, ", n, " exact): no exact percentiles");
  }
  if (stats.count() == 0) {
    reason("no query answered");
  } else if (stats.count() < s.min_queries()) {
    reason("only ", stats.count(), " queries measured: needs at least ", s.min_queries() - stats.count(),
           " more (serving.min_queries = ", s.min_queries(), ")");
  }
  if (stats.count() > 0 && stats.window_seconds() + 1e-9 < s.min_duration_seconds()) {
    std::string fix;
    if (s.scenario() == "offline" && stats.window_seconds() > 0) {
      fix = absl::StrCat("; raise serving.min_queries to about ",
                         static_cast<int64_t>(std::ceil(static_cast<double>(stats.items()) / stats.window_seconds() *
                                                        s.min_duration_seconds())));
    }
    reason(absl::StrFormat("measured %.3f s, below serving.min_duration_seconds = %g", stats.window_seconds(),
                           s.min_duration_seconds()),
           fix);
  }
  const int64_t unanswered = run->queries_scheduled() - run->queries_answered();
  if (unanswered > 0) reason(unanswered, " of ", run->queries_scheduled(), " queries unanswered within the drain time");
  if (n > 0 && bound_ns > 0) {
    const EarlyStopping es = EarlyStop(n, over, p);
    if (!es.met) {
      if (run->latency_at_percentile_ns() > bound_ns) {
        reason(pname, " latency ", Ms(run->latency_at_percentile_ns()),
               " is over the bound serving.latency_bound_ms = ", Shown(s.latency_bound_ms()), " (", over, " of ", n,
               " queries over it)");
      } else {
        reason("needs at least ", es.min_queries - n, " more queries for ", pname,
               " within the bound at 99% confidence (", over, " of ", n, " over it; early stopping)");
      }
    }
  } else if (n > 0 && run->early_stopping_ns() == 0 && s.scenario() != "offline") {
    reason("needs at least ", EarlyStop(0, 0, p).min_queries - n, " more queries for an early-stopping estimate of ",
           pname);
  }
  if (generative != nullptr) {
    JudgeGenerative(s, *generative, stats.count(), run, [&reason](const std::string& r) { reason(r); });
  }
  // The issue delay counts against the latency bound, else (generative) the TTFT SLO.
  const auto delay_bound_ns = bound_ns > 0 ? bound_ns : static_cast<int64_t>(s.ttft_ms() * 1e6);
  if (IsOpenLoop(s.scenario()) && delay_bound_ns > 0 &&
      static_cast<double>(run->issue_delay_p99_ns()) > s.max_issue_delay_share() * static_cast<double>(delay_bound_ns)) {
    reason(absl::StrFormat(
        "the load generator could not keep up: issue delay p99 %.1f us > serving.max_issue_delay_share = %g of the "
        "%s",
        static_cast<double>(run->issue_delay_p99_ns()) * 1e-3, s.max_issue_delay_share(),
        bound_ns > 0 ? "bound" : "TTFT SLO"));
  }
  if (calibration != nullptr && calibration->blas_below()) {
    reason("math library below the CPU: ", calibration->blas_check());
  }
  phase->set_valid(phase->invalid_reasons().empty());
}

}  // namespace hetbench
