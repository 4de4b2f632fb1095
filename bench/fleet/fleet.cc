// bench_fleet: N simulated agents over the real AgentGateway protocol against
// the real hetbench-server binary (spawned here on loopback, or --server).
//
// Modes (one RESULT line each):
//   idle     agents connect and heartbeat; after --warmup-seconds, the
//            coordinator's CPU and RSS over --seconds (the warm-up's apart);
//            --bare-floor: then, the coordinator stopped, the same for a
//            bare gateway (bench_fleet --serve-bare), and the ratio
//   dispatch clients submit --tasks-per-job jobs; agents finish each task at
//            once; tasks/s, Assign latency, the largest live Job message, RSS
//   bigjob   one job of --tasks-per-job tasks on the fleet's devices: tasks/s,
//            the Job message while queued, RSS before/peak/after
//   ingest   one task per agent streams 1,000-sample batches for --seconds,
//            into a bare and a storing callback sink run in this process
//            (before, and after the coordinator stopped) and into the
//            coordinator; the ratio, loop latency p99, and
//            exactly-once (stored samples = sent samples per task). With
//            --huge-specs a client submits 1,000,000-entry specs meanwhile.
//   chaos    dispatch while agents are killed or cut off (alternately) at
//            --chaos-per-second; every acknowledged job must end and every
//            succeeded task hold exactly the samples its last attempt sent
//   history  --history-jobs finished jobs written into a store with the store
//            API, then the coordinator started on it: start time, RSS, and
//            `hetbench get jobs` (newest 50) wall time
//   validate one validation job over every device; --degrade injects known
//            faults into a share of them (bench/fleet/faults.h): recall per
//            fault, false positives on the healthy devices, hangs ended by
//            their box, and the same results judged again give the same
//            verdicts
//
// Simulated devices say so in their Hello (Device.simulated) and results
// (RunEnvironment.simulated); the coordinator keeps them out of the measured
// per-model gauges and every report marks them.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/fleet/faults.h"
#include "bench/fleet/harness.h"
#include "bench/fleet/sim_fleet.h"
#include "common/names.h"
#include "server/store/sqlite_job_store.h"

namespace hetbench::fleet {
namespace {

constexpr char kLoopLatency[] = "hetbench_coordinator_loop_latency_seconds";

v1::SubmitJobRequest FleetJob(int tasks, v1::DeviceKind kind, const std::string& request_id) {
  v1::SubmitJobRequest req;
  req.set_request_id(request_id);
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_name("fleet");
  spec->add_models("mlp");
  // At most 64 batch sizes a spec: past that, the same target again.
  const int sizes = std::min(tasks, 64);
  for (int t = 0; t < sizes; ++t) spec->add_batch_sizes(32 * (t + 1));
  for (int t = 0; t < (tasks + sizes - 1) / sizes; ++t) spec->add_targets()->set_device_kind(kind);
  spec->mutable_train()->set_min_steps(10);
  spec->mutable_train()->set_min_duration_seconds(0);
  spec->mutable_train()->set_warmup_steps(0);
  return req;
}

/// One run against one coordinator: the fleet connected, heartbeats going.
class Run {
 public:
  Run(const Options& opt, const Profiles& profiles, Server server, bool keep)
      : opt_(opt),
        server_(std::move(server)),
        keep_(keep),
        client_(ClientStub(server_.address)),
        fleet_(server_.address, opt, profiles, &stats_) {}
  ~Run() { Shutdown(); }

  /// The agents cut and the coordinator stopped. A floor measured after the
  /// coordinator runs only after this: measured beside it, the floor shared the
  /// two cores with the coordinator and its agents. Idempotent.
  void Shutdown() {
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
    if (heart_.joinable()) heart_.join();
    fleet_.Stop();
    StopServer(server_, keep_);
  }

  void Connect() {
    const double t = Now();
    fleet_.Connect(0, opt_.agents, "sim-");
    WaitFor([&] { return stats_.connected.load() >= opt_.agents; }, 120);
    connect_seconds_ = Now() - t;
    heart_ = std::thread([this] {
      while (!stop_.load()) {
        fleet_.HeartbeatDue(Now());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    before_ = ReadProc(server_.pid);
  }

  std::string Idle() {
    // The warm-up, then the window: each with its own CPU figure, so the
    // transient of young connections is shown, not hidden.
    const double w0 = Now();
    while (Now() - w0 < opt_.warmup_seconds) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const ProcStats warm = ReadProc(server_.pid);
    const double t0 = Now();
    while (Now() - t0 < opt_.seconds) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const ProcStats after = ReadProc(server_.pid);
    // No warm-up, no figure (a division by microseconds would print noise).
    const double warmup_cpu = opt_.warmup_seconds > 0 ? (warm.cpu_seconds - before_.cpu_seconds) / (t0 - w0) : 0.0;
    return absl::StrFormat(
        "RESULT mode=idle agents=%d devices=%d connected=%lld connect_seconds=%.2f heartbeat_seconds=%g "
        "warmup_seconds=%g warmup_cpu_fraction=%.3f server_cpu_fraction=%.3f server_rss_mb=%.0f simulated=true",
        opt_.agents, opt_.agents * opt_.devices, static_cast<long long>(stats_.connected.load()), connect_seconds_,
        opt_.heartbeat_seconds, opt_.warmup_seconds, warmup_cpu, (after.cpu_seconds - warm.cpu_seconds) / (Now() - t0),
        after.rss_mb);
  }

  std::string Dispatch() {
    const double t0 = Now();
    std::vector<std::string> jobs;
    std::mutex jobs_mu;
    std::atomic<int64_t> submitted_tasks{0}, refused{0};
    std::atomic<size_t> max_job_bytes{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < opt_.clients; ++c) {
      clients.emplace_back([&, c] {
        auto stub = ClientStub(server_.address);
        int n = 0;
        while (Now() - t0 < opt_.seconds) {
          // Keep the queue near the devices available: at most 2 jobs' worth per device in flight.
          if (submitted_tasks.load() - stats_.tasks_done_acked.load() > 2LL * opt_.agents * opt_.devices) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
          }
          static const v1::DeviceKind kinds[] = {v1::DEVICE_KIND_CPU, v1::DEVICE_KIND_GPU, v1::DEVICE_KIND_TPU,
                                                 v1::DEVICE_KIND_DPU};
          const v1::SubmitJobRequest req = FleetJob(opt_.tasks_per_job, opt_.devices >= 4 ? kinds[n % 4] : kinds[0],
                                                    absl::StrCat("fleet-", c, "-", n));
          ++n;
          const double start = Now();
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          v1::SubmitJobResponse resp;
          // The job id is known only from the answer; the Assign may come first.
          if (!stub->SubmitJob(&ctx, req, &resp).ok()) {
            ++refused;
            continue;
          }
          submitted_tasks += opt_.tasks_per_job;
          {
            std::lock_guard<std::mutex> l(stats_.mu);
            stats_.submit_start[resp.job_id()] = start;
          }
          // Every 50th job: its Job message while live, as GetJob returns it.
          if (n % 50 == 1) {
            auto job = GetJob(*stub, resp.job_id());
            if (job.ok() && job->ByteSizeLong() > max_job_bytes.load()) max_job_bytes = job->ByteSizeLong();
          }
          std::lock_guard<std::mutex> l(jobs_mu);
          jobs.push_back(resp.job_id());
        }
      });
    }
    std::thread chaos;
    int64_t kills = 0, cuts = 0;
    if (opt_.mode == "chaos") {
      chaos = std::thread([&] {
        std::mt19937 rng(7);
        for (int64_t k = 0; Now() - t0 < opt_.seconds; ++k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(1000 / opt_.chaos_per_second)));
          const int i = static_cast<int>(rng() % static_cast<unsigned>(opt_.agents));
          if (k % 2 == 0) {
            fleet_.Kill(i, "sim-");
            ++kills;
          } else {
            fleet_.CutAndResume(i, "sim-");
            ++cuts;
          }
        }
      });
    }
    for (auto& t : clients) t.join();
    if (chaos.joinable()) chaos.join();
    const double elapsed = Now() - t0;
    const int64_t done_in_window = stats_.tasks_done_acked.load();
    if (opt_.mode == "chaos") {
      // Lost tasks come back after the lease (15 s): wait for every job to end.
      WaitFor(
          [&] {
            for (const std::string& id : jobs) {
              auto job = GetJob(*client_, id);
              if (!job.ok() || !IsTerminal(job->state())) return false;
            }
            return true;
          },
          120);
    } else {
      WaitFor([&] { return stats_.tasks_done_acked.load() >= submitted_tasks.load(); }, 30);
    }
    const ProcStats after = ReadProc(server_.pid);
    int64_t ended = 0, checked = 0;
    const std::string exactly = CheckExactlyOnce(*client_, jobs, stats_, &ended, &checked);
    std::vector<double> lat;
    {
      std::lock_guard<std::mutex> l(stats_.mu);
      lat = stats_.assign_latency_ms;
    }
    return absl::StrFormat(
        "RESULT mode=%s agents=%d devices=%d seconds=%.0f jobs=%zu tasks=%lld tasks_per_second=%.0f "
        "assign_p50_ms=%.1f assign_p99_ms=%.1f submit_refused=%lld job_message_bytes=%zu jobs_ended=%lld "
        "tasks_checked=%lld %s kills=%lld cuts=%lld tasks_resumed=%lld server_cpu_fraction=%.3f server_rss_mb=%.0f "
        "simulated=true",
        opt_.mode, opt_.agents, opt_.agents * opt_.devices, elapsed, jobs.size(),
        static_cast<long long>(submitted_tasks.load()), static_cast<double>(done_in_window) / elapsed,
        Percentile(lat, 0.5), Percentile(lat, 0.99), static_cast<long long>(refused.load()), max_job_bytes.load(),
        static_cast<long long>(ended), static_cast<long long>(checked), exactly, static_cast<long long>(kills),
        static_cast<long long>(cuts), static_cast<long long>(stats_.resumed_tasks.load()),
        (after.cpu_seconds - before_.cpu_seconds) / elapsed, after.rss_mb);
  }

  /// validate: one validation job over every simulated device; each
  /// device's verdict against the fault the simulator injected into it.
  std::string Validate() {
    v1::SubmitJobRequest req;
    req.set_request_id("fleet-validate");
    req.mutable_spec()->mutable_validate()->set_level(opt_.level);
    req.mutable_spec()->add_targets();
    const double t0 = Now();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::SubmitJobResponse resp;
    if (grpc::Status s = client_->SubmitJob(&ctx, req, &resp); !s.ok()) {
      return absl::StrCat("RESULT mode=validate submitted=false error=\"", s.error_message(), "\"");
    }
    absl::StatusOr<v1::Job> job;
    WaitFor(
        [&] {
          job = GetJob(*client_, resp.job_id(), v1::JOB_VIEW_SUMMARY);
          return job.ok() && IsTerminal(job->state());
        },
        300);
    const double seconds = Now() - t0;
    job = GetJob(*client_, resp.job_id());
    if (!job.ok() || !IsTerminal(job->state())) {
      return absl::StrCat("RESULT mode=validate ended=false error=\"", job.ok() ? "not ended in 300 s" : job.status().message(),
                          "\"");
    }
    return absl::StrFormat(
        "RESULT mode=validate agents=%d devices=%d level=%s degrade=\"%s\" seed=%d job=%s state=%s seconds=%.1f%s "
        "simulated=true",
        opt_.agents, opt_.agents * opt_.devices, opt_.level, opt_.degrade, opt_.seed, job->id(), JobStateName(job->state()),
        seconds, TallyAgainstFaults(*job, *ParseDegrade(opt_.degrade)));
  }

  std::string BigJob() {
    // One job of --tasks-per-job tasks, more than the devices: most wait with a pending reason.
    const v1::SubmitJobRequest req = FleetJob(opt_.tasks_per_job, v1::DEVICE_KIND_CPU, "fleet-bigjob");
    const double rss_before = ReadProc(server_.pid).rss_mb;
    const double t0 = Now();
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    if (grpc::Status s = client_->SubmitJob(&ctx, req, &resp); !s.ok()) {
      return absl::StrCat("RESULT mode=bigjob submitted=false error=\"", s.error_message(), "\"");
    }
    size_t max_bytes = 0, max_summary_bytes = 0, final_bytes = 0, final_largest_answer = 0;
    double rss_peak = rss_before;
    std::atomic<bool> done{false};
    // While it runs: its Job message as GetJob returns it, and the RSS.
    std::thread probe([&] {
      auto stub = ClientStub(server_.address);
      while (!done.load()) {
        // The largest GetJob answer (a page of at most 256 tasks with results), and
        // the whole job as a watcher's progress bars get it (JOB_VIEW_SUMMARY).
        size_t largest = 0;
        auto job = GetJob(*stub, resp.job_id(), v1::JOB_VIEW_FULL, &largest);
        if (job.ok() && !IsTerminal(job->state())) max_bytes = std::max(max_bytes, largest);
        auto summary = GetJob(*stub, resp.job_id(), v1::JOB_VIEW_SUMMARY);
        if (summary.ok() && !IsTerminal(summary->state())) {
          max_summary_bytes = std::max(max_summary_bytes, summary->ByteSizeLong());
        }
        rss_peak = std::max(rss_peak, ReadProc(server_.pid).rss_mb);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    WaitFor([&] { return stats_.tasks_done_acked.load() >= opt_.tasks_per_job; }, 120);
    const double elapsed = Now() - t0;
    done = true;
    probe.join();
    WaitFor(
        [&] {
          size_t largest = 0;
          auto job = GetJob(*client_, resp.job_id(), v1::JOB_VIEW_FULL, &largest);
          if (job.ok()) {
            final_bytes = job->ByteSizeLong();
            final_largest_answer = largest;
          }
          return job.ok() && IsTerminal(job->state());
        },
        30);
    int64_t ended = 0, checked = 0;
    const std::string exactly = CheckExactlyOnce(*client_, {resp.job_id()}, stats_, &ended, &checked);
    return absl::StrFormat(
        "RESULT mode=bigjob agents=%d devices=%d tasks=%d seconds=%.2f tasks_per_second=%.0f "
        "get_job_answer_bytes_live_max=%zu summary_bytes_live_max=%zu job_bytes_final=%zu "
        "get_job_answer_bytes_final_max=%zu "
        "server_rss_mb_before=%.0f server_rss_mb_peak=%.0f server_rss_mb_after=%.0f %s tasks_checked=%lld "
        "simulated=true",
        opt_.agents, opt_.agents * opt_.devices, opt_.tasks_per_job, elapsed, opt_.tasks_per_job / elapsed, max_bytes,
        max_summary_bytes, final_bytes, final_largest_answer, rss_before, rss_peak, ReadProc(server_.pid).rss_mb,
        exactly, static_cast<long long>(checked));
  }

  std::string Serving() {
    // A serving task per agent (jobs of up to 64 tasks: the batcher's largest
    // batch 1..64), each a server run on the device's queueing model: the
    // coordinator stores every query's latency and judges each run from all of them.
    // Each simulated agent keeps --serving-window batches in flight (64, as
    // hetbench-agent does); 0 is a labelled shortcut: all at once
    // (agent_window=none).
    std::vector<std::string> jobs;
    const double rss_before = ReadProc(server_.pid).rss_mb;
    const double t0 = Now();
    for (int first = 0; first < opt_.agents; first += 64) {
      v1::SubmitJobRequest req;
      req.set_request_id(absl::StrCat("fleet-serving-", first));
      v1::JobSpec* spec = req.mutable_spec();
      spec->set_name("fleet-serving");
      spec->add_models("mlp");
      for (int i = first; i < std::min(opt_.agents, first + 64); ++i) spec->add_batch_sizes(i - first + 1);
      spec->add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
      v1::ServingSpec* s = spec->mutable_serving();
      s->set_scenario("server");
      s->set_target_qps(opt_.serve_qps);
      s->set_latency_bound_ms(50);
      s->set_min_duration_seconds(1);
      s->set_min_queries(1000);
      grpc::ClientContext ctx;
      v1::SubmitJobResponse resp;
      if (grpc::Status st = client_->SubmitJob(&ctx, req, &resp); !st.ok()) {
        return absl::StrCat("RESULT mode=serving submitted=false error=\"", st.error_message(), "\"");
      }
      jobs.push_back(resp.job_id());
    }
    double rss_peak = rss_before;
    const bool all = WaitFor(
        [&] {
          rss_peak = std::max(rss_peak, ReadProc(server_.pid).rss_mb);
          return stats_.tasks_done_acked.load() >= opt_.agents;
        },
        300);
    const double elapsed = Now() - t0;
    int64_t ended = 0, checked = 0, valid = 0, queries = 0;
    const std::string exactly = CheckExactlyOnce(*client_, jobs, stats_, &ended, &checked);
    std::vector<double> p99_ms;
    for (const std::string& id : jobs) {
      auto job = GetJob(*client_, id);
      if (!job.ok()) continue;
      for (const v1::Task& t : job->tasks()) {
        for (const v1::PhaseResult& p : t.result().phases()) {
          if (p.phase() != v1::PHASE_SERVE) continue;
          valid += p.valid() ? 1 : 0;
          queries += p.stats().count();
          p99_ms.push_back(static_cast<double>(t.result().serving().latency_p99_ns()) * 1e-6);
        }
      }
    }
    std::sort(p99_ms.begin(), p99_ms.end());
    return absl::StrFormat(
        "RESULT mode=serving agents=%d tasks=%d all_done=%s qps_per_task=%.0f queries_stored=%lld seconds=%.2f "
        "queries_per_second_judged=%.0f valid=%lld p99_ms_median=%.3f p99_ms_max=%.3f server_rss_mb_before=%.0f "
        "server_rss_mb_peak=%.0f %s tasks_checked=%lld simulated=true agent_window=%s",
        opt_.agents, opt_.agents, all ? "true" : "false", opt_.serve_qps, static_cast<long long>(queries), elapsed,
        static_cast<double>(queries) / elapsed, static_cast<long long>(valid),
        p99_ms.empty() ? 0.0 : p99_ms[p99_ms.size() / 2], p99_ms.empty() ? 0.0 : p99_ms.back(), rss_before, rss_peak,
        exactly, static_cast<long long>(checked),
        opt_.serving_window > 0 ? absl::StrCat(opt_.serving_window) : std::string("none"));
  }

  /// `floors_before`: the bare and the storing sink's samples/s, measured before the coordinator.
  std::string Ingest(std::pair<double, double> floors_before, const Profiles& profiles) {
    const auto [bare_before, stored_before] = floors_before;
    // One job: a task per agent (cpu targets, distinct batch sizes), each streaming for --seconds.
    std::vector<std::string> jobs;
    for (int first = 0; first < opt_.agents; first += 64) {
      v1::SubmitJobRequest req;
      v1::JobSpec* spec = req.mutable_spec();
      spec->add_models("mlp");
      for (int i = first; i < std::min(opt_.agents, first + 64); ++i) spec->add_batch_sizes(i + 1);
      spec->add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
      spec->mutable_train()->set_min_steps(1);
      grpc::ClientContext ctx;
      v1::SubmitJobResponse resp;
      if (client_->SubmitJob(&ctx, req, &resp).ok()) jobs.push_back(resp.job_id());
    }
    const auto loop_before = ScrapeHistogram(server_.metrics_port, kLoopLatency);
    const double start = Now();
    // --huge-specs: meanwhile a client submits 1,000,000-entry specs, one after the other.
    std::atomic<bool> streaming{true};
    std::atomic<int64_t> huge_refused{0}, huge_accepted{0};
    std::thread huge;
    if (opt_.huge_specs) {
      huge = std::thread([&] {
        v1::SubmitJobRequest req;
        req.mutable_spec()->add_models("mlp");
        req.mutable_spec()->add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
        for (int i = 0; i < 1'000'000; ++i) req.mutable_spec()->add_batch_sizes(1 + i % 4096);
        auto stub = ClientStub(server_.address);
        while (streaming.load()) {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
          v1::SubmitJobResponse resp;
          if (stub->SubmitJob(&ctx, req, &resp).ok()) {
            ++huge_accepted;
          } else {
            ++huge_refused;
          }
        }
      });
    }
    WaitFor([&] { return stats_.tasks_done_acked.load() >= opt_.agents; }, opt_.seconds + 120);
    const double elapsed = Now() - start;
    streaming = false;
    if (huge.joinable()) huge.join();
    const auto loop_after = ScrapeHistogram(server_.metrics_port, kLoopLatency);
    const ProcStats after = ReadProc(server_.pid);
    int64_t ended = 0, checked = 0;
    const std::string exactly = CheckExactlyOnce(*client_, jobs, stats_, &ended, &checked);
    const int64_t samples_acked = stats_.samples_acked.load();
    const double rate = static_cast<double>(samples_acked) / elapsed;
    Shutdown();  // the sinks after it alone on the machine, as before it
    // The sinks again, after, in the mirrored order (bare, storing, coordinator, storing, bare): this VM's
    // speed drifts, and each ratio is taken against the faster of the two (the conservative choice).
    const double stored_after = MeasureBareSink(opt_, profiles, /*storing=*/true);
    const double bare_after = MeasureBareSink(opt_, profiles);
    const double bare = std::max(bare_before, bare_after);
    const double stored = std::max(stored_before, stored_after);
    if (loop_before.ok() && loop_after.ok()) {
      std::cerr << "loop latency (seconds: waits in the window):";
      for (const auto& [bound, count] : *loop_after) {
        auto b = loop_before->find(bound);
        std::cerr << " le" << bound << ":" << count - (b == loop_before->end() ? 0 : b->second);
      }
      std::cerr << "\n";
    }
    const double loop_p99_ms =
        loop_before.ok() && loop_after.ok() ? 1e3 * QuantileBetween(*loop_before, *loop_after, 0.99) : NAN;
    return absl::StrFormat(
        "RESULT mode=ingest agents=%d batch_samples=%d window=%d samples_acked=%lld samples_per_second=%.0f "
        "bare_sink_before=%.0f bare_sink_after=%.0f ratio_to_bare_sink=%.2f storing_sink_before=%.0f "
        "storing_sink_after=%.0f ratio_to_storing_sink=%.2f storing_sink_store=sqlite loop_latency_p99_ms_at_most=%g "
        "huge_specs_refused=%lld huge_specs_accepted=%lld %s tasks_checked=%lld server_cpu_fraction=%.3f "
        "server_rss_mb=%.0f simulated=true",
        opt_.agents, opt_.batch_samples, opt_.window, static_cast<long long>(samples_acked), rate, bare_before,
        bare_after, bare > 0 ? rate / bare : 0.0, stored_before, stored_after, stored > 0 ? rate / stored : 0.0,
        loop_p99_ms, static_cast<long long>(huge_refused.load()), static_cast<long long>(huge_accepted.load()), exactly,
        static_cast<long long>(checked), (after.cpu_seconds - before_.cpu_seconds) / elapsed, after.rss_mb);
  }

 private:
  const Options& opt_;
  Server server_;
  bool keep_;
  FleetStats stats_;
  std::unique_ptr<v1::Coordinator::Stub> client_;
  Fleet fleet_;
  std::thread heart_;
  std::atomic<bool> stop_{false};
  ProcStats before_;
  double connect_seconds_ = 0;
  bool shut_down_ = false;
};

/// history: a store of finished jobs written with the store API (as the
/// coordinator writes them), then the coordinator started on it.
std::string History(const Options& opt, const std::string& server_binary, const std::string& cli_binary, bool keep) {
  const std::string dir = MakeScratchDir();
  const double t_fill = Now();
  {
    auto store = server::SqliteJobStore::Open(dir + "/fleet.db");
    if (!store.ok()) return absl::StrCat("RESULT mode=history error=\"", store.status().message(), "\"");
    const v1::JobState states[] = {v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_FAILED,
                                   v1::JOB_STATE_CANCELLED};
    const char* models[] = {"mlp", "cnn", "qnn"};
    for (int64_t n = 1; n <= opt.history_jobs;) {
      if (!(*store)->Begin().ok()) break;
      for (int64_t k = 0; k < 10'000 && n <= opt.history_jobs; ++k, ++n) {
        v1::Job job;
        job.set_id(absl::StrFormat("job-%06d", n));
        job.set_state(states[n % 4]);
        job.set_created_unix_seconds(1.7e9 + static_cast<double>(n));
        job.set_finished_unix_seconds(1.7e9 + static_cast<double>(n) + 30);
        job.mutable_spec()->add_models(models[n % 3]);
        job.mutable_spec()->add_targets()->set_device_kind(v1::DEVICE_KIND_CPU);
        for (int t = 0; t < opt.tasks_per_job; ++t) {
          job.mutable_spec()->add_batch_sizes(32 * (t + 1));
          v1::Task* task = job.add_tasks();
          task->set_id(absl::StrCat(job.id(), "-t", t));
          task->set_job_id(job.id());
          task->set_index(t);
          task->set_state(v1::TASK_STATE_SUCCEEDED);
          task->set_model(models[n % 3]);
          task->set_batch_size(32 * (t + 1));
          task->set_device_kind(v1::DEVICE_KIND_CPU);
          task->mutable_result()->mutable_environment()->set_simulated(true);
          v1::PhaseResult* phase = task->mutable_result()->add_phases();
          phase->set_phase(v1::PHASE_TRAIN);
          phase->mutable_stats()->set_count(100);
          phase->mutable_stats()->set_p50_ns(1e6);
        }
        if (auto s = (*store)->InsertJob(job, ""); !s.ok()) {
          return absl::StrCat("RESULT mode=history error=\"", s.message(), "\"");
        }
      }
      if (!(*store)->Commit().ok()) break;
    }
  }
  const double fill_seconds = Now() - t_fill;
  Server server = Spawn(server_binary, opt, dir);
  const double start_seconds = server.start_seconds;
  const double rss_started = ReadProc(server.pid).rss_mb;
  // `hetbench get jobs` (the newest 50) as a user runs it: the whole process.
  std::vector<double> cli_ms;
  int cli_exit = 0;
  for (int i = 0; i < 5; ++i) {
    const double t = Now();
    const std::string cmd = absl::StrCat(cli_binary, " --server ", server.address, " get jobs > /dev/null");
    cli_exit = std::system(cmd.c_str());
    cli_ms.push_back((Now() - t) * 1e3);
  }
  // And the ListJobs RPC alone, on one channel.
  auto stub = ClientStub(server.address);
  std::vector<double> rpc_ms;
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_page_size(50);
    v1::ListJobsResponse resp;
    const double t = Now();
    if (!stub->ListJobs(&ctx, req, &resp).ok()) break;
    rpc_ms.push_back((Now() - t) * 1e3);
  }
  const double rss_after = ReadProc(server.pid).rss_mb;
  StopServer(server, keep);
  return absl::StrFormat(
      "RESULT mode=history jobs=%lld tasks_per_job=%d fill_seconds=%.1f server_start_seconds=%.2f "
      "server_rss_mb_started=%.0f server_rss_mb_after_listing=%.0f get_jobs_cli_ms_p50=%.1f get_jobs_cli_ms_max=%.1f "
      "cli_exit=%d list_jobs_rpc_ms_p50=%.2f list_jobs_rpc_ms_max=%.2f simulated=true",
      static_cast<long long>(opt.history_jobs), opt.tasks_per_job, fill_seconds, start_seconds, rss_started, rss_after,
      Percentile(cli_ms, 0.5), Percentile(cli_ms, 1.0), cli_exit, Percentile(rpc_ms, 0.5), Percentile(rpc_ms, 1.0));
}

// idle --bare-floor: the same agents and window against the bare gateway
// (bench_fleet --serve-bare, spawned as the server is), and the ratio.
std::string BareFloor(const Options& opt, const Profiles& profiles, const std::string& server_result) {
  Options bare_opt = opt;
  bare_opt.server_args = {"--serve-bare"};
  Run bare(bare_opt, profiles, Spawn("/proc/self/exe", bare_opt), /*keep=*/false);
  bare.Connect();
  const std::string r = bare.Idle();
  auto field = [](const std::string& line, const std::string& key) {
    const size_t at = line.find(" " + key + "=");
    return at == std::string::npos ? 0.0 : std::atof(line.c_str() + at + key.size() + 2);
  };
  const double floor = field(r, "server_cpu_fraction"), server = field(server_result, "server_cpu_fraction");
  const double warm_floor = field(r, "warmup_cpu_fraction"), warm = field(server_result, "warmup_cpu_fraction");
  return absl::StrFormat(
      "bare_warmup_cpu_fraction=%.3f warmup_ratio_to_bare=%.2f bare_cpu_fraction=%.3f bare_rss_mb=%.0f "
      "ratio_to_bare=%.2f",
      warm_floor, warm_floor > 0 ? warm / warm_floor : 0.0, floor, field(r, "server_rss_mb"),
      floor > 0 ? server / floor : 0.0);
}

}  // namespace
}  // namespace hetbench::fleet

int main(int argc, char** argv) {
  using namespace hetbench::fleet;  // NOLINT: a bench's main
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--serve-bare") return ServeBare(argc, argv);  // spawned by idle --bare-floor
  }
  Options opt;
  std::string server_binary = HETBENCH_SERVER_BINARY, cli_binary = HETBENCH_CLI_BINARY;
  bool keep = false;
  CLI::App app{"bench_fleet: simulated agents against the real hetbench-server"};
  app.add_option("--mode", opt.mode, "idle, dispatch, bigjob, ingest, chaos, history, validate or serving")
      ->capture_default_str();
  bool bare_floor = false;
  app.add_flag("--bare-floor", bare_floor,
               "idle: then the same agents against a bare gRPC gateway in a process of its own (welcomes, echoes "
               "heartbeats, nothing else): the floor gRPC puts under the coordinator");
  app.add_option("--degrade", opt.degrade,
                 "validate: shares of devices with a known fault, e.g. slow5=0.02,slow10=0.02,wrong=0.01,hang=0.01 "
                 "(slow5, slow10, slow30, powercap, noisy, wrong, hang, slowlink)");
  app.add_option("--level", opt.level, "validate: quick or standard")->capture_default_str();
  app.add_option("--agents-per-connection", opt.agents_per_connection,
                 "a shortcut: simulated agents sharing one connection (real agents: 1 each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app.add_flag("--synchronized-heartbeats", opt.synchronized_heartbeats,
               "a shortcut: every agent's heartbeat at the same instant (real agents beat on their own phase)");
  app.add_flag("--sample-arrays", opt.sample_arrays,
               "sample batches as arrays, as agents before the compact columns sent them (hetbench-agent sends "
               "columns to a coordinator whose Welcome takes them)");
  app.add_flag("--single-acks", opt.single_acks,
               "agents that do not read ack lists, as before them: one ack message per stored batch (hetbench-agent "
               "declares Hello.ack_lists and gets one list per commit)");
  app.add_option("--seed", opt.seed, "the simulated agents' noise; the faulty devices stay the same")
      ->capture_default_str();
  app.add_option("--agents", opt.agents, "simulated agents")->capture_default_str();
  app.add_option("--devices", opt.devices, "devices per agent (kinds cycle cpu, gpu, tpu, dpu, qpu-sim)")
      ->capture_default_str();
  app.add_option("--seconds", opt.seconds, "length of the measured window")->capture_default_str();
  app.add_option("--warmup-seconds", opt.warmup_seconds,
                 "idle: seconds after the last agent connected before the measured window (young connections "
                 "probe their bandwidth on every message; a real fleet's are old); its CPU is reported apart")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--heartbeat-seconds", opt.heartbeat_seconds, "agent and coordinator heartbeat")
      ->capture_default_str();
  app.add_option("--clients", opt.clients, "submitting clients (dispatch, chaos)")->capture_default_str();
  app.add_option("--tasks-per-job", opt.tasks_per_job, "tasks per submitted job (dispatch, chaos, bigjob, history)")
      ->capture_default_str();
  app.add_option("--batch-samples", opt.batch_samples, "samples per batch (ingest)")->capture_default_str();
  app.add_option("--serve-qps", opt.serve_qps, "serving: each task's rate, queries/s")->capture_default_str();
  app.add_option("--window", opt.window, "batches in flight per task (ingest; the agent's own window is 64)")->capture_default_str();
  app.add_option("--serving-window", opt.serving_window,
                 "serving: sample batches in flight per task (hetbench-agent: 64); 0 = all at once, a shortcut")
      ->capture_default_str();
  app.add_flag("--huge-specs", opt.huge_specs, "ingest: submit 1,000,000-entry specs while streaming");
  app.add_option("--chaos-per-second", opt.chaos_per_second, "agent kills or cuts per second (chaos)")
      ->capture_default_str();
  app.add_option("--history-jobs", opt.history_jobs, "finished jobs in the store (history)")->capture_default_str();
  app.add_option("--profiles", opt.profiles, "device profiles YAML")->capture_default_str();
  std::string server_address;
  app.add_option("--server", server_address,
                 "run against this coordinator instead of spawning one (e.g. to fill a demo's dashboards; "
                 "its CPU, RSS and loop latency are then not read)");
  app.add_option("--server-binary", server_binary, "hetbench-server to spawn")->capture_default_str();
  app.add_option("--cli-binary", cli_binary, "hetbench CLI (history)")->capture_default_str();
  app.add_option("--server-arg", opt.server_args, "an argument for the spawned hetbench-server (repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--keep", keep, "keep the coordinator's scratch directory (store, log) after the run");
  CLI11_PARSE(app, argc, argv);
  if (opt.profiles.empty()) opt.profiles = HETBENCH_FLEET_PROFILES;
  Profiles profiles;
  try {
    profiles = LoadProfiles(opt.profiles);
  } catch (const std::exception& e) {
    std::cerr << "bench_fleet: --profiles " << opt.profiles << ": " << e.what() << "\n";
    return 2;
  }
  const std::vector<std::string> modes = {"idle",  "dispatch", "bigjob",  "ingest",
                                          "chaos", "history",  "validate", "serving"};
  if (std::find(modes.begin(), modes.end(), opt.mode) == modes.end()) {
    std::cerr << "bench_fleet: --mode " << opt.mode
              << ": use idle, dispatch, bigjob, ingest, chaos, history, validate or serving\n";
    return 2;
  }
  if (auto d = ParseDegrade(opt.degrade); !d.ok()) {
    std::cerr << "bench_fleet: " << d.status().message() << "\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  if (opt.mode == "history") {
    std::cout << History(opt, server_binary, cli_binary, keep) << std::endl;
    return 0;
  }
  // ingest: the bare sink first, then the storing sink, in this process, with the same agents and batches.
  std::pair<double, double> floors_before = {0, 0};
  if (opt.mode == "ingest") {
    floors_before.first = MeasureBareSink(opt, profiles);
    floors_before.second = MeasureBareSink(opt, profiles, /*storing=*/true);
  }
  std::string result;
  {
    Server server;
    if (server_address.empty()) {
      server = Spawn(server_binary, opt);
    } else {
      server.address = server_address;
    }
    Run run(opt, profiles, std::move(server), keep);
    run.Connect();
    if (opt.mode == "idle") {
      result = run.Idle();
      if (bare_floor) {
        run.Shutdown();  // the floor alone on the machine, as the coordinator was
        result = absl::StrCat(result, " ", BareFloor(opt, profiles, result));
      }
    } else if (opt.mode == "bigjob") {
      result = run.BigJob();
    } else if (opt.mode == "ingest") {
      result = run.Ingest(floors_before, profiles);
    } else if (opt.mode == "validate") {
      result = run.Validate();
    } else if (opt.mode == "serving") {
      result = run.Serving();
    } else {
      result = run.Dispatch();
    }
  }
  // How the simulated agents met the coordinator: as real agents (one connection each, beats on their own
  // phase), or through a labelled shortcut.
  std::cout << result << " agents_per_connection=" << opt.agents_per_connection
            << " heartbeats=" << (opt.synchronized_heartbeats ? "synchronized" : "independent")
            << " samples=" << (opt.sample_arrays ? "arrays" : "columns")
            << " acks=" << (opt.single_acks ? "single" : "lists") << std::endl;
  return 0;
}
