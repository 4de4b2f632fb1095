#include "agent/serving/generative.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/serving_spec.h"
#include "common/serving_stats.h"

namespace hetbench::agent {

GenerativeRequest MakeRequest(const v1::DecoderSpec& d, uint64_t seed, int64_t index) {
  // A stream per request: request i is the same whatever was drawn before it.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(index),
                    static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32), 0x6e7e1u};
  std::mt19937_64 rng(seq);
  auto uniform = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  GenerativeRequest r;
  r.prompt.resize(static_cast<size_t>(uniform(d.prompt_tokens_min(), d.prompt_tokens_max())));
  r.output_tokens = static_cast<int>(uniform(d.output_tokens_min(), d.output_tokens_max()));
  for (int64_t& t : r.prompt) t = uniform(0, d.vocabulary() - 1);
  return r;
}

struct GenerativeServer::Running {
  Waiting waiting;
  GenerativeRequest request;
  int slot = 0;
  int position = 0;   // where the next fed token goes
  int64_t token = 0;  // the last generated token: fed at `position` next
  GenerationTimes times;
};

GenerativeServer::GenerativeServer(const DecoderModel& decoder, int max_running, int instances,
                                   std::function<GenerativeRequest(int64_t)> requests)
    : decoder_(decoder), max_running_(std::max(1, max_running)), requests_(std::move(requests)) {
  for (int i = 0; i < std::max(1, instances); ++i) workers_.emplace_back([this, i] { Work(i); });
}

GenerativeServer::~GenerativeServer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  for (std::thread& w : workers_) w.join();
}

void GenerativeServer::Issue(int64_t index, const std::function<void(int64_t)>& answered) {
  absl::MutexLock l(&mu_);
  queue_.push_back({index, answered});
}

std::vector<ServedBatch> GenerativeServer::Steps() const {
  absl::MutexLock l(&mu_);
  return steps_;
}

std::map<int64_t, GenerationTimes> GenerativeServer::Times() const {
  absl::MutexLock l(&mu_);
  return times_;
}

void GenerativeServer::Finish(Running& r, int /*instance*/) {
  {
    absl::MutexLock l(&mu_);
    times_[r.waiting.index] = std::move(r.times);
  }
  r.waiting.answered(r.waiting.index);
}

void GenerativeServer::Work(int instance) {
  KvCache cache = decoder_.NewCache(max_running_);
  std::vector<Running> running;
  std::vector<int> free_slots;
  for (int s = max_running_ - 1; s >= 0; --s) free_slots.push_back(s);
  for (;;) {
    std::vector<Waiting> admitted;
    {
      absl::MutexLock l(&mu_);
      if (running.empty()) {
        auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
        mu_.Await(absl::Condition(&any));
      }
      if (stop_) return;  // abandoned: see the destructor
      while (running.size() + admitted.size() < static_cast<size_t>(max_running_) && !queue_.empty()) {
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    // Admission: a prefill per request gives its first token.
    for (Waiting& w : admitted) {
      Running r;
      r.waiting = std::move(w);
      r.request = requests_(r.waiting.index);
      r.slot = free_slots.back();
      free_slots.pop_back();
      r.token = decoder_.Prefill(cache, r.slot, r.request.prompt);
      r.times.first_token_ns = r.times.last_token_ns = SteadyNowNs();
      r.times.prompt_tokens = static_cast<int>(r.request.prompt.size());
      r.times.output_tokens = 1;
      r.position = static_cast<int>(r.request.prompt.size());
      if (r.times.output_tokens >= r.request.output_tokens) {
        free_slots.push_back(r.slot);
        Finish(r, instance);
      } else {
        running.push_back(std::move(r));
      }
    }
    if (running.empty()) continue;
    // One decoding step for every running request.
    std::vector<int> slots, positions;
    std::vector<int64_t> tokens;
    for (const Running& r : running) {
      slots.push_back(r.slot);
      positions.push_back(r.position);
      tokens.push_back(r.token);
    }
    const int64_t t0 = SteadyNowNs();
    const std::vector<int64_t> next = decoder_.Step(cache, slots, tokens, positions);
    const int64_t now = SteadyNowNs();
    {
      absl::MutexLock l(&mu_);
      steps_.push_back({static_cast<int>(running.size()), instance, t0, now});
    }
    std::vector<Running> still;
    for (size_t i = 0; i < running.size(); ++i) {
      Running& r = running[i];
      r.token = next[i];
      ++r.position;
      ++r.times.output_tokens;
      r.times.gaps_ns.push_back(now - r.times.last_token_ns);
      r.times.last_token_ns = now;
      if (r.times.output_tokens >= r.request.output_tokens) {
        free_slots.push_back(r.slot);
        Finish(r, instance);
      } else {
        still.push_back(std::move(r));
      }
    }
    running = std::move(still);
  }
}

namespace {

int64_t Nearest(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  return NearestRank(v, p);
}

// The agent's generative figures of the answered requests over the run's
// window (first scheduled time to last answer).
void SummarizeRequests(const v1::ServingSpec& s, const std::vector<ServedRequest>& requests,
                       const std::vector<int64_t>& gaps, double window_seconds, v1::GenerativeRun* g) {
  int64_t prompt = 0, output = 0, meeting = 0;
  const auto ttft_ns = static_cast<int64_t>(s.ttft_ms() * 1e6), tpot_ns = static_cast<int64_t>(s.tpot_ms() * 1e6);
  for (const ServedRequest& r : requests) {
    prompt += r.prompt_tokens;
    output += r.output_tokens;
    if ((ttft_ns <= 0 || r.ttft_ns <= ttft_ns) && (tpot_ns <= 0 || r.tpot_ns <= tpot_ns)) ++meeting;
  }
  g->set_prompt_tokens(prompt);
  g->set_output_tokens(output);
  g->set_requests_meeting_slo(meeting);
  g->set_itl_p50_ns(Nearest(gaps, 50));
  g->set_itl_p99_ns(Nearest(gaps, 99));
  if (window_seconds > 0) {
    g->set_output_tokens_per_second(static_cast<double>(output) / window_seconds);
    g->set_requests_per_second(static_cast<double>(requests.size()) / window_seconds);
    g->set_goodput(static_cast<double>(meeting) / window_seconds);
  }
}

// One run of the scenario at `qps` against a fresh server: what the issuer
// recorded, the decoding steps and each request's times.
struct GenerativeOnce {
  ScenarioRun scenario;
  std::vector<ServedBatch> steps;
  std::map<int64_t, GenerationTimes> times;
};

GenerativeOnce RunOnce(const v1::JobSpec& spec, double qps, int max_running, const DecoderModel& decoder,
                       const ServingControl& control, const ReplicaStart* replica = nullptr) {
  const v1::ServingSpec& s = spec.serving();
  const v1::DecoderSpec d = s.decoder();
  const uint64_t seed = spec.seed();
  GenerativeOnce once;
  GenerativeServer server(decoder, max_running, s.instances(),
                          [d, seed](int64_t index) { return MakeRequest(d, seed, index); });
  // A request takes many steps: its answer may come long after its issue.
  once.scenario = RunScenario(spec, qps, server, control, absl::Seconds(600), replica);
  once.steps = server.Steps();
  once.times = server.Times();
  return once;
}

// The answered requests of `once` on the task's time axis (appended to
// `answered`, in schedule order) and their inter-token gaps.
void Requests(const GenerativeOnce& once, int64_t task_start_ns, std::vector<ServedRequest>* answered,
              std::vector<int64_t>* gaps) {
  const OpenLoopRun& run = once.scenario.run;
  const int64_t origin = run.run_start_ns - task_start_ns;
  for (size_t i = 0; i < run.queries.size(); ++i) {
    const QueryTimes& q = run.queries[i];
    const auto it = once.times.find(static_cast<int64_t>(i));
    if (q.answered_ns < 0 || it == once.times.end()) continue;
    const GenerationTimes& t = it->second;
    ServedRequest r;
    r.scheduled_ns = origin + q.scheduled_ns;
    r.latency_ns = q.latency_ns();
    r.ttft_ns = t.first_token_ns - run.run_start_ns - q.scheduled_ns;
    r.tpot_ns = t.output_tokens > 1 ? (t.last_token_ns - t.first_token_ns) / (t.output_tokens - 1) : 0;
    r.prompt_tokens = t.prompt_tokens;
    r.output_tokens = t.output_tokens;
    answered->push_back(r);
    gaps->insert(gaps->end(), t.gaps_ns.begin(), t.gaps_ns.end());
  }
}

// A peak search's run of the decoder at `qps`, judged here by the
// coordinator's rules (the latency bound and the TTFT and TPOT SLOs) from
// its own requests; the final run is judged by the coordinator itself.
v1::ServingStep PeakStep(const v1::JobSpec& spec, double qps, int max_running, const DecoderModel& decoder,
                         const ServingControl& control) {
  const GenerativeOnce once = RunOnce(spec, qps, max_running, decoder, control);
  v1::ServingRun figures;
  std::vector<ServedQuery> queries;
  const v1::PhaseWindow w = SummarizeRun(once.scenario, once.steps, control.task_start_ns, &figures, &queries);
  std::vector<ServedRequest> requests;
  std::vector<int64_t> gaps;
  Requests(once, control.task_start_ns, &requests, &gaps);
  std::vector<int64_t> latencies;
  GenerativeTimes times;
  int64_t tokens = 0;
  for (const ServedRequest& r : requests) {
    latencies.push_back(r.latency_ns);
    times.ttft.push_back(r.ttft_ns);
    times.tpot.push_back(r.tpot_ns);
    tokens += r.output_tokens;
  }
  std::sort(times.ttft.begin(), times.ttft.end());
  std::sort(times.tpot.begin(), times.tpot.end());
  times.ttft_stored = times.tpot_stored = static_cast<int64_t>(requests.size());
  return JudgeStep(spec, qps, std::move(latencies), tokens, w, &figures, &times);
}

}  // namespace

absl::Status RunGenerative(const v1::JobSpec& spec, double qps, int max_running, const DecoderModel& decoder,
                           const std::string& what, const ServingControl& control, v1::TaskResult* result,
                           std::vector<ServedRequest>* answered) {
  const v1::ServingSpec& s = spec.serving();
  max_running = std::max(max_running, 1);
  v1::ServingRun* out = result->mutable_serving();
  out->set_scenario(s.scenario());
  out->set_max_batch(max_running);
  out->set_instances(s.instances());
  out->set_samples_per_query(1);
  out->set_compute(what);
  out->mutable_generative()->set_decoder(decoder.Describe());

  // Warm-up, untimed: a request's prefill and a few steps (first-call allocations).
  const int64_t warm_start = SteadyNowNs();
  {
    KvCache cache = decoder.NewCache(1);
    for (int b = 0; b < s.warmup_batches() && !control.cancel->load(); ++b) {
      const GenerativeRequest r = MakeRequest(s.decoder(), spec.seed() ^ 0x5eedu, b);
      int64_t token = decoder.Prefill(cache, 0, r.prompt);
      for (int i = 1; i < std::min(r.output_tokens, 4); ++i) {
        token = decoder.Step(cache, {0}, {token}, {static_cast<int>(r.prompt.size()) + i - 1})[0];
      }
    }
  }
  result->set_warmup_seconds(static_cast<double>(SteadyNowNs() - warm_start) * 1e-9);
  if (absl::Status f = decoder.Failure(); !f.ok()) return f;  // a brought module that fails its first requests

  if (s.scenario() == "peak") {
    qps = SearchPeak(spec, control, [&](double at) { return PeakStep(spec, at, max_running, decoder, control); }, out);
  }
  out->set_target_qps(s.scenario() == "server" || s.scenario() == "peak" ? qps : 0.0);
  const absl::StatusOr<ReplicaStart> replica = StartReplica(control, out);
  if (!replica.ok()) return replica.status();
  const GenerativeOnce once = RunOnce(spec, qps, max_running, decoder, control, &*replica);
  if (absl::Status f = decoder.Failure(); !f.ok()) return f;
  const ScenarioRun& one = once.scenario;
  const std::vector<ServedBatch>& steps = once.steps;
  std::vector<ServedQuery> queries;
  const v1::PhaseWindow w = SummarizeRun(one, steps, control.task_start_ns, out, &queries);
  std::vector<int64_t> gaps;
  const size_t first = answered->size();
  Requests(once, control.task_start_ns, answered, &gaps);
  int64_t max_steps = 0;
  for (const ServedBatch& b : steps) max_steps = std::max<int64_t>(max_steps, b.size);
  out->mutable_generative()->set_max_running(static_cast<int32_t>(max_steps));
  out->mutable_generative()->set_mean_running(out->mean_batch());
  const std::vector<ServedRequest> mine(answered->begin() + static_cast<std::ptrdiff_t>(first), answered->end());
  SummarizeRequests(s, mine, gaps, static_cast<double>(w.end_ns() - w.start_ns()) * 1e-9, out->mutable_generative());
  if (!one.run.queries.empty()) {
    *result->add_windows() = w;
    result->set_evaluate_seconds(static_cast<double>(w.end_ns() - w.start_ns()) * 1e-9);
  }
  return absl::OkStatus();
}

}  // namespace hetbench::agent
