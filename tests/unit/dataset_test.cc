#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>

#include "agent/data/fashion_mnist.h"
#include "agent/models/models.h"

namespace hetbench::agent {
namespace {

TEST(DatasetTest, LoadsTheRealFashionMnist) {
  auto ds = LoadFashionMnist(HETBENCH_DATA_DIR);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->train.size(), 60000);
  EXPECT_EQ(ds->test.size(), 10000);
  EXPECT_EQ(ds->train.images.size(1), 784);
  EXPECT_EQ(ds->train.labels.max().item<int64_t>(), 9);
  EXPECT_EQ(ds->train.labels.min().item<int64_t>(), 0);
  // Normalised with the training-set mean/std: mean ~0, std ~1.
  EXPECT_NEAR(ds->train.images.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(ds->train.images.std().item<double>(), 1.0, 0.02);
  // Fashion-MNIST's training labels are balanced: 6000 per class.
  EXPECT_EQ(ds->train.labels.eq(3).sum().item<int64_t>(), 6000);
}

TEST(DatasetTest, MissingDirectorySaysHowToFixIt) {
  auto ds = LoadFashionMnist("/nonexistent");
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(std::string(ds.status().message()), ::testing::HasSubstr("apt-get install dataset-fashion-mnist"));
}

TEST(DatasetTest, TruncatedIdxIsRejected) {
  const std::string path = (std::filesystem::temp_directory_path() / "hetbench-bad-idx.gz").string();
  gzFile f = gzopen(path.c_str(), "wb");
  const unsigned char header[] = {0, 0, 0x08, 0x01, 0, 0, 0, 10, 1, 2, 3};  // promises 10 labels, has 3
  gzwrite(f, header, sizeof(header));
  gzclose(f);
  auto idx = ReadIdxGz(path);
  ASSERT_FALSE(idx.ok());
  EXPECT_THAT(std::string(idx.status().message()), ::testing::HasSubstr("promises 10 bytes"));
  std::filesystem::remove(path);
}

TEST(ModelsTest, MlpIsDeterministicPerSeedAndHasTheDocumentedShape) {
  auto a = BuildModel("mlp", 42);
  auto b = BuildModel("mlp", 42);
  auto c = BuildModel("mlp", 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // 784*512+512 + 512*512+512 + 512*10+10
  EXPECT_EQ(a->parameter_count, 669706);
  EXPECT_EQ(a->initial_weights_hash, b->initial_weights_hash);
  EXPECT_NE(a->initial_weights_hash, c->initial_weights_hash);
  EXPECT_EQ(a->net->forward(torch::zeros({3, 784})).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(BuildModel("nope", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hetbench::agent
