// What agents send about a task: sample and power batches stored once and
// aggregated, TaskDone judged against them, malformed messages rejected
// (fixture: coordinator_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "common/sample_codec.h"
#include "tests/unit/coordinator_fixture.h"

namespace hetbench::server::coordinator_testing {
namespace {

TEST_F(CoordinatorTest, JobRunsOnAConnectedAgentAndAggregatesStoredSamples) {
  v1::JobSpec spec;
  spec.add_batch_sizes(32);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_QUEUED);  // no agent yet

  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  EXPECT_EQ(a.batch_size(), 32);
  EXPECT_EQ(a.attempt(), 1);
  EXPECT_EQ(a.model(), "mlp");

  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 20, 30, 40});
  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 20, 30, 40});  // a retry: must not be stored twice
  SendSamples(s, sink, a, 1, v1::PHASE_INFER, {5, 5});
  SendDone(s, sink, a, 2, 6);
  v1::Job done = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.DebugString();
  const v1::TaskResult& r = done.tasks(0).result();
  EXPECT_EQ(r.samples_stored(), 6);
  ASSERT_EQ(r.phases_size(), 2);
  EXPECT_EQ(r.phases(0).phase(), v1::PHASE_TRAIN);
  EXPECT_EQ(r.phases(0).stats().count(), 4);
  EXPECT_DOUBLE_EQ(r.phases(0).stats().p50_ns(), 25);
  EXPECT_EQ(r.phases(1).stats().count(), 2);
  EXPECT_DOUBLE_EQ(r.test_accuracy(), 0.85);

  int acks = 0, done_acks = 0;
  for (auto& m : sink->messages()) {
    if (m.has_ack()) (m.ack().done() ? done_acks : acks) += 1;
  }
  EXPECT_EQ(acks, 3);  // the duplicate is acknowledged too, so the agent stops resending
  EXPECT_EQ(done_acks, 1);
}

TEST_F(CoordinatorTest, MissingSamplesFailTheTaskWithTheCounts) {
  v1::JobSpec spec;
  ASSERT_TRUE(Submit(spec).ok());
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  SendSamples(s, sink, a, 0, v1::PHASE_TRAIN, {10, 20});
  SendDone(s, sink, a, 2, 5);  // claims more than it sent
  v1::Job j = WaitForJobState(a.task_id().substr(0, 10), v1::JOB_STATE_FAILED);
  ASSERT_EQ(j.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("stored 1 of 2 batches and 2 of 5 samples"));
}

TEST_F(CoordinatorTest, ATaskDoneRightBehindItsBatchesWaitsForThemToBeStored) {
  const Started t = StartOneTask();
  constexpr int kBatches = 200;
  for (int seq = 0; seq < kBatches; ++seq) {
    SendSamples(t.session, t.sink, t.assign, seq, v1::PHASE_TRAIN, std::vector<int64_t>(100, 1000 + seq));
  }
  SendDone(t.session, t.sink, t.assign, kBatches, 100 * kBatches);
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAcks(v, true) == 1; }));
  coordinator_->RunSync([] {});
  const std::vector<v1::CoordinatorMessage> sent = t.sink->messages();
  EXPECT_EQ(CountAcks(sent, false), kBatches);
  EXPECT_TRUE(sent.back().has_ack() && sent.back().ack().done()) << "the TaskDone's ack comes after every batch's";
  const v1::Task task = Get(t.job_id).tasks(0);
  ASSERT_EQ(task.state(), v1::TASK_STATE_SUCCEEDED) << task.error();
  EXPECT_EQ(task.result().samples_stored(), 100 * kBatches);
  EXPECT_EQ(task.result().phases(0).stats().count(), 100 * kBatches);
  auto stored = store_->LoadSampleBatches(t.assign.task_id(), 1);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), static_cast<size_t>(kBatches));
}

// An agent that reads ack lists (Hello.ack_lists) gets the acks of one
// commit held back and sent as one list per stream once the commit's answers
// are done; every ack still comes, in the order of the batches, and the
// TaskDone's after them. An agent that does not declare them gets each alone.
TEST_F(CoordinatorTest, AnAgentThatReadsAckListsGetsEachCommitsAcksAsOneListInOrder) {
  for (const bool lists : {true, false}) {
    SCOPED_TRACE(lists ? "ack lists" : "single acks");
    auto job = Submit(v1::JobSpec());
    ASSERT_TRUE(job.ok()) << job.status();
    auto sink = std::make_shared<FakeAgentSink>();
    const uint64_t s = Connect(lists ? "lists" : "single", sink, 1, {}, lists);
    ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
    const v1::Assign a = Assigns(*sink).back();
    constexpr int kBatches = 300;
    for (int seq = 0; seq < kBatches; ++seq) {
      SendSamples(s, sink, a, seq, v1::PHASE_TRAIN, std::vector<int64_t>(50, 1000 + seq));
    }
    // Every ack arrives with nothing sent after the batches: none stays held.
    ASSERT_TRUE(sink->WaitFor([](auto& v) {
      int acked = CountAcks(v, false);
      for (const v1::CoordinatorMessage& m : v) acked += m.acks().acks_size();
      return acked == kBatches;
    }));
    SendDone(s, sink, a, kBatches, 50 * kBatches);
    ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAcks(v, true) == 1; }));
    coordinator_->RunSync([] {});
    std::vector<uint64_t> seqs;
    int lists_sent = 0;
    for (const v1::CoordinatorMessage& m : sink->messages()) {
      if (m.has_ack() && !m.ack().done()) seqs.push_back(m.ack().seq());
      if (m.has_acks()) {
        ++lists_sent;
        for (const v1::SampleAck& ack : m.acks().acks()) seqs.push_back(ack.seq());
      }
    }
    std::vector<uint64_t> expected(kBatches);
    for (int i = 0; i < kBatches; ++i) expected[i] = i;
    EXPECT_EQ(seqs, expected);
    EXPECT_TRUE(sink->messages().back().has_ack() && sink->messages().back().ack().done());
    EXPECT_FALSE(sink->holding()) << "every held ack was released";
    EXPECT_EQ(sink->held_calls(), lists ? kBatches : 0);
    if (!lists) EXPECT_EQ(lists_sent, 0);
    EXPECT_EQ(Get(job->id()).tasks(0).state(), v1::TASK_STATE_SUCCEEDED);
    coordinator_->OnAgentGone(s, "the next round connects another agent");
  }
}

// Stream resume: the stream breaks mid-task, the agent reconnects within its
// lease listing the attempt, sends its unacknowledged batches again and goes
// on. Same attempt, no re-queue, each batch stored once.

TEST_F(CoordinatorTest, MessagesOfAFinishedAttemptSentAgainAreAcknowledgedNotStored) {
  const Started t = StartOneTask();
  SendSamples(t.session, t.sink, t.assign, 0, v1::PHASE_TRAIN, {10, 20});
  SendDone(t.session, t.sink, t.assign, 1, 2);
  ASSERT_EQ(WaitForJobState(t.job_id, v1::JOB_STATE_SUCCEEDED).state(), v1::JOB_STATE_SUCCEEDED);
  coordinator_->OnAgentGone(t.session, "stream closed by peer");
  auto sink2 = std::make_shared<FakeAgentSink>();
  uint64_t s2 = Connect("a1", sink2, 1, {Resume(t.assign, /*finished=*/true)});
  SendSamples(s2, sink2, t.assign, 0, v1::PHASE_TRAIN, {99, 99});
  SendDone(s2, sink2, t.assign, 1, 2);
  ASSERT_TRUE(sink2->WaitFor([](auto& v) { return CountAcks(v, false) == 1 && CountAcks(v, true) == 1; }));
  EXPECT_EQ(FindCancel(sink2->messages()), nullptr);
  v1::Job j = Get(t.job_id);
  EXPECT_EQ(j.tasks(0).result().samples_stored(), 2);
  EXPECT_DOUBLE_EQ(j.tasks(0).result().phases(0).stats().max_ns(), 20);
}

// A coordinator restart is a broken stream for every agent: an agent that
// reconnects within the lease resumes its attempt; the restart costs nothing.

TEST_F(CoordinatorTest, PowerReadingsBecomeEnergyPerPhaseAndCostPerSample) {
  v1::JobSpec spec;
  (*spec.mutable_cost()->mutable_usd_per_hour())["cpu"] = 3.6;  // 0.001 USD per second
  spec.mutable_cost()->set_electricity_usd_per_kwh(0.36);       // 1e-7 USD per joule
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  constexpr int64_t kS = 1'000'000'000;
  // Two 1 s train steps of 128 samples from t = 1 s to 3 s; one infer batch from 3 s to 4 s.
  v1::AgentMessage m;
  v1::SampleBatch* train = m.mutable_samples();
  train->set_task_id(a.task_id());
  train->set_attempt(a.attempt());
  train->set_seq(0);
  train->set_phase(v1::PHASE_TRAIN);
  for (int64_t t : {1 * kS, 2 * kS}) {
    train->add_start_ns(t);
    train->add_duration_ns(kS);
    train->add_items(128);
  }
  coordinator_->OnAgentMessage(s, sink, m);
  SendSamples(s, sink, a, 1, v1::PHASE_INFER, {kS});  // starts at 0 in SendSamples; fine for counts
  // RAPL counter: 100 W from t = 0 to 5 s; modeled: 150 W flat.
  std::vector<std::pair<int64_t, double>> counter, flat;
  for (int i = 0; i <= 50; ++i) {
    counter.push_back({i * kS / 10, 10.0 * i});
    flat.push_back({i * kS / 10, 150.0});
  }
  v1::AgentMessage p1, p2;
  *p1.mutable_power() = Power(a, 0, "rapl:package-0", v1::POWER_SOURCE_RAPL, counter, true);
  *p2.mutable_power() = Power(a, 1, "modeled:cpu0", v1::POWER_SOURCE_MODELED, flat, false);
  coordinator_->OnAgentMessage(s, sink, p1);
  coordinator_->OnAgentMessage(s, sink, p1);  // resent: stored once
  coordinator_->OnAgentMessage(s, sink, p2);

  v1::AgentMessage done;
  v1::TaskDone* d = done.mutable_done();
  d->set_task_id(a.task_id());
  d->set_attempt(a.attempt());
  d->set_state(v1::TASK_STATE_SUCCEEDED);
  d->set_batches_sent(2);
  d->set_samples_sent(3);
  d->set_power_batches_sent(2);
  d->mutable_result()->set_dataset_train_size(60000);
  d->mutable_result()->set_min_train_steps(2);
  for (auto [phase, lo, hi] :
       {std::tuple{v1::PHASE_TRAIN, 1 * kS, 3 * kS}, std::tuple{v1::PHASE_INFER, 3 * kS, 4 * kS}}) {
    v1::PhaseWindow* w = d->mutable_result()->add_windows();
    w->set_phase(phase);
    w->set_start_ns(lo);
    w->set_end_ns(hi);
  }
  coordinator_->OnAgentMessage(s, sink, done);
  v1::Job j = WaitForJobState(job->id(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(j.state(), v1::JOB_STATE_SUCCEEDED) << j.DebugString();
  const v1::TaskResult& r = j.tasks(0).result();
  EXPECT_EQ(r.power_readings_stored(), 102);

  const v1::EnergyResult* rapl_train = nullptr;
  const v1::EnergyResult* modeled_whole = nullptr;
  for (const auto& e : r.energy()) {
    if (e.sensor() == "rapl:package-0" && e.phase() == v1::PHASE_TRAIN) rapl_train = &e;
    if (e.sensor() == "modeled:cpu0" && e.phase() == v1::PHASE_UNSPECIFIED) modeled_whole = &e;
  }
  ASSERT_NE(rapl_train, nullptr);
  EXPECT_NEAR(rapl_train->energy_joules(), 200.0, 1e-6);  // 100 W x 2 s
  EXPECT_NEAR(rapl_train->joules_per_sample(), 200.0 / 256, 1e-9);
  EXPECT_EQ(rapl_train->method(), "counter delta");
  EXPECT_DOUBLE_EQ(rapl_train->coverage(), 1.0);
  ASSERT_NE(modeled_whole, nullptr);
  EXPECT_NEAR(modeled_whole->energy_joules(), 450.0, 1e-6);  // 150 W x 3 s (1 s to 4 s)
  EXPECT_EQ(modeled_whole->assumptions(), "MODELED, not measured: test");

  const v1::CostResult* cost = nullptr;
  for (const auto& c : r.cost()) {
    if (c.phase() == v1::PHASE_TRAIN) cost = &c;
  }
  ASSERT_NE(cost, nullptr);
  EXPECT_EQ(cost->rate_source(), "job cost.usd_per_hour[cpu]");
  // Train window 2 s (first step start to last step end) = 0.002 USD for 256 samples.
  EXPECT_NEAR(cost->usd_per_1000_samples(), 0.002 / 256 * 1000, 1e-12);
  EXPECT_NEAR(cost->usd_per_epoch(), 0.002 * 60000 / 256, 1e-9);
  EXPECT_NEAR(cost->electricity_usd(), 200.0 * 1e-7, 1e-15);  // RAPL preferred over modeled
}

TEST_F(CoordinatorTest, MissingPowerBatchesFailTheTask) {
  v1::JobSpec spec;
  ASSERT_TRUE(Submit(spec).ok());
  auto sink = std::make_shared<FakeAgentSink>();
  uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  SendDone(s, sink, a, 0, 0, v1::TASK_STATE_SUCCEEDED, /*power_batches=*/3);
  v1::Job j = WaitForJobState("job-000001", v1::JOB_STATE_FAILED);
  EXPECT_THAT(j.tasks(0).error(), HasSubstr("incomplete power readings: stored 0 of 3"));
}

TEST_F(CoordinatorTest, ATaskDoneWhoseStateIsNotTerminalIsRejectedAndFailsTheAttempt) {
  Started t = StartOneTask();
  SendDone(t.session, t.sink, t.assign, 0, 0, v1::TASK_STATE_RUNNING);
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.tasks(0).error(), HasSubstr("done.state = running"));
  EXPECT_EQ(job.tasks(0).attempt(), 1);  // an agent's bug is not retried
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) {
    bool rejected = false, fenced = false;
    for (const auto& m : v) {
      rejected = rejected || (m.has_rejected() && m.rejected().what() == "done");
      fenced = fenced || (m.has_cancel() && m.cancel().fenced());
    }
    return rejected && fenced;
  }));
  // The device is free again: the next job runs on it.
  auto next = Submit(v1::JobSpec());
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(t.sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));
}

// A sample batch of `a` (seq 0, TRAIN) with no steps yet.
v1::AgentMessage EmptyTrainBatch(const v1::Assign& a) {
  v1::AgentMessage m;
  v1::SampleBatch* b = m.mutable_samples();
  b->set_task_id(a.task_id());
  b->set_attempt(a.attempt());
  b->set_phase(v1::PHASE_TRAIN);
  return m;
}

TEST_F(CoordinatorTest, AMalformedBatchIsRejectedNamingTheFieldNeverSilentlyDropped) {
  Started t = StartOneTask();
  v1::AgentMessage m = EmptyTrainBatch(t.assign);
  v1::SampleBatch* b = m.mutable_samples();
  b->add_start_ns(0);
  b->add_start_ns(10);
  b->add_duration_ns(10);
  b->add_duration_ns(10);
  b->add_items(1);  // one item for two steps
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  const std::optional<v1::Rejected> rejected = WaitForRejected(*t.sink);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->what(), "samples");
  EXPECT_EQ(rejected->reason(), "samples.items: 1 values, duration_ns has 2");
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.tasks(0).error(), HasSubstr("malformed samples message"));
  EXPECT_TRUE(store_->LoadSampleBatches(t.assign.task_id(), 1)->empty());  // nothing half-applied
}

TEST_F(CoordinatorTest, BatchesSentAsColumnsAreStoredAsSentAndBadColumnsAreRejectedNamingTheField) {
  Started t = StartOneTask();
  EXPECT_TRUE(t.sink->messages().front().has_welcome() && t.sink->messages().front().welcome().sample_columns());
  v1::AgentMessage m = EmptyTrainBatch(t.assign);
  v1::SampleBatch* b = m.mutable_samples();
  for (int i = 0; i < 300; ++i) {
    b->add_start_ns(i * 1000);
    b->add_duration_ns(900 + i);
    b->add_items(8);
  }
  const v1::SampleBatch arrays = *b;
  PackSampleColumns(b);
  const std::string columns = b->columns();
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAcks(v, false) == 1; }));
  auto stored = store_->LoadSampleBatches(t.assign.task_id(), 1);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].duration_ns_size(), 300);
  EXPECT_EQ((*stored)[0].start_ns(299), arrays.start_ns(299));
  EXPECT_EQ((*stored)[0].duration_ns(299), arrays.duration_ns(299));
  EXPECT_EQ((*stored)[0].items(7), 8);

  // The next batch cut short: refused, naming the field and the step.
  b->set_seq(1);
  b->set_columns(columns.substr(0, columns.size() - 5));
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  std::optional<v1::Rejected> rejected = WaitForRejected(*t.sink);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_THAT(rejected->reason(), HasSubstr("samples.columns: truncated at step 299 of 300"));
  WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_EQ(store_->LoadSampleBatches(t.assign.task_id(), 1)->size(), 1u);  // the bad one not stored
}

TEST_F(CoordinatorTest, ABatchWithBothColumnsAndArraysIsRejected) {
  Started t = StartOneTask();
  v1::AgentMessage m = EmptyTrainBatch(t.assign);
  v1::SampleBatch* b = m.mutable_samples();
  b->add_start_ns(0);
  b->add_duration_ns(10);
  b->add_items(1);
  v1::SampleBatch other = *b;
  PackSampleColumns(&other);
  b->set_columns(other.columns());
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  const std::optional<v1::Rejected> rejected = WaitForRejected(*t.sink);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->reason(), "samples: both columns and start_ns/duration_ns/items are set; send one form");
  WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_TRUE(store_->LoadSampleBatches(t.assign.task_id(), 1)->empty());
}

TEST_F(CoordinatorTest, ANegativeStepIsRejectedNamingItsIndex) {
  Started t = StartOneTask();
  v1::AgentMessage m = EmptyTrainBatch(t.assign);
  v1::SampleBatch* b = m.mutable_samples();
  for (int i = 0; i < 4; ++i) {
    b->add_start_ns(i * 10);
    b->add_duration_ns(i == 2 ? -5 : 10);
    b->add_items(1);
  }
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  const std::optional<v1::Rejected> rejected = WaitForRejected(*t.sink);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->reason(), "samples[2]: negative duration or items");
  WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_TRUE(store_->LoadSampleBatches(t.assign.task_id(), 1)->empty());
}

TEST_F(CoordinatorTest, ADeterministicFailureEndsTheTaskAtOnceARetryableOneIsQueuedAgain) {
  Started t = StartOneTask();
  v1::AgentMessage m;
  v1::TaskDone* d = m.mutable_done();
  d->set_task_id(t.assign.task_id());
  d->set_attempt(1);
  d->set_state(v1::TASK_STATE_FAILED);
  d->set_error("out of device memory");
  d->set_retryable(true);
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  ASSERT_TRUE(t.sink->WaitFor([](auto& v) { return CountAssigns(v) == 2; }));  // attempt 2
  const v1::Assign second = Assigns(*t.sink).back();
  EXPECT_EQ(second.attempt(), 2);
  d->set_attempt(2);
  d->set_retryable(false);
  d->set_error("torchscript.path = \"/x.pt\": cannot read it on this agent; copy the file there");
  coordinator_->OnAgentMessage(t.session, t.sink, m);
  v1::Job job = WaitForJobState(t.job_id, v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.tasks(0).attempt(), 2);  // not 3: the failure would repeat
  EXPECT_EQ(job.tasks(0).error(), "torchscript.path = \"/x.pt\": cannot read it on this agent; copy the file there");
}

TEST_F(CoordinatorTest, AServingTaskIsJudgedFromEveryStoredLatencyNearestRank) {
  v1::JobSpec spec;
  spec.add_batch_sizes(1);
  spec.mutable_serving()->set_scenario("server");
  spec.mutable_serving()->set_target_qps(100);
  spec.mutable_serving()->set_latency_bound_ms(50);
  spec.mutable_serving()->set_min_queries(10);
  spec.mutable_serving()->set_min_duration_seconds(0.000001);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto sink = std::make_shared<FakeAgentSink>();
  const uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  const v1::Assign a = Assigns(*sink).back();
  EXPECT_EQ(a.spec().serving().percentile(), 99) << "the agent gets the effective spec";
  // 12 latencies (ms) in two batches; one over the 50 ms bound.
  SendSamples(s, sink, a, 0, v1::PHASE_SERVE, {4'000'000, 9'000'000, 2'000'000, 7'000'000, 60'000'000, 5'000'000});
  SendSamples(s, sink, a, 1, v1::PHASE_SERVE, {1'000'000, 3'000'000, 8'000'000, 6'000'000, 10'000'000, 11'000'000});
  v1::AgentMessage m;
  v1::TaskDone* d = m.mutable_done();
  d->set_task_id(a.task_id());
  d->set_attempt(a.attempt());
  d->set_state(v1::TASK_STATE_SUCCEEDED);
  d->set_batches_sent(2);
  d->set_samples_sent(12);
  v1::ServingRun* sent = d->mutable_result()->mutable_serving();
  sent->set_scenario("server");
  sent->set_queries_scheduled(12);
  sent->set_queries_answered(12);
  sent->set_issue_delay_p99_ns(20'000);
  sent->set_latency_p99_ns(1);  // an agent's own figure is not what the coordinator reports
  coordinator_->OnAgentMessage(s, sink, m);
  const v1::Job done = WaitForTaskState(job->id(), 0, v1::TASK_STATE_SUCCEEDED);
  const v1::TaskResult& r = done.tasks(0).result();
  ASSERT_EQ(r.phases_size(), 1) << r.DebugString();
  EXPECT_EQ(r.phases(0).phase(), v1::PHASE_SERVE);
  EXPECT_EQ(r.phases(0).stats().count(), 12);
  const v1::ServingRun& sv = r.serving();
  EXPECT_EQ(sv.issue_delay_p99_ns(), 20'000) << "the agent's issuer figures stay";
  EXPECT_TRUE(sv.exact());
  EXPECT_EQ(sv.latency_p50_ns(), 6'000'000) << "nearest rank: the 6th of 12";
  EXPECT_EQ(sv.latency_p90_ns(), 11'000'000) << "the 11th of 12";
  EXPECT_EQ(sv.latency_p99_ns(), 60'000'000) << "the 12th of 12";
  EXPECT_EQ(sv.over_bound(), 1);
  EXPECT_FALSE(r.phases(0).valid());
  EXPECT_THAT(r.phases(0).invalid_reasons(),
              ::testing::ElementsAre(::testing::HasSubstr("p99 latency 60.000 ms is over the bound")));
}

TEST_F(CoordinatorTest, AServingTaskThatAnsweredNothingSaysSo) {
  v1::JobSpec spec;
  spec.mutable_serving()->set_scenario("offline");
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto sink = std::make_shared<FakeAgentSink>();
  const uint64_t s = Connect("a1", sink);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 1; }));
  SendDone(s, sink, Assigns(*sink).back(), 0, 0);
  const v1::Job done = WaitForTaskState(job->id(), 0, v1::TASK_STATE_SUCCEEDED);
  const v1::TaskResult& r = done.tasks(0).result();
  ASSERT_EQ(r.phases_size(), 1);
  EXPECT_EQ(r.phases(0).phase(), v1::PHASE_SERVE);
  EXPECT_FALSE(r.phases(0).valid());
  EXPECT_THAT(r.phases(0).invalid_reasons(), ::testing::Contains(::testing::HasSubstr("no query answered")));
}

TEST_F(CoordinatorTest, ARateSweepIsATaskPerRateEachAssignedItsRate) {
  v1::JobSpec spec;
  spec.add_batch_sizes(4);
  spec.mutable_serving()->set_scenario("server");
  spec.mutable_serving()->set_latency_bound_ms(50);
  for (double q : {100.0, 250.0, 400.0}) spec.mutable_serving()->add_qps_sweep(q);
  auto job = Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->tasks_size(), 3);
  EXPECT_EQ(job->tasks(0).target_qps(), 100);
  EXPECT_EQ(job->tasks(2).target_qps(), 400);
  auto sink = std::make_shared<FakeAgentSink>();
  Connect("a1", sink, /*devices=*/3);
  ASSERT_TRUE(sink->WaitFor([](auto& v) { return CountAssigns(v) == 3; }));
  std::vector<double> rates;
  for (const v1::Assign& a : Assigns(*sink)) rates.push_back(a.target_qps());
  std::sort(rates.begin(), rates.end());
  EXPECT_THAT(rates, ::testing::ElementsAre(100.0, 250.0, 400.0));
}

}  // namespace
}  // namespace hetbench::server::coordinator_testing
