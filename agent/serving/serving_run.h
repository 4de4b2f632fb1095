#pragma once
/// A serving task from start to end, for any compute: warm-up, the
/// scenario's issuer against a BatchingServer, then every answered query
/// (its scheduled time on the task's axis and its latency from that time:
/// the executor stores each as a SERVE sample) and the issuer's and
/// batcher's figures in result.serving.
/// The coordinator computes the percentiles and the verdict from the
/// stored samples (common/serving_spec.h), never from this summary.
///
/// Threading: the task's thread; the batcher's workers run `compute`.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/serving/batching_server.h"
#include "agent/serving/issuer.h"
#include "agent/serving/replicas.h"
#include "common/serving_spec.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// What the run shares with the task's other threads (the executor's TaskControl).
struct ServingControl {
  const std::atomic<bool>* cancel = nullptr;  // stops the issuing
  std::atomic<int64_t>* issued = nullptr;     // progress: queries issued
  std::atomic<int64_t>* total = nullptr;      // progress: queries the run will issue (single_stream: its minimum)
  int64_t task_start_ns = 0;                  // the task's time axis (steady clock)
  const ReplicaMeeting* replicas = nullptr;   // a replica of a replicated server run: how to meet the others
};

/// One answered query on the task's time axis.
struct ServedQuery {
  int64_t scheduled_ns = 0;
  int64_t latency_ns = 0;
};

/// One run of a scenario: what the issuer recorded, and the last query's
/// scheduled time (s).
struct ScenarioRun {
  OpenLoopRun run;
  double schedule_seconds = 0;
  double issuer_cpu_seconds = 0;  // the issuing thread's CPU over the run
};

/// Issues spec.serving's scenario at `qps` to `target`: server, the seeded
/// schedule, open loop; offline, min_queries at once; single_stream and
/// multi_stream (samples_per_query samples per query, FanOutTarget), one
/// query outstanding. Answers are waited for 10 s + 10 x the bound +
/// `answer_allowance` (a decoder's requests take long). A `replica` of a
/// replicated server run issues its share of the global schedule (query i
/// when i mod replicas is its rank) from the agreed start.
ScenarioRun RunScenario(const v1::JobSpec& spec, double qps, ServingTarget& target, const ServingControl& control,
                        absl::Duration answer_allowance = absl::ZeroDuration(),
                        const ReplicaStart* replica = nullptr);

/// A replica of a replicated run (control.replicas set) meets the others
/// after its warm-up and records where it starts in out->replica; a run of
/// one starts at once. UNAVAILABLE when the replicas cannot meet.
absl::StatusOr<ReplicaStart> StartReplica(const ServingControl& control, v1::ServingRun* out);

/// The issuer's figures of `one` and the batches' (`batches`: what the
/// target ran) into `out`, its answered queries (on the task's axis) into
/// `answered`; returns the run's window on that axis.
v1::PhaseWindow SummarizeRun(const ScenarioRun& one, const std::vector<ServedBatch>& batches, int64_t task_start_ns,
                             v1::ServingRun* out, std::vector<ServedQuery>* answered);

/// A peak search's step at `qps`, judged here by the coordinator's rules
/// (JudgeServing) from the run's own latencies (any order; `items` served
/// over `window`), and for the decoder its TTFT and TPOT; `figures` holds
/// the run's issuer figures (SummarizeRun) and gets the percentiles.
v1::ServingStep JudgeStep(const v1::JobSpec& spec, double qps, std::vector<int64_t> latencies, int64_t items,
                          const v1::PhaseWindow& window, v1::ServingRun* figures,
                          const GenerativeTimes* generative = nullptr);

/// LoadGen's FindPeakPerformance, as runs on this device: from target_qps,
/// double while VALID (halve while INVALID) until a rate of each kind is
/// known, then bisect until the bracket is within peak_precision of the
/// highest VALID rate, at most peak_max_runs runs. `run_at` runs and judges
/// one rate (each step into out->steps); out->peak_qps is the highest VALID
/// rate. Returns the rate of the final run: that one, else the lowest tried.
double SearchPeak(const v1::JobSpec& spec, const ServingControl& control,
                  const std::function<v1::ServingStep(double qps)>& run_at, v1::ServingRun* out);

/// Runs spec.serving's scenario at `qps` (the task's rate; server) with a
/// batcher of `max_batch` (the task's batch size). `peak` first searches for
/// the highest rate whose run is VALID (each run in result.serving.steps),
/// then runs at it. `what` names the compute for the result ("mlp on cpu0
/// ..."). Appends every answered query of the final run to `answered`, in
/// schedule order.
absl::Status RunServing(const v1::JobSpec& spec, double qps, int max_batch, const BatchingServer::Compute& compute,
                        const std::string& what, const ServingControl& control, v1::TaskResult* result,
                        std::vector<ServedQuery>* answered);

}  // namespace hetbench::agent
