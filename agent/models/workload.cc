#include "agent/models/workload.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/models/cyclegan.h"
#include "agent/models/models.h"
#include "agent/qpu/circuit.h"
#include "agent/qpu/kernels.h"
#include "agent/qpu/statevector.h"
#include "agent/qpu/tensor_backend.h"
#include "common/hash.h"
#include "common/log.h"

namespace hetbench::agent {

std::string ArchitectureFingerprint(const std::string& model, const std::vector<torch::Tensor>& parameters) {
  std::vector<std::string> shapes;
  for (const torch::Tensor& p : parameters) shapes.push_back(absl::StrJoin(p.sizes(), "x"));
  return absl::StrCat(model, "/params=", ParameterCount(parameters), "/shapes=", absl::Hex(Fnv1a(absl::StrJoin(shapes, ";")), absl::kZeroPad16));
}

namespace {

// A layer stack of the zoo: classifier (cross-entropy) or reconstruction (MSE on pixels).
class SequentialWorkload final : public Workload {
 public:
  SequentialWorkload(BuiltModel built, double lr, const ImageDataset& ds)
      : built_(std::move(built)),
        ds_(ds),
        lr_(lr),
        optimizer_(built_.net->parameters(), torch::optim::AdamOptions(lr)) {}
  std::unique_ptr<torch::optim::Optimizer> NewOptimizer(std::vector<torch::Tensor> params) const override {
    return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(lr_));
  }
  const ImageDataset& Data() const override { return ds_; }
  std::string Architecture() const override { return built_.architecture; }
  std::vector<torch::Tensor> Parameters() const override { return built_.net->parameters(); }
  uint64_t InitialHash() const override { return built_.initial_weights_hash; }
  void SetTraining(bool on) override { built_.net->train(on); }
  torch::Tensor TrainStep(const torch::Tensor& x, const torch::Tensor& y) override {
    optimizer_.zero_grad();
    torch::Tensor loss = Loss(built_.net->forward(x), x, y);
    loss.backward();
    if (after_backward_) after_backward_();
    optimizer_.step();
    return loss;
  }
  torch::Tensor TrainStepWith(const std::function<torch::Tensor()>& forward_backward, ClearGradients clear) override {
    if (clear == ClearGradients::kBeforeForward) optimizer_.zero_grad();
    torch::Tensor loss = forward_backward();
    if (after_backward_) after_backward_();
    optimizer_.step();
    if (clear == ClearGradients::kAfterStep) optimizer_.zero_grad();
    return loss;
  }
  absl::Status SetAfterBackward(std::function<void()> fn) override {
    after_backward_ = std::move(fn);
    return absl::OkStatus();
  }
  torch::Tensor Infer(const torch::Tensor& x) override { return built_.net->forward(x); }
  void Score(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& out, QualityTotals* q) override {
    if (built_.reconstruction) {
      q->squared_error += (out - PixelsFromNormalized(x)).pow(2).sum().item<double>();
      q->error_values += out.numel();
    } else {
      q->correct += out.argmax(1).eq(y).sum().item<int64_t>();
      q->scored += x.size(0);
    }
  }
  torch::nn::Sequential* Layers() override { return &built_.net; }
  v1::QpuRun Qpu() const override { return qpu_; }
  absl::Status To(const torch::Device& device) override {
    if (qpu_.qubits() > 0 && !device.is_cpu()) {
      return absl::UnimplementedError("the quantum layer's simulator runs on the CPU only");
    }
    built_.net->to(device);  // in place: the optimizer keeps the same parameters
    return absl::OkStatus();
  }
  void set_qpu(v1::QpuRun q) { qpu_ = std::move(q); }
  torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& y) const override {
    return built_.reconstruction ? torch::mse_loss(out, PixelsFromNormalized(x))
                                 : torch::nn::functional::cross_entropy(out, y);
  }

 private:
  BuiltModel built_;
  const ImageDataset& ds_;
  double lr_;
  torch::optim::Adam optimizer_;
  v1::QpuRun qpu_;
  std::function<void()> after_backward_;
};

// qsim: a pure simulator benchmark. Each test "row" is one run of the
// layered circuit from |0...0>; inference times them, nothing trains.
template <typename Real>
class QsimWorkload final : public Workload {
 public:
  static absl::StatusOr<std::unique_ptr<Workload>> Make(const v1::QpuSpec& q, int64_t memory_limit_bytes) {
    auto state = qpu::StateVector<Real>::Create(q.qubits(), 1, memory_limit_bytes);
    if (!state.ok()) return state.status();
    auto w = std::unique_ptr<QsimWorkload>(new QsimWorkload(q, *std::move(state), memory_limit_bytes));
    return std::unique_ptr<Workload>(std::move(w));
  }
  const ImageDataset& Data() const override { return data_; }
  std::string Architecture() const override { return InputNote(); }
  std::vector<torch::Tensor> Parameters() const override { return {}; }
  // Nothing is drawn at random: the circuit's description is its identity.
  uint64_t InitialHash() const override { return Fnv1a(InputNote()); }
  void SetTraining(bool) override {}
  bool Trainable() const override { return false; }
  torch::Tensor TrainStep(const torch::Tensor&, const torch::Tensor&) override { return {}; }
  // The tensor backend when the spec asks for it or the device is not the
  // CPU (a GPU-hosted qpu-sim); the native kernels otherwise.
  absl::Status To(const torch::Device& device) override {
    if (run_.backend() != "tensor" && device.is_cpu()) return absl::OkStatus();
    auto t = qpu::TensorState::Create(run_.qubits(), device, std::is_same_v<Real, double>, memory_limit_bytes_);
    if (!t.ok()) return t.status();
    tensor_ = std::make_unique<qpu::TensorState>(*std::move(t));
    run_.set_backend("tensor");
    run_.clear_kernel_isa();
    state_.reset();  // the host state is not needed
    return absl::OkStatus();
  }
  torch::Tensor Infer(const torch::Tensor& x) override {
    std::vector<double> z;
    for (int64_t i = 0; i < x.size(0); ++i) {
      if (tensor_) {
        tensor_->Reset();
        tensor_->Run(program_);
        z.push_back(tensor_->ExpectationZ(0));  // a device-to-host copy: the run is synchronised
      } else {
        state_->Reset();
        program_.Run(*state_);
        z.push_back(state_->ExpectationZ(0));
      }
    }
    return torch::tensor(z, torch::kFloat64);
  }
  void Score(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, QualityTotals*) override {}
  std::string InputNote() const override {
    return absl::StrCat("layered circuit, ", run_.qubits(), " qubits, depth ", run_.depth(), ", ", run_.precision(),
                        ": ", run_.gates_per_circuit(), " gates in ", run_.passes_per_circuit(), " passes (",
                        run_.passes_per_circuit() < run_.gates_per_circuit() ? "fused" : "unfused",
                        ", ", run_.backend(), " backend); one sample = one circuit run");
  }
  v1::QpuRun Qpu() const override { return run_; }

 private:
  QsimWorkload(const v1::QpuSpec& q, qpu::StateVector<Real> state, int64_t memory_limit_bytes)
      : state_(std::make_unique<qpu::StateVector<Real>>(std::move(state))), memory_limit_bytes_(memory_limit_bytes) {
    const qpu::Circuit circuit = qpu::LayeredCircuit(q.qubits(), q.depth());
    const size_t gates = circuit.size();
    program_ = q.fused() ? qpu::Fused(circuit, std::is_same_v<Real, double>) : qpu::Unfused(circuit);
    run_.set_qubits(q.qubits());
    run_.set_depth(q.depth());
    run_.set_precision(q.precision());
    run_.set_gates_per_circuit(static_cast<int64_t>(gates));
    run_.set_passes_per_circuit(static_cast<int64_t>(program_.size()));
    run_.set_state_bytes(static_cast<int64_t>(state_->bytes()));
    run_.set_backend(q.backend().empty() ? "native" : q.backend());
    if (q.fused()) run_.set_fused_block_qubits(program_.largest_block);
    run_.set_kernel_isa(qpu::kernels::ActiveTarget());
    data_.train = {torch::zeros({0, 1}), torch::zeros({0}, torch::kInt64)};
    data_.test = {torch::zeros({q.circuits(), 1}), torch::zeros({q.circuits()}, torch::kInt64)};
  }

  std::unique_ptr<qpu::StateVector<Real>> state_;
  std::unique_ptr<qpu::TensorState> tensor_;
  int64_t memory_limit_bytes_;
  qpu::Program program_;
  v1::QpuRun run_;
  ImageDataset data_;
};

// CycleGAN between two classes. Each row of its data is a pair: an image of
// class A then one of class B (1568 values), so one "sample" is one pair and
// the executor batches pairs like any other rows. Images go in as [-1, 1].
class CycleGanWorkload final : public Workload {
 public:
  CycleGanWorkload(const ImageDataset& ds, uint64_t seed, double lr) : gan_(seed, lr) {
    pairs_.train = Pairs(ds.train);
    pairs_.test = Pairs(ds.test);
    pairs_.content_hash = ds.content_hash;
    pairs_.load_seconds = ds.load_seconds;
    std::vector<torch::Tensor> params = gan_.Parameters();
    initial_hash_ = HashTensors(params);
  }
  const ImageDataset& Data() const override { return pairs_; }
  std::string Architecture() const override { return gan_.Architecture(); }
  std::vector<torch::Tensor> Parameters() const override { return gan_.Parameters(); }
  uint64_t InitialHash() const override { return initial_hash_; }
  void SetTraining(bool on) override { gan_.SetTraining(on); }
  torch::Tensor TrainStep(const torch::Tensor& x, const torch::Tensor&) override {
    CycleGanLosses l = gan_.Step(A(x), B(x));
    return l.generator + l.discriminator;
  }
  // Inference translates both ways; the output holds the two translations side by side.
  torch::Tensor Infer(const torch::Tensor& x) override {
    return torch::cat({gan_.AToB(A(x)).flatten(1), gan_.BToA(B(x)).flatten(1)}, 1);
  }
  // Quality: cycle-consistency error A->B->A and B->A->B, mean squared error in [0, 1] pixels.
  void Score(const torch::Tensor& x, const torch::Tensor&, const torch::Tensor& out, QualityTotals* q) override {
    const int64_t n = x.size(0);
    torch::Tensor back_a = gan_.BToA(out.slice(1, 0, 784).view({n, 1, 28, 28}));
    torch::Tensor back_b = gan_.AToB(out.slice(1, 784, 1568).view({n, 1, 28, 28}));
    const torch::Tensor err = ((back_a - A(x)) / 2).pow(2).sum() + ((back_b - B(x)) / 2).pow(2).sum();
    q->squared_error += err.item<double>();
    q->error_values += 2 * n * 784;
  }
  void TrainForwards(const torch::Tensor& x) override {
    // Generator step: 2 translations, 2 cycles, 2 identities, 2 discriminator
    // scores; discriminator step: 4 scores.
    torch::Tensor a = A(x), b = B(x);
    torch::Tensor fb = gan_.AToB(a), fa = gan_.BToA(b);
    (void)gan_.BToA(fb), (void)gan_.AToB(fa), (void)gan_.AToB(b), (void)gan_.BToA(a);
    gan_.DiscriminatorForwards(a, b, fa, fb);
  }
  std::string InputNote() const override {
    return absl::StrCat("pairs of class ", kCycleGanClassA, " (sneaker) and ", kCycleGanClassB,
                        " (ankle boot) images; one sample = one pair; quality = cycle-consistency MSE");
  }

 private:
  static ImageSplit Pairs(const ImageSplit& split) {
    torch::Tensor a = split.images.index({split.labels == kCycleGanClassA});
    torch::Tensor b = split.images.index({split.labels == kCycleGanClassB});
    const int64_t n = std::min(a.size(0), b.size(0));
    ImageSplit out;
    // Normalised -> pixels in [0, 1] -> [-1, 1], the generators' tanh range.
    out.images = PixelsFromNormalized(torch::cat({a.slice(0, 0, n), b.slice(0, 0, n)}, 1)).mul(2).sub(1).contiguous();
    out.labels = torch::zeros({n}, torch::kInt64);
    return out;
  }
  static torch::Tensor A(const torch::Tensor& x) { return x.slice(1, 0, 784).reshape({x.size(0), 1, 28, 28}); }
  static torch::Tensor B(const torch::Tensor& x) { return x.slice(1, 784, 1568).reshape({x.size(0), 1, 28, 28}); }

  CycleGan gan_;
  ImageDataset pairs_;
  uint64_t initial_hash_ = 0;
};

// A TorchScript module from the agent's file system (bring your own model).
class ScriptWorkload final : public Workload {
 public:
  static absl::StatusOr<std::unique_ptr<Workload>> Load(const v1::JobSpec& spec, const ImageDataset& ds) {
    const v1::TorchScriptSpec& ts = spec.torchscript();
    std::ifstream file(ts.path(), std::ios::binary);
    if (!file) {
      return absl::NotFoundError(
          absl::StrCat("torchscript.path = \"", ts.path(), "\": cannot read it on this agent; copy the file there"));
    }
    std::stringstream bytes;
    bytes << file.rdbuf();
    auto w = std::unique_ptr<ScriptWorkload>(new ScriptWorkload(ds));
    w->file_hash_ = Fnv1a(bytes.str());
    try {
      bytes.seekg(0);
      w->module_ = torch::jit::load(bytes);  // the bytes just hashed: one read of the file
    } catch (const c10::Error& e) {
      // LibTorch's what() carries a C++ backtrace: a job's error is one line.
      return absl::InvalidArgumentError(absl::StrCat("torchscript.path = \"", ts.path(),
                                                     "\": not a TorchScript module: ",
                                                     FirstLine(e.what_without_backtrace())));
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("torchscript.path = \"", ts.path(), "\": not a TorchScript module: ", FirstLine(e.what())));
    }
    w->shape_.assign(ts.input_shape().begin(), ts.input_shape().end());
    int64_t numel = 1;
    for (int64_t d : w->shape_) numel *= d;
    if (numel == ds.train.images.size(1)) {
      w->data_ = &ds;
    } else {
      // Synthetic input, seeded, capped at 256 MiB per split.
      const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(4096, (int64_t{256} << 20) / (numel * 4)));
      // From a generator of its own: the process-wide one belongs to builds and dropout.
      auto gen = at::make_generator<at::CPUGeneratorImpl>(spec.seed());
      const auto f32 = torch::TensorOptions().dtype(torch::kFloat32), i64 = torch::TensorOptions().dtype(torch::kInt64);
      const int64_t test_rows = std::max<int64_t>(1, rows / 4);
      w->synthetic_.train = {torch::randn({rows, numel}, gen, f32), torch::randint(0, 10, {rows}, gen, i64)};
      w->synthetic_.test = {torch::randn({test_rows, numel}, gen, f32), torch::randint(0, 10, {test_rows}, gen, i64)};
      w->synthetic_.content_hash = spec.seed();
      w->data_ = &w->synthetic_;
      w->note_ = absl::StrCat("synthetic input: ", rows, " seeded random rows of shape [",
                              absl::StrJoin(w->shape_, ", "), "] (", numel,
                              " values, not the dataset's 784); accuracy is meaningless");
    }
    w->trainable_ = w->module_.find_method("loss").has_value();
    std::vector<torch::Tensor> params;
    for (const auto& p : w->module_.parameters()) params.push_back(p);
    w->params_ = params;
    if (w->trainable_) {
      if (params.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("torchscript.path = \"", ts.path(), "\": has a loss method but no parameters to train"));
      }
      w->optimizer_ = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(spec.train().learning_rate()));
    }
    return std::unique_ptr<Workload>(std::move(w));
  }
  const ImageDataset& Data() const override { return *data_; }
  std::string Architecture() const override {
    return absl::StrCat("torchscript ", module_.type()->name() ? module_.type()->name()->qualifiedName() : "?",
                        " input [", absl::StrJoin(shape_, ", "), "]");
  }
  std::vector<torch::Tensor> Parameters() const override { return params_; }
  uint64_t InitialHash() const override { return file_hash_; }
  void SetTraining(bool on) override { module_.train(on); }
  bool Trainable() const override { return trainable_; }
  torch::Tensor TrainStep(const torch::Tensor& x, const torch::Tensor& y) override {
    optimizer_->zero_grad();
    torch::Tensor loss = module_.get_method("loss")({Shape(x), y}).toTensor();
    loss.backward();
    optimizer_->step();
    return loss;
  }
  torch::Tensor Infer(const torch::Tensor& x) override {
    c10::IValue out = module_.forward({Shape(x)});
    if (out.isTuple()) out = out.toTupleRef().elements().at(0);
    return out.toTensor();
  }
  void Score(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& out, QualityTotals* q) override {
    if (data_ != &synthetic_ && out.dim() == 2 && out.size(1) == 10) {
      q->correct += out.argmax(1).eq(y).sum().item<int64_t>();
      q->scored += x.size(0);
    }
  }
  std::string InputNote() const override { return note_; }

 private:
  explicit ScriptWorkload(const ImageDataset& ds) : data_(&ds) {}
  torch::Tensor Shape(const torch::Tensor& x) const {
    std::vector<int64_t> dims = {x.size(0)};
    dims.insert(dims.end(), shape_.begin(), shape_.end());
    return x.reshape(dims);
  }

  torch::jit::Module module_;
  const ImageDataset* data_;
  ImageDataset synthetic_;
  std::vector<int64_t> shape_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  uint64_t file_hash_ = 0;
  bool trainable_ = false;
  std::string note_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const std::string& model, const v1::JobSpec& spec,
                                                       const ImageDataset& ds, int64_t qpu_memory_limit_bytes) {
  if (model == "cyclegan") return std::unique_ptr<Workload>(new CycleGanWorkload(ds, spec.seed(), spec.train().learning_rate()));
  if (model == "torchscript") return ScriptWorkload::Load(spec, ds);
  if (model == "qsim") {
    return spec.qpu().precision() == "complex128"
               ? QsimWorkload<double>::Make(spec.qpu(), qpu_memory_limit_bytes)
               : QsimWorkload<float>::Make(spec.qpu(), qpu_memory_limit_bytes);
  }
  const qpu::QnnShape shape{spec.qpu().qubits(), spec.qpu().layers()};
  if (model == "qnn" && std::ldexp(16.0, shape.qubits) > static_cast<double>(qpu_memory_limit_bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat("qpu.qubits = ", shape.qubits,
                                                     ": one qnn state needs more than the simulator's memory limit"));
  }
  auto built = BuildModel(model, spec.seed(), shape);
  if (!built.ok()) return built.status();
  auto w = std::make_unique<SequentialWorkload>(*std::move(built), spec.train().learning_rate(), ds);
  if (model == "qnn") {
    v1::QpuRun run;
    run.set_qubits(shape.qubits);
    run.set_layers(shape.layers);
    run.set_precision("complex128");
    run.set_gates_per_circuit(qpu::QnnGatesPerCircuit(shape));
    run.set_passes_per_circuit(run.gates_per_circuit());
    run.set_state_bytes(int64_t{16} << shape.qubits);
    run.set_gradient_method("adjoint");
    run.set_backend("native batched");
    w->set_qpu(std::move(run));
  }
  return std::unique_ptr<Workload>(std::move(w));
}

void SetQuality(const QualityTotals& q, v1::TaskResult* result) {
  if (q.error_values > 0) {
    result->set_test_mse(q.squared_error / static_cast<double>(q.error_values));
  } else if (q.scored > 0) {
    result->set_test_accuracy(static_cast<double>(q.correct) / static_cast<double>(q.scored));
  }
}

}  // namespace hetbench::agent
