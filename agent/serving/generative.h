#pragma once
/// A generative serving run: requests (a prompt, a number of tokens to
/// generate) arrive as the scenario's queries and are served by continuous
/// batching, as LLM servers do (Orca's iteration-level scheduling, vLLM):
/// each of `instances` workers keeps up to `max_running` requests decoding
/// together in the slots of its KV cache; at every step it first admits
/// waiting requests into free slots (one prefill each, which gives the
/// request's first token), then runs one decoding step for every running
/// request. A request is answered with its last token.
///
/// Per request the run keeps its first-token and last-token times and
/// every gap between two tokens; TTFT is counted from the request's
/// scheduled time, as its end-to-end latency is (no coordinated omission).
///
/// Threads: Issue from any thread; the workers run the decoder; Times and
/// Steps from any thread.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/serving/batching_server.h"
#include "agent/serving/decoder.h"
#include "agent/serving/issuer.h"
#include "agent/serving/serving_run.h"
#include "hetbench/v1/common.pb.h"

namespace hetbench::agent {

/// One request: its prompt's tokens and how many tokens it generates.
struct GenerativeRequest {
  std::vector<int64_t> prompt;
  int output_tokens = 0;
};

/// Request `index` of a run: prompt and output lengths uniform in the
/// spec's [min, max], prompt tokens uniform in the vocabulary, all from
/// `seed` and `index` alone (the same request on every machine and replica).
GenerativeRequest MakeRequest(const v1::DecoderSpec& d, uint64_t seed, int64_t index);

/// What happened to one request (steady-clock ns).
struct GenerationTimes {
  int64_t first_token_ns = -1;
  int64_t last_token_ns = -1;
  int prompt_tokens = 0;
  int output_tokens = 0;
  std::vector<int64_t> gaps_ns;  // between successive tokens: output_tokens - 1 of them
};

class GenerativeServer final : public ServingTarget {
 public:
  GenerativeServer(const DecoderModel& decoder, int max_running, int instances,
                   std::function<GenerativeRequest(int64_t index)> requests);
  /// Abandons what is queued or running (answers after the drain time count
  /// for nothing), then stops the workers.
  ~GenerativeServer() override;

  void Issue(int64_t index, const std::function<void(int64_t)>& answered) override;

  /// One entry per decoding step: its size is the requests decoded in it.
  std::vector<ServedBatch> Steps() const;
  /// The answered requests' times, by index; a request is in it before it is answered.
  std::map<int64_t, GenerationTimes> Times() const;

 private:
  struct Waiting {
    int64_t index;
    std::function<void(int64_t)> answered;
  };
  struct Running;
  void Work(int instance);
  void Finish(Running& r, int instance);

  const DecoderModel& decoder_;
  const int max_running_;
  const std::function<GenerativeRequest(int64_t)> requests_;
  mutable absl::Mutex mu_;
  std::deque<Waiting> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<ServedBatch> steps_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, GenerationTimes> times_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

/// One answered request on the task's time axis.
struct ServedRequest {
  int64_t scheduled_ns = 0;
  int64_t latency_ns = 0;  // end to end, from the scheduled time
  int64_t ttft_ns = 0;     // first token, from the scheduled time
  int64_t tpot_ns = 0;     // (last token - first token) / (output tokens - 1)
  int prompt_tokens = 0;
  int output_tokens = 0;
};

/// Runs spec.serving's scenario with the decoder (built from the spec's
/// shapes and seed by the caller) at `qps`, at most `max_running` requests
/// decoding at once per instance: warm-up, the run, and its figures into
/// result.serving (the SERVE figures are the requests'; the agent's
/// generative figures: ITL, tokens/s, goodput). Appends every answered
/// request to `answered`, in schedule order.
absl::Status RunGenerative(const v1::JobSpec& spec, double qps, int max_running, const DecoderModel& decoder,
                           const std::string& what, const ServingControl& control, v1::TaskResult* result,
                           std::vector<ServedRequest>* answered);

}  // namespace hetbench::agent
