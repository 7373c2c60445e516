// Turns plain text into a token shard for --data tokens:PATH (the format
// in runtime/data/token_shards.h) with BERT's uncased tokenizer and a
// vocab.txt. The text is Google's pretraining format: one sentence per
// line, a blank line between documents.
//   tokenize_text --vocab vocab.txt --out corpus.tokens a.txt b.txt ...
//   tokenize_text --vocab vocab.txt --print a.txt      (each line's ids)
#include <cstdio>
#include <fstream>
#include <string>

#include <gflags/gflags.h>

#include "tools/bert_tokenizer.h"

DEFINE_string(vocab, "", "vocab.txt: one WordPiece token per line");
DEFINE_string(out, "", "the shard to write");
DEFINE_bool(lower_case, true, "lower-case and strip accents (bert-*-uncased); --nolower_case for cased vocabularies");
DEFINE_bool(print, false, "print each line's token ids instead of writing a shard");

int main(int argc, char** argv) {
  gflags::SetUsageMessage("tokenize_text --vocab vocab.txt --out corpus.tokens TEXT...");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_vocab.empty() || (FLAGS_out.empty() && !FLAGS_print) || argc < 2) {
    std::fprintf(stderr, "tokenize_text: --vocab, --out (or --print) and at least one text file are required\n");
    return 2;
  }
  ddp::StatusOr<ddp::BertTokenizer> tokenizer = ddp::BertTokenizer::FromVocabFile(FLAGS_vocab, FLAGS_lower_case);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tokenize_text: %s\n", tokenizer.status().message().c_str());
    return 1;
  }
  ddp::TokenCorpus corpus;
  corpus.vocab_size = tokenizer->vocab_size();
  corpus.special = tokenizer->special();
  int64_t lines = 0, tokens = 0, unknown = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    if (!in) {
      std::fprintf(stderr, "tokenize_text: %s: cannot open\n", argv[i]);
      return 1;
    }
    corpus.documents.emplace_back();
    for (std::string line; std::getline(in, line);) {
      const std::vector<uint32_t> ids = tokenizer->Encode(line);
      if (FLAGS_print) {
        for (size_t k = 0; k < ids.size(); ++k) std::printf(k == 0 ? "%u" : " %u", ids[k]);
        std::printf("\n");
        continue;
      }
      ++lines;
      if (ids.empty()) {  // a blank line ends a document
        if (!corpus.documents.back().empty()) corpus.documents.emplace_back();
        continue;
      }
      for (uint32_t id : ids) unknown += id == tokenizer->unk() ? 1 : 0;
      tokens += static_cast<int64_t>(ids.size());
      corpus.documents.back().push_back(ids);
    }
    if (corpus.documents.back().empty()) corpus.documents.pop_back();
  }
  if (FLAGS_print) return 0;
  if (const ddp::Status s = ddp::WriteTokenShard(FLAGS_out, corpus); !s.ok()) {
    std::fprintf(stderr, "tokenize_text: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("tokenize_text: %lld lines, %zu documents, %lld tokens (%lld [UNK]) to %s\n",
              static_cast<long long>(lines), corpus.documents.size(), static_cast<long long>(tokens),
              static_cast<long long>(unknown), FLAGS_out.c_str());
  return 0;
}
