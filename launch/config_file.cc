#include "launch/config_file.h"

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "launch/train_config.pb.h"
#include "runtime/durable_files.h"

DECLARE_string(config);  // launch/train_options.cc

namespace ddp {
namespace {

class ConfigErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first.empty()) first = "line " + std::to_string(line + 1) + ": " + message;
  }
  std::string first;
};

std::string FieldValue(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f) {
  const google::protobuf::Reflection* r = m.GetReflection();
  using F = google::protobuf::FieldDescriptor;
  switch (f->cpp_type()) {
    case F::CPPTYPE_STRING: return r->GetString(m, f);
    case F::CPPTYPE_BOOL: return r->GetBool(m, f) ? "true" : "false";
    case F::CPPTYPE_INT32: return std::to_string(r->GetInt32(m, f));
    case F::CPPTYPE_INT64: return std::to_string(r->GetInt64(m, f));
    case F::CPPTYPE_UINT32: return std::to_string(r->GetUInt32(m, f));
    case F::CPPTYPE_UINT64: return std::to_string(r->GetUInt64(m, f));
    case F::CPPTYPE_DOUBLE: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.17g", r->GetDouble(m, f));
      return buf;
    }
    default: break;
  }
  LOG(FATAL) << "TrainConfig field " << f->name() << " has an unhandled type";
}

}  // namespace

Status ApplyConfigFile() {
  if (FLAGS_config.empty()) return Status::Ok();
  const std::string where = "--config " + FLAGS_config;
  StatusOr<std::string> read = ReadWholeFile(FLAGS_config);  // a regular file, read up to its size
  if (!read.ok()) {
    return Status(read.status().code(), read.status().code() == StatusCode::kNotFound
                                            ? where + ": cannot open"
                                            : "--config " + read.status().message());
  }
  std::istringstream text(*read);
  TrainConfig config;
  google::protobuf::TextFormat::Parser parser;
  ConfigErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &config)) return InvalidArgument(where + ": " + errors.first);
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  config.GetReflection()->ListFields(config, &fields);
  for (const auto* field : fields) {
    gflags::CommandLineFlagInfo info;
    if (!gflags::GetCommandLineFlagInfo(field->name().c_str(), &info)) {
      return Unimplemented(where + ": '" + field->name() + "' is not supported by this build of ddp_train");
    }
    if (!info.is_default) continue;  // the command line wins
    const std::string value = FieldValue(config, field);
    if (gflags::SetCommandLineOption(field->name().c_str(), value.c_str()).empty()) {
      return InvalidArgument(where + ": bad value '" + value + "' for " + field->name());
    }
  }
  return Status::Ok();
}

}  // namespace ddp
