#pragma once
/// Loads MNIST-format (IDX) datasets such as Fashion-MNIST from
/// dataset-fashion-mnist's gzip files.

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace hetbench::agent {

/// One split: images as float [N, 784] normalised with the split-independent
/// Fashion-MNIST mean/std, labels as int64 [N].
struct ImageSplit {
  torch::Tensor images;
  torch::Tensor labels;
  int64_t size() const { return labels.size(0); }
};

/// Size of the Fashion-MNIST test split (used to size buffers before loading).
inline constexpr int64_t kFashionMnistTestSize = 10000;

struct ImageDataset {
  ImageSplit train;
  ImageSplit test;
  uint64_t content_hash = 0;  // FNV-1a over the raw bytes of all four files
  double load_seconds = 0;
};

/// Undoes the normalisation: pixels back in [0, 1] (reconstruction targets).
torch::Tensor PixelsFromNormalized(const torch::Tensor& normalized);
/// The normalised value of a pixel in [0, 1].
double NormalizedFromPixel(double pixel);

/// Reads one gzip'd IDX file (magic 0x801 labels or 0x803 images) into raw bytes
/// and its dimensions. Errors name the file and what is wrong with it.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
absl::StatusOr<IdxArray> ReadIdxGz(const std::string& path);

/// Loads `dir`/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
absl::StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir);

}  // namespace hetbench::agent
