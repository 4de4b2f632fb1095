#include "client/cli.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/compare.h"
#include "client/render.h"
#include "client/render/html.h"
#include "client/render/plots.h"
#include "common/names.h"
#include "common/security.h"
#include "common/spec_yaml.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hetbench/v1/coordinator.grpc.pb.h"

namespace hetbench::client {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Common {
  std::string server = "127.0.0.1:50051";
  double timeout_seconds = 10.0;
  std::string output = "table";
  ClientSecurity security;
  std::string token;  // read from security.token_file
};

/// Every call: its deadline and this caller's bearer token.
void Prepare(grpc::ClientContext* ctx, double seconds, const std::string& token) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  AddToken(ctx, token);
}

int RpcError(std::ostream& err, const std::string& what, const grpc::Status& s, const std::string& server) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    err << "hetbench: " << what << ": cannot reach the coordinator at " << server << " (" << s.error_message()
        << "); start hetbench-server or set --server / HETBENCH_SERVER\n";
  } else {
    err << "hetbench: " << what << ": " << s.error_message() << "\n";
  }
  return kExitFailed;
}

/// 128 random bits, hex: the idempotency key of one submit invocation.
std::string NewRequestId() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> u;
  return absl::StrFormat("cli-%016x%016x", u(rd), u(rd));
}

int ExitFor(const v1::Job& job) { return job.state() == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailed; }

/// GetJob, page after page of tasks, as one job.
grpc::Status FetchJob(v1::Coordinator::Stub& stub, const std::string& job_id, double timeout_seconds,
                      const std::string& token, v1::Job* job) {
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  job->Clear();
  do {
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_seconds, token);
    v1::Job page;
    if (grpc::Status s = stub.GetJob(&ctx, req, &page); !s.ok()) return s;
    req.set_task_page_token(page.next_task_page_token());
    page.clear_next_task_page_token();
    if (job->id().empty()) {
      *job = std::move(page);
    } else {
      for (v1::Task& t : *page.mutable_tasks()) *job->add_tasks() = std::move(t);
    }
  } while (!req.task_page_token().empty());
  return grpc::Status::OK;
}

/// Streams WatchJob until the job ends; draws progress bars when `draw`.
/// Returns the last job seen.
absl::StatusOr<v1::Job> Watch(v1::Coordinator::Stub& stub, const std::string& job_id, double timeout_seconds, bool draw,
                              const std::string& token, std::ostream& err) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout_seconds, token);
  v1::WatchJobRequest req;
  req.set_job_id(job_id);
  req.set_view(v1::JOB_VIEW_SUMMARY);  // progress needs states, not results
  auto reader = stub.WatchJob(&ctx, req);
  v1::JobEvent event;
  v1::Job last;
  const bool tty = isatty(STDERR_FILENO);
  size_t drawn = 0;
  std::vector<std::string> last_keys;
  while (reader->Read(&event)) {
    last = event.job();
    if (!draw) continue;
    std::vector<std::string> lines = ProgressLines(last, 30);
    lines.insert(lines.begin(), absl::StrCat(last.id(), " ", JobStateName(last.state())));
    if (tty) {
      if (drawn > 0) err << "\x1b[" << drawn << "F";  // back to the first line drawn
      for (const auto& l : lines) err << "\x1b[2K" << l << "\n";
      drawn = lines.size();
    } else {
      // Not a terminal (a log, CI): one line per task when its state, phase
      // or progress decile changes.
      std::vector<std::string> keys = {JobStateName(last.state())};
      for (const v1::Task& t : last.tasks()) {
        const int decile = t.total_steps() > 0 ? static_cast<int>(10 * t.step() / t.total_steps()) : 0;
        keys.push_back(absl::StrCat(t.state(), "/", t.phase(), "/", decile));
      }
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i >= last_keys.size() || keys[i] != last_keys[i]) err << lines[i] << "\n";
      }
      last_keys = keys;
    }
    err.flush();
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  return last;
}

}  // namespace

/// Every page of one task's stored samples or power readings (its current attempt).
grpc::Status FetchTaskData(v1::Coordinator::Stub& stub, const std::string& task_id, v1::GetTaskDataRequest::Kind kind,
                           double timeout_seconds, const std::string& token, v1::TaskData* all) {
  v1::GetTaskDataRequest req;
  req.set_task_id(task_id);
  req.set_kind(kind);
  req.set_page_size(256);
  all->Clear();
  do {
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_seconds, token);
    v1::TaskData page;
    if (grpc::Status s = stub.GetTaskData(&ctx, req, &page); !s.ok()) return s;
    all->set_task_id(page.task_id());
    all->set_attempt(page.attempt());
    for (auto& b : *page.mutable_samples()) *all->add_samples() = std::move(b);
    for (auto& b : *page.mutable_power()) *all->add_power() = std::move(b);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  return grpc::Status::OK;
}

/// `report --html FILE` and/or `--svg DIR`: the figures (timelines with the
/// power readings each task stored) and the self-contained page.
int WriteFigures(v1::Coordinator::Stub& stub, const v1::Job& job, const std::string& html_file,
                 const std::string& svg_dir, v1::DeviceKind baseline, bool compare_anyway, const Common& common,
                 std::ostream& out, std::ostream& err) {
  // The timelines' power traces: the tasks JobPlots draws a timeline for.
  PowerTraces power;
  int fetched = 0;
  for (const v1::Task& t : job.tasks()) {
    if (t.result().windows_size() == 0 || t.result().power_readings_stored() == 0) continue;
    if (t.state() != v1::TASK_STATE_SUCCEEDED || ++fetched > 12) continue;
    v1::TaskData data;
    grpc::Status s = FetchTaskData(stub, t.id(), v1::GetTaskDataRequest::KIND_POWER, common.timeout_seconds,
                                   common.token, &data);
    if (!s.ok()) return RpcError(err, "get task data", s, common.server);
    power[t.id()].assign(data.power().begin(), data.power().end());
  }
  const std::vector<Plot> plots = JobPlots(job, power);
  if (!svg_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(svg_dir, ec);
    if (ec) {
      err << "hetbench: --svg " << svg_dir << ": cannot create the directory: " << ec.message() << "\n";
      return kExitFailed;
    }
    for (const Plot& p : plots) {
      const std::string path = (std::filesystem::path(svg_dir) / (p.name + ".svg")).string();
      std::ofstream f(path);
      f << p.svg;
      if (!f) {
        err << "hetbench: --svg: cannot write " << path << "\n";
        return kExitFailed;
      }
    }
    out << "wrote " << plots.size() << " figures to " << svg_dir << "\n";
  }
  if (!html_file.empty()) {
    // Written beside, then renamed: a reader never sees half a report.
    const std::string tmp = html_file + ".tmp";
    {
      std::ofstream f(tmp);
      f << RenderHtmlReport(job, plots, baseline, compare_anyway);
      if (!f.flush()) {
        err << "hetbench: --html " << html_file << ": cannot write it\n";
        std::filesystem::remove(tmp);
        return kExitFailed;
      }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, html_file, ec);
    if (ec) {
      err << "hetbench: --html " << html_file << ": " << ec.message() << "\n";
      return kExitFailed;
    }
    out << "wrote " << html_file << " (" << plots.size() << " figures)\n";
  }
  return IsTerminal(job.state()) ? ExitFor(job) : kExitOk;
}

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  Common common;
  if (const char* env = std::getenv("HETBENCH_SERVER"); env != nullptr && *env) common.server = env;
  CLI::App app{"hetbench: benchmark one model across CPUs, GPUs, TPUs, DPUs and QPU simulators"};
  app.set_version_flag("--version", HetbenchVersion());
  app.require_subcommand(1);
  app.add_option("--server", common.server, "coordinator address (or HETBENCH_SERVER)")->capture_default_str();
  app.add_option("--tls-ca", common.security.tls_ca, "the coordinator's CA (PEM): use TLS")->envname("HETBENCH_TLS_CA");
  app.add_option("--token-file", common.security.token_file, "file holding this client's bearer token")
      ->envname("HETBENCH_TOKEN_FILE");
  app.add_option("--timeout", common.timeout_seconds, "deadline of each request, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  // submit
  auto* submit = app.add_subcommand("submit", "submit a benchmark job (flags, or -f job.yaml)");
  std::string spec_file, name, dataset, torchscript_path;
  std::vector<std::string> models;
  std::vector<int64_t> input_shape;
  bool layers = false;
  int layer_steps = -1;
  std::vector<int> batch_sizes;
  std::vector<std::string> targets;
  int64_t min_steps = -1, max_steps = -1, infer_max_batches = -1;
  int warmup_steps = -1, threads = -1;
  double min_duration = -1, epochs = -1, lr = -1, wait_timeout = 24 * 3600;
  int64_t seed = -1;
  bool wait = false, follow = false;
  std::string submit_output = "table";
  submit->add_option("-f,--file", spec_file, "job spec YAML")->check(CLI::ExistingFile);
  submit->add_option("-m,--model", models, "model(s) of the zoo; repeat or comma-separate (default mlp)")
      ->delimiter(',');
  submit->add_flag("--layers", layers, "also time every top-level layer (forward, backward, inference)");
  submit->add_option("--layer-steps", layer_steps, "steps of per-layer timing (default 20)");
  submit->add_option("--torchscript", torchscript_path, "TorchScript file on the agent (model \"torchscript\")");
  submit->add_option("--input-shape", input_shape, "TorchScript input shape without the batch, e.g. 1,28,28")
      ->delimiter(',');
  submit->add_option("--name", name, "job name");
  submit->add_option("--dataset", dataset, "dataset (fashion-mnist)");
  submit->add_option("-b,--batch-size", batch_sizes, "batch size; repeat or comma-separate for a sweep")
      ->delimiter(',');
  submit
      ->add_option("-t,--target", targets,
                   "device kind to run on (cpu, gpu, tpu, dpu, qpu-sim), optionally :executor "
                   "(cpu:python runs the PyTorch runner); repeatable")
      ->delimiter(',');
  submit->add_option("--warmup-steps", warmup_steps, "training steps before measuring");
  submit->add_option("--min-steps", min_steps, "measured training steps (0 = one pass of --epochs)");
  submit->add_option("--max-steps", max_steps, "cap on measured training steps");
  submit->add_option("--min-duration", min_duration, "minimum measured training seconds");
  submit->add_option("--epochs", epochs, "training budget in epochs when --min-steps is 0");
  submit->add_option("--lr", lr, "Adam learning rate");
  submit->add_option("--infer-max-batches", infer_max_batches, "measured inference batches (0 = whole test set)");
  submit->add_option("--seed", seed, "random seed");
  submit->add_option("--threads", threads, "threads per task (0 = all cores)");
  double idle_baseline = 0, electricity = 0;
  std::vector<std::string> costs;
  submit->add_option("--idle-baseline", idle_baseline, "seconds of idle power measured before each task");
  submit->add_option("--cost", costs, "device cost: KIND=USD_PER_HOUR or label:K=V=USD_PER_HOUR (repeatable)");
  submit->add_option("--electricity-usd-per-kwh", electricity, "electricity price, shown apart from device cost");
  submit->add_flag("--wait", wait, "wait for the job to end; print its report");
  submit->add_flag("--follow", follow, "like --wait, with live progress bars");
  submit->add_option("--wait-timeout", wait_timeout, "seconds to wait for the job")->capture_default_str();
  int submit_retries = 4;
  submit
      ->add_option("--retries", submit_retries,
                   "retries when the coordinator is unreachable or busy (same request id: never a second job)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  submit->add_option("-o,--output", submit_output, "report format with --wait: table, json, csv")
      ->capture_default_str();

  // get
  auto* get = app.add_subcommand("get", "list jobs or agents, or show one job");
  get->require_subcommand(1);
  auto* get_jobs = get->add_subcommand("jobs", "list jobs");
  int limit = 50;
  get_jobs->add_option("--limit", limit, "newest N jobs (0 = all)")->capture_default_str();
  std::string list_state, list_model, list_kind, page_token;
  get_jobs->add_option("--state", list_state,
                       "only jobs in this state (queued, running, succeeded, failed, cancelled)");
  get_jobs->add_option("--model", list_model, "only jobs that run this model");
  get_jobs->add_option("--kind", list_kind, "only jobs with a target of this device kind");
  get_jobs->add_option("--page-token", page_token, "continue a listing where an earlier one stopped");
  auto* get_job = get->add_subcommand("job", "show one job");
  std::string job_id;
  get_job->add_option("id", job_id, "job id")->required();
  auto* get_agents = get->add_subcommand("agents", "list connected agents and their devices");
  get_jobs->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
  get_job->add_option("-o,--output", common.output, "table, json or yaml (the effective spec, for submit -f)")
      ->capture_default_str();
  get_agents->add_option("-o,--output", common.output, "table, wide (drivers, executors, sensors), json or csv")
      ->capture_default_str();

  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("id", job_id, "job id")->required();

  auto* report = app.add_subcommand("report", "compare the results of a job");
  report->add_option("id", job_id, "job id")->required();
  report->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();
  bool study = false, compare_anyway = false, layers_report = false;
  std::string baseline = "cpu";
  report->add_option("--baseline", baseline, "device kind speedups are relative to")->capture_default_str();
  report->add_flag("--layers", layers_report, "print only the per-layer times (table or csv)");
  report->add_flag("--compare-anyway", compare_anyway, "compute speedups even between different model fingerprints");
  report->add_flag("--study", study,
                   "print the reference study's time/power/energy table (E = P x T with nominal watts)");
  std::string html_file, svg_dir;
  report->add_option("--html", html_file,
                     "write one self-contained HTML report (figures, tables, environment, validity, rerun command)");
  report->add_option("--svg", svg_dir, "write every figure as an SVG file into this directory");

  auto* compare = app.add_subcommand(
      "compare", "compare jobs run by run: per task pair and phase, median ratio, 95% CI, rank test, verdict");
  std::vector<std::string> compare_ids;
  std::string threshold_text = "2%";
  compare->add_option("ids", compare_ids, "JOB_A JOB_B [JOB_C ...]: each later job against the first")
      ->required()
      ->expected(2, 64);
  compare->add_option("--threshold", threshold_text, "smallest change called slower or faster, e.g. 2% or 0.02")
      ->capture_default_str();
  compare->add_flag("--compare-anyway", compare_anyway, "compare tasks whose model fingerprints differ");
  compare->add_option("-o,--output", common.output, "table, json or csv")->capture_default_str();

  auto* watch = app.add_subcommand("watch", "show live progress of a job until it ends");
  watch->add_option("id", job_id, "job id")->required();
  watch->add_option("--wait-timeout", wait_timeout, "seconds to watch")->capture_default_str();

  auto* health = app.add_subcommand("health", "check the coordinator's grpc.health.v1 status");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream o, e2;
    const int code = app.exit(e, o, e2);
    out << o.str();
    err << e2.str();
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (submit->parsed()) common.output = submit_output;
  auto format = ParseOutputFormat(common.output);
  if (!format.ok()) {
    err << "hetbench: " << format.status().message() << "\n";
    return kExitUsage;
  }
  // Every view names the formats it has: another is refused, never ignored.
  {
    std::string command, allowed;
    if (get_jobs->parsed()) command = "get jobs", allowed = "table json csv";
    if (get_job->parsed()) command = "get job", allowed = "table json yaml";
    if (get_agents->parsed()) command = "get agents", allowed = "table wide json csv";
    if (submit->parsed()) command = "submit --wait", allowed = "table json csv";
    if (compare->parsed()) command = "compare", allowed = "table json csv";
    if (report->parsed()) {
      command = study ? "report --study" : layers_report ? "report --layers" : "report";
      allowed = study ? "table" : layers_report ? "table csv" : "table json csv";
    }
    if (!command.empty() && !absl::StrContains(absl::StrCat(" ", allowed, " "), absl::StrCat(" ", common.output, " "))) {
      err << "hetbench: " << command << " -o " << common.output << ": not a format of this view; use "
          << absl::StrJoin(absl::StrSplit(allowed, ' '), ", ") << "\n";
      return kExitUsage;
    }
  }

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  auto credentials = MakeChannelCredentials(common.security);
  auto token = LoadCallerToken(common.security.token_file);
  if (!credentials.ok() || !token.ok()) {
    err << "hetbench: " << (credentials.ok() ? token.status() : credentials.status()).message() << "\n";
    return kExitUsage;
  }
  common.token = *token;
  auto channel = grpc::CreateCustomChannel(common.server, *credentials, args);
  auto stub = v1::Coordinator::NewStub(channel);

  if (health->parsed()) {
    auto hstub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    Prepare(&ctx, common.timeout_seconds, common.token);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = hstub->Check(&ctx, req, &resp);
    if (!s.ok()) return RpcError(err, "health", s, common.server);
    const bool serving = resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    out << (serving ? "SERVING" : "NOT_SERVING") << "\n";
    return serving ? kExitOk : kExitFailed;
  }

  if (submit->parsed()) {
    v1::JobSpec spec;
    if (!spec_file.empty()) {
      std::ifstream in(spec_file);
      std::stringstream text;
      text << in.rdbuf();
      auto parsed = ParseJobSpecYaml(text.str());
      if (!parsed.ok()) {
        err << "hetbench: " << spec_file << ": " << parsed.status().message() << "\n";
        return kExitFailed;
      }
      spec = *parsed;
    }
    // Flags given on the command line override the file.
    if (!models.empty()) {
      spec.clear_model();
      spec.clear_models();
      if (models.size() == 1) {
        spec.set_model(models[0]);  // errors then name `model`, the field the user wrote
      } else {
        for (const std::string& m : models) spec.add_models(m);
      }
    }
    if (layers) spec.mutable_layers()->set_enabled(true);
    if (submit->count("--layer-steps")) spec.mutable_layers()->set_steps(layer_steps);
    if (!torchscript_path.empty()) {
      spec.mutable_torchscript()->set_path(torchscript_path);
      if (models.empty() && spec.models().empty() && spec.model().empty()) spec.add_models("torchscript");
    }
    if (!input_shape.empty()) {
      spec.mutable_torchscript()->clear_input_shape();
      for (int64_t d : input_shape) spec.mutable_torchscript()->add_input_shape(d);
    }
    if (!name.empty()) spec.set_name(name);
    if (!dataset.empty()) spec.set_dataset(dataset);
    if (!batch_sizes.empty()) {
      spec.clear_batch_sizes();
      for (int b : batch_sizes) spec.add_batch_sizes(b);
    }
    if (!targets.empty()) {
      spec.clear_targets();
      for (const std::string& t : targets) {
        // kind[:executor], e.g. cpu, tpu, cpu:python
        std::vector<std::string> parts = absl::StrSplit(t, absl::MaxSplits(':', 1));
        auto kind = ParseDeviceKind(parts[0]);
        if (!kind) {
          err << "hetbench: --target " << t << ": unknown device kind; use cpu, gpu, tpu, dpu or qpu-sim"
              << " (optionally :executor, e.g. cpu:python)\n";
          return kExitUsage;
        }
        v1::TargetSelector* target = spec.add_targets();
        target->set_device_kind(*kind);
        if (parts.size() > 1) target->set_executor(parts[1]);
      }
    }
    if (submit->count("--warmup-steps")) spec.mutable_train()->set_warmup_steps(warmup_steps);
    if (submit->count("--min-steps")) spec.mutable_train()->set_min_steps(min_steps);
    if (submit->count("--max-steps")) spec.mutable_train()->set_max_steps(max_steps);
    if (submit->count("--min-duration")) spec.mutable_train()->set_min_duration_seconds(min_duration);
    if (submit->count("--epochs")) spec.mutable_train()->set_epochs(epochs);
    if (submit->count("--lr")) spec.mutable_train()->set_learning_rate(lr);
    if (submit->count("--infer-max-batches")) spec.mutable_inference()->set_max_batches(infer_max_batches);
    if (submit->count("--seed")) spec.set_seed(static_cast<uint64_t>(seed));
    if (submit->count("--threads")) spec.set_threads(threads);
    if (submit->count("--idle-baseline")) spec.mutable_power()->set_idle_baseline_seconds(idle_baseline);
    if (submit->count("--electricity-usd-per-kwh")) spec.mutable_cost()->set_electricity_usd_per_kwh(electricity);
    for (const std::string& c : costs) {
      const auto eq = c.rfind('=');
      double rate = 0;
      if (eq == std::string::npos || eq == 0 || !absl::SimpleAtod(c.substr(eq + 1), &rate)) {
        err << "hetbench: --cost " << c << ": expected KIND=USD_PER_HOUR, e.g. gpu=2.48\n";
        return kExitUsage;
      }
      (*spec.mutable_cost()->mutable_usd_per_hour())[c.substr(0, eq)] = rate;
    }

    // One request id per invocation, reused by every retry: a submit whose
    // answer was lost is never made twice.
    v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    req.set_request_id(NewRequestId());
    v1::SubmitJobResponse resp;
    grpc::Status s;
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx, common.timeout_seconds, common.token);
      s = stub->SubmitJob(&ctx, req, &resp);
      const bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                         s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      if (s.ok() || !retry || attempt >= submit_retries) break;
      const double backoff = std::min(8.0, 0.5 * (1 << attempt));
      err << "hetbench: submit: " << s.error_message() << "; retrying in " << backoff << " s (request "
          << req.request_id() << ")\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(backoff * 1000)));
    }
    if (!s.ok()) return RpcError(err, "submit refused", s, common.server);
    if (resp.existing()) err << "hetbench: the coordinator already had this request: " << resp.job_id() << "\n";
    if (!wait && !follow) {
      out << resp.job_id() << "\n";
      return kExitOk;
    }
    err << "submitted " << resp.job_id() << "\n";
    auto final_job = Watch(*stub, resp.job_id(), wait_timeout, follow, common.token, err);
    if (!final_job.ok()) {
      err << "hetbench: watching " << resp.job_id() << ": " << final_job.status().message() << "\n";
      return kExitFailed;
    }
    // The watch stream carries live state; the report reads the stored job.
    v1::Job job;
    s = FetchJob(*stub, resp.job_id(), common.timeout_seconds, common.token, &job);
    if (!s.ok()) return RpcError(err, "get job", s, common.server);
    out << RenderReport(job, *format);
    return ExitFor(job);
  }

  if (compare->parsed()) {
    double threshold = 0;
    std::string t = threshold_text;
    const bool percent = !t.empty() && t.back() == '%';
    if (percent) t.pop_back();
    if (!absl::SimpleAtod(t, &threshold) || threshold < 0 || (percent ? threshold >= 100 : threshold >= 1)) {
      err << "hetbench: --threshold " << threshold_text << ": expected a fraction in [0, 1) or a percentage, e.g. 2%\n";
      return kExitUsage;
    }
    if (percent) threshold /= 100;
    std::vector<v1::Job> jobs(compare_ids.size());
    for (size_t i = 0; i < compare_ids.size(); ++i) {
      grpc::Status s = FetchJob(*stub, compare_ids[i], common.timeout_seconds, common.token, &jobs[i]);
      if (!s.ok()) return RpcError(err, absl::StrCat("get job ", compare_ids[i]), s, common.server);
    }
    bool compared_any = false;
    for (size_t j = 1; j < jobs.size(); ++j) {
      std::vector<std::string> unpaired;
      std::vector<PairResult> results;
      for (const TaskPair& pair : PairTasks(jobs[0], jobs[j], compare_anyway, &unpaired)) {
        if (!pair.refused.empty()) {
          results.push_back({pair, v1::PHASE_UNSPECIFIED, {}});
          continue;
        }
        v1::TaskData da, db;
        for (auto [task, data] : {std::pair{pair.a, &da}, std::pair{pair.b, &db}}) {
          grpc::Status s = FetchTaskData(*stub, task->id(), v1::GetTaskDataRequest::KIND_SAMPLES,
                                         common.timeout_seconds, common.token, data);
          if (!s.ok()) return RpcError(err, absl::StrCat("samples of ", task->id()), s, common.server);
        }
        const std::vector<v1::SampleBatch> sa(da.samples().begin(), da.samples().end());
        const std::vector<v1::SampleBatch> sb(db.samples().begin(), db.samples().end());
        for (v1::Phase phase : {v1::PHASE_TRAIN, v1::PHASE_INFER}) {
          const std::vector<double> a = TimesPerSample(sa, phase), b = TimesPerSample(sb, phase);
          if (a.empty() && b.empty()) continue;
          results.push_back({pair, phase, CompareSteps(a, b, threshold)});
          compared_any = true;
        }
      }
      out << RenderComparison(jobs[0], jobs[j], results, unpaired, threshold, common.output);
    }
    if (!compared_any) {
      err << "hetbench: compare: no pair of tasks could be compared (see above)\n";
      return kExitFailed;
    }
    return kExitOk;
  }

  if (watch->parsed()) {
    auto final_job = Watch(*stub, job_id, wait_timeout, true, common.token, err);
    if (!final_job.ok()) {
      err << "hetbench: watching " << job_id << ": " << final_job.status().message() << "\n";
      return kExitFailed;
    }
    return ExitFor(*final_job);
  }

  if (get_jobs->parsed()) {
    // Pages of at most 500, newest first, until --limit jobs (0: all) or the last page.
    v1::ListJobsRequest req;
    if (!list_state.empty()) {
      auto state = ParseJobState(list_state);
      if (!state) {
        err << "hetbench: --state " << list_state << ": use queued, running, succeeded, failed or cancelled\n";
        return kExitUsage;
      }
      req.set_state(*state);
    }
    if (!list_kind.empty()) {
      auto kind = ParseDeviceKind(list_kind);
      if (!kind) {
        err << "hetbench: --kind " << list_kind << ": use cpu, gpu, tpu, dpu or qpu-sim\n";
        return kExitUsage;
      }
      req.set_device_kind(*kind);
    }
    req.set_model(list_model);
    req.set_page_token(page_token);
    std::vector<v1::Job> jobs;
    std::string next;
    do {
      req.set_page_size(limit > 0 ? std::min<int>(500, limit - static_cast<int>(jobs.size())) : 500);
      grpc::ClientContext ctx;
      Prepare(&ctx, common.timeout_seconds, common.token);
      v1::ListJobsResponse resp;
      grpc::Status s = stub->ListJobs(&ctx, req, &resp);
      if (!s.ok()) return RpcError(err, "list jobs", s, common.server);
      for (v1::Job& j : *resp.mutable_jobs()) jobs.push_back(std::move(j));
      next = resp.next_page_token();
      req.set_page_token(next);
    } while (!next.empty() && (limit <= 0 || static_cast<int>(jobs.size()) < limit));
    std::reverse(jobs.begin(), jobs.end());  // oldest first, the newest at the bottom
    out << RenderJobList(jobs, *format);
    if (!next.empty()) err << "more jobs: --page-token " << next << "\n";
    return kExitOk;
  }

  if (get_agents->parsed()) {
    grpc::ClientContext ctx;
    Prepare(&ctx, common.timeout_seconds, common.token);
    v1::ListAgentsResponse resp;
    grpc::Status s = stub->ListAgents(&ctx, v1::ListAgentsRequest(), &resp);
    if (!s.ok()) return RpcError(err, "list agents", s, common.server);
    out << RenderAgents({resp.agents().begin(), resp.agents().end()}, *format);
    return kExitOk;
  }

  if (get_job->parsed() || report->parsed() || cancel->parsed()) {
    grpc::ClientContext ctx;
    Prepare(&ctx, common.timeout_seconds, common.token);
    v1::Job job;
    grpc::Status s;
    if (cancel->parsed()) {
      v1::CancelJobRequest req;
      req.set_job_id(job_id);
      s = stub->CancelJob(&ctx, req, &job);
      if (!s.ok()) return RpcError(err, "cancel", s, common.server);
      out << job.id() << " " << JobStateName(job.state()) << "\n";
      return kExitOk;
    }
    s = FetchJob(*stub, job_id, common.timeout_seconds, common.token, &job);
    if (!s.ok()) return RpcError(err, "get job", s, common.server);
    if (report->parsed()) {
      const auto kind = ParseDeviceKind(baseline);
      if (!kind) {
        err << "hetbench: --baseline " << baseline << ": unknown device kind; use cpu, gpu, tpu, dpu or qpu-sim\n";
        return kExitUsage;
      }
      if (!html_file.empty() || !svg_dir.empty()) {
        return WriteFigures(*stub, job, html_file, svg_dir, *kind, compare_anyway, common, out, err);
      }
      if (study) {
        out << RenderStudyTable(job, *kind, compare_anyway);
      } else if (layers_report) {
        out << RenderLayers(job, *format, *kind);
      } else {
        out << RenderReport(job, *format, compare_anyway, *kind);
      }
      return IsTerminal(job.state()) ? ExitFor(job) : kExitOk;
    }
    out << RenderJob(job, *format);
    return kExitOk;
  }
  err << app.help();
  return kExitUsage;
}

}  // namespace hetbench::client
