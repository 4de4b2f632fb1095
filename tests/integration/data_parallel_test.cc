// Gangs of one rank per thread over c10d/Gloo on loopback. Data parallel:
// the ranks end with the parameters of one process trained on the global
// batch, and a peer that never arrives fails the rank instead of hanging.
// Split across agents: each stage's rank ends with its layers' parameters
// of one process trained on the same batches. Either way each rank reads
// the machine probe before training, the ranks taking turns, and a rank of
// an earlier round of the gang takes no place in the next.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "agent/executors/machine_probe.h"
#include "agent/executors/torch_executor.h"
#include "agent/gang/gradient_sync.h"
#include "agent/models/models.h"
#include "agent/models/workload.h"
#include "common/clock.h"
#include "common/job_spec.h"
#include "tests/testing/free_port.h"

namespace hetbench::agent {
namespace {

using ::testing::HasSubstr;

using ::hetbench::testing::FreePort;

// 96 training rows (so 8 steps of a global batch of 16 reshuffle once), 16 test rows.
ImageDataset SmallDataset() {
  torch::manual_seed(5);
  ImageDataset ds;
  const double black = NormalizedFromPixel(0), white = NormalizedFromPixel(1);
  ds.train = {torch::rand({96, 784}) * (white - black) + black, torch::arange(96, torch::kInt64).remainder(10)};
  ds.test = {torch::rand({16, 784}) * (white - black) + black, torch::arange(16, torch::kInt64).remainder(10)};
  ds.content_hash = 7;
  return ds;
}

struct RankRun {
  absl::StatusOr<v1::TaskResult> result = absl::UnknownError("not run");
  std::vector<torch::Tensor> parameters;  // the trained tensors (kept alive past the run)
  std::vector<std::vector<torch::Tensor>> layer_parameters;  // per top-level layer
  size_t train_samples = 0, infer_samples = 0;
};

// One rank (or, with world 1, the single-process reference) of `model`;
// with `split` set, rank r runs stage r of it across agents.
RankRun RunRank(const ImageDataset& ds, int batch_size, int rank, int world, int port, double timeout_seconds = 20,
                const v1::SplitSpec* split = nullptr, bool machine_probe = true) {
  RankRun out;
  TorchExecutorConfig config;
  config.calibrate = false;
  config.machine_probe = machine_probe;
  config.data_dir = HETBENCH_DATA_DIR;
  config.make_workload = [&](const std::string& m, const v1::JobSpec& s, const ImageDataset&) {
    auto w = MakeWorkload(m, s, ds);
    if (!w.ok()) return w;
    out.parameters = (*w)->Parameters();
    for (const auto& layer : **(*w)->Layers()) out.layer_parameters.push_back(layer.ptr()->parameters());
    // Dropout masks are drawn per process (as in any DDP), so no two runs
    // of a different split share them: the comparison runs without dropout.
    for (const auto& layer : (*(*w)->Layers())->modules(/*include_self=*/false)) {
      if (auto* d = layer->as<torch::nn::DropoutImpl>()) d->options.p(0);
    }
    return w;
  };
  TorchExecutor exec(config);
  v1::Assign a;
  a.set_task_id(absl::StrCat("t", rank));
  a.set_batch_size(batch_size);
  a.set_model("mlp");
  v1::JobSpec spec;
  spec.mutable_train()->set_min_steps(6);
  spec.mutable_train()->set_warmup_steps(2);
  spec.mutable_train()->set_min_duration_seconds(0);
  spec.mutable_inference()->set_max_batches(1);
  if (split != nullptr) *spec.mutable_split() = *split;
  *a.mutable_spec() = WithDefaults(spec);
  v1::GangAssign* g = a.mutable_gang();
  g->set_gang_id("g");
  g->set_rank(rank);
  g->set_world_size(world);
  g->set_master_host("127.0.0.1");
  g->set_master_port(port);
  g->set_timeout_seconds(timeout_seconds);
  for (int r = 0; r < world; ++r) g->add_peers(absl::StrCat("agent-", r, "/cpu0"));
  v1::Device cpu;
  cpu.set_cores(1);
  TaskControl control(SampleCapacity(a), SteadyNowNs());
  out.result = exec.Run(a, cpu, &control);
  for (size_t i = 0; i < control.samples.published(); ++i) {
    if (control.samples.at(i).phase == v1::PHASE_TRAIN) ++out.train_samples;
    if (control.samples.at(i).phase == v1::PHASE_INFER) ++out.infer_samples;
  }
  return out;
}

// Ranks 0 and 1 of a gang of two, each on its own thread, with the same
// batch size (and split, when given); both must succeed.
std::pair<RankRun, RankRun> RunTwoRanks(const ImageDataset& ds, int batch_size, const v1::SplitSpec* split = nullptr) {
  const int port = FreePort();
  RankRun r0, r1;
  std::thread t0([&] { r0 = RunRank(ds, batch_size, 0, 2, port, 20, split); });
  std::thread t1([&] { r1 = RunRank(ds, batch_size, 1, 2, port, 20, split); });
  t0.join();
  t1.join();
  EXPECT_TRUE(r0.result.ok()) << r0.result.status();
  EXPECT_TRUE(r1.result.ok()) << r1.result.status();
  return {std::move(r0), std::move(r1)};
}

// Acceptance: mlp over 2 ranks, batch 8 each, 8 steps (2 warm-up + 6) that
// cross an epoch, against one process with batch 16 on the same seed.
// Tolerance per parameter: 1e-4 absolute + 1e-4 relative, a tenth of one
// Adam step (lr 1e-3): the all-reduce sums float32 gradients in another
// order, and Adam's g / sqrt(v) magnifies that rounding where a gradient is
// near 0 (seen: 2.1e-5 at most). On average the tensors agree to 1e-6.
// Dropout is set to 0 in both (see RunRank).
TEST(DataParallelTest, TwoRanksEndWithTheParametersOfOneProcessOnTheGlobalBatch) {
  const ImageDataset ds = SmallDataset();
  auto [r0, r1] = RunTwoRanks(ds, 8);
  ASSERT_TRUE(r0.result.ok() && r1.result.ok());
  const RankRun one = RunRank(ds, 16, 0, 1, 0);
  ASSERT_TRUE(one.result.ok()) << one.result.status();

  EXPECT_EQ(r0.train_samples, 6u);
  EXPECT_EQ(r1.train_samples, 6u) << "the ranks stop on the same step";
  ASSERT_EQ(r0.parameters.size(), one.parameters.size());
  for (size_t i = 0; i < one.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(r0.parameters[i], r1.parameters[i])) << "tensor " << i << " differs between ranks";
    EXPECT_LT((r0.parameters[i] - one.parameters[i]).abs().mean().item<double>(), 1e-6) << "tensor " << i;
    EXPECT_TRUE(torch::allclose(r0.parameters[i], one.parameters[i], 1e-4, 1e-4))
        << "tensor " << i << ": max difference "
        << (r0.parameters[i] - one.parameters[i]).abs().max().item<double>();
  }
  const v1::ParallelRun& d = r0.result->parallel();
  EXPECT_EQ(d.world_size(), 2);
  EXPECT_EQ(d.backend(), "gloo");
  EXPECT_EQ(d.global_batch_size(), 16);
  // mlp: 784x512 + 512 + 512x512 + 512 + 512x10 + 10 = 669,706 floats, plus the vote.
  EXPECT_EQ(d.bytes_per_step(), (669706 + 1) * 4);
  EXPECT_EQ(d.allreduce().count(), 6);
  EXPECT_GT(d.allreduce_gbytes_per_second(), 0);
  EXPECT_NEAR(d.parameter_checksum(), one.result->parallel().parameter_checksum(),
              1e-4 * one.result->parallel().parameter_checksum());
  EXPECT_EQ(one.result->parallel().backend(), "none (one rank)");
  // Each rank read the machine probe before training (in turn); a gang's ranks take no reading after.
  for (const RankRun* r : {&r0, &r1}) {
    EXPECT_EQ(r->result->machine_probe().kernel(), ProbeKernel(1));
    EXPECT_GT(r->result->machine_probe().before_ns(), 0);
    EXPECT_EQ(r->result->machine_probe().after_ns(), 0);
  }
}

// A rank that reads no probe (a GPU stage, say; here the probe turned off)
// still takes its turn, so the others' barriers do not wait for it in vain.
TEST(DataParallelTest, ARankThatReadsNoProbeStillTakesItsTurn) {
  const ImageDataset ds = SmallDataset();
  const int port = FreePort();
  RankRun r0, r1;
  const int64_t start = SteadyNowNs();
  std::thread t0([&] { r0 = RunRank(ds, 8, 0, 2, port, 20); });
  std::thread t1([&] { r1 = RunRank(ds, 8, 1, 2, port, 20, nullptr, /*machine_probe=*/false); });
  t0.join();
  t1.join();
  ASSERT_TRUE(r0.result.ok()) << r0.result.status();
  ASSERT_TRUE(r1.result.ok()) << r1.result.status();
  EXPECT_GT(r0.result->machine_probe().before_ns(), 0);
  EXPECT_FALSE(r1.result->has_machine_probe());
  std::printf("two ranks, one reading the probe: %.2f s\n", static_cast<double>(SteadyNowNs() - start) * 1e-9);
}

// A gang's ranks take turns: each rank's function runs while the others
// wait, rank 0 first, so two ranks on one host never time the machine probe
// at once.
TEST(GangGroupTest, RanksTakeTurnsOneAfterAnother) {
  const int port = FreePort();
  constexpr int kWorld = 3;
  std::pair<int64_t, int64_t> spans[kWorld];
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      v1::GangAssign g;
      g.set_gang_id("turns");
      g.set_rank(r);
      g.set_world_size(kWorld);
      g.set_master_host("127.0.0.1");
      g.set_master_port(port);
      g.set_timeout_seconds(20);
      auto joined = GangGroup::Join(g, "127.0.0.1");
      ASSERT_TRUE(joined.ok()) << joined.status();
      (*joined)->InTurn([&] {
        spans[r].first = SteadyNowNs();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        spans[r].second = SteadyNowNs();
      });
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_GE(spans[r].first, spans[r - 1].second) << "rank " << r << " started before rank " << r - 1 << " ended";
  }
}

// The store listens on one port every round of a gang: a rank fenced from
// round 1 that reaches it while round 2 meets (it had started joining when
// the fence came) takes no place in round 2, whose two ranks meet each other;
// it waits for its own round's peers and fails alone: at its timeout, or (as
// here) when round 2 ends and rank 0 closes the store.
TEST(GangGroupTest, ARankOfAnEarlierRoundTakesNoPlaceInTheNext) {
  const int port = FreePort();
  auto assign = [&](const std::string& round, int rank, double timeout_seconds) {
    v1::GangAssign g;
    g.set_gang_id("g");
    g.set_round(round);
    g.set_rank(rank);
    g.set_world_size(2);
    g.set_master_host("127.0.0.1");
    g.set_master_port(port);
    g.set_timeout_seconds(timeout_seconds);
    return g;
  };
  // Joins and passes a barrier with the round's other rank.
  auto meet = [](const v1::GangAssign& g) -> absl::Status {
    auto joined = GangGroup::Join(g, "127.0.0.1");
    if (!joined.ok()) return joined.status();
    try {
      (*joined)->InTurn([] {});
    } catch (const std::exception& e) {
      return absl::UnavailableError(e.what());  // its peer was not of its round
    }
    return absl::OkStatus();
  };
  // The store's key count, read by a client of its own: how the test knows
  // who has arrived. Each rank writes its address while it waits for peers.
  c10d::TCPStoreOptions watch;
  watch.port = static_cast<uint16_t>(port);
  watch.isServer = false;
  watch.waitWorkers = false;
  watch.timeout = std::chrono::seconds(20);
  auto keys_beyond = [&](c10d::TCPStore& store, int64_t n) {
    const int64_t deadline = SteadyNowNs() + 20'000'000'000;
    while (SteadyNowNs() < deadline) {
      if (store.getNumKeys() > n) return store.getNumKeys();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "the store kept " << n << " keys for 20 s";
    return n;
  };
  absl::Status zero, stale, one;
  std::thread t0([&] { zero = meet(assign("g/2", 0, 20)); });
  c10d::TCPStore store("127.0.0.1", watch);  // connects once rank 0 listens (a client retries)
  const int64_t with_zero = keys_beyond(store, 0);
  std::thread tstale([&] { stale = meet(assign("g/1", 1, 2)); });
  // Round 2's rank 1 comes once the stale rank has written to the store: the
  // order in which keys without the round let the stale rank take its place.
  keys_beyond(store, with_zero);
  std::thread t1([&] { one = meet(assign("g/2", 1, 20)); });
  t0.join();
  tstale.join();
  t1.join();
  EXPECT_TRUE(zero.ok()) << zero;
  EXPECT_TRUE(one.ok()) << one;
  EXPECT_EQ(stale.code(), absl::StatusCode::kUnavailable) << stale;
  EXPECT_THAT(stale.message(), HasSubstr("gang g/1 rank 1"));
  std::printf("the stale rank: %s\n", std::string(stale.message()).c_str());
}

// Rank 0 of 2 whose peer never comes: it fails retryable (UNAVAILABLE) after
// the gang's timeout instead of waiting for ever.
TEST(DataParallelTest, ARankWhosePeerNeverArrivesFailsWithinTheTimeout) {
  const ImageDataset ds = SmallDataset();
  const RankRun alone = RunRank(ds, 8, 0, 2, FreePort(), /*timeout_seconds=*/1.5);
  ASSERT_FALSE(alone.result.ok());
  EXPECT_EQ(alone.result.status().code(), absl::StatusCode::kUnavailable) << alone.result.status();
  EXPECT_THAT(alone.result.status().message(), HasSubstr("rendezvous"));
}

// mlp as layers 0-2 | 3-6, a stage per rank on CPUs.
v1::SplitSpec MlpInTwoStagesAcrossAgents() {
  v1::SplitSpec split;
  split.set_across_agents(true);
  for (const char* layers : {"0-2", "3-"}) {
    v1::SplitStage* st = split.add_stages();
    st->set_layers(layers);
    st->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  }
  return split;
}

// Acceptance (split across agents): mlp in two stages, one rank each, 8
// steps of batch 16 (2 warm-up + 6, crossing an epoch), against one process
// on the same seed and batches. The ranks exchange the boundary activation
// and its gradient as float32, unchanged, so each layer's parameters match
// the one-process run to float rounding (tolerance 1e-6 absolute + 1e-5
// relative); the last stage's loss matches it too.
TEST(SplitAcrossAgentsTest, EachStageEndsWithItsLayersOfOneProcessOnTheSameBatches) {
  const ImageDataset ds = SmallDataset();
  const v1::SplitSpec split = MlpInTwoStagesAcrossAgents();
  auto [r0, r1] = RunTwoRanks(ds, 16, &split);
  ASSERT_TRUE(r0.result.ok() && r1.result.ok());
  const RankRun one = RunRank(ds, 16, 0, 1, 0);
  ASSERT_TRUE(one.result.ok()) << one.result.status();

  EXPECT_EQ(r0.train_samples, 6u);
  EXPECT_EQ(r1.train_samples, 6u) << "the later stage stops when the first says so";
  ASSERT_EQ(one.layer_parameters.size(), r0.layer_parameters.size());
  for (size_t layer = 0; layer < one.layer_parameters.size(); ++layer) {
    const RankRun& owner = layer < 3 ? r0 : r1;  // the stage that trained the layer
    for (size_t i = 0; i < one.layer_parameters[layer].size(); ++i) {
      const torch::Tensor& got = owner.layer_parameters[layer][i];
      const torch::Tensor& want = one.layer_parameters[layer][i];
      EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6))
          << "layer " << layer << " tensor " << i << ": max difference " << (got - want).abs().max().item<double>();
    }
  }
  EXPECT_NEAR(r1.result->final_train_loss(), one.result->final_train_loss(),
              1e-5 * std::abs(one.result->final_train_loss()));
  EXPECT_FLOAT_EQ(r0.result->final_train_loss(), r1.result->final_train_loss()) << "passed back with the gradient";
  // Rank 0 reports both stages; the boundary is 16 x 512 floats each way,
  // plus what the message is and its rows forward, and the later stage's
  // hold time, loss and figures back.
  ASSERT_EQ(r0.result->split_size(), 2);
  const int64_t boundary = 16 * 512;
  for (const v1::SplitStageResult& st : r0.result->split()) {
    EXPECT_EQ(st.transfer_bytes(), 4 * ((boundary + 2) + (boundary + 2 + 3))) << "stage " << st.stage();
    EXPECT_GT(st.forward_ns(), 0);
    EXPECT_GT(st.backward_ns(), 0);
    EXPECT_GT(st.transfer_ns(), 0);
    EXPECT_EQ(st.agent_id(), absl::StrCat("agent-", st.stage()));
  }
  // The link was probed before the first step: stage 0's outgoing link has a
  // latency and a bandwidth; the last stage has no outgoing link.
  EXPECT_GT(r0.result->split(0).link_latency_ns(), 0);
  EXPECT_GT(r0.result->split(0).link_gbytes_per_second(), 0);
  EXPECT_EQ(r0.result->split(1).link_latency_ns(), 0);
  EXPECT_EQ(r0.result->split(1).link_gbytes_per_second(), 0);
  EXPECT_EQ(r0.result->split(0).layers(), "0-2");
  EXPECT_EQ(r0.result->split(1).layers(), "3-" + std::to_string(one.layer_parameters.size() - 1));
  EXPECT_EQ(r1.result->split_size(), 0) << "only rank 0 holds every stage's figures";
  // Inference through both stages (1 batch of 16 test rows): scored by the
  // last, the same on both ranks and as the one process.
  EXPECT_EQ(r0.infer_samples, 1u);
  EXPECT_EQ(r1.infer_samples, 1u);
  EXPECT_GT(one.result->test_accuracy(), 0);
  EXPECT_DOUBLE_EQ(r0.result->test_accuracy(), one.result->test_accuracy());
  EXPECT_DOUBLE_EQ(r1.result->test_accuracy(), one.result->test_accuracy());
  EXPECT_THAT(r1.result->input_note(), HasSubstr("inference a batch at a time through every stage"));
}

// Three stages, a rank each: every link is probed (the middle rank answers
// the first link's probe, then probes its own) and rank 0 reports both
// links' figures, the middle one's sent to it once; the ranks end on one loss.
TEST(SplitAcrossAgentsTest, ThreeStagesReportEveryLinksProbeOnRankZero) {
  const ImageDataset ds = SmallDataset();
  v1::SplitSpec split;
  split.set_across_agents(true);
  for (const char* layers : {"0-1", "2-4", "5-"}) {
    v1::SplitStage* st = split.add_stages();
    st->set_layers(layers);
    st->mutable_target()->set_device_kind(v1::DEVICE_KIND_CPU);
  }
  const int port = FreePort();
  RankRun runs[3];
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back([&, r] { runs[r] = RunRank(ds, 16, r, 3, port, 20, &split); });
  for (std::thread& t : threads) t.join();
  for (const RankRun& run : runs) ASSERT_TRUE(run.result.ok()) << run.result.status();
  ASSERT_EQ(runs[0].result->split_size(), 3);
  for (int s = 0; s < 2; ++s) {
    const v1::SplitStageResult& st = runs[0].result->split(s);
    EXPECT_GT(st.link_latency_ns(), 0) << "stage " << s;
    EXPECT_GT(st.link_gbytes_per_second(), 0) << "stage " << s;
    EXPECT_GT(st.transfer_ns(), 0) << "stage " << s;
  }
  EXPECT_EQ(runs[0].result->split(2).link_gbytes_per_second(), 0) << "the last stage has no outgoing link";
  EXPECT_EQ(runs[1].result->split_size(), 0);
  EXPECT_FLOAT_EQ(runs[0].result->final_train_loss(), runs[2].result->final_train_loss());
  EXPECT_EQ(runs[2].train_samples, 6u);
  for (const RankRun& run : runs) EXPECT_GT(run.result->machine_probe().before_ns(), 0) << "every stage's rank";
}

// Stage 1 of 2 whose stage 0 never comes: fails retryable, no hang.
TEST(SplitAcrossAgentsTest, AStageWhosePeerNeverArrivesFailsWithinTheTimeout) {
  const ImageDataset ds = SmallDataset();
  const v1::SplitSpec split = MlpInTwoStagesAcrossAgents();
  const RankRun alone = RunRank(ds, 16, 1, 2, FreePort(), /*timeout_seconds=*/1.5, &split);
  ASSERT_FALSE(alone.result.ok());
  EXPECT_EQ(alone.result.status().code(), absl::StatusCode::kUnavailable) << alone.result.status();
}

TEST(DataParallelTest, AGangOfOneOpensNothingAndARankOutsideTheGangIsRefused) {
  v1::GangAssign g;
  g.set_world_size(1);
  auto one = GradientSync::Join(g, "127.0.0.1");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->world_size(), 1);
  g.set_world_size(2);
  g.set_rank(2);
  auto bad = GradientSync::Join(g, "127.0.0.1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hetbench::agent
