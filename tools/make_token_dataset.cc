// Writes BERT pretraining data as a `tensors:` dataset (input_ids,
// token_type_ids, attention_mask, labels, next_sentence_label), drawn from
// the synthetic corpus: a held-out set uses other sample indices.
//   make_token_dataset --out eval.safetensors --samples 256 --seq-len 64 --first-sample 1000000
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include <gflags/gflags.h>

#include "runtime/data/token_dataset.h"
#include "runtime/path_use.h"
#include "runtime/safetensors.h"
#include "tools/tool_main.h"

DEFINE_string(out, "", "output safetensors file");
DEFINE_int64(samples, 256, "number of samples");
DEFINE_int64(first_sample, 0, "index of the first generated sample");
DEFINE_int64(seq_len, 128, "tokens per sequence");
DEFINE_uint64(seed, 1, "the corpus's seed (ddp_train's --seed draws the same corpus)");
DEFINE_int64(classes, 0, "0: pretraining data; 2 or more: a sequence-classification set (labels [N], the topic modulo this)");

namespace ddp {
namespace {

Status Run() {
  if (FLAGS_out.empty() || FLAGS_samples <= 0) return InvalidArgument("--out and a positive --samples are required");
  if (FLAGS_classes < 0 || FLAGS_classes == 1) {
    return InvalidArgument("--classes must be 0 (pretraining data) or at least 2 (a classification set), got " +
                           std::to_string(FLAGS_classes));
  }
  if (FLAGS_first_sample < 0 || FLAGS_first_sample > std::numeric_limits<int64_t>::max() - FLAGS_samples) {
    return InvalidArgument("--first-sample " + std::to_string(FLAGS_first_sample) + " must be non-negative, with " +
                           "--first-sample + --samples within 2^63");
  }
  RETURN_IF_ERROR(CheckOutputPaths({}, {{"--out", FLAGS_out}}));
  TokenDataOptions options;
  options.seq_len = FLAGS_seq_len;
  options.seed = FLAGS_seed;
  options.classes = FLAGS_classes;
  ASSIGN_OR_RETURN(const std::unique_ptr<TokenDataset> data, OpenTokenDataset("--seq-len", "synthetic", options));
  // Five tensors of a sample's tokens, held twice while the file is written.
  RETURN_IF_ERROR(CheckFlagSize("--samples " + std::to_string(FLAGS_samples) + " of --seq-len " +
                                    std::to_string(FLAGS_seq_len),
                                FLAGS_samples, 2 * (4 * FLAGS_seq_len + 2) * static_cast<int64_t>(sizeof(int64_t))));
  std::vector<int64_t> indices(FLAGS_samples);
  std::iota(indices.begin(), indices.end(), FLAGS_first_sample);
  const TokenBatch b = data->Fill(indices.data(), FLAGS_samples);
  std::vector<NamedTensor> tensors = {{"input_ids", b.input_ids},
                                      {"token_type_ids", b.token_type_ids},
                                      {"attention_mask", b.attention_mask},
                                      {"labels", b.labels}};
  if (b.next_sentence_label.defined()) tensors.push_back({"next_sentence_label", b.next_sentence_label});
  RETURN_IF_ERROR(WriteSafetensors(FLAGS_out, tensors));
  // The baseline an accuracy is judged against: always predicting the most
  // frequent masked token (or class).
  std::map<int64_t, int64_t> counts;
  int64_t labelled = 0;
  for (int64_t i = 0; i < b.labels.numel(); ++i) {
    const int64_t label = b.labels.data<int64_t>()[i];
    if (label == -100) continue;
    ++counts[label];
    ++labelled;
  }
  int64_t most = 0, most_id = -1;
  for (const auto& [id, count] : counts) {
    if (count > most) most = count, most_id = id;
  }
  std::printf("most frequent label: %lld, %lld of %lld masked tokens, share %.6f\n", static_cast<long long>(most_id),
              static_cast<long long>(most), static_cast<long long>(labelled),
              labelled > 0 ? static_cast<double>(most) / static_cast<double>(labelled) : 0.0);
  return Status::Ok();
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("make_token_dataset --out FILE.safetensors --samples N --seq-len T [--classes C]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::RunTool("make_token_dataset", ddp::Run);
}
