#include "report/render/parallel.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/render/common.h"
#include "report/render/svg.h"
#include "common/names.h"

namespace hetbench::report {

using render::CsvLines;
using render::FindPhase;
using render::Ms;
using render::TaskModel;

std::vector<GangFigures> Gangs(const v1::Job& job) {
  std::vector<GangFigures> out;
  std::map<std::string, size_t> index;
  for (const v1::Task& t : job.tasks()) {
    // A split across agents is a gang too, of stages: its figures are the split's.
    if (t.gang().world_size() == 0 || job.spec().split().across_agents()) continue;
    auto [it, fresh] = index.emplace(t.gang().id(), out.size());
    if (fresh) {
      GangFigures g;
      g.gang_id = t.gang().id();
      g.model = TaskModel(job, t);
      g.batch_size = t.batch_size();
      g.world_size = t.gang().world_size();
      out.push_back(g);
    }
    GangFigures& g = out[it->second];
    if (t.state() != v1::TASK_STATE_SUCCEEDED) continue;
    ++g.ranks_succeeded;
    const v1::ParallelRun& d = t.result().parallel();
    if (const v1::PhaseResult* p = FindPhase(t, v1::PHASE_TRAIN)) {
      g.samples_per_second += p->stats().samples_per_second();
      g.step_p50_ns = std::max(g.step_p50_ns, p->stats().p50_ns());
    }
    g.compute_p50_ns = std::max(g.compute_p50_ns, d.compute().p50_ns());
    g.allreduce_p50_ns = std::max(g.allreduce_p50_ns, d.allreduce().p50_ns());
    g.bytes_per_step = d.bytes_per_step();
    g.clock_bound_ns = std::max(g.clock_bound_ns, static_cast<double>(t.result().clock().bound_ns()));
    g.clock_known = g.clock_known && t.result().clock().round_trips() > 0;
  }
  for (GangFigures& g : out) {
    if (g.world_size > 1 && g.allreduce_p50_ns > 0) {
      g.allreduce_gbytes_per_second = static_cast<double>(g.bytes_per_step) / g.allreduce_p50_ns;
    }
    for (const GangFigures& one : out) {
      if (one.world_size == 1 && one.model == g.model && one.batch_size == g.batch_size &&
          one.ranks_succeeded == 1 && one.samples_per_second > 0 && g.ranks_succeeded == g.world_size) {
        g.scaling_efficiency = g.samples_per_second / (g.world_size * one.samples_per_second);
      }
    }
  }
  return out;
}

std::string RenderScaling(const v1::Job& job, OutputFormat format) {
  const std::vector<GangFigures> gangs = Gangs(job);
  if (gangs.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const GangFigures& g : gangs) {
    const bool done = g.ranks_succeeded == g.world_size;
    rows.push_back({g.gang_id, g.model, absl::StrCat(g.batch_size), absl::StrCat(g.batch_size * g.world_size),
                    absl::StrCat(g.world_size), done ? absl::StrFormat("%.1f", g.samples_per_second) : "-",
                    done ? Ms(g.step_p50_ns) : "-", done ? Ms(g.compute_p50_ns) : "-",
                    done && g.world_size > 1 ? Ms(g.allreduce_p50_ns) : "-",
                    done && g.world_size > 1 ? absl::StrFormat("%.1f", g.bytes_per_step / 1048576.0) : "-",
                    g.allreduce_gbytes_per_second > 0 ? absl::StrFormat("%.2f", g.allreduce_gbytes_per_second) : "-",
                    g.scaling_efficiency > 0 ? absl::StrFormat("%.2f", g.scaling_efficiency) : "-",
                    done && g.clock_known ? absl::StrFormat("%.3f", g.clock_bound_ns / 1e6) : "-"});
  }
  if (format == OutputFormat::kCsv) {
    return CsvLines(
        "gang_id,model,batch_per_rank,global_batch,devices,samples_per_second,step_p50_ms,compute_p50_ms,"
        "allreduce_p50_ms,allreduce_mib_per_step,allreduce_gbytes_per_second,scaling_efficiency,clock_bound_ms",
        rows);
  }
  return absl::StrCat(
      "data-parallel scaling (per gang; SAMPLES_PER_S sums the ranks, times are the slowest rank's p50):\n",
      FormatTable({"GANG", "MODEL", "BATCH/RANK", "GLOBAL", "DEVICES", "SAMPLES_PER_S", "STEP_MS", "COMPUTE_MS",
                   "ALLREDUCE_MS", "MIB/STEP", "GB/S", "EFFICIENCY", "CLOCK_+-MS"},
                  rows),
      "EFFICIENCY = samples/s / (devices x the same model and batch/rank on 1 device). GB/S = gradient bytes /"
      " all-reduce p50 (algorithm bandwidth; a ring's bus bandwidth is 2(n-1)/n of it). CLOCK_+-MS bounds the"
      " ranks' clock offsets to the coordinator.\n");
}

namespace {
// "a2/cpu0" for a stage on another agent (a split across agents), else "cpu0".
std::string StageDevice(const v1::SplitStageResult& s) {
  return s.agent_id().empty() ? s.device_id() : absl::StrCat(s.agent_id(), "/", s.device_id());
}
}  // namespace

std::string RenderSplit(const v1::Job& job, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  std::string probes;  // the links probed before the first step (splits across agents)
  for (const v1::Task& t : job.tasks()) {
    for (const v1::SplitStageResult& s : t.result().split()) {
      const bool probed = s.link_gbytes_per_second() > 0;
      rows.push_back({t.id(), TaskModel(job, t), absl::StrCat(t.batch_size()), absl::StrCat(s.stage()), s.layers(),
                      absl::StrCat(StageDevice(s), " (", DeviceKindName(s.device_kind()), ")"), Ms(s.forward_ns()),
                      Ms(s.backward_ns()), Ms(s.transfer_ns()), absl::StrFormat("%.1f", s.transfer_bytes() / 1024.0),
                      Ms(s.idle_ns()), Ms(s.step_ns())});
      if (format == OutputFormat::kCsv) {
        rows.back().push_back(probed ? absl::StrFormat("%.1f", s.link_latency_ns() / 1e3) : "");
        rows.back().push_back(probed ? absl::StrFormat("%.3g", s.link_gbytes_per_second()) : "");
      } else if (probed) {
        absl::StrAppendFormat(&probes, "  %s stage %d -> %d: %.1f us one way, %.3g GB/s\n", t.id(), s.stage(),
                              s.stage() + 1, s.link_latency_ns() / 1e3, s.link_gbytes_per_second());
      }
    }
  }
  if (rows.empty()) return "";
  if (format == OutputFormat::kCsv) {
    return CsvLines("task_id,model,batch_size,stage,layers,device,forward_ms,backward_ms,transfer_ms,transfer_kib,"
                    "idle_ms,step_ms,link_latency_us,link_gbytes_per_second",
                    rows);
  }
  if (!probes.empty()) {
    probes = absl::StrCat("links probed before the first step (ping-pong of 1 KiB for the latency, 4 MiB for the "
                          "bandwidth, each round trip after compute as a step's; trimmed means):\n",
                          probes);
  }
  return absl::StrCat("split stages (medians over the measured steps):\n",
                      FormatTable({"TASK", "MODEL", "BATCH", "STAGE", "LAYERS", "DEVICE", "FWD_MS", "BWD_MS",
                                   "TRANSFER_MS", "TRANSFER_KIB", "IDLE_MS", "STEP_MS"},
                                  rows),
                      "TRANSFER: activations out and gradients in (both directions, per step; across agents the "
                      "c10d send/recv of both, with the figures sent back); IDLE: the step minus the stage's own "
                      "work (the pipeline bubble: without micro-batches each stage waits for the others; the "
                      "optimizer step is in it).\n",
                      probes);
}

void ParallelPlots(const v1::Job& job, std::vector<Plot>* out) {
  const std::vector<GangFigures> gangs = Gangs(job);
  std::map<std::pair<std::string, int>, svg::StackedBarChart> charts;
  for (const GangFigures& g : gangs) {
    if (g.ranks_succeeded != g.world_size) continue;
    svg::StackedBarChart& c = charts[{g.model, g.batch_size}];
    if (c.title.empty()) {
      c.title = absl::StrCat("Data-parallel step, ", g.model, ", batch ", g.batch_size, " per device");
      c.y_label = "ms per step (slowest rank's p50)";
      c.stacks = {"compute", "all-reduce"};
      c.footnote = "label: devices (scaling efficiency = samples/s over devices x 1-device samples/s)";
    }
    c.categories.push_back(g.scaling_efficiency > 0
                               ? absl::StrFormat("%d dev (eff %.2f)", g.world_size, g.scaling_efficiency)
                               : absl::StrFormat("%d dev", g.world_size));
    c.values.push_back({g.compute_p50_ns / 1e6, g.world_size > 1 ? g.allreduce_p50_ns / 1e6 : 0.0});
  }
  for (auto& [key, c] : charts) {
    out->push_back({absl::StrCat("scaling-", key.first, "-b", key.second), c.title, svg::Render(c)});
  }
  for (const v1::Task& t : job.tasks()) {
    if (t.result().split_size() == 0 || t.state() != v1::TASK_STATE_SUCCEEDED) continue;
    svg::StackedBarChart c;
    c.title = absl::StrCat("Split step by stage, ", t.id(), " (", TaskModel(job, t), ", batch ", t.batch_size(), ")");
    c.y_label = "ms per step (p50)";
    c.stacks = {"forward", "backward", "transfer", "idle (bubble)"};
    c.other_last = true;
    for (const v1::SplitStageResult& s : t.result().split()) {
      c.categories.push_back(absl::StrCat("stage ", s.stage(), " ", s.layers(), " ", StageDevice(s)));
      c.values.push_back({s.forward_ns() / 1e6, s.backward_ns() / 1e6, s.transfer_ns() / 1e6, s.idle_ns() / 1e6});
    }
    out->push_back({absl::StrCat("split-", t.id()), c.title, svg::Render(c)});
  }
}

}  // namespace hetbench::report
