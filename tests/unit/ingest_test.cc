// The stored form of sample columns and the aggregation done at ingest.
#include <random>

#include "common/sample_codec.h"
#include "common/stats.h"
#include "gtest/gtest.h"
#include "server/ingest/step_aggregator.h"
#include "server/service/agent_messages.h"
#include "server/service/ingest_gate.h"

namespace hetbench::server {
namespace {

v1::SampleBatch Batch(int n, uint32_t seed, int64_t t0 = 5'000'000) {
  std::mt19937 rng(seed);
  v1::SampleBatch b;
  b.set_task_id("job-000001-t0");
  b.set_phase(v1::PHASE_TRAIN);
  int64_t t = t0;
  for (int i = 0; i < n; ++i) {
    const int64_t d = 800'000 + static_cast<int64_t>(rng() % 400'000);
    t += rng() % 4 == 0 ? static_cast<int64_t>(rng() % 1000) : 0;  // occasional gaps
    b.add_start_ns(t);
    b.add_duration_ns(d);
    b.add_items(i + 1 == n ? 17 : 64);  // a short last batch
    t += d;
  }
  return b;
}

TEST(SampleCodecTest, RoundTripsColumnsAndIsSmallerThanTheProtobuf) {
  const v1::SampleBatch b = Batch(1000, 1);
  const std::string blob = EncodeSampleColumns(b);
  v1::SampleBatch back;
  ASSERT_TRUE(DecodeSampleColumns(blob, &back).ok());
  EXPECT_EQ(std::vector<int64_t>(back.start_ns().begin(), back.start_ns().end()),
            std::vector<int64_t>(b.start_ns().begin(), b.start_ns().end()));
  EXPECT_EQ(std::vector<int64_t>(back.duration_ns().begin(), back.duration_ns().end()),
            std::vector<int64_t>(b.duration_ns().begin(), b.duration_ns().end()));
  EXPECT_EQ(std::vector<int32_t>(back.items().begin(), back.items().end()),
            std::vector<int32_t>(b.items().begin(), b.items().end()));
  EXPECT_LT(blob.size() * 3, b.ByteSizeLong() * 2) << blob.size() << " vs " << b.ByteSizeLong();
}

TEST(SampleCodecTest, KeepsExtremeAndNegativeValues) {
  v1::SampleBatch b;
  for (int64_t v : {int64_t{0}, int64_t{-5}, INT64_MAX / 4, int64_t{1}}) {
    b.add_start_ns(v);
    b.add_duration_ns(v);
    b.add_items(static_cast<int32_t>(v % 1000));
  }
  v1::SampleBatch back;
  ASSERT_TRUE(DecodeSampleColumns(EncodeSampleColumns(b), &back).ok());
  EXPECT_EQ(back.start_ns(2), INT64_MAX / 4);
  EXPECT_EQ(back.duration_ns(1), -5);
  EXPECT_EQ(back.items(1), -5);
}

// Every varint length, each side of its edge (the encoder writes one to three
// bytes without a loop), through all three columns.
TEST(SampleCodecTest, KeepsValuesAtEveryVarintLengthEdge) {
  v1::SampleBatch b;
  int64_t t = 0;
  for (int bits = 0; bits <= 62; ++bits) {
    for (int64_t v : {(int64_t{1} << bits) - 1, int64_t{1} << bits}) {
      b.add_start_ns(t);
      b.add_duration_ns(v / 2);  // zigzag doubles it: both sides of each edge
      b.add_items(static_cast<int32_t>(v & 0x7fffffff));
      t += v / 2 + (v & 0xff);
    }
  }
  v1::SampleBatch back;
  ASSERT_TRUE(DecodeSampleColumns(EncodeSampleColumns(b), &back).ok());
  ASSERT_EQ(back.duration_ns_size(), b.duration_ns_size());
  for (int i = 0; i < b.duration_ns_size(); ++i) {
    ASSERT_EQ(back.start_ns(i), b.start_ns(i)) << i;
    ASSERT_EQ(back.duration_ns(i), b.duration_ns(i)) << i;
    ASSERT_EQ(back.items(i), b.items(i)) << i;
  }
}

TEST(SampleCodecTest, ReadsTheOlderWholeProtobufForm) {
  const v1::SampleBatch b = Batch(10, 2);
  v1::SampleBatch back;
  ASSERT_TRUE(DecodeSampleColumns(b.SerializeAsString(), &back).ok());
  EXPECT_EQ(back.duration_ns(9), b.duration_ns(9));
  EXPECT_EQ(back.start_ns(3), b.start_ns(3));
}

TEST(SampleCodecTest, RefusesCorruptBlobs) {
  std::string blob = EncodeSampleColumns(Batch(100, 3));
  v1::SampleBatch back;
  EXPECT_FALSE(DecodeSampleColumns(blob.substr(0, blob.size() - 2), &back).ok());  // truncated
  EXPECT_FALSE(DecodeSampleColumns(blob + "x", &back).ok());                       // trailing bytes
  std::string future = blob;
  future[1] = 9;
  const absl::Status s = DecodeSampleColumns(future, &back);
  EXPECT_NE(s.message().find("version 9"), std::string::npos) << s;
  EXPECT_FALSE(DecodeSampleColumns(std::string("\xff\x01\xff\xff\xff\xff\x0f", 7), &back).ok());  // count too big
}

// The values of a compact blob, read step by step as the coordinator's edge reads them.
absl::Status ReadSteps(std::string_view blob, std::vector<StepSample>* out) {
  out->clear();
  return ForEachSampleStep(blob, [out](int64_t start, int64_t d, int32_t items) { out->push_back({start, d, items}); });
}

TEST(SampleCodecTest, PackedColumnsReadBackStepByStepAsTheArraysAndTheCountIsReadFirst) {
  const v1::SampleBatch arrays = Batch(1000, 5);
  v1::SampleBatch packed = arrays;
  PackSampleColumns(&packed);  // what the agent sends
  EXPECT_EQ(packed.duration_ns_size(), 0);
  EXPECT_EQ(packed.start_ns_size(), 0);
  EXPECT_LT(packed.ByteSizeLong() * 3, arrays.ByteSizeLong() * 2) << "the columns should be under two thirds of the arrays";
  EXPECT_EQ(SampleColumnsCount(packed.columns()), 1000);
  EXPECT_EQ(SampleCount(packed), 1000);  // what the ingest gate counts for it
  EXPECT_EQ(SampleCount(arrays), 1000);
  EXPECT_EQ(SampleColumnsCount("\x08\x01"), -1);  // a protobuf, not the compact form
  std::vector<StepSample> steps;
  ASSERT_TRUE(ReadSteps(packed.columns(), &steps).ok());
  ASSERT_EQ(steps.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(steps[i].start_ns, arrays.start_ns(i)) << i;
    ASSERT_EQ(steps[i].duration_ns, arrays.duration_ns(i)) << i;
    ASSERT_EQ(steps[i].items, arrays.items(i)) << i;
  }
  // The store keeps the agent's columns as they came.
  EXPECT_EQ(EncodeSampleColumns(packed), packed.columns());
  EXPECT_EQ(EncodeSampleColumns(packed), EncodeSampleColumns(arrays));
  // The PostgreSQL store's COPY takes them by view: the agent's own bytes, not a copy.
  std::string encoded;
  const std::string_view view = SampleColumnsView(packed, &encoded);
  EXPECT_EQ(view.data(), packed.columns().data());
  EXPECT_TRUE(encoded.empty());
  const std::string_view from_arrays = SampleColumnsView(arrays, &encoded);
  EXPECT_EQ(from_arrays.data(), encoded.data());
  EXPECT_EQ(from_arrays, packed.columns());
}

TEST(SampleCodecTest, StepByStepReadingRefusesWhatIsNotTheCompactFormNamingTheStep) {
  v1::SampleBatch b = Batch(50, 6);
  PackSampleColumns(&b);
  std::vector<StepSample> steps;
  absl::Status s = ReadSteps(b.columns().substr(0, b.columns().size() - 4), &steps);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("truncated at step 4"), std::string::npos) << s;
  s = ReadSteps(b.columns() + "x", &steps);
  EXPECT_NE(s.message().find("bytes after the last step"), std::string::npos) << s;
  s = ReadSteps(Batch(5, 1).SerializeAsString(), &steps);
  EXPECT_NE(s.message().find("not the compact form"), std::string::npos) << s;
  EXPECT_TRUE(steps.empty());  // the header is read before any step
  v1::SampleBatch big_items;
  big_items.add_start_ns(0);
  big_items.add_duration_ns(1);
  big_items.add_items(2'000'000'000);
  big_items.add_start_ns(1);
  big_items.add_duration_ns(1);
  big_items.add_items(-2'000'000'000);
  PackSampleColumns(&big_items);
  ASSERT_TRUE(ReadSteps(big_items.columns(), &steps).ok());  // a change of 4e9 still lands in range
  EXPECT_EQ(steps[1].items, -2'000'000'000);
}

// The edge reads a batch sent as columns in one pass, keeping only the
// durations: what it hands the loop must be what the arrays would give.
TEST(AgentMessagesCheckTest, ColumnsGiveTheSummaryDurationsAndCountsOfTheArrays) {
  v1::AgentMessage as_arrays;
  *as_arrays.mutable_samples() = Batch(1000, 8);
  v1::AgentMessage as_columns = as_arrays;
  PackSampleColumns(as_columns.mutable_samples());
  const AgentMessages::Checked a = AgentMessages::Check(&as_arrays, 100'000);
  const AgentMessages::Checked c = AgentMessages::Check(&as_columns, 100'000);
  ASSERT_EQ(a.problem, "");
  ASSERT_EQ(c.problem, "");
  EXPECT_EQ(c.summary.n, 1000);
  EXPECT_EQ(c.summary.min, a.summary.min);
  EXPECT_EQ(c.summary.max, a.summary.max);
  EXPECT_EQ(c.summary.first_start, a.summary.first_start);
  EXPECT_EQ(c.summary.last_end, a.summary.last_end);
  EXPECT_EQ(c.summary.items, a.summary.items);
  EXPECT_EQ(c.summary.min_items, a.summary.min_items);
  EXPECT_EQ(c.summary.sum, a.summary.sum);
  EXPECT_EQ(c.summary.m2, a.summary.m2);
  EXPECT_EQ(c.steps.bucket_increments, a.steps.bucket_increments);
  EXPECT_EQ(c.steps.sum_seconds, a.steps.sum_seconds);
  const v1::SampleBatch& cb = as_columns.samples();
  EXPECT_EQ(std::vector<int64_t>(cb.duration_ns().begin(), cb.duration_ns().end()),
            std::vector<int64_t>(as_arrays.samples().duration_ns().begin(), as_arrays.samples().duration_ns().end()));
  EXPECT_EQ(cb.start_ns_size() + cb.items_size(), 0);  // read, summarized, not kept
  EXPECT_EQ(SampleCount(cb), 1000);
}

TEST(AgentMessagesCheckTest, BadColumnsNameTheStepAndKeepNoHalfDecodedDurations) {
  v1::AgentMessage m;
  *m.mutable_samples() = Batch(50, 9);
  m.mutable_samples()->set_duration_ns(7, -3);
  v1::AgentMessage negative = m;
  PackSampleColumns(negative.mutable_samples());
  EXPECT_EQ(AgentMessages::Check(&negative, 100'000).problem, "samples[7]: negative duration or items");
  PackSampleColumns(m.mutable_samples());
  m.mutable_samples()->mutable_columns()->resize(m.samples().columns().size() - 4);
  EXPECT_EQ(AgentMessages::Check(&m, 100'000).problem, "samples.columns: truncated at step 49 of 50");
  EXPECT_EQ(m.samples().duration_ns_size(), 0);
  v1::AgentMessage too_many;
  *too_many.mutable_samples() = Batch(50, 10);
  PackSampleColumns(too_many.mutable_samples());
  EXPECT_EQ(AgentMessages::Check(&too_many, 49).problem, "samples.columns: 50 samples in one batch: at most 49");
  EXPECT_EQ(too_many.samples().duration_ns_size(), 0);  // refused from the header, before decoding
}

std::vector<StepSample> Steps(const std::vector<v1::SampleBatch>& batches) {
  std::vector<StepSample> out;
  for (const auto& b : batches) {
    for (int i = 0; i < b.duration_ns_size(); ++i) out.push_back({b.start_ns(i), b.duration_ns(i), b.items(i)});
  }
  return out;
}

TEST(StepAggregatorTest, ExactBelowTheLimitMatchesTheWholeComputation) {
  std::vector<v1::SampleBatch> batches;
  TaskAggregate agg;
  int64_t t = 0;
  for (int k = 0; k < 7; ++k) {
    batches.push_back(Batch(k == 0 ? 1 : 333, 10 + k, t));
    t = batches.back().start_ns(batches.back().start_ns_size() - 1) + 2'000'000;
    agg.Add(batches.back());
  }
  const v1::TimingStats want = ComputeTimingStats(Steps(batches));
  const v1::TimingStats got = agg.phases.at(v1::PHASE_TRAIN).Finish();
  EXPECT_EQ(agg.batches_stored, 7);
  EXPECT_EQ(got.count(), want.count());
  EXPECT_EQ(got.items(), want.items());
  EXPECT_NEAR(got.mean_ns(), want.mean_ns(), 1e-6 * want.mean_ns());
  EXPECT_NEAR(got.stddev_ns(), want.stddev_ns(), 1e-6 * want.stddev_ns());
  EXPECT_DOUBLE_EQ(got.p25_ns(), want.p25_ns());
  EXPECT_DOUBLE_EQ(got.p50_ns(), want.p50_ns());
  EXPECT_DOUBLE_EQ(got.p99_ns(), want.p99_ns());
  EXPECT_DOUBLE_EQ(got.window_seconds(), want.window_seconds());
  EXPECT_EQ(got.quantile_relative_error(), 0);
}

// The one-pass batch summary keeps a large mean's small spread: sums taken
// about the first duration, not about zero.
TEST(StepAggregatorTest, OnePassSummaryKeepsTheSpreadOfLongSteps) {
  std::vector<int64_t> start, duration;
  std::vector<int32_t> items;
  for (int i = 0; i < 1000; ++i) {
    start.push_back(int64_t{1'700'000'000'000'000'000} + i * int64_t{4'000'000'000'000});
    duration.push_back(int64_t{3'600'000'000'000} + (i % 7) - 3);  // an hour, +-3 ns
    items.push_back(i % 5 == 0 ? 0 : 64);
  }
  const BatchSummary b = SummarizeBatch(start.data(), duration.data(), items.data(), 1000);
  double mean = 0;
  for (int64_t d : duration) mean += static_cast<double>(d - duration[0]);
  mean = static_cast<double>(duration[0]) + mean / 1000;
  double m2 = 0;
  for (int64_t d : duration) m2 += (static_cast<double>(d) - mean) * (static_cast<double>(d) - mean);
  EXPECT_EQ(b.n, 1000);
  EXPECT_NEAR(b.sum / 1000, mean, 1e-3);
  EXPECT_NEAR(b.m2, m2, 1e-6 * m2);  // about 4,000 ns^2: lost entirely by sums about zero
  EXPECT_EQ(b.min, int64_t{3'600'000'000'000} - 3);
  EXPECT_EQ(b.max, int64_t{3'600'000'000'000} + 3);
  EXPECT_EQ(b.items, 800 * 64);
  EXPECT_EQ(b.min_items, 0);
  EXPECT_EQ(b.first_start, start[0]);
  EXPECT_EQ(b.last_end, start[999] + duration[999]);
}

// Squares of deviations under 2^40 ns are summed in integers, larger ones in
// doubles: a batch of both (steps of 5 ms and of an hour, and an absurd one
// of 2^62 ns that would overflow any integer sum) keeps the two-pass spread.
TEST(StepAggregatorTest, OnePassSpreadHoldsForSmallAndHugeDeviationsAlike) {
  std::vector<int64_t> start, duration;
  std::vector<int32_t> items;
  for (int i = 0; i < 1000; ++i) {
    start.push_back(i * int64_t{10'000'000});
    duration.push_back(i % 10 == 9 ? int64_t{3'600'000'000'000} : int64_t{5'000'000} + (i % 13) * 1'000);
    items.push_back(1);
  }
  duration[500] = int64_t{1} << 62;
  const BatchSummary b = SummarizeBatch(start.data(), duration.data(), items.data(), 1000);
  long double mean = 0;
  for (int64_t d : duration) mean += static_cast<long double>(d);
  mean /= 1000;
  long double m2 = 0;
  for (int64_t d : duration) m2 += (static_cast<long double>(d) - mean) * (static_cast<long double>(d) - mean);
  EXPECT_NEAR(b.sum / 1000, static_cast<double>(mean), 1e-9 * static_cast<double>(mean));
  EXPECT_NEAR(b.m2, static_cast<double>(m2), 1e-9 * static_cast<double>(m2));
  // Without the huge step: every square in the integer sum, exact.
  duration[500] = 5'000'000;
  const BatchSummary small = SummarizeBatch(start.data(), duration.data(), items.data(), 1000);
  mean = 0;
  for (int64_t d : duration) mean += static_cast<long double>(d);
  mean /= 1000;
  m2 = 0;
  for (int64_t d : duration) m2 += (static_cast<long double>(d) - mean) * (static_cast<long double>(d) - mean);
  EXPECT_NEAR(small.m2, static_cast<double>(m2), 1e-12 * static_cast<double>(m2));
}

TEST(StepAggregatorTest, PastTheLimitPercentilesStayWithinTheStatedError) {
  std::vector<v1::SampleBatch> batches;
  TaskAggregate agg;
  int64_t t = 0;
  const int per_batch = 1000;
  const int n_batches = static_cast<int>(PhaseAccumulator::kExactLimit / per_batch) + 20;
  for (int k = 0; k < n_batches; ++k) {
    batches.push_back(Batch(per_batch, 100 + k, t));
    t = batches.back().start_ns(per_batch - 1) + 2'000'000;
    agg.Add(batches.back());
  }
  const PhaseAccumulator& acc = agg.phases.at(v1::PHASE_TRAIN);
  EXPECT_FALSE(acc.exact());
  const v1::TimingStats want = ComputeTimingStats(Steps(batches));
  const v1::TimingStats got = acc.Finish();
  EXPECT_EQ(got.count(), want.count());
  EXPECT_NEAR(got.mean_ns(), want.mean_ns(), 1e-9 * want.mean_ns());
  EXPECT_NEAR(got.stddev_ns(), want.stddev_ns(), 1e-6 * want.stddev_ns());
  EXPECT_EQ(got.min_ns(), want.min_ns());
  EXPECT_EQ(got.max_ns(), want.max_ns());
  EXPECT_DOUBLE_EQ(got.quantile_relative_error(), PhaseAccumulator::kRelativeError);
  for (auto [g, w] : {std::pair{got.p25_ns(), want.p25_ns()}, std::pair{got.p50_ns(), want.p50_ns()},
                      std::pair{got.p90_ns(), want.p90_ns()}, std::pair{got.p99_ns(), want.p99_ns()}}) {
    EXPECT_NEAR(g, w, w * got.quantile_relative_error()) << g << " vs " << w;
  }
}

}  // namespace
}  // namespace hetbench::server

namespace hetbench::server {
namespace {

class CountingWaiter : public GateWaiter {
 public:
  void Resume() override { ++resumed; }
  int resumed = 0;
};

TEST(IngestGateTest, ParksReadersPastTheBudgetAndResumesThemUnderIt) {
  IngestGate gate(3000);
  auto a = std::make_shared<CountingWaiter>();
  auto b = std::make_shared<CountingWaiter>();
  gate.Add(GateUnits(1000));
  gate.Add(GateUnits(1000));
  EXPECT_TRUE(gate.RoomOrPark(a));  // 2,000 queued: room
  gate.Add(GateUnits(1000));
  EXPECT_FALSE(gate.RoomOrPark(a));  // 3,000: both park
  EXPECT_FALSE(gate.RoomOrPark(b));
  gate.Add(GateUnits(0));  // a message without samples still counts 1
  EXPECT_EQ(gate.queued(), 3001);
  gate.Release(1);  // 3,000: still no room, nobody woken
  EXPECT_EQ(a->resumed + b->resumed, 0);
  gate.Release(1000);  // 2,000: both woken, once
  EXPECT_EQ(a->resumed, 1);
  EXPECT_EQ(b->resumed, 1);
  gate.Release(1000);
  EXPECT_EQ(a->resumed, 1);
  EXPECT_EQ(gate.queued(), 1000);
}

TEST(IngestGateTest, ABatchSentAsColumnsWeighsTheStepsItDeclares) {
  v1::AgentMessage arrays;
  *arrays.mutable_samples() = Batch(1000, 8);
  v1::AgentMessage columns = arrays;
  PackSampleColumns(columns.mutable_samples());
  EXPECT_EQ(GateUnits(arrays), 1000);
  EXPECT_EQ(GateUnits(columns), 1000);  // not 1: its arrays are empty until the edge decodes it
  v1::AgentMessage power;
  power.mutable_power()->add_t_ns(1);
  power.mutable_power()->add_t_ns(2);
  EXPECT_EQ(GateUnits(power), 2);
  v1::AgentMessage beat;
  beat.mutable_heartbeat();
  EXPECT_EQ(GateUnits(beat), 1);
}

TEST(IngestGateTest, AGoneStreamIsNotResumed) {
  IngestGate gate(10);
  gate.Add(10);
  {
    auto gone = std::make_shared<CountingWaiter>();
    EXPECT_FALSE(gate.RoomOrPark(gone));
  }
  gate.Release(10);  // the parked weak_ptr has expired: nothing to call
  EXPECT_EQ(gate.queued(), 0);
}

}  // namespace
}  // namespace hetbench::server
