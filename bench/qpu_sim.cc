// The state-vector simulator's speed, measured in one run, as ratios to the
// machine's own memory bandwidth:
//  1. the machine: an explicitly vectorised in-place read-modify-write
//     (x = x * a + b, bench/stream_baseline.cc) and memcpy over a buffer the
//     size of the state, at each thread count, so thread scaling is judged
//     against what the memory allows;
//  2. an unfused single-qubit gate (a layer of RY, one pass per gate) as
//     GB/s and as a ratio to the read-modify-write (goal >= 0.85 at n >= 24);
//  3. the layered circuit (depth 10: RY on every qubit, then CZ on
//     alternating neighbour pairs), unfused, then fused into blocks of at
//     most k qubits for each k (passes and seconds), and the k the cost model
//     picks; then each fused program's GB/s per pass as a ratio to the
//     read-modify-write (its real blocks on the kernels' real path, and
//     again forced onto the complex path, alternated), and the pick's time
//     over the fastest k's;
//  4. where the state is stored padded (kernels::Padding, from 512 MiB), the
//     flat layout in the same memory: a one-qubit gate on the top qubit and
//     the fused programs, alternated flat, padded, flat, padded.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <complex>
#include <cstdio>
#include <cstring>
#include <vector>

#include "agent/qpu/circuit.h"
#include "agent/qpu/huge_pages.h"
#include "agent/qpu/kernels.h"
#include "agent/qpu/statevector.h"
#include "bench/machine.h"
#include "bench/stream_baseline.h"
#include "common/clock.h"
#include "common/stats.h"

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

// `p` with every dense block made to take the kernels' complex path: an
// imaginary part of 1e-300 where an entry has none (0 once rounded to float:
// the same product), so real blocks are timed as a general complex block is.
qpu::Program ComplexPath(qpu::Program p) {
  for (qpu::kernels::Block& b : p.blocks) {
    if (b.diagonal) continue;
    for (std::complex<double>& e : b.matrix) {
      if (e.imag() == 0) e.imag(1e-300);
    }
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> qubits = {20, 24, 26}, threads = {1, 2}, ks = {2, 3, 4, 5, 6};
  int depth = 10, repeats = 3, circuit_repeats = 3;
  bool circuits = true;
  CLI::App app{"hetbench state-vector simulator: gate bandwidth against the machine's, fusion by k, threads"};
  app.add_option("--qubits", qubits, "qubit counts")->delimiter(',')->capture_default_str();
  app.add_option("--threads", threads, "thread counts")->delimiter(',')->capture_default_str();
  app.add_option("--k", ks, "fused block sizes to time")->delimiter(',')->capture_default_str();
  app.add_option("--depth", depth, "layered circuit depth")->capture_default_str();
  app.add_option("--repeats", repeats, "best of this many runs (bandwidth rows)")->capture_default_str();
  app.add_option("--circuit-repeats", circuit_repeats,
                 "runs of each program (circuit rows): times are the best, per-pass ratios the median")
      ->capture_default_str();
  app.add_flag("!--no-circuits", circuits, "skip the layered-circuit rows");
  CLI11_PARSE(app, argc, argv);

  std::printf("cpu: %s\n", hetbench::bench::CpuModel().c_str());
  std::printf("kernels: %s (%d complex64 per vector); compiled and supported here:", qpu::kernels::ActiveTarget().c_str(),
              qpu::kernels::ComplexLanes(false));
  for (const std::string& t : qpu::kernels::AvailableTargets()) std::printf(" %s", t.c_str());
  std::printf("\nbaseline: x = x*a + b in place, %lld float lanes (Highway, explicit SIMD); complex64 states.\n",
              static_cast<long long>(hetbench::bench::StreamFloatLanes()));
  std::printf("Every GB/s counts one read and one write of the whole buffer per pass.\n");
  std::printf(
      "memory: states and the baseline's buffer (the state itself) ask for huge pages (MADV_HUGEPAGE); "
      "transparent huge pages here: %s\n\n",
      qpu::TransparentHugePagesMode().c_str());
  std::printf("%-6s %-7s %9s %9s %9s %9s %7s %9s %9s\n", "qubits", "threads", "state_MiB", "rmw_GB/s", "copy_GB/s",
              "gate_GB/s", "ratio", "low_GB/s", "high_GB/s");
  struct CircuitRow {
    int n, t;
    double bytes;  // the state's size
    double unfused_s;
    size_t gates;
    std::vector<std::pair<size_t, double>> by_k;
    std::vector<double> complex_by_k;  // the same programs on the complex path
    // Per k, the median over the repeats of each run's per-pass GB/s over the
    // read-modify-write timed just before and after it (real path, complex path).
    std::vector<double> ratio_by_k, complex_ratio_by_k;
    int chosen_k;
    size_t chosen_passes;
    double chosen_s;
    double pick_s = 0;
    std::vector<double> estimate_by_k = {};  // the cost model's seconds for each k's program
    double chosen_estimate_s = 0;
  };
  std::vector<CircuitRow> rows;
  for (int n : qubits) {
    auto state = qpu::StateVector<float>::Create(n, 1, int64_t{16} << 30);
    if (!state.ok()) {
      std::printf("%-6d %s\n", n, std::string(state.status().message()).c_str());
      continue;
    }
    const double bytes = static_cast<double>(state->bytes());  // the amplitudes a pass moves
    // The baseline sweeps the state's whole storage (pads too, when padded).
    const double storage_bytes = static_cast<double>(state->storage_bytes());
    std::vector<std::complex<float>, qpu::HugePageAllocator<std::complex<float>>> other(
        static_cast<size_t>(state->layout().Storage(n)));
    float* raw = reinterpret_cast<float*>(state->storage());
    const int64_t floats = 2 * state->layout().Storage(n);
    for (int t : threads) {
      torch::set_num_threads(t);
      // Untimed first: right after the thread count changes, the new
      // threads' first passes ran at 0.6-0.7 of their later speed here.
      for (const int64_t until = SteadyNowNs() + 300'000'000; SteadyNowNs() < until;) {
        hetbench::bench::StreamRmw(raw, floats, 0.999f, 1e-9f);
      }
      const double rmw_s = BestSeconds(repeats, [&] { hetbench::bench::StreamRmw(raw, floats, 0.999f, 1e-9f); });
      const double copy_s = BestSeconds(repeats, [&] {
        at::parallel_for(0, state->layout().Storage(n), int64_t{1} << 15, [&](int64_t b, int64_t e) {
          std::memcpy(other.data() + b, state->storage() + b, static_cast<size_t>(e - b) * sizeof(other[0]));
        });
      });
      state->Reset();
      // One RY pass per qubit; "low" qubits lie inside a SIMD vector (lane permutations), "high" across vectors.
      const int low = std::min(n, [] {
        int l = 0;
        while ((1 << l) < qpu::kernels::ComplexLanes(false)) ++l;
        return l;
      }());
      std::vector<double> per_qubit(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) {
        per_qubit[q] = BestSeconds(repeats, [&] { state->Apply1(q, qpu::Ry<float>(0.3 + 0.01 * q)); });
      }
      double all = 0, lo = 0, hi = 0;
      for (int q = 0; q < n; ++q) {
        all += per_qubit[q];
        (q < low ? lo : hi) += per_qubit[q];
      }
      const double rmw_bw = 2 * storage_bytes / rmw_s / 1e9, gate_bw = 2 * bytes / (all / n) / 1e9;
      std::printf("%-6d %-7d %9.1f %9.2f %9.2f %9.2f %7.3f %9.2f %9.2f\n", n, t, bytes / (1 << 20), rmw_bw,
                  2 * storage_bytes / copy_s / 1e9, gate_bw, gate_bw / rmw_bw, low ? 2 * bytes / (lo / low) / 1e9 : 0.0,
                  2 * bytes / (hi / (n - low)) / 1e9);
      std::fflush(stdout);
      if (!circuits) continue;
      const qpu::Circuit layered = qpu::LayeredCircuit(n, depth);
      CircuitRow row{n, t, bytes, 0, layered.size(), {}, {}, {}, {}, 0, 0, 0};
      const qpu::Program unfused = qpu::Unfused(layered);
      state->Reset();
      row.unfused_s = BestSeconds(1, [&] { unfused.Run(*state); });
      // The pick first (its costs' measurement timed the first time), then
      // every k alternated, best of each.
      const int64_t pick_start = SteadyNowNs();
      const qpu::Program chosen = qpu::Fused(layered, false);
      row.pick_s = static_cast<double>(SteadyNowNs() - pick_start) * 1e-9;  // the costs' measurement, first time
      row.chosen_k = chosen.max_block_qubits;  // the k asked for (blocks may be smaller)
      row.chosen_passes = chosen.size();
      const qpu::PassCosts& costs = qpu::MeasuredPassCosts(false, qpu::StreamsFromMemory(n, false));
      row.chosen_estimate_s = qpu::EstimatedSeconds(chosen, costs);
      std::vector<qpu::Program> programs, complex_paths;
      for (int k : ks) {
        programs.push_back(qpu::FuseUpTo(layered, k));
        complex_paths.push_back(ComplexPath(programs.back()));
        row.estimate_by_k.push_back(qpu::EstimatedSeconds(programs.back(), costs));
      }
      if (t == threads.front()) {
        // What each k's passes are: dense across vectors, dense with a qubit inside a vector, diagonal.
        std::printf("  passes at n=%d:", n);
        for (const qpu::Program& p : programs) {
          int high = 0, low = 0, diagonal = 0;
          for (const qpu::kernels::Block& b : p.blocks) {
            ++(b.diagonal ? diagonal : qpu::kernels::HasQubitInsideVector(b, false) ? low : high);
          }
          std::printf(" k=%d %zu (%d dense, %d dense in-vector, %d diagonal);", p.max_block_qubits, p.size(), high, low,
                      diagonal);
        }
        std::printf("\n");
      }
      std::vector<double> real_s(ks.size(), 1e300), complex_s(ks.size(), 1e300);
      // The baseline beside each run: this VM's bandwidth moves by a third
      // within minutes, so one read-modify-write at the row's start is no
      // baseline for a run a minute later. Each run's ratio is to the mean of
      // the read-modify-writes timed just before and just after it.
      const auto rmw_now = [&] {
        return 2 * storage_bytes / BestSeconds(3, [&] { hetbench::bench::StreamRmw(raw, floats, 0.999f, 1e-9f); }) /
               1e9;
      };
      std::vector<std::vector<double>> real_ratio(ks.size()), complex_ratio(ks.size());
      // The pick is FuseUpTo(layered, chosen_k): when that k is timed, its
      // time is the pick's (timing the same program twice would put this
      // VM's run-to-run noise, ~5 %, into pick/best); else it is timed too.
      const auto timed = std::find(ks.begin(), ks.end(), row.chosen_k);
      row.chosen_s = 1e300;
      for (int r = 0; r < circuit_repeats; ++r) {
        for (size_t i = 0; i < ks.size(); ++i) {
          const double pass_bytes = 2 * bytes * static_cast<double>(programs[i].size());
          const double rmw_before = rmw_now();
          state->Reset();
          const double real = BestSeconds(1, [&] { programs[i].Run(*state); });
          const double rmw_between = rmw_now();
          state->Reset();
          const double complex = BestSeconds(1, [&] { complex_paths[i].Run(*state); });
          const double rmw_after = rmw_now();
          real_s[i] = std::min(real_s[i], real);
          complex_s[i] = std::min(complex_s[i], complex);
          real_ratio[i].push_back(pass_bytes / real / 1e9 / ((rmw_before + rmw_between) / 2));
          complex_ratio[i].push_back(pass_bytes / complex / 1e9 / ((rmw_between + rmw_after) / 2));
        }
        if (timed == ks.end()) {
          state->Reset();
          row.chosen_s = std::min(row.chosen_s, BestSeconds(1, [&] { chosen.Run(*state); }));
        }
      }
      if (timed != ks.end()) row.chosen_s = real_s[static_cast<size_t>(timed - ks.begin())];
      for (size_t i = 0; i < ks.size(); ++i) {
        row.by_k.emplace_back(programs[i].size(), real_s[i]);
        row.complex_by_k.push_back(complex_s[i]);
        row.ratio_by_k.push_back(hetbench::MedianInPlace(real_ratio[i]));
        row.complex_ratio_by_k.push_back(hetbench::MedianInPlace(complex_ratio[i]));
      }
      rows.push_back(row);
      if (state->layout().padded()) {
        // 4. The padded layout against the flat one in the same storage (the
        // flat state is its first 2^n amplitudes: the same memory, so the
        // layout is all that differs): per layout and round, a one-qubit gate
        // on the top qubit (best of `repeats`) and each k's program, each a
        // ratio to the read-modify-write timed just before and after it; the
        // median over the rounds.
        const qpu::kernels::Padding layouts[2] = {qpu::kernels::Padding{}, state->layout()};
        const qpu::Mat2<double> ry = qpu::Ry<double>(0.3);
        const qpu::kernels::Block top{{n - 1}, {ry.begin(), ry.end()}, false};
        std::vector<std::vector<double>> by_layout[2];  // [flat, padded][0: top gate, 1 + i: ks[i]]
        for (auto& v : by_layout) v.assign(1 + ks.size(), {});
        std::vector<double> best_s[2];
        for (auto& b : best_s) b.assign(1 + ks.size(), 1e300);
        for (int r = 0; r < circuit_repeats; ++r) {
          for (int padded = 0; padded < 2; ++padded) {
            const qpu::kernels::Padding& layout = layouts[padded];
            const auto run = [&](const qpu::kernels::Block& b) { qpu::kernels::Apply(b, state->storage(), n, layout); };
            const auto timed_ratio = [&](size_t slot, double pass_bytes, const auto& run) {
              const double before = rmw_now();
              const double sec = run();
              const double after = rmw_now();
              by_layout[padded][slot].push_back(pass_bytes / sec / 1e9 / ((before + after) / 2));
              best_s[padded][slot] = std::min(best_s[padded][slot], sec);
            };
            state->Reset();  // |0...0> in either layout: amplitude 0 first, zeros after it
            timed_ratio(0, 2 * bytes, [&] { return BestSeconds(repeats, [&] { run(top); }); });
            for (size_t i = 0; i < ks.size(); ++i) {
              state->Reset();
              timed_ratio(1 + i, 2 * bytes * static_cast<double>(programs[i].size()), [&] {
                return BestSeconds(1, [&] {
                  for (const qpu::kernels::Block& b : programs[i].blocks) run(b);
                });
              });
            }
          }
        }
        const qpu::kernels::Padding& pad = state->layout();
        const double top_flat = hetbench::MedianInPlace(by_layout[0][0]);
        const double top_padded = hetbench::MedianInPlace(by_layout[1][0]);
        std::printf(
            "  layout at n=%d, %d thread(s): a pad of %lld KiB every %lld MiB against flat in the same memory, "
            "alternated; "
            "per-pass ratio to the read-modify-write, median of %d (flat -> padded)\n"
            "    top qubit %d, one gate: %.3f -> %.3f\n",
            n, t, static_cast<long long>(pad.pad * 8 >> 10),
            static_cast<long long>((int64_t{8} << pad.every_log2) >> 20), circuit_repeats, n - 1, top_flat, top_padded);
        for (size_t i = 0; i < ks.size(); ++i) {
          std::printf("    k=%d program: %.3f -> %.3f, best time %.2f s -> %.2f s (padded/flat %.3f)\n", ks[i],
                      hetbench::MedianInPlace(by_layout[0][1 + i]), hetbench::MedianInPlace(by_layout[1][1 + i]),
                      best_s[0][1 + i], best_s[1][1 + i], best_s[1][1 + i] / best_s[0][1 + i]);
        }
        std::printf("RESULT qpu_sim_layout qubits=%d threads=%d top_flat=%.3f top_padded=%.3f\n", n, t, top_flat,
                    top_padded);
        std::fflush(stdout);
      }
    }
  }
  std::printf("\nratio = gate_GB/s / rmw_GB/s for an unfused single-qubit gate (goal >= 0.85 at n >= 24, 1 thread).\n");
  // The costs the model measured (one thread), in cache and past the caches.
  for (const bool streamed : {false, true}) {
    const qpu::PassCosts& c = qpu::MeasuredPassCosts(false, streamed);
    std::printf("\ncost model, complex64, %s (last-level cache %lld MiB): ns per amplitude of a pass, k = 1..%d\n",
                streamed ? "past the caches" : "in cache", static_cast<long long>(qpu::LastLevelCacheBytes() >> 20),
                qpu::kernels::kMaxDenseQubits);
    for (int low = 0; low < 2; ++low) {
      for (int real = 0; real < 2; ++real) {
        std::printf("  %-4s %-7s", low ? "low" : "high", real ? "real" : "complex");
        for (int k = 1; k <= qpu::kernels::kMaxDenseQubits; ++k)
          std::printf(" %7.3f", c.dense_s_per_amp[low][real][k] * 1e9);
        std::printf("\n");
      }
    }
    std::printf("  diagonal     %7.3f\n", c.diagonal_s_per_amp * 1e9);
  }
  if (rows.empty()) return 0;
  std::printf("\nlayered circuit, depth %d: seconds (passes) unfused, fused into blocks of <= k qubits, and the k the "
              "cost model picks\n%-6s %-7s %6s %15s",
              depth, "qubits", "threads", "gates", "unfused");
  for (int k : ks) std::printf(" %14s%d", "k=", k);
  std::printf(" %16s %8s\n", "cost-chosen", "speedup");
  for (const CircuitRow& r : rows) {
    std::printf("%-6d %-7d %6zu %9.2f (%3zu)", r.n, r.t, r.gates, r.unfused_s, r.gates);
    for (const auto& [passes, s] : r.by_k) std::printf(" %9.2f (%3zu)", s, passes);
    std::printf(" k=%d %6.2f (%3zu) %7.2fx\n", r.chosen_k, r.chosen_s, r.chosen_passes, r.unfused_s / r.chosen_s);
  }
  std::printf(
      "\nper pass of each fused program: GB/s (one read and one write of the state per pass) as a ratio to the "
      "read-modify-write at the same thread count timed just before and after each run, the median over %d "
      "runs (goal >= 0.85 for k = 2, 3 at n >= 24); the pick's time over "
      "the fastest k's (goal <= 1.03). The layered circuit's blocks are real (RY, CZ): the first line of each "
      "row times them on the kernels' real path, the second on the complex path a general block takes\n"
      "%-6s %-7s",
      circuit_repeats, "qubits", "threads");
  for (int k : ks) std::printf(" %7s%d", "k=", k);
  std::printf(" %12s %10s %8s\n", "pick/best", "best_k", "costs_s");
  for (const CircuitRow& r : rows) {
    std::printf("%-6d %-7d", r.n, r.t);
    double best = r.chosen_s;
    int best_k = r.chosen_k;
    for (size_t i = 0; i < r.by_k.size(); ++i) {
      const auto& [passes, s] = r.by_k[i];
      std::printf(" %8.3f", r.ratio_by_k[i]);
      if (s < best) {
        best = s;
        best_k = ks[i];
      }
    }
    std::printf(" %12.3f %10d %8.2f\n", r.chosen_s / best, best_k, r.pick_s);
    std::printf("%-6s %-7s", "", "complex");
    for (size_t i = 0; i < r.complex_by_k.size(); ++i) {
      std::printf(" %8.3f", r.complex_ratio_by_k[i]);
    }
    std::printf("   (the same blocks on the kernels' complex path)\n");
    // The costs are one thread's: at more threads the ratio would show the
    // threads' speedup, not the model's error, so it is printed at 1 only.
    if (r.t == 1) {
      std::printf("%-6s %-7s", "", "model");
      for (size_t i = 0; i < r.estimate_by_k.size(); ++i) std::printf(" %8.3f", r.estimate_by_k[i] / r.by_k[i].second);
      std::printf("   (the cost model's estimate over the measured time, real path; the pick's %.3f)\n",
                  r.chosen_estimate_s / r.chosen_s);
    }
    std::printf("RESULT qpu_sim qubits=%d threads=%d pick_k=%d best_k=%d pick_over_best=%.3f\n", r.n, r.t, r.chosen_k,
                best_k, r.chosen_s / best);
  }
  return 0;
}
