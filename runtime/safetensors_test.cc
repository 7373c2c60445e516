#include "runtime/safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

// A file built by hand: header JSON, then `data` bytes.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string out;
  const uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + header + data;
}

std::vector<NamedTensor> EveryDtype() {
  std::vector<NamedTensor> t;
  t.push_back({"conv1.weight", Tensor::FromVector<float>({1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.125f}, {2, 1, 3})});
  t.push_back({"f64", Tensor::FromVector<double>({3.141592653589793, -1e300}, {2})});
  Tensor f16 = Tensor::Empty({3}, DType::kF16);
  f16.Fill(0.5);
  t.push_back({"f16", f16});
  Tensor bf16 = Tensor::Empty({2, 2}, DType::kBF16);
  bf16.Fill(-3.0);
  t.push_back({"bf16", bf16});
  t.push_back({"i32", Tensor::FromVector<int32_t>({-7, 2147483647}, {2})});
  t.push_back({"bn1.num_batches_tracked", Tensor::FromVector<int64_t>({123456789012345}, {})});
  t.push_back({"u8", Tensor::FromVector<uint8_t>({0, 255, 17}, {3})});
  t.push_back({"empty", Tensor::Empty({0, 4}, DType::kF32)});
  return t;
}

void ExpectSameTensors(const std::vector<NamedTensor>& expected, const SafetensorsContents& got) {
  ASSERT_EQ(got.tensors.size(), expected.size());
  for (const NamedTensor& e : expected) {
    const Tensor* t = got.Find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->dtype(), e.tensor.dtype()) << e.name;
    EXPECT_EQ(t->shape(), e.tensor.shape()) << e.name;
    ASSERT_EQ(t->nbytes(), e.tensor.nbytes()) << e.name;
    EXPECT_EQ(std::memcmp(t->raw_data(), e.tensor.raw_data(), t->nbytes()), 0) << e.name;
  }
}

TEST(SafetensorsTest, RoundTripsEveryDtypeThroughAFile) {
  const std::string path = testing::TempPath("round_trip.safetensors");
  const std::vector<NamedTensor> tensors = EveryDtype();
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  StatusOr<SafetensorsContents> read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameTensors(tensors, *read);
  EXPECT_EQ(read->metadata.at("format"), "pt");
  EXPECT_EQ(read->Find("bn1.num_batches_tracked")->ndim(), 0);
  EXPECT_EQ(read->Find("bn1.num_batches_tracked")->data<int64_t>()[0], 123456789012345);
  // File order is kept.
  EXPECT_EQ(read->tensors.front().name, "conv1.weight");
  EXPECT_EQ(read->tensors.back().name, "empty");
}

TEST(SafetensorsTest, HeaderIsPaddedToEightBytes) {
  StatusOr<std::string> bytes = SerializeSafetensors({{"x", Tensor::FromVector<float>({1}, {1})}});
  ASSERT_TRUE(bytes.ok());
  uint64_t len = 0;
  std::memcpy(&len, bytes->data(), 8);
  EXPECT_EQ(len % 8, 0u);
  EXPECT_EQ(bytes->size(), 8 + len + 4);
}

TEST(SafetensorsTest, ReadsAFileWrittenByPyTorchTooling) {
  // tests/golden/make_safetensors_golden.py wrote this with torch tensors.
  StatusOr<SafetensorsContents> read = ReadSafetensors("runtime/testdata/pytorch_golden.safetensors");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const SafetensorsContents& c = *read;
  EXPECT_EQ(c.metadata.at("format"), "pt");
  const Tensor* w = c.Find("layer1.0.conv1.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype(), DType::kF32);
  EXPECT_EQ(w->shape(), (Shape{2, 3, 1, 1}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w->data<float>()[i], 0.25f * i - 0.5f);
  const Tensor* n = c.Find("bn1.num_batches_tracked");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->dtype(), DType::kI64);
  EXPECT_EQ(n->ndim(), 0);
  EXPECT_EQ(n->data<int64_t>()[0], 42);
  const Tensor* h = c.Find("half");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype(), DType::kF16);
  EXPECT_EQ(h->GetAsDouble(0), 1.0);
  EXPECT_EQ(h->GetAsDouble(1), -0.333251953125);
  const Tensor* b = c.Find("bfloat");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype(), DType::kBF16);
  EXPECT_EQ(b->GetAsDouble(0), 3.140625);
  const Tensor* ids = c.Find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype(), DType::kI64);
  EXPECT_EQ(ids->shape(), (Shape{2, 3}));
  EXPECT_EQ(ids->data<int64_t>()[5], 30522);
  const Tensor* d = c.Find("double");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->data<double>()[0], 0.1);
}

// Each malformed input is a DataLoss status whose message names the source
// and the fault.
void ExpectMalformed(const std::string& bytes, const std::string& fragment) {
  StatusOr<SafetensorsContents> r = ParseSafetensors(bytes, "bad.safetensors");
  ASSERT_FALSE(r.ok()) << "accepted input expected to fail with: " << fragment;
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("bad.safetensors"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

const char kGoodHeader[] = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(SafetensorsErrorTest, TruncatedFiles) {
  ExpectMalformed("", "shorter than the 8-byte header length");
  ExpectMalformed("\x05\x00\x00", "shorter than the 8-byte header length");
  const std::string good = RawFile(kGoodHeader, std::string(8, '\0'));
  ASSERT_TRUE(ParseSafetensors(good, "good").ok());
  // Cut inside the data section, and inside the header.
  ExpectMalformed(good.substr(0, good.size() - 1), "past the 7-byte data section");
  ExpectMalformed(good.substr(0, 20), "runs past the end");
}

TEST(SafetensorsErrorTest, HeaderLengthPastTheEnd) {
  std::string bytes = RawFile(kGoodHeader, std::string(8, '\0'));
  bytes[7] = '\x7f';  // a huge length
  ExpectMalformed(bytes, "header length");
  ExpectMalformed(bytes, "runs past the end");
}

TEST(SafetensorsErrorTest, UnknownDtype) {
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", std::string(2, '\0')),
                  "tensor 'a' has unsupported dtype 'F8_E4M3'");
}

TEST(SafetensorsErrorTest, OffsetsOutOfRange) {
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", std::string(8, '\0')),
                  "tensor 'a' data_offsets end 16 is past the 8-byte data section");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0')),
                  "begin after end");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", std::string(12, '\0')),
                  "spans 12 bytes but f32[2] needs 8");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                          std::string(8, '\0')),
                  "overlaps");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})", std::string(8, '\0')),
                  "data_offsets");
}

TEST(SafetensorsErrorTest, MalformedHeaders) {
  ExpectMalformed(RawFile("{not json", ""), "header is not valid JSON");
  ExpectMalformed(RawFile("[1,2]", ""), "header is not a JSON object");
  ExpectMalformed(RawFile(R"({"a":3})", ""), "tensor 'a' is not a JSON object");
  ExpectMalformed(RawFile(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')), "no string 'dtype'");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", std::string(4, '\0')), "no 'shape'");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')),
                  "not a non-negative integer");
  ExpectMalformed(RawFile(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", ""),
                  "overflows");
  ExpectMalformed(RawFile(R"({"__metadata__":{"k":1}})", ""), "__metadata__ value 'k' is not a string");
}

TEST(SafetensorsErrorTest, MissingFileNamesThePath) {
  StatusOr<SafetensorsContents> r = ReadSafetensors(testing::TempPath("does_not_exist.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("does_not_exist.safetensors: cannot open"), std::string::npos);
}

TEST(SafetensorsWriteTest, RejectsBadTensorListsAndKeepsTheOldFile) {
  const std::string path = testing::TempPath("keep.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"x", Tensor::FromVector<float>({1}, {1})}}).ok());
  Status dup = WriteSafetensors(path, {{"y", Tensor::FromVector<float>({2}, {1})},
                                       {"y", Tensor::FromVector<float>({3}, {1})}});
  EXPECT_FALSE(dup.ok());
  EXPECT_NE(dup.message().find("duplicate tensor name 'y'"), std::string::npos);
  EXPECT_FALSE(WriteSafetensors(path, {{"__metadata__", Tensor::FromVector<float>({1}, {1})}}).ok());
  StatusOr<SafetensorsContents> r = ReadSafetensors(path);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->Find("x"), nullptr);
  Status unwritable = WriteSafetensors("/nonexistent-dir/x.safetensors", {});
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("/nonexistent-dir/x.safetensors: cannot write"), std::string::npos);
}

// A file written piece by piece, the pieces in reverse order, is the file
// written whole, byte for byte; a writer that goes without committing
// leaves the old file and no temporary one.
TEST(SafetensorsWriteTest, PiecesInAnyOrderMakeTheWholeFile) {
  const Tensor a = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = Tensor::FromVector<int64_t>({7, -8}, {2});
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  const std::string whole = testing::TempPath("whole.safetensors"), pieces = testing::TempPath("pieces.safetensors");
  ASSERT_TRUE(WriteSafetensors(whole, {{"a", a}, {"b", b}}, metadata).ok());
  {
    StatusOr<std::unique_ptr<SafetensorsFileWriter>> w = SafetensorsFileWriter::Create(
        pieces, {{"a", DType::kF32, {2, 3}}, {"b", DType::kI64, {2}}}, metadata);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Write(1, 0, b.raw_data(), b.nbytes()).ok());
    ASSERT_TRUE((*w)->Write(0, 12, a.data<float>() + 3, 12).ok());
    ASSERT_TRUE((*w)->Write(0, 0, a.data<float>(), 12).ok());
    ASSERT_TRUE((*w)->Commit().ok());
  }
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(pieces), read(whole));
  {
    StatusOr<std::unique_ptr<SafetensorsFileWriter>> w =
        SafetensorsFileWriter::Create(pieces, {{"c", DType::kF32, {1}}});
    ASSERT_TRUE(w.ok());
    const float one = 1.0f;
    ASSERT_TRUE((*w)->Write(0, 0, &one, 4).ok());
  }  // not committed
  EXPECT_EQ(read(pieces), read(whole));
  EXPECT_FALSE(std::ifstream(pieces + ".tmp." + std::to_string(::getpid())).good());
}

}  // namespace
}  // namespace ddp
