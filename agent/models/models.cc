#include "agent/models/models.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/data/fashion_mnist.h"
#include "agent/models/global_generator.h"
#include "agent/qpu/qnn.h"
#include "common/hash.h"
#include "common/job_spec.h"

namespace hetbench::agent {

namespace {

// mlp: Linear(784,512)-ReLU-Dropout(0.2)-Linear(512,512)-ReLU-Dropout(0.2)-Linear(512,10)
torch::nn::Sequential Mlp() {
  return torch::nn::Sequential(torch::nn::Linear(784, 512), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                               torch::nn::Linear(512, 512), torch::nn::ReLU(), torch::nn::Dropout(0.2),
                               torch::nn::Linear(512, 10));
}

// cnn: Conv2d(1,32,3)-ReLU-Conv2d(32,64,3)-ReLU-MaxPool2d(2)-Dropout(0.25)-Flatten-
//      Linear(9216,128)-ReLU-Dropout(0.5)-Linear(128,10)
torch::nn::Sequential Cnn() {
  return torch::nn::Sequential(torch::nn::Unflatten(torch::nn::UnflattenOptions(1, {1, 28, 28})),
                               torch::nn::Conv2d(1, 32, 3), torch::nn::ReLU(), torch::nn::Conv2d(32, 64, 3),
                               torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Dropout(0.25),
                               torch::nn::Flatten(), torch::nn::Linear(9216, 128), torch::nn::ReLU(),
                               torch::nn::Dropout(0.5), torch::nn::Linear(128, 10));
}

// The 28 image rows as a sequence of 28-pixel steps through a recurrent
// layer; the last step's output (the final hidden state) goes on.
template <typename Rnn, typename Options>
class RowSequenceImpl : public torch::nn::Module {
 public:
  explicit RowSequenceImpl(Options options) : rnn_(register_module("rnn", Rnn(options.batch_first(true)))) {}
  torch::Tensor forward(torch::Tensor x) {
    auto out = std::get<0>(rnn_->forward(x.view({x.size(0), 28, 28})));
    return out.select(1, out.size(1) - 1);
  }

 private:
  Rnn rnn_;
};
using RowRnnImpl = RowSequenceImpl<torch::nn::RNN, torch::nn::RNNOptions>;
using RowLstmImpl = RowSequenceImpl<torch::nn::LSTM, torch::nn::LSTMOptions>;
TORCH_MODULE(RowRnn);
TORCH_MODULE(RowLstm);

// rnn: tanh RNN(28 -> 128) over the rows, last hidden state -> Linear(128, 10)
torch::nn::Sequential Rnn() {
  return torch::nn::Sequential(RowRnn(torch::nn::RNNOptions(28, 128).nonlinearity(torch::kTanh)),
                               torch::nn::Linear(128, 10));
}

// lstm: LSTM(28 -> 128) over the rows, last hidden state -> Linear(128, 10)
torch::nn::Sequential Lstm() {
  return torch::nn::Sequential(RowLstm(torch::nn::LSTMOptions(28, 128)), torch::nn::Linear(128, 10));
}

// autoencoder: 784-128-32-128-784, ReLU between, Sigmoid output (pixels in [0, 1])
torch::nn::Sequential Autoencoder() {
  return torch::nn::Sequential(torch::nn::Linear(784, 128), torch::nn::ReLU(), torch::nn::Linear(128, 32),
                               torch::nn::ReLU(), torch::nn::Linear(32, 128), torch::nn::ReLU(),
                               torch::nn::Linear(128, 784), torch::nn::Sigmoid());
}

// ---- CIFAR-style 32x32 RGB models, fed Fashion-MNIST padded and repeated.

// [N, 784] normalised images -> [N, 3, 32, 32]: 2 pixels of background on
// every side (the normalised value of a 0 pixel), the one channel repeated.
class ToRgb32Impl : public torch::nn::Module {
 public:
  torch::Tensor forward(torch::Tensor x) {
    const double background = NormalizedBackground();
    return torch::constant_pad_nd(x.view({x.size(0), 1, 28, 28}), {2, 2, 2, 2}, background).expand({-1, 3, -1, -1});
  }
};
TORCH_MODULE(ToRgb32);

torch::nn::Conv2d Conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

// conv6 (Frankle & Carbin's Conv-6): 2x[64] pool 2x[128] pool 2x[256] pool, FC 256-256-10
torch::nn::Sequential Conv6() {
  torch::nn::Sequential s{ToRgb32()};
  int64_t in = 3;
  for (int64_t width : {64, 128, 256}) {
    s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, width, 3).padding(1)));
    s->push_back(torch::nn::ReLU());
    s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(width, width, 3).padding(1)));
    s->push_back(torch::nn::ReLU());
    s->push_back(torch::nn::MaxPool2d(2));
    in = width;
  }
  s->push_back(torch::nn::Flatten());
  s->push_back(torch::nn::Linear(256 * 4 * 4, 256));
  s->push_back(torch::nn::ReLU());
  s->push_back(torch::nn::Linear(256, 256));
  s->push_back(torch::nn::ReLU());
  s->push_back(torch::nn::Linear(256, 10));
  return s;
}

// vgg16 (CIFAR variant): 13 conv3x3 + BatchNorm + ReLU in five pooled stages, Linear(512, 10)
torch::nn::Sequential Vgg16() {
  torch::nn::Sequential s{ToRgb32()};
  int64_t in = 3;
  const std::vector<std::vector<int64_t>> stages = {{64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512},
                                                    {512, 512, 512}};
  for (const auto& stage : stages) {
    for (int64_t width : stage) {
      s->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, width, 3).padding(1)));
      s->push_back(torch::nn::BatchNorm2d(width));
      s->push_back(torch::nn::ReLU());
      in = width;
    }
    s->push_back(torch::nn::MaxPool2d(2));
  }
  s->push_back(torch::nn::Flatten());
  s->push_back(torch::nn::Linear(512, 10));
  return s;
}

// ResNet basic block: two conv3x3+BN, identity or 1x1-conv shortcut.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1_(register_module("conv1", Conv3x3(in, out, stride))),
        bn1_(register_module("bn1", torch::nn::BatchNorm2d(out))),
        conv2_(register_module("conv2", Conv3x3(out, out))),
        bn2_(register_module("bn2", torch::nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module(
          "shortcut", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                            torch::nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = torch::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    return torch::relu(y + (shortcut_ ? shortcut_->forward(x) : x));
  }

 private:
  torch::nn::Conv2d conv1_;
  torch::nn::BatchNorm2d bn1_;
  torch::nn::Conv2d conv2_;
  torch::nn::BatchNorm2d bn2_;
  torch::nn::Sequential shortcut_{nullptr};
};
TORCH_MODULE(BasicBlock);

// resnet18 (CIFAR variant): conv3x3(64)-BN-ReLU, 4 stages of 2 basic blocks
// (64, 128, 256, 512; strides 1, 2, 2, 2), global average pool, Linear(512, 10)
torch::nn::Sequential Resnet18() {
  torch::nn::Sequential s(ToRgb32(), Stage(Conv3x3(3, 64), torch::nn::BatchNorm2d(64), torch::nn::ReLU()));
  int64_t in = 64;
  for (auto [width, stride] : std::vector<std::pair<int64_t, int64_t>>{{64, 1}, {128, 2}, {256, 2}, {512, 2}}) {
    s->push_back(Stage(BasicBlock(in, width, stride), BasicBlock(width, width, 1)));
    in = width;
  }
  s->push_back(torch::nn::AdaptiveAvgPool2d(1));
  s->push_back(torch::nn::Flatten());
  s->push_back(torch::nn::Linear(512, 10));
  return s;
}

// ---- transformer: the 28 image rows as 28 tokens of 28 pixels.

constexpr int64_t kTokens = 28, kModelDim = 64;

// Row tokens -> Linear(28, 64) + a learned position embedding, as [S, N, E].
class RowTokensImpl : public torch::nn::Module {
 public:
  RowTokensImpl()
      : embed_(register_module("embed", torch::nn::Linear(28, kModelDim))),
        position_(register_parameter("position", torch::randn({kTokens, 1, kModelDim}) * 0.02)) {}
  torch::Tensor forward(torch::Tensor x) {
    return embed_(x.view({x.size(0), kTokens, 28}).transpose(0, 1)) + position_;
  }

 private:
  torch::nn::Linear embed_;
  torch::Tensor position_;
};
TORCH_MODULE(RowTokens);

// LibTorch 1.13's encoder takes [S, N, E]; its output is averaged over the tokens.
class EncoderMeanImpl : public torch::nn::Module {
 public:
  EncoderMeanImpl()
      : encoder_(register_module(
            "encoder", torch::nn::TransformerEncoder(
                           torch::nn::TransformerEncoderOptions(
                               torch::nn::TransformerEncoderLayerOptions(kModelDim, 4).dim_feedforward(128).dropout(0.1),
                               2)))) {}
  torch::Tensor forward(torch::Tensor x) { return encoder_(x).mean(0); }

 private:
  torch::nn::TransformerEncoder encoder_;
};
TORCH_MODULE(EncoderMean);

// transformer: RowTokens(28 -> 64, learned positions), 2 encoder layers (4 heads,
// feed-forward 128, dropout 0.1), mean over tokens, Linear(64, 10)
torch::nn::Sequential Transformer() {
  return torch::nn::Sequential(RowTokens(), EncoderMean(), torch::nn::Linear(kModelDim, 10));
}

}  // namespace

double NormalizedBackground() { return NormalizedFromPixel(0.0); }

absl::StatusOr<BuiltModel> BuildModel(const std::string& name, uint64_t seed, qpu::QnnShape qnn_shape) {
  // The initial weights come from LibTorch's process-wide generator: seeding
  // and building hold it alone (global_generator.h), so neither another
  // build nor a CPU task's dropout draws between the seed and the weights.
  SeededDraws alone;
  torch::manual_seed(seed);
  BuiltModel out;
  if (name == "mlp") {
    out.net = Mlp();
  } else if (name == "cnn") {
    out.net = Cnn();
  } else if (name == "rnn") {
    out.net = Rnn();
  } else if (name == "lstm") {
    out.net = Lstm();
  } else if (name == "autoencoder") {
    out.net = Autoencoder();
    out.reconstruction = true;
  } else if (name == "conv6") {
    out.net = Conv6();
  } else if (name == "vgg16") {
    out.net = Vgg16();
  } else if (name == "resnet18") {
    out.net = Resnet18();
  } else if (name == "transformer") {
    out.net = Transformer();
  } else if (name == "qnn") {
    out.net = qpu::MakeQnn(qnn_shape);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", name, "\" is not in this agent's zoo; available: ", absl::StrJoin(KnownModels(), ", ")));
  }
  std::ostringstream arch;
  arch << *out.net;
  out.architecture = arch.str();
  out.parameter_count = ParameterCount(out.net->parameters());
  out.initial_weights_hash = HashTensors(out.net->parameters());
  return out;
}

int64_t ParameterCount(const std::vector<torch::Tensor>& tensors) {
  int64_t n = 0;
  for (const torch::Tensor& t : tensors) n += t.numel();
  return n;
}

uint64_t HashTensors(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = kFnv1aOffset;
  for (const torch::Tensor& p : tensors) {
    torch::Tensor c = p.detach().contiguous().to(torch::kCPU);
    h = Fnv1a(h, c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }
  return h;
}

}  // namespace hetbench::agent
