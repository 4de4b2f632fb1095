#include "agent/qpu/qnn_batched.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

namespace hetbench::agent::qpu {

namespace {

// Samples simulated together: a constant, so every loop over them has a
// known trip count (4 AVX-512 vectors of doubles) and no remainder.
constexpr int64_t kChunk = 32;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HETBENCH_QNN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HETBENCH_QNN_CLONES
#endif
#define HETBENCH_INLINE inline __attribute__((always_inline))

struct Shape {
  int n = 0, layers = 0;
  int64_t dim = 0;
};

// One chunk's states: re[i * kChunk + b], im[i * kChunk + b].
struct States {
  double* re;
  double* im;
};

// RY(t) per sample on qubit q: c[b] = cos(t_b / 2), s[b] = sin(t_b / 2).
HETBENCH_INLINE void Ry(States st, int64_t dim, int q, const double* __restrict__ c, const double* __restrict__ s) {
  const int64_t stride = int64_t{1} << q;
  for (int64_t i0 = 0; i0 < dim; ++i0) {
    if (i0 & stride) continue;
    double* __restrict__ r0 = st.re + i0 * kChunk;
    double* __restrict__ r1 = st.re + (i0 | stride) * kChunk;
    double* __restrict__ m0 = st.im + i0 * kChunk;
    double* __restrict__ m1 = st.im + (i0 | stride) * kChunk;
    for (int64_t b = 0; b < kChunk; ++b) {
      const double x0 = r0[b], x1 = r1[b], y0 = m0[b], y1 = m1[b];
      r0[b] = c[b] * x0 - s[b] * x1;
      r1[b] = s[b] * x0 + c[b] * x1;
      m0[b] = c[b] * y0 - s[b] * y1;
      m1[b] = s[b] * y0 + c[b] * y1;
    }
  }
}

// RZ(t), one angle for the chunk: diag(c - i s, c + i s).
HETBENCH_INLINE void Rz(States st, int64_t dim, int q, double c, double s) {
  for (int64_t i = 0; i < dim; ++i) {
    const double t = ((i >> q) & 1) ? s : -s;
    double* __restrict__ r = st.re + i * kChunk;
    double* __restrict__ m = st.im + i * kChunk;
    for (int64_t b = 0; b < kChunk; ++b) {
      const double x = r[b], y = m[b];
      r[b] = c * x - t * y;
      m[b] = c * y + t * x;
    }
  }
}

HETBENCH_INLINE void Cz(States st, int64_t dim, int a, int b2) {
  const int64_t both = (int64_t{1} << a) | (int64_t{1} << b2);
  for (int64_t i = 0; i < dim; ++i) {
    if ((i & both) != both) continue;
    for (int64_t b = 0; b < kChunk; ++b) {
      st.re[i * kChunk + b] = -st.re[i * kChunk + b];
      st.im[i * kChunk + b] = -st.im[i * kChunk + b];
    }
  }
}

// The gate list of one layer structure, shared by every sample: encodings
// first (per-sample angles), then per layer RY, RZ on each qubit and the CZ ring.
struct Gate {
  enum Kind { kEncode, kRy, kRz, kCz } kind;
  int q = 0, target = 0;
  int64_t weight = -1;  // index into weights (kRy, kRz)
};

std::vector<Gate> Gates(const Shape& sh) {
  std::vector<Gate> g;
  for (int q = 0; q < sh.n; ++q) g.push_back({Gate::kEncode, q, 0, -1});
  for (int l = 0; l < sh.layers; ++l) {
    for (int q = 0; q < sh.n; ++q) {
      const int64_t w = (static_cast<int64_t>(l) * sh.n + q) * 2;
      g.push_back({Gate::kRy, q, 0, w});
      g.push_back({Gate::kRz, q, 0, w + 1});
    }
    for (int q = 0; q < sh.n && sh.n > 1; ++q) {
      if (sh.n == 2 && q == 1) break;  // a ring of two is one CZ
      g.push_back({Gate::kCz, q, (q + 1) % sh.n, -1});
    }
  }
  return g;
}

// Per-sample cos/sin of half the encoding angles: cs[q][b], sn[q][b].
struct HalfAngles {
  std::vector<double> c, s;
};
HalfAngles Encodings(const double* angles, const Shape& sh) {  // angles [kChunk, n]
  HalfAngles h{std::vector<double>(static_cast<size_t>(sh.n * kChunk)),
               std::vector<double>(static_cast<size_t>(sh.n * kChunk))};
  for (int q = 0; q < sh.n; ++q) {
    for (int64_t b = 0; b < kChunk; ++b) {
      h.c[q * kChunk + b] = std::cos(angles[b * sh.n + q] / 2);
      h.s[q * kChunk + b] = std::sin(angles[b * sh.n + q] / 2);
    }
  }
  return h;
}

// Forward: the final states of a chunk and <Z_q> per sample (out[b * n + q]).
HETBENCH_QNN_CLONES
void ForwardChunk(const Shape& sh, const std::vector<Gate>& gates, const HalfAngles& enc, const double* weights,
                  States st, double* out) {
  const int64_t dim = sh.dim;
  // The encodings on |0...0> make a product state: amplitude i is the product
  // over qubits of cos (bit 0) or sin (bit 1), built by doubling.
  for (int64_t i = 0; i < dim * kChunk; ++i) st.re[i] = st.im[i] = 0;
  for (int64_t b = 0; b < kChunk; ++b) st.re[b] = 1;
  for (int q = 0; q < sh.n; ++q) {
    const double* c = enc.c.data() + q * kChunk;
    const double* s = enc.s.data() + q * kChunk;
    for (int64_t i = 0; i < (int64_t{1} << q); ++i) {
      double* __restrict__ lo = st.re + i * kChunk;
      double* __restrict__ hi = st.re + (i | (int64_t{1} << q)) * kChunk;
      for (int64_t b = 0; b < kChunk; ++b) {
        hi[b] = lo[b] * s[b];
        lo[b] *= c[b];
      }
    }
  }
  double c[kChunk], s[kChunk];
  for (const Gate& g : gates) {
    switch (g.kind) {
      case Gate::kEncode:
        break;  // done above
      case Gate::kRy:
        for (int64_t b = 0; b < kChunk; ++b) c[b] = std::cos(weights[g.weight] / 2), s[b] = std::sin(weights[g.weight] / 2);
        Ry(st, dim, g.q, c, s);
        break;
      case Gate::kRz:
        Rz(st, dim, g.q, std::cos(weights[g.weight] / 2), std::sin(weights[g.weight] / 2));
        break;
      case Gate::kCz:
        Cz(st, dim, g.q, g.target);
        break;
    }
  }
  double e[64 * kChunk] = {};  // n <= 64
  for (int64_t i = 0; i < dim; ++i) {
    const double* r = st.re + i * kChunk;
    const double* m = st.im + i * kChunk;
    double p[kChunk];
    for (int64_t b = 0; b < kChunk; ++b) p[b] = r[b] * r[b] + m[b] * m[b];
    for (int q = 0; q < sh.n; ++q) {
      double* eq = e + q * kChunk;
      if ((i >> q) & 1) {
        for (int64_t b = 0; b < kChunk; ++b) eq[b] -= p[b];
      } else {
        for (int64_t b = 0; b < kChunk; ++b) eq[b] += p[b];
      }
    }
  }
  for (int64_t b = 0; b < kChunk; ++b) {
    for (int q = 0; q < sh.n; ++q) out[b * sh.n + q] = e[q * kChunk + b];
  }
}

// Adjoint sweep over a chunk: phi holds the final states and is undone gate
// by gate; lambda = O phi with O = sum_q g_q Z_q. Writes d/d(angle) per
// sample into grad_angles[b * n + q] and d/d(weight) per sample into
// grad_weights[b * W + w].
HETBENCH_QNN_CLONES
void BackwardChunk(const Shape& sh, const std::vector<Gate>& gates, const HalfAngles& enc, const double* weights,
                   const double* grad_out, States phi, States lambda, double* grad_angles, double* grad_weights,
                   int64_t weight_count) {
  const int64_t dim = sh.dim;
  for (int64_t i = 0; i < dim; ++i) {
    double d[kChunk] = {};
    for (int q = 0; q < sh.n; ++q) {
      const bool one = (i >> q) & 1;
      for (int64_t b = 0; b < kChunk; ++b) d[b] += one ? -grad_out[b * sh.n + q] : grad_out[b * sh.n + q];
    }
    for (int64_t b = 0; b < kChunk; ++b) {
      lambda.re[i * kChunk + b] = d[b] * phi.re[i * kChunk + b];
      lambda.im[i * kChunk + b] = d[b] * phi.im[i * kChunk + b];
    }
  }
  double c[kChunk], s[kChunk], acc[kChunk];
  for (auto it = gates.rbegin(); it != gates.rend(); ++it) {
    const Gate& g = *it;
    if (g.kind == Gate::kCz) {
      Cz(phi, dim, g.q, g.target);
      Cz(lambda, dim, g.q, g.target);
      continue;
    }
    for (int64_t b = 0; b < kChunk; ++b) acc[b] = 0;
    const int64_t stride = int64_t{1} << g.q;
    if (g.kind == Gate::kRz) {
      // 2 Re <lambda| (-i/2 Z) |phi>: + (lr pi - li pr) where the bit is 0, - where it is 1.
      for (int64_t i = 0; i < dim; ++i) {
        const double sign = (i & stride) ? -1.0 : 1.0;
        const double* lr = lambda.re + i * kChunk;
        const double* li = lambda.im + i * kChunk;
        const double* pr = phi.re + i * kChunk;
        const double* pi = phi.im + i * kChunk;
        for (int64_t b = 0; b < kChunk; ++b) acc[b] += sign * (lr[b] * pi[b] - li[b] * pr[b]);
      }
      const double w = weights[g.weight];
      Rz(phi, dim, g.q, std::cos(w / 2), -std::sin(w / 2));
      Rz(lambda, dim, g.q, std::cos(w / 2), -std::sin(w / 2));
    } else {
      // 2 Re <lambda| (-i/2 Y) |phi> over each pair: (l1 . p0) - (l0 . p1).
      for (int64_t i0 = 0; i0 < dim; ++i0) {
        if (i0 & stride) continue;
        const int64_t i1 = i0 | stride;
        const double* l0r = lambda.re + i0 * kChunk;
        const double* l0i = lambda.im + i0 * kChunk;
        const double* l1r = lambda.re + i1 * kChunk;
        const double* l1i = lambda.im + i1 * kChunk;
        const double* p0r = phi.re + i0 * kChunk;
        const double* p0i = phi.im + i0 * kChunk;
        const double* p1r = phi.re + i1 * kChunk;
        const double* p1i = phi.im + i1 * kChunk;
        for (int64_t b = 0; b < kChunk; ++b) {
          acc[b] += l1r[b] * p0r[b] + l1i[b] * p0i[b] - l0r[b] * p1r[b] - l0i[b] * p1i[b];
        }
      }
      if (g.kind == Gate::kEncode) {
        for (int64_t b = 0; b < kChunk; ++b) c[b] = enc.c[g.q * kChunk + b], s[b] = -enc.s[g.q * kChunk + b];
      } else {
        const double w = weights[g.weight];
        for (int64_t b = 0; b < kChunk; ++b) c[b] = std::cos(w / 2), s[b] = -std::sin(w / 2);
      }
      Ry(phi, dim, g.q, c, s);
      Ry(lambda, dim, g.q, c, s);
    }
    if (g.kind == Gate::kEncode) {
      for (int64_t b = 0; b < kChunk; ++b) grad_angles[b * sh.n + g.q] = acc[b];
    } else {
      for (int64_t b = 0; b < kChunk; ++b) grad_weights[b * weight_count + g.weight] = acc[b];
    }
  }
}

// The inputs as float64, padded with zero angles (valid circuits whose
// results are dropped) to whole chunks.
torch::Tensor Padded(const torch::Tensor& t, int64_t rows) {
  torch::Tensor d = t.detach().to(torch::kFloat64).contiguous();
  if (d.size(0) == rows) return d;
  return torch::cat({d, torch::zeros({rows - d.size(0), d.size(1)}, torch::kFloat64)}).contiguous();
}

Shape ShapeOf(const torch::Tensor& angles, const torch::Tensor& weights) {
  Shape sh;
  sh.n = static_cast<int>(angles.size(1));
  sh.layers = static_cast<int>(weights.size(0));
  sh.dim = int64_t{1} << sh.n;
  TORCH_CHECK(sh.n >= 1 && sh.n <= 20, "qnn: qubits = ", sh.n, " must be in [1, 20]");
  return sh;
}

}  // namespace

torch::Tensor BatchedExpectations(const torch::Tensor& angles_in, const torch::Tensor& weights_in,
                                  torch::Tensor* states) {
  const Shape sh = ShapeOf(angles_in, weights_in);
  const int64_t batch = angles_in.size(0), chunks = (batch + kChunk - 1) / kChunk;
  const torch::Tensor angles = Padded(angles_in, chunks * kChunk);
  const torch::Tensor weights = weights_in.detach().to(torch::kFloat64).contiguous();
  torch::Tensor st = torch::empty({chunks, 2, sh.dim, kChunk}, torch::kFloat64);
  torch::Tensor out = torch::empty({chunks * kChunk, sh.n}, torch::kFloat64);
  const std::vector<Gate> gates = Gates(sh);
  const double* a = angles.data_ptr<double>();
  const double* w = weights.data_ptr<double>();
  double* o = out.data_ptr<double>();
  double* sp = st.data_ptr<double>();
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double* re = sp + c * 2 * sh.dim * kChunk;
      ForwardChunk(sh, gates, Encodings(a + c * kChunk * sh.n, sh), w, States{re, re + sh.dim * kChunk},
                   o + c * kChunk * sh.n);
    }
  });
  if (states) *states = st;
  return out.slice(0, 0, batch);
}

void BatchedGradients(const torch::Tensor& angles_in, const torch::Tensor& weights_in, const torch::Tensor& grad_in,
                      const torch::Tensor& states_in, torch::Tensor* grad_angles, torch::Tensor* grad_weights) {
  const Shape sh = ShapeOf(angles_in, weights_in);
  const int64_t batch = angles_in.size(0), chunks = (batch + kChunk - 1) / kChunk;
  // The sweep undoes the gates in place: a saved forward state is copied
  // (autograd may call backward again), a fresh one is used as is.
  torch::Tensor states;
  if (states_in.defined()) {
    states = states_in.clone();
  } else {
    BatchedExpectations(angles_in, weights_in, &states);
  }
  const torch::Tensor angles = Padded(angles_in, chunks * kChunk);
  const torch::Tensor grad = Padded(grad_in, chunks * kChunk);  // padded rows carry no gradient
  const torch::Tensor weights = weights_in.detach().to(torch::kFloat64).contiguous();
  const int64_t wcount = weights.numel();
  torch::Tensor ga = torch::zeros({chunks * kChunk, sh.n}, torch::kFloat64);
  torch::Tensor gw = torch::zeros({chunks * kChunk, std::max<int64_t>(wcount, 1)}, torch::kFloat64);
  const std::vector<Gate> gates = Gates(sh);
  const double* a = angles.data_ptr<double>();
  const double* w = weights.data_ptr<double>();
  const double* g = grad.data_ptr<double>();
  double* sp = states.data_ptr<double>();
  double* gap = ga.data_ptr<double>();
  double* gwp = gw.data_ptr<double>();
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<double> lambda(static_cast<size_t>(2 * sh.dim * kChunk));
    for (int64_t c = c0; c < c1; ++c) {
      double* re = sp + c * 2 * sh.dim * kChunk;
      BackwardChunk(sh, gates, Encodings(a + c * kChunk * sh.n, sh), w, g + c * kChunk * sh.n,
                    States{re, re + sh.dim * kChunk}, States{lambda.data(), lambda.data() + sh.dim * kChunk},
                    gap + c * kChunk * sh.n, gwp + c * kChunk * std::max<int64_t>(wcount, 1), std::max<int64_t>(wcount, 1));
    }
  });
  *grad_angles = ga.slice(0, 0, batch).contiguous().to(angles_in.scalar_type());
  *grad_weights = gw.slice(0, 0, batch).slice(1, 0, wcount).sum(0).view(weights_in.sizes()).to(weights_in.scalar_type());
}

}  // namespace hetbench::agent::qpu
