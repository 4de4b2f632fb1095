#pragma once
/// Many devices: the data-parallel scaling of a job's gangs and the stage
/// breakdown of its split tasks, as tables and figures.

#include <string>
#include <vector>

#include "report/render.h"
#include "report/render/plots.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::report {

/// One gang of a job (all its ranks), summarised.
struct GangFigures {
  std::string gang_id, model;
  int batch_size = 0;     // per rank
  int world_size = 0;
  int ranks_succeeded = 0;
  double samples_per_second = 0;  // sum over the ranks' measured training
  double step_p50_ns = 0;         // the slowest rank's
  double compute_p50_ns = 0;      // the slowest rank's step minus its all-reduce
  double allreduce_p50_ns = 0;    // the slowest rank's
  int64_t bytes_per_step = 0;
  double allreduce_gbytes_per_second = 0;  // bytes / the slowest rank's all-reduce p50
  /// samples/s over world_size x the same model and batch's 1-device gang; 0 without one.
  double scaling_efficiency = 0;
  double clock_bound_ns = 0;  // the largest clock-offset bound among the ranks
  bool clock_known = true;    // every rank recorded a clock offset
};

/// The job's gangs in task order; a gang counts once every rank succeeded.
std::vector<GangFigures> Gangs(const v1::Job& job);

/// "data-parallel scaling" table (or CSV), "" when the job has no gang.
std::string RenderScaling(const v1::Job& job, OutputFormat format);
/// "split stages" table (or CSV), "" when no task ran split.
std::string RenderSplit(const v1::Job& job, OutputFormat format);

/// Figures: step time split into compute and all-reduce per device count
/// (with the scaling efficiency), and each split task's stages.
void ParallelPlots(const v1::Job& job, std::vector<Plot>* out);

}  // namespace hetbench::report
