// Writes BERT pretraining data as a `tensors:` dataset (input_ids,
// token_type_ids, attention_mask, labels, next_sentence_label), drawn from
// the synthetic corpus: a held-out set uses other sample indices.
//   make_token_dataset --out eval.safetensors --samples 256 --seq-len 64 --first-sample 1000000
#include <cstdio>
#include <map>
#include <numeric>
#include <vector>

#include <gflags/gflags.h>

#include "runtime/data/token_dataset.h"
#include "runtime/safetensors.h"

DEFINE_string(out, "", "output safetensors file");
DEFINE_int64(samples, 256, "number of samples");
DEFINE_int64(first_sample, 0, "index of the first generated sample");
DEFINE_int64(seq_len, 128, "tokens per sequence");
DEFINE_uint64(seed, 1, "the corpus's seed (ddp_train's --seed draws the same corpus)");
DEFINE_int64(classes, 0, "> 0: a sequence-classification set (labels [N], the topic modulo this), not pretraining");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_out.empty() || FLAGS_samples <= 0) {
    std::fprintf(stderr, "make_token_dataset: --out and a positive --samples are required\n");
    return 2;
  }
  ddp::TokenDataOptions options;
  options.seq_len = FLAGS_seq_len;
  options.seed = FLAGS_seed;
  options.classes = FLAGS_classes;
  auto data = ddp::OpenTokenDataset("--seq-len", "synthetic", options);
  if (!data.ok()) {
    std::fprintf(stderr, "make_token_dataset: %s\n", data.status().message().c_str());
    return 2;
  }
  std::vector<int64_t> indices(FLAGS_samples);
  std::iota(indices.begin(), indices.end(), FLAGS_first_sample);
  const ddp::TokenBatch b = (*data)->Fill(indices.data(), FLAGS_samples);
  std::vector<ddp::NamedTensor> tensors = {{"input_ids", b.input_ids},
                                           {"token_type_ids", b.token_type_ids},
                                           {"attention_mask", b.attention_mask},
                                           {"labels", b.labels}};
  if (b.next_sentence_label.defined()) tensors.push_back({"next_sentence_label", b.next_sentence_label});
  const ddp::Status s = ddp::WriteSafetensors(FLAGS_out, tensors);
  if (!s.ok()) {
    std::fprintf(stderr, "make_token_dataset: %s\n", s.message().c_str());
    return 1;
  }
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
  return 0;
}
