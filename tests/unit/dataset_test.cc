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

struct ModelCase {
  const char* name;
  int64_t parameters;
  std::vector<int64_t> output;
  bool reconstruction;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

class ZooModelsTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ZooModelsTest, BuildsTheDocumentedShapeDeterministicallyFromFlatImages) {
  const ModelCase& c = GetParam();
  auto a = BuildModel(c.name, 42);
  auto b = BuildModel(c.name, 42);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  EXPECT_EQ(a->parameter_count, c.parameters);
  EXPECT_EQ(a->initial_weights_hash, b->initial_weights_hash);
  EXPECT_EQ(a->reconstruction, c.reconstruction);
  a->net->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor out = a->net->forward(torch::randn({5, 784}));
  EXPECT_EQ(out.sizes().vec(), c.output);
  if (c.reconstruction) {
    EXPECT_GE(out.min().item<double>(), 0.0);  // sigmoid: pixels in [0, 1]
    EXPECT_LE(out.max().item<double>(), 1.0);
  }
}

// Parameter counts follow from the layer sizes in the issue, e.g. cnn:
// 1*32*9+32 + 32*64*9+64 + 9216*128+128 + 128*10+10.
INSTANTIATE_TEST_SUITE_P(Zoo, ZooModelsTest,
                         ::testing::Values(ModelCase{"mlp", 669706, {5, 10}, false},
                                           ModelCase{"cnn", 1199882, {5, 10}, false},
                                           ModelCase{"rnn", 21514, {5, 10}, false},
                                           ModelCase{"lstm", 82186, {5, 10}, false},
                                           ModelCase{"autoencoder", 209968, {5, 784}, true},
                                           // 6 convs (3-64-64-128-128-256-256) + 4096-256-256-10
                                           ModelCase{"conv6", 2262602, {5, 10}, false},
                                           // the CIFAR variants' published sizes
                                           ModelCase{"vgg16", 14728266, {5, 10}, false},
                                           ModelCase{"resnet18", 11173962, {5, 10}, false},
                                           // embed 28*64+64, positions 28*64, 2 x 33472 per encoder layer, 64*10+10
                                           ModelCase{"transformer", 71242, {5, 10}, false}),
                         [](const ::testing::TestParamInfo<ModelCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace hetbench::agent
