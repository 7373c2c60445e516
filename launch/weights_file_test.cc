// Weights out and back in: a model saved and loaded into another is equal
// bit for bit; non-finite weights are refused on both sides, naming the
// tensor; a file for another model is refused naming the file.
#include "launch/weights_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "models/registry.h"
#include "runtime/safetensors.h"

namespace ddp {
namespace {

std::unique_ptr<Model> Make(const std::string& name, uint64_t seed) {
  ModelOptions m;
  m.name = name;
  m.num_classes = 10;
  m.seed = seed;
  return std::move(CreateModel(m).value());
}

TEST(WeightsFileTest, SavedAndLoadedBitForBit) {
  const std::string path = std::string(::testing::TempDir()) + "/w.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> a = Make("resnet18", 1), b = Make("resnet18", 2);
  ASSERT_TRUE(SaveWeightsFile(path, *a, ctx, "resnet18").ok());
  StatusOr<SafetensorsContents> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->metadata.at("model"), "resnet18");
  EXPECT_EQ(file->metadata.at("format"), "pt");
  ASSERT_TRUE(LoadWeightsFile(path, *b, "resnet18", false).ok());
  const Tensor& pa = a->flat_parameters();
  EXPECT_EQ(std::memcmp(pa.raw_data(), b->flat_parameters().raw_data(), pa.nbytes()), 0);
}

TEST(WeightsFileTest, NonFiniteRefusedNamingTheTensor) {
  const std::string path = std::string(::testing::TempDir()) + "/nan.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> a = Make("resnet18", 1);
  a->parameters().back()->value.data<float>()[0] = std::nanf("");
  const std::string last = a->parameters().back()->name;
  const Status saved = SaveWeightsFile(path, *a, ctx, "resnet18");
  EXPECT_EQ(saved.message(), "--save-weights " + path + ": tensor '" + last + "' holds non-finite values; not written");
  // Written anyway (as another tool might), it is refused at load.
  std::vector<NamedTensor> named;
  for (auto& [name, t] : a->StateDict()) named.push_back({name, t});
  ASSERT_TRUE(WriteSafetensors(path, named, {}).ok());
  const Status loaded = LoadWeightsFile(path, *Make("resnet18", 2), "resnet18", false);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.message().find("--load-weights " + path), std::string::npos) << loaded.message();
  EXPECT_NE(loaded.message().find(last), std::string::npos) << loaded.message();
}

TEST(WeightsFileTest, AnotherModelsFileIsRefused) {
  const std::string path = std::string(::testing::TempDir()) + "/r18.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  ASSERT_TRUE(SaveWeightsFile(path, *Make("resnet18", 1), ctx, "resnet18").ok());
  const Status loaded = LoadWeightsFile(path, *Make("resnet34", 1), "resnet34", false);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message().rfind("--load-weights " + path + ": ", 0), 0u) << loaded.message();
}

// In pieces (ZeRO's buckets: the flat space from the top down, a weight
// split across pieces): the file written whole, byte for byte, tied
// weights (BERT's decoder) under both names. A non-finite value is refused
// naming its tensor, on a rank that writes and one that does not, and
// leaves the file as it was; a rank that does not write writes nothing.
TEST(WeightsFileTest, WrittenInPiecesAsWritten) {
  const std::string whole = std::string(::testing::TempDir()) + "/whole.safetensors";
  const std::string pieces = std::string(::testing::TempDir()) + "/pieces.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> bert = Make("bert-tiny", 1);
  ASSERT_TRUE(SaveWeightsFile(whole, *bert, ctx, "bert-tiny").ok());
  const Tensor flat = bert->flat_parameters();
  const int64_t n = flat.numel(), piece = n / 7 + 3;  // pieces that cut parameters
  auto in_pieces = [&](const FlatPieceVisitor& visit) {
    for (int64_t end = n; end > 0; end -= piece) {
      const int64_t begin = std::max<int64_t>(0, end - piece);
      RETURN_IF_ERROR(visit(begin, flat.View(begin, {end - begin})));
    }
    return Status::Ok();
  };
  ASSERT_TRUE(SaveWeightsFileInPieces(pieces, *bert, ctx, "bert-tiny", true, in_pieces).ok());
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string bytes = read(whole);
  EXPECT_EQ(read(pieces), bytes);
  StatusOr<SafetensorsContents> file = ReadSafetensors(pieces);
  ASSERT_TRUE(file.ok());
  EXPECT_NE(file->Find("cls.predictions.decoder.weight"), nullptr);

  const Parameter& mid = *bert->parameters()[bert->parameters().size() / 2];
  mid.value.data<float>()[NumElements(mid.shape) - 1] = INFINITY;
  for (bool writes : {true, false}) {
    const Status saved = SaveWeightsFileInPieces(pieces, *bert, ctx, "bert-tiny", writes, in_pieces);
    EXPECT_EQ(saved.message(), "--save-weights " + pieces + ": tensor '" + mid.name + "' holds non-finite values; not written");
    EXPECT_EQ(read(pieces), bytes);
  }
  mid.value.data<float>()[NumElements(mid.shape) - 1] = 0.0f;
  const std::string unwritten = std::string(::testing::TempDir()) + "/unwritten.safetensors";
  ASSERT_TRUE(SaveWeightsFileInPieces(unwritten, *bert, ctx, "bert-tiny", false, in_pieces).ok());
  EXPECT_FALSE(std::ifstream(unwritten).good());
}

// A non-finite buffer (batch norm's statistics differ between ranks) is the
// writing rank's to refuse, after every piece went round (the other ranks'
// gathers need this one's); a rank that does not write lets it be.
TEST(WeightsFileTest, NonFiniteBufferIsRefusedAfterEveryPiece) {
  const std::string path = std::string(::testing::TempDir()) + "/buffer.safetensors";
  ExecutionContext ctx = ExecutionContext::Cpu(1);
  std::unique_ptr<Model> resnet = Make("resnet18", 1);
  const Tensor flat = resnet->flat_parameters();
  Buffer& mean = *resnet->buffers().front();
  mean.value.data<float>()[0] = std::nanf("");
  for (bool writes : {true, false}) {
    int pieces = 0;
    const Status saved = SaveWeightsFileInPieces(path, *resnet, ctx, "resnet18", writes, [&](const FlatPieceVisitor& visit) {
      for (int64_t at = 0; at < flat.numel(); at += 1 << 20, ++pieces) {
        RETURN_IF_ERROR(visit(at, flat.View(at, {std::min<int64_t>(1 << 20, flat.numel() - at)})));
      }
      return Status::Ok();
    });
    EXPECT_EQ(pieces, (flat.numel() + (1 << 20) - 1) >> 20);
    if (writes) {
      EXPECT_EQ(saved.message(), "--save-weights " + path + ": tensor '" + mean.name + "' holds non-finite values; not written");
      EXPECT_FALSE(std::ifstream(path).good());
    } else {
      EXPECT_TRUE(saved.ok()) << saved.ToString();
    }
  }
}

}  // namespace
}  // namespace ddp
