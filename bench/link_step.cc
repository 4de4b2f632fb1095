// Does a split's link probe predict the link's time inside a training step?
// Two processes on loopback join a Gloo gang (the agent's GangGroup) and move
// one boundary's messages (activation forward, gradient back, each copied into
// its buffer first, as agent/gang/stage_link.cc does) in five patterns,
// alternated A B C D E A B C D E:
//  - back-to-back: round trips with nothing between them (the probe's pattern);
//  - sleep gap: rank 0 sleeps GAP ms between round trips;
//  - compute gap: rank 0 runs a GEMM loop for GAP ms between round trips (a
//    stage's forward and backward), rank 1 one for HOLD ms after receiving;
//  - compute gap, both busy: as above, and rank 1 also computes while it
//    waits (another agent's work on the same cores);
//  - compute gap, busy after answering: as compute gap, and rank 1 computes
//    for AFTER ms right after its answer (a later stage's optimizer step,
//    which runs while the gradient is still being received).
// Rank 0 times each one way as a step does: (sent -> answer received - the
// time rank 1 held it) / 2. Prints medians, trimmed means (without the highest
// and lowest eighth, as the probe takes them) and the medians' ratio to
// back-to-back.
// Usage: bench_link_step [--mbytes 2.36] [--gap-ms 60] [--hold-ms 7] [--after-ms 2] [--rounds 20] [--blocks 2]
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "CLI/CLI.hpp"
#include "agent/gang/gang_group.h"
#include "bench/machine.h"
#include "common/clock.h"
#include "common/stats.h"

namespace {

using hetbench::SteadyNowNs;

void Send(c10d::ProcessGroup* g, torch::Tensor& t, int peer) {
  std::vector<at::Tensor> v{t};
  g->send(v, peer, 0)->wait();
}
void Recv(c10d::ProcessGroup* g, torch::Tensor& t, int peer) {
  std::vector<at::Tensor> v{t};
  g->recv(v, peer, 0)->wait();
}

// Runs GEMMs for about `ms` milliseconds (a stage's compute).
void Compute(double ms, torch::Tensor& a, torch::Tensor& b) {
  const int64_t end = SteadyNowNs() + static_cast<int64_t>(ms * 1e6);
  while (SteadyNowNs() < end) b = torch::mm(a, a);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"the link probe against step-shaped transfers"};
  double mbytes = 2.36, gap_ms = 60, hold_ms = 7, after_ms = 2;
  int rounds = 20, blocks = 2;
  app.add_option("--mbytes", mbytes, "one message, MB");
  app.add_option("--gap-ms", gap_ms, "rank 0's time between round trips");
  app.add_option("--hold-ms", hold_ms, "rank 1's compute between receiving and answering");
  app.add_option("--after-ms", after_ms, "rank 1's compute right after answering (busy after answering)");
  app.add_option("--rounds", rounds, "round trips per pattern and block");
  app.add_option("--blocks", blocks, "A B C D E blocks");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  const int port = 30000 + static_cast<int>(std::random_device{}() % 20000);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("bench_link_step: fork");
    return 1;
  }
  const int rank = child == 0 ? 1 : 0;
  hetbench::v1::GangAssign gang;
  gang.set_gang_id("link-step");
  gang.set_rank(rank);
  gang.set_world_size(2);
  gang.set_master_host("127.0.0.1");
  gang.set_master_port(port);
  gang.set_timeout_seconds(60);
  auto joined = hetbench::agent::GangGroup::Join(gang, "127.0.0.1");
  if (!joined.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, std::string(joined.status().message()).c_str());
    return 1;
  }
  c10d::ProcessGroup* g = (*joined)->group();
  const int64_t n = static_cast<int64_t>(mbytes * 1e6 / 4);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  torch::Tensor buf = torch::zeros({n + 2}, f32), payload = torch::ones({n}, f32);
  torch::Tensor a = torch::randn({256, 256}, f32), b;
  constexpr int kPatterns = 5;
  const char* names[kPatterns] = {"back-to-back", "sleep gap", "compute gap", "compute gap, both busy",
                                  "compute gap, busy after"};
  std::vector<double> one_way[kPatterns];
  for (int block = 0; block < blocks; ++block) {
    for (int p = 0; p < kPatterns; ++p) {
      for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
        if (rank == 0) {
          if (p == 1) usleep(static_cast<useconds_t>(gap_ms * 1000));
          if (p >= 2) Compute(gap_ms, a, b);
          const int64_t t0 = SteadyNowNs();
          buf.narrow(0, 0, n).copy_(payload);
          Send(g, buf, 1);
          Recv(g, buf, 1);
          const double held = buf[n].item<float>();
          if (r > 0) one_way[p].push_back((static_cast<double>(SteadyNowNs() - t0) - held) / 2);
        } else {
          if (p == 3) {
            // Busy while waiting (another agent's work on these cores): the
            // receive blocks, so a second thread computes beside it.
            std::atomic<bool> done{false};
            std::thread busy([&] {
              torch::Tensor c = torch::randn({256, 256}, f32), d;
              while (!done) d = torch::mm(c, c);
            });
            Recv(g, buf, 0);
            done = true;
            busy.join();
          } else {
            Recv(g, buf, 0);
          }
          const int64_t got = SteadyNowNs();
          if (p >= 2) Compute(hold_ms, a, b);
          const int64_t copy_start = SteadyNowNs();
          buf.narrow(0, 0, n).copy_(payload);
          buf[n] = static_cast<float>(copy_start - got);
          Send(g, buf, 0);
          if (p == 4) Compute(after_ms, a, b);
        }
      }
    }
  }
  if (rank == 1) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  std::printf(
      "cpu: %s; message %.2f MB, gap %.0f ms, hold %.1f ms, after %.1f ms, %d round trips per pattern (%d "
      "blocks)\n",
      hetbench::bench::CpuModel().c_str(), mbytes, gap_ms, hold_ms, after_ms, rounds * blocks, blocks);
  double base = 0;
  for (int p = 0; p < kPatterns; ++p) {
    const double m = hetbench::MedianInPlace(one_way[p]);  // reorders, the trimmed mean does not mind
    const double trimmed = hetbench::TrimmedMeanInPlace(one_way[p], 0.125);
    if (p == 0) base = m;
    std::printf("%-24s one way p50 %8.1f us  trimmed mean %8.1f us  %.2f GB/s  p50 ratio to back-to-back %.2f\n",
                names[p], m / 1e3, trimmed / 1e3, static_cast<double>(n) * 4 / m, m / base);
  }
  return 0;
}
