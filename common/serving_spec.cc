#include "common/serving_spec.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/names.h"
#include "common/serving_stats.h"

namespace hetbench {

namespace {

constexpr const char* kScenarios = "server, single_stream, offline or peak";

bool IsScenario(const std::string& s) { return s == "server" || s == "single_stream" || s == "offline" || s == "peak"; }

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

void FillServingDefaults(v1::JobSpec* spec) {
  if (!IsServing(*spec)) return;
  v1::ServingSpec* s = spec->mutable_serving();
  if (!s->has_percentile()) s->set_percentile(IsOpenLoop(s->scenario()) ? 99.0 : 90.0);
  if (!s->has_min_duration_seconds()) s->set_min_duration_seconds(2.0);
  if (!s->has_min_queries()) s->set_min_queries(1024);
  if (!s->has_max_queue_delay_ms()) s->set_max_queue_delay_ms(1.0);
  if (!s->has_instances()) s->set_instances(1);
  if (!s->has_max_issue_delay_share()) s->set_max_issue_delay_share(0.1);
  if (!s->has_warmup_batches()) s->set_warmup_batches(8);
  if (s->scenario() == "peak") {
    if (!s->has_peak_precision()) s->set_peak_precision(0.1);
    if (!s->has_peak_max_runs()) s->set_peak_max_runs(12);
  }
}

// The rates and the bound: target_qps or qps_sweep, a peak search's settings,
// and what a closed-loop or offline scenario must leave out.
void CheckRatesAndBound(const v1::ServingSpec& s, std::vector<std::string>* problems) {
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
    if (!(s.latency_bound_ms() > 0 && s.latency_bound_ms() <= ServingLimits::kMaxBoundMs)) {
      bad("serving.latency_bound_ms = ", Shown(s.latency_bound_ms()), ": must be in (0, ",
          static_cast<int64_t>(ServingLimits::kMaxBoundMs), "] for scenario ", scenario,
          ": the bound the reported percentile must meet, e.g. 50");
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

void CheckServing(const v1::JobSpec& spec, std::vector<std::string>* problems) {
  auto bad = [problems](auto... parts) { problems->push_back(absl::StrCat(parts...)); };
  const v1::ServingSpec& s = spec.serving();
  bool calibration_model = false;
  for (int i = 0; i < spec.models_size(); ++i) {
    const std::string& m = spec.models(i);
    if (IsServingCalibrationModel(m)) {
      calibration_model = true;
      if (!IsServing(spec)) {
        bad("models[", i, "] = \"", m, "\": a serving calibration model; it needs serving.scenario (", kScenarios, ")");
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
  CheckRatesAndBound(s, problems);
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

void JudgeServing(const v1::JobSpec& spec, const std::vector<int64_t>& sorted_latencies, v1::ServingRun* run,
                  v1::PhaseResult* phase, const v1::Calibration* calibration) {
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
  if (IsOpenLoop(s.scenario()) && bound_ns > 0 &&
      static_cast<double>(run->issue_delay_p99_ns()) > s.max_issue_delay_share() * static_cast<double>(bound_ns)) {
    reason(absl::StrFormat(
        "the load generator could not keep up: issue delay p99 %.1f us > serving.max_issue_delay_share = %g of the "
        "bound",
        static_cast<double>(run->issue_delay_p99_ns()) * 1e-3, s.max_issue_delay_share()));
  }
  if (calibration != nullptr && calibration->blas_below()) {
    reason("math library below the CPU: ", calibration->blas_check());
  }
  phase->set_valid(phase->invalid_reasons().empty());
}

}  // namespace hetbench
