// SQuAD's exact match and F1 of ddp_train's predicted spans:
//   squad_eval --squad dev-v1.1.json --features dev.safetensors --predictions predictions.tsv
// The features are make_squad_tensors --eval's (example_index,
// offset_mapping); the predictions ddp_train --predictions-file's. Each
// question's answer is the text of its best-scoring window's span.
#include <cstdio>

#include <gflags/gflags.h>

#include "runtime/data/squad.h"
#include "runtime/safetensors.h"
#include "tools/tool_main.h"

DEFINE_string(squad, "", "SQuAD v1.1 JSON the features were made from");
DEFINE_string(features, "", "make_squad_tensors --eval's safetensors file");
DEFINE_string(predictions, "", "ddp_train --predictions-file's spans");

namespace ddp {
namespace {

Status Run() {
  if (FLAGS_squad.empty() || FLAGS_features.empty() || FLAGS_predictions.empty()) {
    return InvalidArgument("--squad, --features and --predictions are required");
  }
  const StatusOr<SquadSet> set = ReadSquad(FLAGS_squad);
  if (!set.ok()) return Status(set.status().code(), "--squad " + set.status().message());
  const StatusOr<SafetensorsContents> features = ReadSafetensors(FLAGS_features);
  if (!features.ok()) return Status(features.status().code(), "--features " + features.status().message());
  const std::string named = "--features " + FLAGS_features;
  const Tensor* examples = features->Find("example_index");
  const Tensor* offsets = features->Find("offset_mapping");
  if (examples == nullptr || offsets == nullptr) {
    return InvalidArgument(named + ": no example_index and offset_mapping (make_squad_tensors --eval writes them)");
  }
  RETURN_IF_ERROR(CheckFeaturesSource(*set, features->metadata, named, "--squad " + FLAGS_squad));
  const StatusOr<std::vector<FeatureSpan>> spans = ReadFeatureSpans(FLAGS_predictions);
  if (!spans.ok()) return Status(spans.status().code(), "--predictions " + spans.status().message());
  ASSIGN_OR_RETURN(const SquadScores scores, ScoreSpans(*set, *examples, *offsets, *spans, named));
  std::printf("{\"exact_match\": %.4f, \"f1\": %.4f, \"questions\": %lld}\n", scores.exact_match, scores.f1,
              static_cast<long long>(scores.questions));
  return Status::Ok();
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("squad_eval --squad dev.json --features dev.safetensors --predictions predictions.tsv");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::RunTool("squad_eval", ddp::Run);
}
