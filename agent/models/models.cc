#include "agent/models/models.h"

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

}  // namespace

absl::StatusOr<BuiltModel> BuildModel(const std::string& name, uint64_t seed) {
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
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", name, "\" is not in this agent's zoo; available: ", absl::StrJoin(KnownModels(), ", ")));
  }
  std::ostringstream arch;
  arch << *out.net;
  out.architecture = arch.str();
  uint64_t h = 1469598103934665603ULL;
  for (const torch::Tensor& p : out.net->parameters()) {
    torch::Tensor c = p.detach().contiguous().to(torch::kCPU);
    out.parameter_count += c.numel();
    const auto* bytes = static_cast<const uint8_t*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel() * static_cast<int64_t>(c.element_size()); ++i) {
      h ^= bytes[i];
      h *= 1099511628211ULL;
    }
  }
  out.initial_weights_hash = h;
  return out;
}

}  // namespace hetbench::agent
