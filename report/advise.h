#pragma once
/// The placement advisor: from a job that timed the layers of one model on
/// several device kinds (`layers: {enabled: true}` on each target), predict
/// the best placement of contiguous layer ranges on device kinds for an
/// objective (or the figures of a given plan, e.g. one split across two
/// agents of one kind), against every single-device run. Pure computation
/// on the job.
///
/// The model (stated with every answer):
///  - a layer's training time on a kind is its profiled forward + backward
///    p50, scaled so that with the layer's optimizer share (LayerTiming.
///    optimizer, when the profile timed it) the kind's layers sum to its
///    measured step p50 (the profile synchronises at every layer, the step
///    does not);
///  - a boundary between two kinds moves the layer's output forward and its
///    gradient back: 2 x (latency + output bytes x batch / bandwidth), plus
///    across agents the handoff the link's split measured (its step beyond
///    its stages' compute and transfers, per boundary); the
///    latency and bandwidth probed by a split across agents (its links'
///    ping-pong at 1 KiB and 4 MiB, each round trip after compute as a
///    step's, each sender's copy into its buffer included, trimmed means);
///    without a probe, latency 0 and the bandwidth of the
///    split's own transfers (bytes / time) or as given;
///  - stages run one after another (no micro-batches): the step is the sum,
///    plus the optimizer: on one agent one step over every layer after the
///    backward; across agents each stage's own after its backward, so a later
///    stage's overlaps the earlier stages' backward and adds only what is
///    left of it when the next step's forward reaches that stage;
///  - energy: each layer's time x its kind's measured (or modeled) average
///    training power, a transfer's time x both kinds' power;
///  - cost: the step time x the hourly rates of every kind the plan holds;
///  - with `repeats` (every kind profiled k >= 2 times): each kind's step and
///    layer times are the median over its runs, and the advised plan is also
///    predicted under each run's profile alone, giving a 95% prediction
///    interval for one new run (Student's t on the k runs' log predictions,
///    widened by sqrt(1 + 1/k)); it covers the noise between runs, not the
///    model's own error. When the link comes from a job with repeats (m >= 2
///    runs of its split), the plan is also predicted under each run's link
///    with the median profile, and the interval adds that variance (the two
///    sources independent: variances added, Welch-Satterthwaite degrees of
///    freedom); from one run the link's variation is not in the interval,
///    and the assumptions say so. The runs of a kind may come from several agents
///    (one target pinned to each): for a plan across agents the interval
///    then holds the differences between them, and the assumptions say
///    when every run came from one agent.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "report/render.h"
#include "hetbench/v1/coordinator.pb.h"

namespace hetbench::report {

enum class Objective { kTime, kEnergy, kCost };
absl::StatusOr<Objective> ParseObjective(const std::string& name);
/// "time", "energy" or "cost".
const char* ObjectiveName(Objective o);

struct AdviseOptions {
  Objective objective = Objective::kTime;
  int max_stages = 3;
  /// Link bandwidth between two kinds, GB/s; 0 = measured from the job's
  /// split tasks (transfer bytes / transfer time), else 1 GB/s assumed.
  double link_gbytes_per_second = 0;
  std::string model;  // empty: the model with layer timings on the most kinds
  int batch_size = 0;
  /// A plan to predict instead of searching: "LAYERS:KIND" per stage, as
  /// --split takes them ("0-2:cpu", "3-:cpu").
  std::vector<std::string> plan;
  /// The stages on different agents (a split across agents): neighbours of
  /// one kind are allowed in a given plan, each boundary a network link.
  bool across_agents = false;
  /// Where the link is measured: this job's split tasks (null: the advised job's).
  const v1::Job* link_job = nullptr;
};

struct Stage {
  int begin = 0, end = 0;  // layers [begin, end)
  v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED;
};

struct Prediction {
  std::vector<Stage> stages;
  double step_ns = 0, transfer_ns = 0;
  double optimizer_ns = 0;           // the optimizer's time on the step's critical path
  double energy_joules = 0;          // per step
  double usd_per_1000_samples = 0;
  bool energy_modeled = false;       // some power figure was MODELED
  bool energy_known = true;          // every kind of the plan had a power figure
  bool cost_known = true;            // every kind of the plan had an hourly rate
};

struct SingleRun {
  v1::DeviceKind kind = v1::DEVICE_KIND_UNSPECIFIED;
  std::string task_id;
  double measured_step_ns = 0;       // the task's training p50
  double profiled_sum_ns = 0;        // its layers' forward + backward p50s
  double profiled_optimizer_ns = 0;  // its layers' optimizer shares (0: not timed, or not below the step)
  Prediction as_plan;                // the kind alone under the model
};

struct Advice {
  std::string job_id;
  std::string model;
  int batch_size = 0;
  Objective objective = Objective::kTime;
  std::vector<std::string> layer_names;
  Prediction best;
  std::vector<SingleRun> singles;
  double link_gbytes_per_second = 0;
  double link_latency_ns = 0;  // one way, per message; 0 unless probed
  std::string link_source;
  // Across agents, a boundary's cost beyond its two messages: the link job's
  // split step past its stages' forward, backward and transfers, per
  // boundary (the median over its split tasks; 0 unless they timed it).
  double handoff_ns = 0;
  /// The link job's own figures per split run (probed or measured; empty
  /// when the bandwidth was given or assumed): latency, bandwidth, handoff.
  struct LinkRun {
    double latency_ns = 0, gbytes_per_second = 0, handoff_ns = 0;
  };
  std::vector<LinkRun> link_runs;
  std::vector<double> link_run_step_ns;  // the plan under each link run, the median profile (link_runs >= 2)
  size_t plans_considered = 0;
  bool plan_given = false;     // --plan: predicted, not searched
  bool across_agents = false;
  bool optimizer_timed = false;              // some kind's profile timed the layers' optimizer shares
  std::vector<std::string> per_layer_power;  // kinds whose layers each have their own measured power
  int runs = 1;                              // runs of each kind the figures are the median over
  std::vector<std::string> profile_agents;   // the agents the profiled runs ran on, each once, in order
  std::vector<double> run_step_ns;           // the plan under each run's profile (runs >= 2)
  double interval_low_ns = 0, interval_high_ns = 0;  // 95% prediction interval; 0 without repeats
  bool interval_has_link = false;                    // the interval holds the link's variation between runs
  double profile_interval_low_ns = 0, profile_interval_high_ns = 0;  // the profile's runs alone (no link runs)
  std::vector<std::string> assumptions;
};

absl::StatusOr<Advice> Advise(const v1::Job& job, const AdviseOptions& options);
/// What the prediction assumes, in the order the report lists it: sets
/// advice.assumptions from the advice's figures (Advise calls it last;
/// advise_render.cc, beside the rest of the advice's text).
void AddAssumptions(const AdviseOptions& options, Advice& advice);
/// A stage's layers as a split stage names them: "0-3", "4" or "5-" (to the last of `layers`).
std::string StageLayers(const Stage& stage, size_t layers);
/// "0-3:cpu,4-:qpu-sim": the --split flag that runs the plan.
std::string SplitFlag(const Prediction& plan, size_t layers);
/// The advice as a table (with the assumptions) or JSON (advise_render.cc).
std::string RenderAdvice(const Advice& advice, OutputFormat format);

}  // namespace hetbench::report
