// Broken streams between the agent and the coordinator, cut by a TCP proxy
// while tasks run: resumed from the last acknowledged batch, exactly once
// (fixture: loopback_fixture.h).
#include "tests/integration/loopback_fixture.h"

namespace hetbench::loopback_testing {
namespace {

using ::hetbench::testing::WaitFor;

class StreamCutTest : public LoopbackTest {
 protected:
  bool ThroughProxy() const override { return true; }

  /// The value of an unlabelled counter of the coordinator's /metrics registry.
  double Counter(const std::string& family) {
    for (const auto& f : server_->metrics().registry()->Collect()) {
      if (f.name == family && !f.metric.empty()) return f.metric[0].counter.value;
    }
    return -1;
  }
};

// Stream resume (#7): the link between agent and coordinator is cut again and
// again while a task runs. The agent keeps training, reconnects, lists the
// attempt in its Hello and sends what was not acknowledged; the coordinator
// re-binds the attempt. The task finishes as attempt 1 with every batch stored
// exactly once: what was received equals what was sent.
TEST_F(StreamCutTest, AStreamCutAgainAndAgainResumesFromTheLastAcknowledgedBatch) {
  ASSERT_TRUE(WaitForConnections(1));
  constexpr int kSteps = 1500, kInfer = 40;
  CliResult submit = SubmitExactJob(kSteps, kInfer);
  ASSERT_EQ(submit.code, 0) << submit.err;
  std::mt19937 rng(7);
  int cuts = 0;
  int64_t welcomed_at_cut = 0;  // cut a stream only once it is welcomed (its Hello, and so its resume, processed)
  v1::Job job;
  const absl::Time deadline = absl::Now() + absl::Minutes(4);
  for (;;) {
    job = GetJob("job-000001");
    if (IsTerminal(job.state()) || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(150, 450)(rng)));
    const int64_t welcomed = agent_->counters().connections.load();
    if (welcomed > welcomed_at_cut && GetJob("job-000001").tasks(0).state() == v1::TASK_STATE_RUNNING &&
        proxy_->CutAll() > 0) {
      ++cuts;
      welcomed_at_cut = welcomed;
    }
  }
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << Describe(job.tasks(0));
  const v1::Task& task = job.tasks(0);
  EXPECT_EQ(task.attempt(), 1) << "a cut must not cost the attempt";
  EXPECT_GE(cuts, 8) << "the task ran too briefly to be cut often";
  // Every cut while the task ran was resumed, except one that came after the
  // agent's last message (the task had ended but the job was not seen yet).
  EXPECT_GE(task.resumes(), cuts - 1);

  auto stored = server_->store().LoadSampleBatches(task.id(), 1);
  ASSERT_TRUE(stored.ok());
  std::vector<v1::SampleBatch> sent;
  {
    absl::MutexLock l(&mu_);
    sent = sent_;
  }
  ASSERT_EQ(stored->size(), sent.size());
  std::set<uint64_t> seqs;
  int64_t train = 0, infer = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ((*stored)[i].SerializeAsString(), sent[i].SerializeAsString()) << "batch " << i;
    EXPECT_TRUE(seqs.insert((*stored)[i].seq()).second) << "seq " << (*stored)[i].seq() << " stored twice";
    ((*stored)[i].phase() == v1::PHASE_TRAIN ? train : infer) += (*stored)[i].duration_ns_size();
  }
  EXPECT_EQ(train, kSteps);
  EXPECT_EQ(infer, kInfer);
  EXPECT_EQ(task.result().samples_stored(), kSteps + kInfer);
  // The cuts did catch messages in flight: some went again, and those the
  // coordinator already had were recognised rather than stored twice.
  EXPECT_GT(agent_->counters().messages_resent.load(), 0);
  // Sent as compact columns once a stream was welcomed; what went again
  // before its Welcome went as arrays: both forms are in what was stored.
  EXPECT_GT(agent_->counters().sample_batches_as_columns.load(), 0);
  EXPECT_EQ(Counter("hetbench_tasks_resumed_total"), task.resumes());
  CliResult shown = Cli({"--server", address_, "get", "job", "job-000001"});
  EXPECT_THAT(shown.out, HasSubstr(absl::StrCat("resumed after ", task.resumes(), " broken stream(s)")));
  std::printf(
      "stream cut %d times while the task ran (%ld TCP connections); %d resumes; attempt %d; "
      "%zu batches / %ld samples sent, %zu / %ld stored, 0 duplicates; %ld messages sent again, "
      "%.0f of them already stored\n",
      cuts, static_cast<long>(proxy_->connections()), task.resumes(), task.attempt(), sent.size(),
      static_cast<long>(train + infer), stored->size(), static_cast<long>(task.result().samples_stored()),
      static_cast<long>(agent_->counters().messages_resent.load()), Counter("hetbench_sample_batches_duplicate_total"));
}

// The end of a task on a link that dies unseen: the agent finishes, builds its
// TaskDone (counts of the batches it made) and writes it, but the coordinator
// hears nothing of the last part of the task, and then the link is cut. The
// agent, still holding the task, must not make further batches (power
// readings taken after the end): on the next stream it sends again exactly
// what the TaskDone counts, and the task succeeds as attempt 1. (Found by
// e2e.chaos: a power batch made after the TaskDone, sent again before it on
// resume, failed a task with "stored 3 of 2 batches".)
TEST_F(StreamCutTest, WhatTheAgentSendsAgainAfterItsTaskEndedIsExactlyWhatItsTaskDoneCounts) {
  ASSERT_TRUE(WaitForConnections(1));
  // Long enough to be seen measuring on an idle machine (300 steps took 1 s:
  // a single progress report fell in the window).
  CliResult submit = SubmitExactJob(1000, 10);
  ASSERT_EQ(submit.code, 0) << submit.err;
  ASSERT_TRUE(WaitUntilMeasuring(200));
  proxy_->SetSwallowingClientBytes(true);  // from here the coordinator hears nothing
  ASSERT_TRUE(WaitFor([&] { return agent_->counters().tasks_finished.load() > 0; }, absl::Minutes(1), absl::Milliseconds(50)));
  ASSERT_EQ(agent_->counters().tasks_finished.load(), 1);
  // Power readings go on after the task's end: let the pump run 60 passes
  // (3 s at its 50 ms interval, three power send intervals), each of which
  // would send a reading made after the end if one were kept.
  const int64_t passes = agent_->counters().pump_passes.load();
  ASSERT_TRUE(WaitFor([&] { return agent_->counters().pump_passes.load() >= passes + 60; }, absl::Seconds(30)));
  EXPECT_EQ(GetJob("job-000001").tasks(0).state(), v1::TASK_STATE_RUNNING);  // the TaskDone was swallowed
  proxy_->SetSwallowingClientBytes(false);
  EXPECT_GT(proxy_->CutAll(), 0);
  const v1::Job job = WaitUntilEnded(absl::Minutes(1));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << Describe(job.tasks(0));
  EXPECT_EQ(job.tasks(0).attempt(), 1);
  EXPECT_EQ(job.tasks(0).resumes(), 1);
  EXPECT_EQ(job.tasks(0).result().samples_stored(), 1010);
  auto power = server_->store().LoadPowerBatches("job-000001-t0", 1);
  ASSERT_TRUE(power.ok());
  EXPECT_FALSE(power->empty());
  for (size_t i = 0; i < power->size(); ++i) EXPECT_EQ((*power)[i].seq(), i);
  std::printf("TaskDone swallowed, link cut: resumed; %zu power batches and 1010 samples stored, as counted\n",
              power->size());
}

class ShortLeaseStreamCutTest : public StreamCutTest {
 protected:
  ShortLeaseStreamCutTest() { lease_seconds_ = 2.0; }
};

// The other side of resume: an agent cut off for longer than its lease. The
// coordinator takes the attempt back at the lease; the agent, without contact
// for a whole lease, stops it by itself; when the link returns it does not
// claim it, and the next attempt runs on the same device, apart from the first.
TEST_F(ShortLeaseStreamCutTest, AnAgentCutOffLongerThanItsLeaseStopsItsAttemptAndTheTaskRunsAgain) {
  ASSERT_TRUE(WaitForConnections(1));
  CliResult submit = Cli({"--server", address_, "submit", "-b", "32", "--min-steps", "100000", "--min-duration", "0"});
  ASSERT_EQ(submit.code, 0) << submit.err;
  ASSERT_TRUE(WaitUntilMeasuring(20, /*attempt=*/1));
  proxy_->SetRefusing(true);
  const absl::Time cut_at = absl::Now();  // printed, not asserted: the lease's bound is checked on a
                                          // driven clock (CoordinatorTest.AnAgentThatDoesNotComeBackWithinTheLeaseLosesItsTask)
  // Meanwhile `get agents` shows the agent disconnected, its device held.
  CliResult agents;
  for (int i = 0; i < 20; ++i) {
    agents = Cli({"--server", address_, "get", "agents"});
    if (absl::StrContains(agents.out, "disconnected;")) break;
  }
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("loopback-agent +cpu0 .* busy, disconnected"));
  EXPECT_THAT(agents.out, ::testing::ContainsRegex("\nloopback-agent +cpu0 +[0-9-]+ [0-9:]+Z +stream closed by"));
  std::printf("hetbench get agents, during the cut:\n%s", agents.out.c_str());
  v1::Job job;
  WaitFor(
      [&] {
        job = GetJob("job-000001");
        return job.tasks(0).state() != v1::TASK_STATE_RUNNING;
      },
      absl::Seconds(10), absl::Milliseconds(25));
  const double requeue_s = absl::ToDoubleSeconds(absl::Now() - cut_at);
  ASSERT_EQ(job.tasks(0).state(), v1::TASK_STATE_QUEUED);
  // Taken back at the lease, not at the broken stream (the reason says which).
  EXPECT_THAT(job.tasks(0).error(), HasSubstr("did not resume within the lease"));
  // The agent's own lease runs out too: it stops attempt 1 by itself.
  ASSERT_TRUE(WaitFor([&] { return agent_->counters().attempts_abandoned.load() >= 1; }, absl::Seconds(10)));
  proxy_->SetRefusing(false);
  ASSERT_TRUE(WaitUntilMeasuring(20, /*attempt=*/2)) << GetJob("job-000001").tasks(0).error();
  job = GetJob("job-000001");
  EXPECT_EQ(job.tasks(0).device_id(), "cpu0");  // the device was free: attempt 1 had stopped
  EXPECT_EQ(job.tasks(0).resumes(), 0);
  auto first = server_->store().LoadSampleBatches("job-000001-t0", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->empty());  // attempt 1's samples stay under attempt 1
  CliResult cancel = Cli({"--server", address_, "cancel", "job-000001"});
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  std::printf(
      "cut off for longer than the %.1f s lease: attempt 1 taken back after %.2f s, attempt 2 ran on the "
      "same device\n",
      lease_seconds_, requeue_s);
}

}  // namespace
}  // namespace hetbench::loopback_testing
