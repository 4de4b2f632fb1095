#pragma once
// The coordinator driven directly, shared by coordinator_test (jobs and the
// client API), coordinator_agents_test (sessions, leases, resume, fencing) and
// coordinator_ingest_test (samples, power, TaskDone): fake agent streams, a
// simulated clock and a real SQLite store. No sleeps: every wait is on a
// condition with a deadline.
#include "server/service/coordinator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "server/service/reactor_sink.h"
#include "server/store/sqlite_job_store.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wait.h"

namespace hetbench::server::coordinator_testing {

using ::testing::HasSubstr;

/// Holds back and merges what SendHeld gives it as the gRPC sink does
/// (ReactorSink): until Release, or ahead of the next Send or Close.
template <typename T>
class FakeSink final : public MessageSink<T> {
 public:
  void Send(T msg) override {
    absl::MutexLock l(&mu_);
    ReleaseLocked();
    if (!closed_) messages_.push_back(std::move(msg));
  }
  void SendHeld(T msg) override {
    absl::MutexLock l(&mu_);
    ++held_calls_;
    if (closed_ || (held_.has_value() && MergeHeld(&*held_, &msg))) return;
    ReleaseLocked();
    held_ = std::move(msg);
  }
  void Release() override {
    absl::MutexLock l(&mu_);
    ReleaseLocked();
  }
  void Close(const grpc::Status& status) override {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    ReleaseLocked();
    closed_ = true;
    status_ = status;
  }
  /// How many messages came through SendHeld, and whether one is held now.
  int held_calls() {
    absl::MutexLock l(&mu_);
    return held_calls_;
  }
  bool holding() {
    absl::MutexLock l(&mu_);
    return held_.has_value();
  }
  /// Waits until `pred(messages)` holds; false after 10 s.
  bool WaitFor(std::function<bool(const std::vector<T>&)> pred) {
    absl::MutexLock l(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(messages_); };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(10));
  }
  std::vector<T> messages() {
    absl::MutexLock l(&mu_);
    return messages_;
  }
  bool closed() {
    absl::MutexLock l(&mu_);
    return closed_;
  }
  grpc::Status status() {
    absl::MutexLock l(&mu_);
    return status_;
  }
  bool ReadsHeldBack() const override { return held_back_.load(); }
  /// As the gRPC sink reports it while its window or the ingest gate holds reads back.
  void set_reads_held_back(bool held) { held_back_.store(held); }

 private:
  std::atomic<bool> held_back_{false};
  absl::Mutex mu_;
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (held_.has_value() && !closed_) messages_.push_back(std::move(*held_));
    held_.reset();
  }

  std::vector<T> messages_ ABSL_GUARDED_BY(mu_);
  std::optional<T> held_ ABSL_GUARDED_BY(mu_);
  int held_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

using FakeAgentSink = FakeSink<v1::CoordinatorMessage>;

/// Every Assign the sink received, in order.
inline std::vector<v1::Assign> Assigns(FakeAgentSink& sink) {
  std::vector<v1::Assign> out;
  for (const auto& m : sink.messages()) {
    if (m.has_assign()) out.push_back(m.assign());
  }
  return out;
}

/// The first Rejected the sink saw, once it sees one (empty after the wait: none came).
inline std::optional<v1::Rejected> WaitForRejected(FakeSink<v1::CoordinatorMessage>& sink) {
  sink.WaitFor([](auto& v) {
    for (const auto& x : v) {
      if (x.has_rejected()) return true;
    }
    return false;
  });
  for (const auto& x : sink.messages()) {
    if (x.has_rejected()) return x.rejected();
  }
  return std::nullopt;
}

inline int CountAssigns(const std::vector<v1::CoordinatorMessage>& m) {
  int n = 0;
  for (const auto& x : m) n += x.has_assign() ? 1 : 0;
  return n;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void TearDown() override { Close(); }
  void Open() {
    store_ = *SqliteJobStore::Open(dir_.path() + "/jobs.db");
    coordinator_ = std::make_unique<Coordinator>(store_.get(), &metrics_, &clock_, options_);
    ASSERT_TRUE(coordinator_->Start().ok());
  }
  void Close() {
    if (coordinator_) coordinator_->Stop();
    coordinator_.reset();
    store_.reset();
  }

  absl::StatusOr<v1::Job> Submit(v1::JobSpec spec) {
    absl::Notification done;
    absl::StatusOr<v1::Job> result;
    coordinator_->api().SubmitJob(std::move(spec), [&](absl::StatusOr<v1::Job> j) {
      result = std::move(j);
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }
  v1::Job Get(const std::string& id) {
    absl::Notification done;
    v1::Job job;
    coordinator_->api().GetJob(id, [&](absl::StatusOr<v1::Job> j) {
      if (j.ok()) {
        job = *std::move(j);
      } else {
        ADD_FAILURE() << "GetJob(" << id << "): " << j.status();
      }
      done.Notify();
    });
    done.WaitForNotification();
    return job;
  }
  std::vector<v1::Job> List() {
    absl::Notification done;
    std::vector<v1::Job> jobs;
    coordinator_->api().ListJobs(JobFilter{1000}, [&](absl::StatusOr<JobPage> page) {
      // Newest first; tests read them oldest first.
      if (page.ok()) jobs.assign(page->jobs.rbegin(), page->jobs.rend());
      done.Notify();
    });
    done.WaitForNotification();
    return jobs;
  }

  std::vector<v1::AgentInfo> Agents() {
    absl::Notification done;
    std::vector<v1::AgentInfo> agents;
    coordinator_->api().ListAgents([&](std::vector<v1::AgentInfo> a) {
      agents = std::move(a);
      done.Notify();
    });
    done.WaitForNotification();
    return agents;
  }

  /// Connects a fake agent with `devices` CPU devices; returns its session id.
  uint64_t Connect(const std::string& agent_id, std::shared_ptr<FakeAgentSink> sink, int devices = 1,
                   const std::vector<v1::ResumeTask>& resume = {}, bool ack_lists = false) {
    uint64_t session = coordinator_->NewSessionId();
    v1::AgentMessage m;
    m.mutable_hello()->set_agent_id(agent_id);
    m.mutable_hello()->set_ack_lists(ack_lists);
    m.mutable_hello()->set_gang_rounds(true);  // as hetbench-agent says
    for (const v1::ResumeTask& r : resume) *m.mutable_hello()->add_resume() = r;
    for (int i = 0; i < devices; ++i) {
      v1::Device* d = m.mutable_hello()->add_devices();
      d->set_id("cpu" + std::to_string(i));
      d->set_kind(v1::DEVICE_KIND_CPU);
    }
    coordinator_->OnAgentMessage(session, sink, m);
    EXPECT_TRUE(sink->WaitFor([](auto& v) { return !v.empty() && v[0].has_welcome(); }));
    return session;
  }

  void SendSamples(uint64_t session, std::shared_ptr<FakeAgentSink> sink, const v1::Assign& a, uint64_t seq,
                   v1::Phase phase, std::vector<int64_t> durations) {
    v1::AgentMessage m;
    v1::SampleBatch* b = m.mutable_samples();
    b->set_task_id(a.task_id());
    b->set_attempt(a.attempt());
    b->set_seq(seq);
    b->set_phase(phase);
    int64_t t = 0;
    for (int64_t d : durations) {
      b->add_start_ns(t);
      b->add_duration_ns(d);
      b->add_items(a.batch_size());
      t += d;
    }
    coordinator_->OnAgentMessage(session, sink, m);
  }

  void SendDone(uint64_t session, std::shared_ptr<FakeAgentSink> sink, const v1::Assign& a, uint64_t batches,
                int64_t samples, v1::TaskState state = v1::TASK_STATE_SUCCEEDED, uint64_t power_batches = 0,
                int64_t min_train_steps = 1) {
    v1::AgentMessage m;
    v1::TaskDone* d = m.mutable_done();
    d->set_task_id(a.task_id());
    d->set_attempt(a.attempt());
    d->set_state(state);
    d->set_batches_sent(batches);
    d->set_samples_sent(samples);
    d->set_power_batches_sent(power_batches);
    d->mutable_result()->set_test_accuracy(0.85);
    d->mutable_result()->set_min_train_steps(min_train_steps);
    coordinator_->OnAgentMessage(session, sink, m);
  }

  /// A default job whose one task is assigned to a freshly connected agent.
  struct Started {
    std::string job_id;
    uint64_t session = 0;
    std::shared_ptr<FakeAgentSink> sink;
    v1::Assign assign;
  };
  Started StartOneTask(const std::string& agent_id = "a1") {
    Started out;
    auto job = Submit(v1::JobSpec());
    EXPECT_TRUE(job.ok()) << job.status();
    if (job.ok()) out.job_id = job->id();
    out.sink = std::make_shared<FakeAgentSink>();
    out.session = Connect(agent_id, out.sink);
    EXPECT_TRUE(out.sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
    const std::vector<v1::Assign> assigns = Assigns(*out.sink);
    if (!assigns.empty()) out.assign = assigns.back();
    return out;
  }

  v1::Job WaitForJobState(const std::string& id, v1::JobState state) {
    for (int i = 0; i < 1000; ++i) {
      v1::Job j = Get(id);
      if (j.state() == state) return j;
      coordinator_->RunSync([] {});
    }
    return Get(id);
  }

  /// Waits (up to 10 s) for task `index` of job `id` to reach `state`. A
  /// task's end is aggregated off the loop, so it can trail the job's state.
  v1::Job WaitForTaskState(const std::string& id, int index, v1::TaskState state) {
    v1::Job j;
    hetbench::testing::WaitFor(
        [&] {
          coordinator_->RunSync([] {});
          j = Get(id);
          return j.tasks(index).state() == state;
        },
        absl::Seconds(10), absl::Milliseconds(1));
    return j;
  }

  hetbench::testing::TempDir dir_{"hetbench-coord"};
  SimulatedClock clock_;
  Metrics metrics_;
  CoordinatorOptions options_;
  std::unique_ptr<SqliteJobStore> store_;
  std::unique_ptr<Coordinator> coordinator_;
};

inline v1::ResumeTask Resume(const v1::Assign& a, bool finished = false) {
  v1::ResumeTask r;
  r.set_task_id(a.task_id());
  r.set_attempt(a.attempt());
  r.set_finished(finished);
  return r;
}

inline int CountAcks(const std::vector<v1::CoordinatorMessage>& m, bool done) {
  int n = 0;
  for (const auto& x : m) n += x.has_ack() && x.ack().done() == done ? 1 : 0;
  return n;
}

inline const v1::Cancel* FindCancel(const std::vector<v1::CoordinatorMessage>& m) {
  for (const auto& x : m) {
    if (x.has_cancel()) return &x.cancel();
  }
  return nullptr;
}

// Batches are stored by the batch writer after the loop has handed them on;
// a TaskDone right behind them waits for their commit, then is judged on the
// complete counts (without the wait it would see fewer and fail the task).
// Every batch is acked once, after its commit, and the TaskDone last.
inline v1::PowerBatch Power(const v1::Assign& a, uint64_t seq, const std::string& sensor, v1::PowerSource source,
                     std::vector<std::pair<int64_t, double>> readings, bool counter) {
  v1::PowerBatch b;
  b.set_task_id(a.task_id());
  b.set_attempt(a.attempt());
  b.set_seq(seq);
  b.mutable_sensor()->set_name(sensor);
  b.mutable_sensor()->set_source(source);
  b.mutable_sensor()->set_device_id("cpu0");
  b.mutable_sensor()->set_available(true);
  b.mutable_sensor()->set_update_period_seconds(0.1);
  b.mutable_sensor()->set_has_energy_counter(counter);
  if (source == v1::POWER_SOURCE_MODELED) b.set_assumptions("MODELED, not measured: test");
  for (auto [t, v] : readings) {
    b.add_t_ns(t);
    b.add_watts(counter ? NAN : v);
    b.add_joules(counter ? v : NAN);
  }
  return b;
}

}  // namespace hetbench::server::coordinator_testing
