#include "agent/data/fashion_mnist.h"

#include <zlib.h>

#include <chrono>

#include "absl/strings/str_cat.h"

#include "common/hash.h"

namespace hetbench::agent {

namespace {

constexpr double kMean = 0.2860;  // Fashion-MNIST training-set pixel mean
constexpr double kStd = 0.3530;

}  // namespace

torch::Tensor PixelsFromNormalized(const torch::Tensor& normalized) { return normalized * kStd + kMean; }
double NormalizedFromPixel(double pixel) { return (pixel - kMean) / kStd; }

absl::StatusOr<IdxArray> ReadIdxGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("dataset file ", path,
                                            " cannot be opened; install it with `apt-get install dataset-fashion-mnist`"
                                            " or set the agent's --data-dir"));
  }
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) bytes.insert(bytes.end(), buf, buf + n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string gz_error = (n < 0 && msg) ? msg : "";
  gzclose(f);
  if (n < 0) return absl::DataLossError(absl::StrCat(path, ": gzip error: ", gz_error));
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08) {
    return absl::DataLossError(absl::StrCat(path, ": not an IDX file of unsigned bytes"));
  }
  const int ndims = bytes[3];
  if (ndims < 1 || ndims > 4 || bytes.size() < 4u + 4u * ndims) {
    return absl::DataLossError(absl::StrCat(path, ": bad IDX header"));
  }
  IdxArray out;
  int64_t count = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint8_t* p = &bytes[4 + 4 * i];
    const int64_t d = (int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3];
    out.dims.push_back(d);
    count *= d;
  }
  const size_t header = 4u + 4u * ndims;
  if (bytes.size() - header != static_cast<size_t>(count)) {
    return absl::DataLossError(
        absl::StrCat(path, ": header promises ", count, " bytes of data, file has ", bytes.size() - header));
  }
  out.data.assign(bytes.begin() + header, bytes.end());
  return out;
}

namespace {

absl::StatusOr<ImageSplit> LoadSplit(const std::string& dir, const std::string& prefix, uint64_t* hash) {
  auto images = ReadIdxGz(absl::StrCat(dir, "/", prefix, "-images-idx3-ubyte.gz"));
  if (!images.ok()) return images.status();
  auto labels = ReadIdxGz(absl::StrCat(dir, "/", prefix, "-labels-idx1-ubyte.gz"));
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3 || labels->dims.size() != 1 || images->dims[0] != labels->dims[0]) {
    return absl::DataLossError(absl::StrCat(dir, "/", prefix, ": images and labels do not match"));
  }
  *hash = Fnv1a(*hash, images->data.data(), images->data.size());
  *hash = Fnv1a(*hash, labels->data.data(), labels->data.size());
  const int64_t n = images->dims[0];
  const int64_t pixels = images->dims[1] * images->dims[2];
  ImageSplit split;
  split.images = torch::from_blob(images->data.data(), {n, pixels}, torch::kUInt8)
                     .to(torch::kFloat32)
                     .div_(255.0)
                     .sub_(kMean)
                     .div_(kStd);
  split.labels = torch::from_blob(labels->data.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return split;
}

}  // namespace

absl::StatusOr<ImageDataset> LoadFashionMnist(const std::string& dir) {
  const auto t0 = std::chrono::steady_clock::now();
  ImageDataset ds;
  ds.content_hash = kFnv1aOffset;
  auto train = LoadSplit(dir, "train", &ds.content_hash);
  if (!train.ok()) return train.status();
  auto test = LoadSplit(dir, "t10k", &ds.content_hash);
  if (!test.ok()) return test.status();
  ds.train = *std::move(train);
  ds.test = *std::move(test);
  ds.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ds;
}

}  // namespace hetbench::agent
