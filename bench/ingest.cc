// Sample ingestion: the coordinator's path (event loop, exactly-once store,
// group commit, ack after commit) against bare SQLite inserts of the same
// batches through the same JobStore in one transaction. Prints samples/s and
// the ratio. With --pg URL (a PostgreSQL database the bench may write to),
// also the coordinator's path on PostgreSQL (sample batches as binary COPY,
// the default; multi-row INSERTs; pipelined INSERTs; one statement per batch), after
// SQLite's in each of --rounds, and the ratios PostgreSQL / SQLite of each round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/machine.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/ingest/step_aggregator.h"
#include "server/service/coordinator.h"
#include "server/store/pg_job_store.h"
#include "server/store/pg_leader.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/sample_batches.h"

namespace {

using hetbench::server::MessageSink;
namespace v1 = hetbench::v1;

class CountingSink final : public MessageSink<v1::CoordinatorMessage> {
 public:
  void Send(v1::CoordinatorMessage msg) override {
    absl::MutexLock l(&mu_);
    if (msg.has_ack()) ++acks_;
    if (msg.has_assign()) assign_ = msg.assign();
  }
  void Close(const grpc::Status&) override {}
  bool WaitAcks(int64_t n) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return acks_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(600));
  }
  bool WaitAssign() {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !assign_.task_id().empty(); };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(10));
  }
  v1::Assign assign() {
    absl::MutexLock l(&mu_);
    return assign_;
  }

 private:
  absl::Mutex mu_;
  int64_t acks_ ABSL_GUARDED_BY(mu_) = 0;
  v1::Assign assign_ ABSL_GUARDED_BY(mu_);
};

// Steps of ~1 us, 128 samples each, a batch per millisecond.
v1::SampleBatch MakeBatch(const std::string& task, int attempt, uint64_t seq, int n) {
  hetbench::testing::BatchShape shape;
  shape.seq_stride_ns = 1'000'000;
  shape.step_ns = 1000;
  shape.duration_ns = 900;
  shape.duration_cycle = 50;
  shape.items = 128;
  return hetbench::testing::SampleBatchOf(task, attempt, seq, n, shape);
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The coordinator's path on `store`: one agent streaming `batches` as fast as
// the coordinator lets it; seconds until every batch is acknowledged.
double CoordinatorSeconds(std::unique_ptr<hetbench::server::JobStore> store, int batches, int per_batch) {
  hetbench::server::Metrics metrics;
  hetbench::RealClock clock;
  hetbench::server::Coordinator coordinator(store.get(), &metrics, &clock, {});
  (void)coordinator.Start();
  auto sink = std::make_shared<CountingSink>();
  coordinator.api().SubmitJob(v1::JobSpec(), [](absl::StatusOr<v1::Job>) {});
  const uint64_t session = coordinator.NewSessionId();
  v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("bench");
  auto* d = hello.mutable_hello()->add_devices();
  d->set_id("cpu0");
  d->set_kind(v1::DEVICE_KIND_CPU);
  coordinator.OnAgentMessage(session, sink, hello);
  if (!sink->WaitAssign()) return -1;
  const v1::Assign a = sink->assign();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) {
    v1::AgentMessage m;
    *m.mutable_samples() = MakeBatch(a.task_id(), a.attempt(), i, per_batch);
    coordinator.OnAgentMessage(session, sink, std::move(m));
  }
  const bool acked = sink->WaitAcks(batches);
  const double seconds = Seconds(t0);
  coordinator.Stop();
  return acked ? seconds : -1;
}

// A PostgreSQL store on `url`, writing as the leader a fresh lock makes.
struct PgSide {
  std::unique_ptr<hetbench::server::PgLeaderLock> lock;
  std::unique_ptr<hetbench::server::JobStore> store;
};
absl::StatusOr<PgSide> OpenPg(const std::string& url, hetbench::server::PgStoreOptions::BatchWrites writes) {
  hetbench::server::PgLeaderOptions lock_options;
  lock_options.url = url;
  lock_options.holder = "bench-ingest";
  auto lock = hetbench::server::PgLeaderLock::Connect(lock_options);
  if (!lock.ok()) return lock.status();
  auto epoch = (*lock)->Acquire(nullptr, nullptr);
  if (!epoch.ok()) return epoch.status();
  hetbench::server::PgStoreOptions options;
  options.url = url;
  options.epoch = (*lock)->epoch();
  options.batch_writes = writes;
  auto store = hetbench::server::PgJobStore::Open(options);
  if (!store.ok()) return store.status();
  return PgSide{std::move(*lock), std::move(*store)};
}

}  // namespace

int main(int argc, char** argv) {
  int batches = 2000, per_batch = 1000, rounds = 2;
  std::string pg_url;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batches")) batches = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--samples-per-batch")) per_batch = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--pg")) pg_url = argv[i + 1];
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
  }
  const auto dir = std::filesystem::temp_directory_path() / "hetbench-ingest-bench";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  // Bare: the store alone, one transaction.
  double bare_seconds;
  {
    auto store = *hetbench::server::SqliteJobStore::Open((dir / "bare.db").string());
    auto t0 = std::chrono::steady_clock::now();
    (void)store->Begin();
    for (int i = 0; i < batches; ++i) (void)store->PutSampleBatch(MakeBatch("bare-t0", 1, i, per_batch));
    (void)store->Commit();
    bare_seconds = Seconds(t0);
  }

  // Coordinator: one agent streaming batches as fast as it can.
  const double coord_seconds = CoordinatorSeconds(
      *hetbench::server::SqliteJobStore::Open((dir / "coord.db").string()), batches, per_batch);
  const double total = static_cast<double>(batches) * per_batch;
  std::printf("CPU: %s\n", hetbench::bench::CpuModel().c_str());
  std::printf("%d batches x %d samples, SQLite WAL synchronous=FULL\n", batches, per_batch);
  std::printf("%-28s %14s %12s\n", "path", "samples/s", "seconds");
  std::printf("%-28s %14.0f %12.3f\n", "bare store, one transaction", total / bare_seconds, bare_seconds);
  std::printf("%-28s %14.0f %12.3f\n", "coordinator, acked", total / coord_seconds, coord_seconds);
  std::printf("ratio coordinator/bare throughput: %.3f\n", bare_seconds / coord_seconds);

  // PostgreSQL against SQLite, both through the coordinator, A B A B. Each
  // round's PostgreSQL run writes a new job (the coordinator numbers it).
  for (int round = 0; !pg_url.empty() && round < rounds; ++round) {
    const std::string db = (dir / absl::StrCat("round", round, ".db")).string();
    const double sqlite_s = CoordinatorSeconds(*hetbench::server::SqliteJobStore::Open(db), batches, per_batch);
    // COPY (the store's default), then multi-row INSERTs, pipelined INSERTs,
    // one statement per batch.
    using Writes = hetbench::server::PgStoreOptions::BatchWrites;
    const Writes modes[] = {Writes::kCopy, Writes::kMultiRow, Writes::kPipelined, Writes::kOneByOne};
    double pg_s[4] = {0, 0, 0, 0};
    for (int m = 0; m < 4; ++m) {
      auto pg = OpenPg(pg_url, modes[m]);
      if (!pg.ok()) {
        std::printf("RESULT pg error=%s\n", std::string(pg.status().message()).c_str());
        return 1;
      }
      pg_s[m] = CoordinatorSeconds(std::move(pg->store), batches, per_batch);
    }
    std::printf(
        "RESULT ingest round=%d sqlite=%.0f samples/s postgresql_copy=%.0f samples/s postgresql_multirow=%.0f "
        "samples/s postgresql_pipelined=%.0f samples/s postgresql_one_by_one=%.0f samples/s ratio_pg_sqlite=%.3f "
        "(multi-row: %.3f, pipelined: %.3f, one by one: %.3f)\n",
        round, total / sqlite_s, total / pg_s[0], total / pg_s[1], total / pg_s[2], total / pg_s[3], sqlite_s / pg_s[0],
        sqlite_s / pg_s[1], sqlite_s / pg_s[2], sqlite_s / pg_s[3]);
  }

  // What a task's end costs the loop: its phases' stats from the aggregate
  // built at ingest, whatever the sample count (exact up to the limit, then
  // the histogram).
  std::printf("%-28s %14s %12s\n", "task end (aggregate)", "steps", "ms");
  for (int64_t steps :
       {int64_t{10'000}, int64_t{hetbench::server::PhaseAccumulator::kExactLimit}, int64_t{10'000'000}}) {
    hetbench::server::TaskAggregate agg;
    for (int64_t done = 0; done < steps; done += per_batch) {
      agg.Add(MakeBatch("t", 1, static_cast<int>(done / per_batch),
                        static_cast<int>(std::min<int64_t>(per_batch, steps - done))));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const v1::TimingStats stats = agg.phases.begin()->second.Finish();
    std::printf("%-28s %14lld %12.3f\n", stats.quantile_relative_error() > 0 ? "  histogram" : "  exact",
                static_cast<long long>(steps), Seconds(t0) * 1e3);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
