// A SQuAD v1.1 file to question answering features for ddp_train --task
// question-answering (tools/squad_features.h):
//   make_squad_tensors --vocab vocab.txt --squad train-v1.1.json --seq-len 384 --doc-stride 128
//       --max-query-len 64 --out train.safetensors
// --eval adds example_index and offset_mapping, for --predictions-file and
// tools/squad_eval. The file's metadata fingerprints the SQuAD file's
// questions (squad_fingerprint), so features are never scored against
// another file.
#include <cstdio>

#include <gflags/gflags.h>

#include "runtime/path_use.h"
#include "runtime/safetensors.h"
#include "tools/squad_features.h"
#include "tools/tool_main.h"

DEFINE_string(vocab, "", "BERT's vocab.txt");
DEFINE_bool(lower_case, true, "uncased vocabulary: lower-case and strip accents (--nolower_case for cased)");
DEFINE_string(squad, "", "SQuAD v1.1 JSON");
DEFINE_int64(seq_len, 384, "tokens per feature");
DEFINE_int64(doc_stride, 128, "context tokens shared by consecutive windows of a long context");
DEFINE_int64(max_query_len, 64, "a question's tokens beyond this are cut");
DEFINE_bool(eval, false, "evaluation features: also example_index and offset_mapping");
DEFINE_string(out, "", "output safetensors file");

namespace ddp {
namespace {

Status Run() {
  if (FLAGS_vocab.empty() || FLAGS_squad.empty() || FLAGS_out.empty()) {
    return InvalidArgument("--vocab, --squad and --out are required");
  }
  if (FLAGS_seq_len < 8 || FLAGS_seq_len > 512) {
    return InvalidArgument("--seq-len must be in [8, 512] (BERT's positions), got " + std::to_string(FLAGS_seq_len));
  }
  if (FLAGS_doc_stride < 0) return InvalidArgument("--doc-stride must be non-negative");
  if (FLAGS_max_query_len < 1) return InvalidArgument("--max-query-len must be positive");
  RETURN_IF_ERROR(CheckOutputPaths({{"--vocab", FLAGS_vocab}, {"--squad", FLAGS_squad}}, {{"--out", FLAGS_out}}));
  ASSIGN_OR_RETURN(const BertTokenizer tokenizer, BertTokenizer::FromVocabFile(FLAGS_vocab, FLAGS_lower_case));
  const StatusOr<SquadSet> set = ReadSquad(FLAGS_squad);
  if (!set.ok()) return Status(set.status().code(), "--squad " + set.status().message());
  SquadFeatureOptions options;
  options.seq_len = FLAGS_seq_len;
  options.doc_stride = FLAGS_doc_stride;
  options.max_query_len = FLAGS_max_query_len;
  options.eval = FLAGS_eval;
  SquadFeatureCounts counts;
  const StatusOr<std::vector<NamedTensor>> features = MakeSquadFeatures(*set, tokenizer, options, &counts);
  if (!features.ok()) return InvalidArgument("--squad " + FLAGS_squad + ": " + features.status().message());
  // Which file and questions these are, for squad_eval and --squad-eval-file.
  RETURN_IF_ERROR(WriteSafetensors(FLAGS_out, *features, {{kSquadFingerprintKey, SquadFingerprint(*set)}}));
  std::printf("make_squad_tensors: %lld questions, %lld features of %lld tokens (%lld windows without the answer, "
              "labelled [CLS]) -> %s\n",
              static_cast<long long>(counts.questions), static_cast<long long>(counts.features),
              static_cast<long long>(FLAGS_seq_len), static_cast<long long>(counts.without_answer), FLAGS_out.c_str());
  return Status::Ok();
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("make_squad_tensors --vocab vocab.txt --squad FILE.json --out FILE.safetensors");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::RunTool("make_squad_tensors", ddp::Run);
}
