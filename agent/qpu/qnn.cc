#include "agent/qpu/qnn.h"

#include <ATen/Parallel.h>

#include "agent/qpu/qnn_batched.h"
#include "agent/qpu/statevector.h"

namespace hetbench::agent::qpu {

namespace {

using C = Complex<double>;

// One sample's gate sequence. A parametrised gate is exp(-i t P / 2), P = Y or Z.
struct Gate {
  enum Kind { kRy, kRz, kCz } kind;
  int q = 0, target = 0;
  double angle = 0;
  int64_t param = -1;  // index into the flat gradient vector: [angles (n) | weights (L*n*2)]
};

std::vector<Gate> Gates(const double* angles, const double* weights, int n, int layers) {
  std::vector<Gate> g;
  g.reserve(static_cast<size_t>(n + layers * 3 * n));
  for (int q = 0; q < n; ++q) g.push_back({Gate::kRy, q, 0, angles[q], q});
  for (int l = 0; l < layers; ++l) {
    for (int q = 0; q < n; ++q) {
      const int64_t w = (static_cast<int64_t>(l) * n + q) * 2;
      g.push_back({Gate::kRy, q, 0, weights[w], n + w});
      g.push_back({Gate::kRz, q, 0, weights[w + 1], n + w + 1});
    }
    for (int q = 0; q < n && n > 1; ++q) {
      if (n == 2 && q == 1) break;  // a ring of two is one CZ
      g.push_back({Gate::kCz, q, (q + 1) % n, 0, -1});
    }
  }
  return g;
}

void Apply(StateVector<double>& s, const Gate& g, bool inverse) {
  const double t = inverse ? -g.angle : g.angle;
  switch (g.kind) {
    case Gate::kRy:
      s.Apply1(g.q, Ry<double>(t), 0);
      break;
    case Gate::kRz:
      s.ApplyDiagonal1(g.q, C(std::cos(t / 2), -std::sin(t / 2)), C(std::cos(t / 2), std::sin(t / 2)), 0);
      break;
    case Gate::kCz:
      s.ApplyCz(g.q, g.target, 0);  // its own inverse
      break;
  }
}

// (-i/2) P applied to a state: the derivative of exp(-i t P / 2) times the state after it.
void ApplyGenerator(StateVector<double>& s, const Gate& g) {
  if (g.kind == Gate::kRy) {  // -i/2 Y = [[0, -1/2], [1/2, 0]]
    s.Apply1(g.q, {C(0), C(-0.5), C(0.5), C(0)}, 0);
  } else {  // -i/2 Z = diag(-i/2, i/2)
    s.ApplyDiagonal1(g.q, C(0, -0.5), C(0, 0.5), 0);
  }
}

StateVector<double> Prepare(const std::vector<Gate>& gates, int n) {
  StateVector<double> s = *StateVector<double>::Create(n);
  for (const Gate& g : gates) Apply(s, g, false);
  return s;
}

}  // namespace

torch::Tensor QuantumExpectationsPerSample(const torch::Tensor& angles_in, const torch::Tensor& weights_in) {
  const torch::Tensor angles = angles_in.detach().to(torch::kFloat64).contiguous();
  const torch::Tensor weights = weights_in.detach().to(torch::kFloat64).contiguous();
  const int64_t batch = angles.size(0);
  const int n = static_cast<int>(angles.size(1)), layers = static_cast<int>(weights.size(0));
  torch::Tensor out = torch::empty({batch, n}, torch::kFloat64);
  const double* a = angles.data_ptr<double>();
  const double* w = weights.data_ptr<double>();
  double* o = out.data_ptr<double>();
  at::parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const StateVector<double> s = Prepare(Gates(a + b * n, w, n, layers), n);
      const std::vector<double> e = s.ExpectationsZ();
      std::copy(e.begin(), e.end(), o + b * n);
    }
  });
  return out;
}

void QuantumGradientsPerSample(const torch::Tensor& angles_in, const torch::Tensor& weights_in,
                               const torch::Tensor& grad_in, torch::Tensor* grad_angles, torch::Tensor* grad_weights) {
  const torch::Tensor angles = angles_in.detach().to(torch::kFloat64).contiguous();
  const torch::Tensor weights = weights_in.detach().to(torch::kFloat64).contiguous();
  const torch::Tensor grad = grad_in.detach().to(torch::kFloat64).contiguous();
  const int64_t batch = angles.size(0);
  const int n = static_cast<int>(angles.size(1)), layers = static_cast<int>(weights.size(0));
  const int64_t params = n + weights.numel();
  torch::Tensor per_sample = torch::zeros({batch, params}, torch::kFloat64);
  const double* a = angles.data_ptr<double>();
  const double* w = weights.data_ptr<double>();
  const double* g = grad.data_ptr<double>();
  double* ps = per_sample.data_ptr<double>();
  at::parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const std::vector<Gate> gates = Gates(a + b * n, w, n, layers);
      StateVector<double> phi = Prepare(gates, n);
      // lambda = O psi with O = sum_q g_q Z_q (diagonal)
      StateVector<double> lambda = phi;
      for (int64_t i = 0; i < lambda.dim(); ++i) {
        double d = 0;
        for (int q = 0; q < n; ++q) d += ((i >> q) & 1) ? -g[b * n + q] : g[b * n + q];
        lambda.amplitude(i) *= d;
      }
      StateVector<double> mu = phi;
      for (auto it = gates.rbegin(); it != gates.rend(); ++it) {
        if (it->param >= 0) {
          mu = phi;  // the state just after this gate (the same size: no allocation)
          ApplyGenerator(mu, *it);
          double re = 0;
          mu.ForEach(0, [&](int64_t i, const C& m) {
            const C& l = lambda.amplitude(i);
            re += l.real() * m.real() + l.imag() * m.imag();
          });
          ps[b * params + it->param] = 2 * re;
        }
        Apply(phi, *it, true);
        Apply(lambda, *it, true);
      }
    }
  });
  *grad_angles = per_sample.slice(1, 0, n).contiguous().to(angles_in.scalar_type());
  *grad_weights = per_sample.slice(1, n, params).sum(0).view(weights_in.sizes()).to(weights_in.scalar_type());
}

namespace {

// The batched simulator; forward keeps the final states so backward starts
// its adjoint sweep from them instead of simulating the circuit again.
struct QuantumFunction : public torch::autograd::Function<QuantumFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor angles, torch::Tensor weights) {
    ctx->save_for_backward({angles, weights});
    torch::Tensor states;
    torch::Tensor out = BatchedExpectations(angles, weights, &states);
    ctx->saved_data["states"] = states;
    return out.to(angles.scalar_type());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    torch::Tensor ga, gw;
    BatchedGradients(saved[0], saved[1], grad_outputs[0], ctx->saved_data["states"].toTensor(), &ga, &gw);
    return {ga, gw};
  }
};

struct PerSampleFunction : public torch::autograd::Function<PerSampleFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor angles, torch::Tensor weights) {
    ctx->save_for_backward({angles, weights});
    return QuantumExpectationsPerSample(angles, weights).to(angles.scalar_type());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    torch::Tensor ga, gw;
    QuantumGradientsPerSample(saved[0], saved[1], grad_outputs[0], &ga, &gw);
    return {ga, gw};
  }
};

}  // namespace

torch::Tensor QuantumLayer(const torch::Tensor& angles, const torch::Tensor& weights) {
  return QuantumFunction::apply(angles, weights);
}

torch::Tensor QuantumLayerPerSample(const torch::Tensor& angles, const torch::Tensor& weights) {
  return PerSampleFunction::apply(angles, weights);
}

torch::Tensor QuantumExpectations(const torch::Tensor& angles, const torch::Tensor& weights) {
  return BatchedExpectations(angles, weights, nullptr);
}

void QuantumGradients(const torch::Tensor& angles, const torch::Tensor& weights, const torch::Tensor& grad_out,
                      torch::Tensor* grad_angles, torch::Tensor* grad_weights) {
  BatchedGradients(angles, weights, grad_out, torch::Tensor(), grad_angles, grad_weights);
}

torch::Tensor QuantumCircuitImpl::forward(torch::Tensor x) {
  const torch::Tensor angles = M_PI * torch::sigmoid(x);
  return per_sample_ ? QuantumLayerPerSample(angles, weights_) : QuantumLayer(angles, weights_);
}

QuantumCircuitImpl::QuantumCircuitImpl(QnnShape shape) : shape_(shape), per_sample_(shape.per_sample) {
  weights_ = register_parameter("weights", (torch::rand({shape.layers, shape.qubits, 2}) * 2 - 1) * 0.1);
}

void QuantumCircuitImpl::pretty_print(std::ostream& s) const {
  s << "QuantumCircuit(qubits=" << shape_.qubits << ", layers=" << shape_.layers
    << ", RY(pi sigmoid x) encoding, RY-RZ + CZ ring per layer, <Z> per qubit, adjoint gradients"
    << (per_sample_ ? ", one state per sample" : ", batched states") << ")";
}

torch::nn::Sequential MakeQnn(QnnShape shape) {
  return torch::nn::Sequential(torch::nn::Linear(784, shape.qubits), QuantumCircuit(shape),
                               torch::nn::Linear(shape.qubits, 10));
}

}  // namespace hetbench::agent::qpu
