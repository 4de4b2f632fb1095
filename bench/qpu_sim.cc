// The state-vector simulator's speed, measured in one run: for each qubit
// count and thread count, the memory bandwidth of a plain in-place
// read-modify-write loop over the state's buffer, of an unfused single-qubit
// gate (a layer of RY, one pass per gate), their ratio (goal >= 0.6 at
// n >= 22), and gates per second of the layered circuit (depth 10: RY on every
// qubit, then CZ on alternating neighbour pairs), unfused and fused.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "agent/qpu/circuit.h"
#include "agent/qpu/statevector.h"
#include "common/clock.h"

namespace {

using hetbench::SteadyNowNs;
namespace qpu = hetbench::agent::qpu;

template <typename F>
double BestSeconds(int repeats, const F& f) {
  int64_t best = INT64_MAX;
  for (int r = 0; r < repeats; ++r) {
    const int64_t t0 = SteadyNowNs();
    f();
    best = std::min(best, SteadyNowNs() - t0);
  }
  return static_cast<double>(best) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> qubits = {16, 20, 24, 26}, threads = {1, 2};
  int depth = 10, repeats = 3;
  CLI::App app{"hetbench state-vector simulator: gate bandwidth vs a plain loop, gates per second"};
  app.add_option("--qubits", qubits, "qubit counts")->delimiter(',')->capture_default_str();
  app.add_option("--threads", threads, "thread counts")->delimiter(',')->capture_default_str();
  app.add_option("--depth", depth, "layered circuit depth")->capture_default_str();
  app.add_option("--repeats", repeats, "best of this many runs")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::printf("complex64 states; bandwidth counts each pass as reading and writing the whole state\n");
  std::printf("%-6s %-7s %9s %12s %12s %7s %14s %14s %7s\n", "qubits", "threads", "state_MiB", "loop_GB/s",
              "gate_GB/s", "ratio", "unfused_gate/s", "fused_gate/s", "passes");
  for (int n : qubits) {
    auto state = qpu::StateVector<float>::Create(n, 1, int64_t{16} << 30);
    if (!state.ok()) {
      std::printf("%-6d %s\n", n, std::string(state.status().message()).c_str());
      continue;
    }
    const double bytes = static_cast<double>(state->bytes());
    const qpu::Circuit layered = qpu::LayeredCircuit(n, depth);
    const qpu::Circuit fused = layered.Fused();
    qpu::Circuit ry_layer(n);
    for (int q = 0; q < n; ++q) ry_layer.Ry(q, 0.3 + 0.01 * q);
    for (int t : threads) {
      torch::set_num_threads(t);
      // The plain loop: every amplitude times a unit phase, in place, same chunks and threads.
      const std::complex<float> phase(0.6f, 0.8f);
      std::complex<float>* a = state->data();
      const double loop_s = BestSeconds(repeats, [&] {
        at::parallel_for(0, state->dim(), qpu::kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const float re = a[i].real(), im = a[i].imag();
            a[i] = {re * phase.real() - im * phase.imag(), re * phase.imag() + im * phase.real()};
          }
        });
      });
      const double layer_s = BestSeconds(repeats, [&] { ry_layer.Run(*state); });
      const double gate_s = layer_s / n;
      const double unfused_s = BestSeconds(1, [&] { layered.Run(*state); });
      const double fused_s = BestSeconds(1, [&] { fused.Run(*state); });
      const double loop_bw = 2 * bytes / loop_s / 1e9, gate_bw = 2 * bytes / gate_s / 1e9;
      std::printf("%-6d %-7d %9.1f %12.2f %12.2f %7.3f %14.1f %14.1f %3zu/%-3zu\n", n, t, bytes / (1 << 20), loop_bw,
                  gate_bw, gate_bw / loop_bw, static_cast<double>(layered.size()) / unfused_s,
                  static_cast<double>(layered.size()) / fused_s, fused.size(), layered.size());
      std::fflush(stdout);
    }
  }
  std::printf("ratio = gate_GB/s / loop_GB/s for an unfused single-qubit gate (goal >= 0.6 at n >= 22);\n"
              "fused_gate/s counts the original gates, done in `passes` (fused/unfused) passes.\n");
  return 0;
}
