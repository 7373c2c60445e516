// The TrainConfig message compiles through proto_cc_library and parses the
// protobuf text format that --config files use.
#include <string>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "launch/train_config.pb.h"

namespace ddp {
namespace {

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    errors += "line " + std::to_string(line + 1) + ": " + message + "\n";
  }
  std::string errors;
};

TEST(TrainConfigProtoTest, ParsesTextFormat) {
  TrainConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    model: "resnet50"
    batch_size: 8
    lr: 0.1
    nesterov: true
    bucket_mb: 2.5
    data: "tensors:/data/train.safetensors"
  )pb",
                                                            &config));
  EXPECT_EQ(config.model(), "resnet50");
  EXPECT_EQ(config.batch_size(), 8);
  EXPECT_DOUBLE_EQ(config.lr(), 0.1);
  EXPECT_TRUE(config.nesterov());
  EXPECT_DOUBLE_EQ(config.bucket_mb(), 2.5);
  EXPECT_EQ(config.data(), "tensors:/data/train.safetensors");
  // Unset optional fields are distinguishable from explicit defaults, so a
  // flag default never overrides a config value.
  EXPECT_FALSE(config.has_momentum());
  EXPECT_TRUE(config.has_nesterov());
}

TEST(TrainConfigProtoTest, UnknownFieldIsAnErrorWithItsLine) {
  TrainConfig config;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  EXPECT_FALSE(parser.ParseFromString("model: \"resnet18\"\nbatch_szie: 4\n", &config));
  EXPECT_NE(errors.errors.find("line 2"), std::string::npos) << errors.errors;
  EXPECT_NE(errors.errors.find("batch_szie"), std::string::npos) << errors.errors;
}

}  // namespace
}  // namespace ddp
