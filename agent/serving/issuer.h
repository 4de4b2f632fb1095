#pragma once
/// The load generator of a serving run: issues queries at the times of a
/// schedule made before the run (common/serving_stats.h), never waiting for
/// answers (open loop, as LoadGen's Server scenario), and records per query
/// when it was scheduled, issued and answered. Latency is answered minus
/// scheduled: an issuer or a server that stalls shows the stall in every
/// query scheduled during it (no coordinated omission), and issued minus
/// scheduled (the issue delay) says how well the issuer kept up.
///
/// Threads: RunOpenLoop issues on the calling thread; the target may answer
/// on any thread. Times are steady-clock ns from the run's start.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"

namespace hetbench::agent {

/// What the issuer sends queries to: a serving loop on a device, or a fake.
class ServingTarget {
 public:
  virtual ~ServingTarget() = default;
  /// Takes query `index`; calls `answered(index)` once it is answered, on
  /// any thread, possibly before Issue returns. Should not block the issuer
  /// (a target that does delays the queries after it, which their latency shows).
  virtual void Issue(int64_t index, const std::function<void(int64_t index)>& answered) = 0;
  /// Takes queries first .. first + count - 1 at once (a multi_stream
  /// query's samples): a batcher sees them together. By default one by one.
  virtual void IssueMany(int64_t first, int count, const std::function<void(int64_t index)>& answered) {
    for (int j = 0; j < count; ++j) Issue(first + j, answered);
  }
};

/// Answers each query inside Issue: the issuer's own cost alone, with no
/// worker wake-up per query (what MeasureIssuerCeiling and bench_serving's
/// null runs drive).
class InlineNullTarget final : public ServingTarget {
 public:
  void Issue(int64_t index, const std::function<void(int64_t index)>& answered) override { answered(index); }
};

/// LoadGen's MultiStream query: `samples` samples issued together to
/// `inner` (IssueMany; query q's are q * samples + j), the query answered
/// when its last sample is. Threads: as the inner target's.
class FanOutTarget final : public ServingTarget {
 public:
  FanOutTarget(ServingTarget& inner, int samples);
  void Issue(int64_t index, const std::function<void(int64_t index)>& answered) override;

 private:
  struct Outstanding;
  ServingTarget& inner_;
  const int samples_;
};

struct QueryTimes {
  int64_t scheduled_ns = 0;
  int64_t issued_ns = 0;
  int64_t answered_ns = -1;  // -1: not answered within the drain time
  int64_t latency_ns() const { return answered_ns < 0 ? -1 : answered_ns - scheduled_ns; }
  int64_t issue_delay_ns() const { return issued_ns - scheduled_ns; }
};

/// The issuer's default spin before each query (RunOpenLoop).
inline constexpr absl::Duration kIssuerSpin = absl::Microseconds(20);

struct OpenLoopRun {
  std::vector<QueryTimes> queries;  // in schedule order
  int64_t unanswered = 0;           // queries with no answer after `drain`
  int64_t run_start_ns = 0;         // the steady clock at the run's start
};

/// Issues query i at schedule[i] (ns from the start; ascending), sleeping
/// until shortly before and spinning the last `spin` for precision (20 us:
/// on the development VM a wake comes 12-25 us late at p50, and 20 us keeps
/// the issue delay p99 under 50 us for ~2 us of CPU per query above what the
/// sleep itself costs; 50 us bought ~10 us less delay for ~20 us more CPU,
/// taken from the system under test: bench_serving --spin-us 0 20 50); then
/// waits at most `drain` for the outstanding answers. A set `cancel` stops
/// the issuing (the run then holds the queries issued so far); `issued`,
/// when given, counts the queries issued (progress for another thread).
/// The start is now, or `start_ns` on the steady clock when given (a
/// replica's agreed start; queries due before the call are late, which
/// their issue delay and latency show).
OpenLoopRun RunOpenLoop(const std::vector<int64_t>& schedule, ServingTarget& target, absl::Duration drain,
                        absl::Duration spin = kIssuerSpin, const std::atomic<bool>* cancel = nullptr,
                        std::atomic<int64_t>* issued = nullptr, int64_t start_ns = 0);

/// The most the issuer offers on this machine: `queries` queries all due at
/// once, issued back to back (no sleep, no spin) to a target that answers
/// inside the call; its rate and the issuing thread's CPU per query (what
/// issuing and recording one costs). A null serving run reports it.
struct IssuerCeiling {
  double qps = 0;
  double cpu_us_per_query = 0;
};
IssuerCeiling MeasureIssuerCeiling(int64_t queries);

/// LoadGen's SingleStream: one query outstanding at a time, the next issued
/// as soon as the last is answered (its scheduled time is its issue time),
/// until at least `min_queries` and `min_duration` (or `max_queries`, or a
/// `cancel`). A query not answered within `timeout` ends the run unanswered.
struct ClosedLoopLimits {
  int64_t min_queries = 1;
  absl::Duration min_duration = absl::ZeroDuration();
  int64_t max_queries = 1'000'000;
  absl::Duration timeout = absl::Seconds(10);
};
OpenLoopRun RunClosedLoop(ServingTarget& target, const ClosedLoopLimits& limits,
                          const std::atomic<bool>* cancel = nullptr, std::atomic<int64_t>* issued = nullptr);

}  // namespace hetbench::agent
