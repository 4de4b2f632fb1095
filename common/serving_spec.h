#pragma once
/// The `serving:` section of a job spec: its defaults, its checks, the
/// queries a task runs, and the verdict on a finished serving run. The
/// coordinator is the authority (it fills defaults and judges); the agent
/// reads the same defaults; the CLI checks with it to fail fast.
///
/// The verdict follows MLPerf LoadGen's rules, with defaults small enough
/// for seconds-long runs on a shared machine: a run is VALID when it lasted
/// min_duration_seconds and min_queries, every query was answered, the
/// reported percentile is within the latency bound at 99% confidence
/// (early stopping: common/serving_stats.h), and the issue delay's p99
/// stayed under max_issue_delay_share of the bound.

#include <cstdint>
#include <string>
#include <vector>

#include "hetbench/v1/common.pb.h"

namespace hetbench {

struct ServingLimits {
  /// Queries one task may run: the agent keeps each query's times and the
  /// coordinator every latency exactly (PhaseAccumulator::kServeExactLimit).
  static constexpr int64_t kMaxQueries = 1'000'000;
  static constexpr double kMaxQps = 1'000'000;
  static constexpr double kMaxBoundMs = 3'600'000;
  static constexpr int kMaxInstances = 64;
  static constexpr int kMaxSamplesPerQuery = 1024;
  static constexpr int kMaxReplicas = 64;
};

/// A replicated run's rendezvous (its replicas meet after warm-up to agree
/// on the start) waits this long for every replica.
inline constexpr double kReplicaRendezvousSeconds = 120;

/// The generative model: a decoder-only transformer with a KV cache
/// (serving.decoder), served by continuous batching; its own job.
inline constexpr char kDecoderModel[] = "decoder";

/// Whether the spec asks for a serving run (serving.scenario is set).
bool IsServing(const v1::JobSpec& spec);

/// Models that exist only to check the harness: "null" answers at once,
/// "fixed-service" busy-waits serving.fixed_service_us per batch.
const std::vector<std::string>& ServingCalibrationModels();
bool IsServingCalibrationModel(const std::string& model);

/// A model that exists only in a serving run: a calibration model or the decoder.
bool IsServingOnlyModel(const std::string& model);

/// Whether the spec serves the generative model (models: [decoder]).
bool IsGenerative(const v1::JobSpec& spec);

/// Fills the serving section's unset fields (a no-op without a scenario).
void FillServingDefaults(v1::JobSpec* spec);

/// Appends one line per bad serving field, naming it and the fix. Runs on
/// the effective spec; also refuses what a serving run cannot be combined
/// with (parallel, split, the layer profile, the Python executor, qsim) and
/// the calibration models outside a serving run.
void CheckServing(const v1::JobSpec& spec, std::vector<std::string>* problems);

/// The most queries a serving run may issue, which its sample buffer holds:
/// `server` at `qps`: the queries expected to cover both min_queries and
/// min_duration_seconds, with room for the Poisson draw's spread (x 5/4 +
/// 64); `offline`: min_queries; `single_stream` and `peak` (its final rate
/// is found in the run): kMaxQueries.
int64_t ServingQueryCapacity(const v1::JobSpec& spec, double qps);

/// The server scenario's arrivals at `qps` (ns from the run's start): the
/// seeded Poisson schedule (serving_stats.h), cut at the first arrival where
/// both min_queries and min_duration_seconds (from the first arrival) hold;
/// at most ServingQueryCapacity queries. The agent's issuer and the fleet
/// simulator both draw it.
std::vector<int64_t> ServerSchedule(const v1::JobSpec& spec, double qps);

/// The highest rate one run may ask for: kMaxQps, or less where its
/// capacity at min_duration_seconds would exceed kMaxQueries.
double ServingMaxQps(const v1::JobSpec& spec);

/// The rates of a job's serving tasks, one task each: serving.qps_sweep,
/// else serving.target_qps (0 for the scenarios without a rate).
std::vector<double> ServingRates(const v1::JobSpec& spec);

/// A generative run's stored per-request times, each ascending: TTFT and
/// TPOT samples (empty when they were not kept exactly), and how many of
/// each were stored.
struct GenerativeTimes {
  std::vector<int64_t> ttft;
  std::vector<int64_t> tpot;
  int64_t ttft_stored = 0;
  int64_t tpot_stored = 0;
};

/// Fills the coordinator's figures of `run` (percentiles, the early-stopping
/// estimate, queries over the bound) from `sorted_latencies` (every stored
/// SERVE sample, ascending; empty when they were not kept exactly) and the
/// phase's stats, then sets the phase's validity and reasons, e.g. "needs at
/// least 412 more queries for p99 at 99% confidence". A generative run
/// (`generative` given) also gets its TTFT and TPOT percentiles, and each
/// SLO set is judged as the bound is: the reported percentile within it at
/// 99% confidence.
void JudgeServing(const v1::JobSpec& spec, const std::vector<int64_t>& sorted_latencies, v1::ServingRun* run,
                  v1::PhaseResult* phase, const v1::Calibration* calibration = nullptr,
                  const GenerativeTimes* generative = nullptr);

}  // namespace hetbench
