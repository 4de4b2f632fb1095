#include "agent/executors/python_executor.h"

#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/executors/machine_probe.h"
#include "agent/executors/torch_threads.h"
#include "agent/platform/malloc_arenas.h"
#include "agent/runners/child_process.h"
#include "common/clock.h"
#include "common/names.h"
#include "common/serving_spec.h"
#include "common/validate_spec.h"

namespace hetbench::agent {

namespace {

constexpr size_t kMaxLine = 64 << 20;  // a runner line larger than this is an error

std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The machine probe (machine_probe.h) read by the agent around a runner, at
// the runner's `threads`: before it starts, or (`after`) after it exits,
// when the thread count held is the one read before.
void ReadMachineProbe(int threads, bool after, v1::MachineProbe* probe) {
  const TorchThreads thread_setting(threads);
  const std::string kernel = ProbeKernel(thread_setting.threads());
  if (after) {
    if (kernel == probe->kernel()) probe->set_after_ns(TimeProbe().median_ns);
    return;
  }
  const ProbeWindow before = TimeProbe();
  probe->set_kernel(kernel);
  probe->set_before_ns(before.median_ns);
  probe->set_calls(before.calls);
}

// What the agent knows of the run that the runner does not say.
void StampEnvironment(const v1::Device& device, const std::string& hostname, v1::RunEnvironment* env) {
  env->set_executor("python");
  env->set_device_model(device.model());
  env->set_hostname(hostname);
  env->set_agent_version(HetbenchVersion());
  env->set_malloc(AgentMallocNote());  // the runner inherits the agent's malloc settings
}

}  // namespace

PythonExecutor::PythonExecutor(RunnerConfig config) : config_(std::move(config)) { IgnoreSigpipe(); }

int PythonExecutor::Threads(const v1::Assign& task, const v1::Device& device) const {
  const int threads =
      task.spec().threads() > 0 ? task.spec().threads() : (config_.threads > 0 ? config_.threads : device.cores());
  return std::max(threads, 1);
}

// The task as the runner reads it: one JSON line on its stdin.
absl::StatusOr<std::string> PythonExecutor::TaskLine(const v1::Assign& task, const v1::Device& device,
                                                     const TaskControl& control) const {
  v1::RunnerTask rt;
  *rt.mutable_assign() = task;
  *rt.mutable_device() = device;
  rt.set_task_start_ns(control.task_start_ns);
  rt.set_data_dir(config_.data_dir);
  rt.set_threads(Threads(task, device));
  rt.set_torch_device(device.kind() == v1::DEVICE_KIND_TPU ? "xla" : "cpu");
  rt.set_max_samples_per_line(1000);
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  if (auto s = google::protobuf::util::MessageToJsonString(rt, &json, print); !s.ok()) {
    return absl::InternalError(absl::StrCat("encoding the runner task: ", s.ToString()));
  }
  json.push_back('\n');
  return json;
}

namespace {

// How long the runner may take, and what its kill says: a validation test
// its time box plus the start-up allowance; any other task the agent's
// --runner-deadline-seconds.
std::pair<double, std::string> Deadline(const v1::JobSpec& spec, const RunnerConfig& config) {
  if (IsValidate(spec)) {
    const double box = spec.validate().time_box_seconds();
    return {std::min(config.deadline_seconds, box + config.validation_startup_seconds),
            absl::StrFormat("still running at its time box of %g s plus the runner's start-up allowance of %g s: "
                            "killed",
                            box, config.validation_startup_seconds)};
  }
  return {config.deadline_seconds, absl::StrCat("runner exceeded its deadline of ", config.deadline_seconds,
                                                " s (agent flag --runner-deadline-seconds)")};
}

}  // namespace

absl::StatusOr<v1::TaskResult> PythonExecutor::Run(const v1::Assign& task, const v1::Device& device,
                                                   TaskControl* control) {
  if (IsServing(task.spec())) {
    return absl::FailedPreconditionError(
        absl::StrCat("serving runs on the torch executor; device ", device.id(), " was given the python executor"));
  }
  const absl::StatusOr<std::string> json = TaskLine(task, device, *control);
  if (!json.ok()) return json.status();

  // The machine around the run (machine_probe.h), read by the agent at the
  // runner's thread count while no runner is running: before it starts and
  // after it exits, outside every window the runner times.
  const bool probe = config_.machine_probe && device.kind() == v1::DEVICE_KIND_CPU;
  v1::MachineProbe machine;
  if (probe) ReadMachineProbe(Threads(task, device), /*after=*/false, &machine);

  ChildProcess child;
  if (auto s = child.Start(config_.command); !s.ok()) return s;
  child.Feed(*json);

  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;  // a newer runner may say more
  const int64_t start_ns = SteadyNowNs();
  const auto [deadline_seconds, deadline_reason] = Deadline(task.spec(), config_);
  const auto deadline_ns = static_cast<int64_t>(deadline_seconds * 1e9);
  const auto grace_ns = static_cast<int64_t>(config_.kill_grace_seconds * 1e9);
  int64_t term_sent_ns = 0;
  bool killed = false;
  std::string stop_reason;  // why the agent stopped the runner
  bool timed_out = false;
  std::string buffer, runner_error;
  bool have_result = false;
  v1::TaskResult result;
  int64_t line_no = 0;
  bool open = true;
  while (open) {
    open = child.Pump(50, &buffer);
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      const std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      ++line_no;
      if (line.empty()) continue;
      v1::RunnerEvent ev;
      if (auto s = google::protobuf::util::JsonStringToMessage(line, &ev, parse); !s.ok()) {
        if (stop_reason.empty()) {
          stop_reason = absl::StrCat("runner output line ", line_no, " is not a RunnerEvent (", s.message().ToString(),
                                     "): ", line.substr(0, 200));
        }
        continue;
      }
      switch (ev.kind_case()) {
        case v1::RunnerEvent::kProgress:
          control->phase = ev.progress().phase();
          control->step = ev.progress().step();
          control->total_steps = ev.progress().total_steps();
          break;
        case v1::RunnerEvent::kSamples: {
          const v1::RunnerSamples& s = ev.samples();
          if (s.start_ns_size() != s.duration_ns_size() || s.start_ns_size() != s.items_size()) {
            if (stop_reason.empty()) stop_reason = absl::StrCat("runner line ", line_no, ": sample columns differ in length");
            break;
          }
          for (int i = 0; i < s.start_ns_size(); ++i) {
            if (!control->samples.Push({s.start_ns(i), s.duration_ns(i), s.items(i), s.phase()})) {
              if (stop_reason.empty()) {
                stop_reason = absl::StrCat("runner sent more samples than the task allows (",
                                           control->samples.capacity(), ")");
              }
              break;
            }
          }
          break;
        }
        case v1::RunnerEvent::kResult:
          result = ev.result();
          have_result = true;
          break;
        case v1::RunnerEvent::kError:
          runner_error = ev.error();
          break;
        default:
          break;
      }
    }
    if (buffer.size() > kMaxLine && stop_reason.empty()) stop_reason = "runner printed a line over 64 MiB";
    const int64_t now = SteadyNowNs();
    if (stop_reason.empty() && deadline_ns > 0 && now - start_ns > deadline_ns) {
      timed_out = true;
      stop_reason = deadline_reason;
    }
    if (term_sent_ns == 0 && (control->cancel.load() || !stop_reason.empty())) {
      child.Signal(SIGTERM);
      term_sent_ns = now;
    } else if (term_sent_ns > 0 && !killed && now - term_sent_ns > grace_ns) {
      child.Signal(SIGKILL);
      killed = true;
    }
  }
  const int status = child.Wait();
  if (!stop_reason.empty()) {
    return timed_out ? absl::DeadlineExceededError(stop_reason) : absl::InternalError(stop_reason);
  }
  if (control->cancel.load()) return result;  // partial: the agent reports CANCELLED with what was streamed
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = runner_error.empty() ? LastLine(child.StderrTail()) : runner_error;
    return absl::InternalError(absl::StrCat("runner `", absl::StrJoin(config_.command, " "), "` failed (",
                                            DescribeExit(status), ")", why.empty() ? "" : ": ", why));
  }
  if (!runner_error.empty()) return absl::InternalError(absl::StrCat("runner: ", runner_error));
  if (!have_result) return absl::InternalError("runner exited 0 without a result line");
  result.clear_machine_probe();  // the agent's reading, never the runner's word
  if (probe) {
    ReadMachineProbe(Threads(task, device), /*after=*/true, &machine);
    *result.mutable_machine_probe() = machine;
  }
  StampEnvironment(device, config_.hostname, result.mutable_environment());
  return result;
}

v1::RunnerProbe PythonExecutor::Probe(const std::vector<std::string>& command, double timeout_seconds) {
  v1::RunnerProbe probe;
  std::vector<std::string> argv = command;
  argv.push_back("--probe");
  IgnoreSigpipe();
  ChildProcess child;
  if (auto s = child.Start(argv); !s.ok()) {
    probe.set_error(std::string(s.message()));
    return probe;
  }
  child.Feed("");
  std::string out;
  const int64_t end = SteadyNowNs() + static_cast<int64_t>(timeout_seconds * 1e9);
  bool timed_out = false;
  while (child.Pump(50, &out)) {
    if (SteadyNowNs() > end) {
      child.Signal(SIGKILL);
      timed_out = true;
    }
  }
  const int status = child.Wait();
  if (timed_out) {
    probe.set_error(absl::StrCat("`", absl::StrJoin(argv, " "), "` did not answer within ", timeout_seconds, " s"));
    return probe;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    probe.set_error(absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (", DescribeExit(status),
                                 "): ", LastLine(child.StderrTail())));
    return probe;
  }
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(LastLine(out), &probe, parse); !s.ok()) {
    probe.Clear();
    probe.set_error(absl::StrCat("probe output is not a RunnerProbe: ", s.message().ToString()));
  }
  return probe;
}

std::string DefaultRunnerScript(const std::string& agent_executable) {
  const std::string dir = agent_executable.substr(0, agent_executable.rfind('/') + 1);
  for (const std::string& candidate :
       {std::string(HETBENCH_SOURCE_DIR "/agent/runners/torch_runner.py"),
        dir + "../share/hetbench/runners/torch_runner.py", std::string("/usr/share/hetbench/runners/torch_runner.py")}) {
    if (FileExists(candidate)) return candidate;
  }
  return "";
}

}  // namespace hetbench::agent
