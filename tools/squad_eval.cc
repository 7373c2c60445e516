// SQuAD's exact match and F1 of ddp_train's predicted spans:
//   squad_eval --squad dev-v1.1.json --features dev.safetensors --predictions predictions.tsv
// The features are make_squad_tensors --eval's (example_index,
// offset_mapping); the predictions ddp_train --predictions-file's. Each
// question's answer is the text of its best-scoring window's span.
#include <cstdio>

#include <gflags/gflags.h>

#include "runtime/data/squad.h"
#include "runtime/safetensors.h"

DEFINE_string(squad, "", "SQuAD v1.1 JSON the features were made from");
DEFINE_string(features, "", "make_squad_tensors --eval's safetensors file");
DEFINE_string(predictions, "", "ddp_train --predictions-file's spans");

int main(int argc, char** argv) {
  gflags::SetUsageMessage("squad_eval --squad dev.json --features dev.safetensors --predictions predictions.tsv");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  auto fail = [](const std::string& line) {
    std::fprintf(stderr, "squad_eval: %s\n", line.c_str());
    return 1;
  };
  if (FLAGS_squad.empty() || FLAGS_features.empty() || FLAGS_predictions.empty()) {
    return fail("--squad, --features and --predictions are required");
  }
  const ddp::StatusOr<ddp::SquadSet> set = ddp::ReadSquad(FLAGS_squad);
  if (!set.ok()) return fail(set.status().message());
  const ddp::StatusOr<ddp::SafetensorsContents> features = ddp::ReadSafetensors(FLAGS_features);
  if (!features.ok()) return fail(features.status().message());
  const ddp::Tensor* examples = features->Find("example_index");
  const ddp::Tensor* offsets = features->Find("offset_mapping");
  if (examples == nullptr || offsets == nullptr || examples->dtype() != ddp::DType::kI64 ||
      offsets->dtype() != ddp::DType::kI64 || offsets->ndim() != 3 || offsets->dim(0) != examples->numel()) {
    return fail("--features " + FLAGS_features +
                ": no i64 example_index [N] and offset_mapping [N, T, 2] (make_squad_tensors --eval writes them)");
  }
  const ddp::StatusOr<std::vector<ddp::FeatureSpan>> spans = ddp::ReadFeatureSpans(FLAGS_predictions);
  if (!spans.ok()) return fail(spans.status().message());
  const ddp::StatusOr<ddp::SquadScores> scores =
      ddp::ScoreSpans(*set, *examples, *offsets, *spans, "--features " + FLAGS_features);
  if (!scores.ok()) return fail(scores.status().message());
  std::printf("{\"exact_match\": %.4f, \"f1\": %.4f, \"questions\": %lld}\n", scores->exact_match, scores->f1,
              static_cast<long long>(scores->questions));
  return 0;
}
