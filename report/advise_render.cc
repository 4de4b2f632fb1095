// The advice as a table or JSON, and the text of its assumptions (report/advise.h); the model is in
// advise.cc.
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/names.h"
#include "report/advise.h"
#include "report/render/common.h"

namespace hetbench::report {

void AddAssumptions(const AdviseOptions& options, Advice& advice) {
  advice.assumptions = {
      advice.optimizer_timed
          ? "a layer's training time on a kind = its forward + backward p50 from the per-layer profile, scaled so "
            "that with its optimizer share (zero_grad + step over its parameters, timed per layer) the kind's layers "
            "sum to its measured step p50"
          : "a layer's training time on a kind = its forward + backward p50 from the per-layer profile, scaled so the "
            "kind's layers sum to its measured step p50 (the profile has no optimizer timings: the optimizer is "
            "spread over the layers)",
      absl::StrCat(
          advice.link_latency_ns > 0
              ? absl::StrFormat("a boundary moves the layer's output forward and its gradient back: 2 x (%.1f us + "
                                "bytes x batch / %.3g GB/s) (%s)",
                                advice.link_latency_ns / 1e3, advice.link_gbytes_per_second, advice.link_source)
              : absl::StrFormat("a boundary moves the layer's output forward and its gradient back: 2 x bytes x "
                                "batch / %.3g GB/s (%s)",
                                advice.link_gbytes_per_second, advice.link_source),
          advice.across_agents && advice.handoff_ns > 0
              ? absl::StrFormat(", plus %.3f ms of handoff (the link job's split step beyond its stages' compute "
                                "and transfers, per boundary)",
                                advice.handoff_ns / 1e6)
              : ""),
      advice.across_agents
          ? "stages run one after another (no micro-batches): the step is their sum, then stage 0's optimizer; each "
            "later stage steps its own optimizer after its backward, beside the earlier stages' backward, and adds "
            "to the step only what is left of it when the next step's forward reaches the stage"
          : "stages run one after another (no micro-batches): the step is their sum, then one optimizer step over "
            "every layer",
      absl::StrCat(advice.per_layer_power.empty()
                       ? "energy: each layer's time x its kind's average training power"
                       : absl::StrCat("energy: each layer's time x its own training power, measured by the layer "
                                      "loops (layers.energy_seconds) on ",
                                      absl::StrJoin(advice.per_layer_power, ", "),
                                      "; elsewhere the kind's average training power"),
                   " (transfers: both kinds' power); cost: the step x the hourly rates of every kind the plan holds"),
  };
  if (advice.plan_given) {
    advice.assumptions.push_back(
        absl::StrCat("the plan was given (--plan), not searched",
                     options.across_agents ? "; its stages on different agents, each boundary a network link" : ""));
  }
  if (advice.best.energy_modeled) {
    advice.assumptions.push_back("some power figures are MODELED (nominal watts x utilisation), not measured");
  }
  if (advice.across_agents && advice.profile_agents.size() == 1) {
    advice.assumptions.push_back(
        absl::StrCat("every profiled run was on one agent (", advice.profile_agents[0],
                     ") and the plan's stages run on several: the figures and the interval hold that agent alone, not "
                     "the differences between agents (profile on each agent the split uses: one target per agent, "
                     "targets: [{device_kind: ..., agent_id: ...}, ...])"));
  } else if (advice.profile_agents.size() >= 2) {
    advice.assumptions.push_back(absl::StrCat("the profiled runs are from ", advice.profile_agents.size(), " agents (",
                                              absl::StrJoin(advice.profile_agents, ", "),
                                              "): each kind's figures are the median over all of its runs, "
                                              "and the interval holds the differences between the agents"));
  }
  advice.assumptions.push_back(
      advice.runs >= 2
          ? absl::StrCat("steps and layer times are the median over ", advice.runs,
                         " runs (repeats); the 95% prediction interval covers the noise between runs, not the "
                         "model's own error")
          : "one run of each kind: no prediction interval (profile with --repeats 3 for one)");
  if (advice.runs >= 2 && advice.best.stages.size() >= 2 && !advice.link_runs.empty()) {
    advice.assumptions.push_back(
        advice.interval_has_link
            ? absl::StrCat("the link's figures are the median over ", advice.link_runs.size(),
                           " runs of its split; the interval adds the plan's spread under each run's link")
            : "the link's figures are from one run of its split: the interval leaves out the link's variation "
              "between runs (submit the link's split with --repeats 3)");
  }
}

std::string RenderAdvice(const Advice& a, OutputFormat format) {
  const size_t layers = a.layer_names.size();
  auto plan_text = [&](const Prediction& p) {
    std::vector<std::string> parts;
    for (const Stage& s : p.stages) {
      parts.push_back(absl::StrCat(s.begin, s.end - s.begin > 1 ? absl::StrCat("-", s.end - 1) : "", " on ",
                                   DeviceKindName(s.kind)));
    }
    return absl::StrJoin(parts, " | ");
  };
  if (format == OutputFormat::kJson) {
    nlohmann::json j;
    j["job_id"] = a.job_id;
    j["model"] = a.model;
    j["batch_size"] = a.batch_size;
    j["objective"] = ObjectiveName(a.objective);
    j["layers"] = a.layer_names;
    auto pred = [&](const Prediction& p) {
      nlohmann::json o;
      o["stages"] = nlohmann::json::array();
      for (const Stage& s : p.stages) {
        o["stages"].push_back(
            {{"first_layer", s.begin}, {"last_layer", s.end - 1}, {"device_kind", DeviceKindName(s.kind)}});
      }
      o["step_ms"] = p.step_ns / 1e6;
      o["transfer_ms"] = p.transfer_ns / 1e6;
      o["optimizer_ms"] = p.optimizer_ns / 1e6;
      o["energy_joules_per_step"] = p.energy_known ? nlohmann::json(p.energy_joules) : nlohmann::json();
      o["energy_modeled"] = p.energy_modeled;
      o["usd_per_1000_samples"] = p.cost_known ? nlohmann::json(p.usd_per_1000_samples) : nlohmann::json();
      o["split_flag"] = SplitFlag(p, layers);
      return o;
    };
    j["best"] = pred(a.best);
    j["single_devices"] = nlohmann::json::array();
    for (const SingleRun& s : a.singles) {
      nlohmann::json o = pred(s.as_plan);
      o["task_id"] = s.task_id;
      o["measured_step_ms"] = s.measured_step_ns / 1e6;
      o["profiled_layers_sum_ms"] = s.profiled_sum_ns / 1e6;
      o["profiled_optimizer_ms"] = s.profiled_optimizer_ns / 1e6;
      j["single_devices"].push_back(o);
    }
    j["runs"] = a.runs;
    j["profile_agents"] = a.profile_agents;
    j["run_step_ms"] = nlohmann::json::array();
    for (double ns : a.run_step_ns) j["run_step_ms"].push_back(ns / 1e6);
    j["prediction_interval_ms"] = a.interval_high_ns > 0
                                      ? nlohmann::json::array({a.interval_low_ns / 1e6, a.interval_high_ns / 1e6})
                                      : nlohmann::json();
    j["link_gbytes_per_second"] = a.link_gbytes_per_second;
    j["link_latency_us"] = a.link_latency_ns / 1e3;
    j["link_source"] = a.link_source;
    j["handoff_ms"] = a.handoff_ns / 1e6;
    j["link_runs"] = a.link_runs.size();
    j["link_run_step_ms"] = nlohmann::json::array();
    for (double ns : a.link_run_step_ns) j["link_run_step_ms"].push_back(ns / 1e6);
    j["interval_has_link"] = a.interval_has_link;
    j["profile_interval_ms"] =
        a.profile_interval_high_ns > 0
            ? nlohmann::json::array({a.profile_interval_low_ns / 1e6, a.profile_interval_high_ns / 1e6})
            : nlohmann::json();
    j["plans_considered"] = a.plans_considered;
    j["plan_given"] = a.plan_given;
    j["across_agents"] = a.across_agents;
    j["assumptions"] = a.assumptions;
    return j.dump(1) + "\n";
  }
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& what, const Prediction& p, const std::string& measured) {
    rows.push_back({what, plan_text(p), render::Ms(p.step_ns), render::Ms(p.transfer_ns),
                    p.energy_known ? absl::StrFormat("%.4f%s", p.energy_joules, p.energy_modeled ? "*" : "") : "-",
                    p.cost_known ? absl::StrFormat("%.6f", p.usd_per_1000_samples) : "-", measured});
  };
  row(a.plan_given ? std::string("given plan") : absl::StrCat("advised (", ObjectiveName(a.objective), ")"), a.best,
      "-");
  for (const SingleRun& s : a.singles)
    row(absl::StrCat(DeviceKindName(s.kind), " alone"), s.as_plan, render::Ms(s.measured_step_ns));
  std::string out = absl::StrCat(
      "placement advice for ", a.model, ", batch ", a.batch_size, " (", a.plans_considered, " plans considered):\n",
      FormatTable({"PLAN", "LAYERS", "STEP_MS", "TRANSFER_MS", "J_PER_STEP", "USD_PER_1K", "MEASURED_STEP_MS"}, rows));
  absl::StrAppend(&out,
                  "J_PER_STEP: * = from MODELED power, not measured; - = no power figure. USD_PER_1K: - = no "
                  "hourly rate (give --cost KIND=USD_PER_HOUR).\n");
  if (a.interval_high_ns > 0) {
    std::vector<std::string> each;
    for (double ns : a.run_step_ns) each.push_back(render::Ms(ns));
    absl::StrAppend(&out, "95% prediction interval for a run of the ", a.plan_given ? "plan" : "advised plan", ": ",
                    render::Ms(a.interval_low_ns), "-", render::Ms(a.interval_high_ns), " ms per step, from ", a.runs,
                    " runs' profiles (each run predicts ", absl::StrJoin(each, ", "), " ms)");
    if (a.interval_has_link) {
      std::vector<std::string> links;
      for (double ns : a.link_run_step_ns) links.push_back(render::Ms(ns));
      absl::StrAppend(&out, " and ", a.link_runs.size(), " runs' links (", absl::StrJoin(links, ", "), " ms)");
    }
    absl::StrAppend(&out, "\n");
  } else {
    absl::StrAppend(&out, "no prediction interval: one run of each kind (profile with --repeats 3 for one)\n");
  }
  absl::StrAppend(&out, "run it: hetbench submit -m ", a.model, " -b ", a.batch_size, " --split ",
                  SplitFlag(a.best, layers), a.across_agents ? " --split-across-agents" : "",
                  "   (or: hetbench advise ", a.job_id, " ... --verify)\n");
  absl::StrAppend(&out, "assumptions:\n");
  for (const std::string& s : a.assumptions) absl::StrAppend(&out, "  - ", s, "\n");
  return out;
}

}  // namespace hetbench::report
