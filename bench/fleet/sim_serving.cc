#include "bench/fleet/sim_serving.h"

#include <algorithm>
#include <limits>
#include <random>

#include "absl/strings/str_format.h"
#include "common/names.h"
#include "common/serving_spec.h"
#include "common/serving_stats.h"

namespace hetbench::fleet {


SimulatedServing SimulateServing(const v1::Assign& a, v1::DeviceKind kind, const Profile& p, uint64_t seed,
                                 int per_batch) {
  const v1::JobSpec& spec = a.spec();
  const v1::ServingSpec& s = spec.serving();
  const std::string& scenario = s.scenario();
  const int max_batch = std::max(1, a.batch_size());
  const int samples = scenario == "multi_stream" ? std::max(1, s.samples_per_query()) : 1;
  const double qps = a.target_qps() > 0 ? a.target_qps() : s.target_qps();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(1.0, p.jitter);
  auto service_ns = [&](int size) {
    const double seconds = p.batch_overhead_us * 1e-6 + size / p.samples_per_second;
    return static_cast<int64_t>(seconds * 1e9 * std::max(0.5, noise(rng)));
  };
  SimulatedServing out;
  std::vector<int64_t> scheduled, latency;
  int64_t batches = 0, batched = 0;
  if (scenario == "single_stream" || scenario == "multi_stream") {
    // One query outstanding: the next is scheduled when the last is answered.
    const auto min_ns = static_cast<int64_t>(s.min_duration_seconds() * 1e9);
    int64_t t = 0;
    for (int64_t i = 0; i < ServingLimits::kMaxQueries && (i < s.min_queries() || t < min_ns); ++i) {
      int64_t done = t;
      for (int left = samples; left > 0; left -= max_batch) {
        const int size = std::min(left, max_batch);
        done += service_ns(size);
        ++batches;
        batched += size;
      }
      scheduled.push_back(t);
      latency.push_back(done - t);
      t = done;
    }
  } else {
    const std::vector<int64_t> arrivals =
        scenario == "offline" ? std::vector<int64_t>(static_cast<size_t>(ServingQueryCapacity(spec, qps)), 0)
                              : ServerSchedule(spec, qps);
    std::vector<int64_t> free_at(static_cast<size_t>(std::max(1, s.instances())), 0);
    for (size_t i = 0; i < arrivals.size();) {
      auto server = std::min_element(free_at.begin(), free_at.end());
      const int64_t start = std::max(*server, arrivals[i]);
      size_t end = i;  // every query arrived by the start, up to the largest batch
      while (end < arrivals.size() && end - i < static_cast<size_t>(max_batch) && arrivals[end] <= start) ++end;
      const int size = static_cast<int>(end - i);
      const int64_t done = start + service_ns(size);
      for (size_t j = i; j < end; ++j) {
        scheduled.push_back(arrivals[j]);
        latency.push_back(done - arrivals[j]);
      }
      *server = done;
      ++batches;
      batched += size;
      i = end;
    }
  }
  const auto n = static_cast<int64_t>(scheduled.size());
  int64_t last = 0;
  for (int64_t i = 0; i < n; i += per_batch) {
    v1::SampleBatch& b = out.batches.emplace_back();
    b.set_task_id(a.task_id());
    b.set_attempt(a.attempt());
    b.set_seq(out.batches.size() - 1);
    b.set_phase(v1::PHASE_SERVE);
    for (int64_t j = i; j < std::min(n, i + per_batch); ++j) {
      b.add_start_ns(scheduled[static_cast<size_t>(j)]);
      b.add_duration_ns(latency[static_cast<size_t>(j)]);
      b.add_items(samples);
      last = std::max(last, scheduled[static_cast<size_t>(j)] + latency[static_cast<size_t>(j)]);
    }
  }
  out.queries = n;
  out.end_ns = last;
  v1::ServingRun& r = out.run;
  r.set_scenario(scenario);
  r.set_target_qps(scenario == "server" || scenario == "peak" ? qps : 0.0);
  r.set_queries_scheduled(n);
  r.set_queries_answered(n);
  r.set_schedule_seconds(n > 0 ? static_cast<double>(scheduled.back()) * 1e-9 : 0);
  if (last > 0) r.set_achieved_qps(static_cast<double>(n) / (static_cast<double>(last) * 1e-9));
  r.set_batches(batches);
  if (batches > 0) r.set_mean_batch(static_cast<double>(batched) / static_cast<double>(batches));
  r.set_max_batch(max_batch);
  r.set_instances(std::max(1, s.instances()));
  r.set_samples_per_query(samples);
  r.set_compute(
      absl::StrFormat("SIMULATED %s (%s): a queueing model, greedy batching, %.3g samples/s + %.0f us per batch%s",
                      DeviceKindName(kind), p.name, p.samples_per_second, p.batch_overhead_us,
                      scenario == "peak" ? "; peak search not simulated: one server run at the first rate" : ""));
  return out;
}

}  // namespace hetbench::fleet
