// bench_serving: the serving load generator's own figures (agent/serving/issuer.h).
//  1. Null target (answers inside Issue): at each rate, the achieved rate, the
//     issue delay p50/p99/max (issued minus scheduled) and the issuer thread's
//     CPU per query (sleeping and spinning included): how far it keeps up.
//  2. Fixed-service target (BatchingServer with FixedServiceCompute: one
//     instance, one query per batch, busy-waits S on its worker thread) at 20/50/80% load: the measured latency p50/p99 against an
//     ideal server's on the same arrivals (Lindley's recursion: each answer S
//     after the later of its arrival and the previous answer), and the mean
//     against M/D/1's S (1 + rho / (2 (1 - rho))).
//  0. Saturated: every query due at once, issued back to back: the issuer's
//     CPU per query with no sleep or spin (its own work) and its ceiling rate.
//     The sleep floor: a loop that only sleeps until each scheduled time, its CPU
//     per wake (what any sleeping issuer pays the kernel and the VM per query).
// --spin-us A B ... alternates the issuer's spin A B A B over --repeats rounds.
// Prints RESULT lines; asserts nothing.
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "bench/machine.h"
#include "CLI/CLI.hpp"
#include "agent/serving/batching_server.h"
#include "agent/serving/issuer.h"
#include "agent/serving/serving_model.h"
#include "common/clock.h"
#include "common/serving_stats.h"

namespace {

using hetbench::NearestRank;
using hetbench::SteadyNowNs;
using hetbench::ThreadCpuSeconds;
using hetbench::agent::OpenLoopRun;
using hetbench::agent::QueryTimes;
using hetbench::agent::InlineNullTarget;

std::vector<int64_t> Sorted(const OpenLoopRun& run, int64_t (QueryTimes::*field)() const) {
  std::vector<int64_t> v;
  for (const QueryTimes& q : run.queries) v.push_back((q.*field)());
  std::sort(v.begin(), v.end());
  return v;
}

// The floor under any issuer that sleeps until each query: a loop that only
// sleeps until each scheduled time (timer slack 1 ns, as the issuer sets it),
// no spin, no issue, no records. Its CPU per wake is what the kernel and the
// VM charge for one sleep; an issuer's CPU per query above it is its own.
void RunSleepFloor(int round, double qps, int64_t duration_ns) {
  const std::vector<int64_t> schedule = hetbench::PoissonSchedule(1, qps, duration_ns, 100'000'000);
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const double cpu0 = ThreadCpuSeconds();
  const int64_t start = SteadyNowNs();
  std::vector<int64_t> late;
  late.reserve(schedule.size());
  for (int64_t due : schedule) {
    const int64_t now = SteadyNowNs() - start;
    if (due > now) absl::SleepFor(absl::Nanoseconds(due - now));
    late.push_back(std::max<int64_t>(0, SteadyNowNs() - start - due));
  }
  const double cpu = ThreadCpuSeconds() - cpu0;
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
  std::sort(late.begin(), late.end());
  std::printf("RESULT sleep_floor round=%d target=%.0f/s wakes=%zu late p50=%.1fus p99=%.1fus cpu=%.2fus/wake\n", round,
              qps, schedule.size(), NearestRank(late, 50) * 1e-3, NearestRank(late, 99) * 1e-3,
              cpu / static_cast<double>(schedule.size()) * 1e6);
}

// One null-target run: achieved rate, issue delay and the issuer's CPU per query.
void RunNull(int round, double spin_us, double qps, int64_t duration_ns) {
  const std::vector<int64_t> schedule = hetbench::PoissonSchedule(1, qps, duration_ns, 100'000'000);
  InlineNullTarget target;
  const double cpu0 = ThreadCpuSeconds();
  const OpenLoopRun run = hetbench::agent::RunOpenLoop(schedule, target, absl::Seconds(5),
                                                       absl::Nanoseconds(static_cast<int64_t>(spin_us * 1e3)));
  const double cpu = ThreadCpuSeconds() - cpu0;
  const std::vector<int64_t> delay = Sorted(run, &QueryTimes::issue_delay_ns);
  const double span = (run.queries.back().issued_ns - run.queries.front().issued_ns) * 1e-9;
  const double achieved = static_cast<double>(run.queries.size() - 1) / std::max(span, 1e-9);
  const double offered = static_cast<double>(schedule.size() - 1) / ((schedule.back() - schedule.front()) * 1e-9);
  std::printf(
      "RESULT null round=%d spin=%.0fus target=%.0f/s offered=%.0f/s achieved=%.0f/s (%.4f of offered) queries=%zu "
      "issue_delay p50=%.1fus p99=%.1fus max=%.1fus issuer_cpu=%.2fus/query\n",
      round, spin_us, qps, offered, achieved, achieved / offered, run.queries.size(), NearestRank(delay, 50) * 1e-3,
      NearestRank(delay, 99) * 1e-3, delay.back() * 1e-3, cpu / static_cast<double>(run.queries.size()) * 1e6);
}

// The issuer's own cost, no waiting (MeasureIssuerCeiling, what a null
// serving run reports): its CPU per query with no sleep or spin and its
// ceiling rate.
void RunSaturated(int round, int64_t n) {
  const hetbench::agent::IssuerCeiling c = hetbench::agent::MeasureIssuerCeiling(n);
  std::printf("RESULT saturated round=%d queries=%lld ceiling=%.0f/s issuer_cpu=%.3fus/query (issue and record; "
              "no sleep or spin)\n",
              round, static_cast<long long>(n), c.qps, c.cpu_us_per_query);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_serving: the serving load generator's issue delay, CPU per query and latency accuracy"};
  std::vector<double> rates = {10'000, 100'000, 500'000};
  double seconds = 2, service_ms = 1;
  std::vector<double> loads = {0.2, 0.5, 0.8};
  std::vector<double> spins_us = {absl::ToDoubleMicroseconds(hetbench::agent::kIssuerSpin)};
  int repeats = 1;
  app.add_option("--rates", rates, "null-target rates (queries/s)");
  app.add_option("--spin-us", spins_us,
                 "the issuer's spin before each query (us); several: the null runs alternate them A B A B");
  app.add_option("--repeats", repeats, "null-target rounds over every spin and rate");
  app.add_option("--seconds", seconds, "length of each run");
  app.add_option("--service-ms", service_ms, "the fixed-service target's time per query");
  app.add_option("--loads", loads, "the fixed-service target's utilisations");
  CLI11_PARSE(app, argc, argv);
  std::printf("CPU: %s\n", hetbench::bench::CpuModel().c_str());
  const auto duration_ns = static_cast<int64_t>(seconds * 1e9);

  for (int round = 0; round < repeats; ++round) {
    RunSaturated(round, static_cast<int64_t>(std::max(1.0, seconds) * 2'000'000));
    for (double qps : rates) RunSleepFloor(round, qps, duration_ns);
    for (double spin_us : spins_us) {
      for (double qps : rates) RunNull(round, spin_us, qps, duration_ns);
    }
  }

  const auto service_ns = static_cast<int64_t>(service_ms * 1e6);
  for (double rho : loads) {
    const double qps = rho / (service_ms * 1e-3);
    const std::vector<int64_t> schedule = hetbench::PoissonSchedule(2, qps, duration_ns, 100'000'000);
    hetbench::agent::BatchingServer target({1, absl::ZeroDuration(), 1},
                                           hetbench::agent::FixedServiceCompute(absl::Nanoseconds(service_ns)));
    const OpenLoopRun run = hetbench::agent::RunOpenLoop(schedule, target, absl::Seconds(30));
    // The ideal server on the same arrivals.
    std::vector<int64_t> ideal;
    int64_t free_at = 0;
    double ideal_sum = 0, measured_sum = 0;
    for (int64_t t : schedule) {
      free_at = std::max(free_at, t) + service_ns;
      ideal.push_back(free_at - t);
      ideal_sum += static_cast<double>(free_at - t);
    }
    for (const QueryTimes& q : run.queries) measured_sum += static_cast<double>(q.latency_ns());
    std::sort(ideal.begin(), ideal.end());
    const std::vector<int64_t> measured = Sorted(run, &QueryTimes::latency_ns);
    const double n = static_cast<double>(schedule.size());
    const double md1_mean = service_ms * (1 + rho / (2 * (1 - rho)));
    std::printf(
        "RESULT fixed_service service=%.2fms load=%.2f queries=%zu unanswered=%lld p50 measured=%.3fms ideal=%.3fms "
        "(x%.3f) p99 measured=%.3fms ideal=%.3fms (x%.3f) mean measured=%.3fms ideal=%.3fms M/D/1=%.3fms\n",
        service_ms, rho, schedule.size(), static_cast<long long>(run.unanswered), NearestRank(measured, 50) * 1e-6,
        NearestRank(ideal, 50) * 1e-6, static_cast<double>(NearestRank(measured, 50)) / NearestRank(ideal, 50),
        NearestRank(measured, 99) * 1e-6, NearestRank(ideal, 99) * 1e-6,
        static_cast<double>(NearestRank(measured, 99)) / NearestRank(ideal, 99), measured_sum / n * 1e-6,
        ideal_sum / n * 1e-6, md1_mean);
  }
  return 0;
}
