// Turns plain text into a token shard for --data tokens:PATH (the format
// in runtime/data/token_shards.h) with BERT's uncased tokenizer and a
// vocab.txt. The text is Google's pretraining format: one sentence per
// line, a blank line between documents.
//   tokenize_text --vocab vocab.txt --out corpus.tokens a.txt b.txt ...
//   tokenize_text --vocab vocab.txt --print a.txt      (each line's ids)
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gflags/gflags.h>

#include "runtime/path_use.h"
#include "tools/bert_tokenizer.h"
#include "tools/tool_main.h"

DEFINE_string(vocab, "", "vocab.txt: one WordPiece token per line");
DEFINE_string(out, "", "the shard to write");
DEFINE_bool(lower_case, true, "lower-case and strip accents (bert-*-uncased); --nolower_case for cased vocabularies");
DEFINE_bool(print, false, "print each line's token ids instead of writing a shard");

namespace ddp {
namespace {

Status Run(const std::vector<std::string>& texts) {
  if (FLAGS_vocab.empty() || (FLAGS_out.empty() && !FLAGS_print) || texts.empty()) {
    return InvalidArgument("--vocab, --out (or --print) and at least one text file are required");
  }
  std::vector<PathUse> inputs = {{"--vocab", FLAGS_vocab}};
  for (const std::string& text : texts) {
    struct stat st;
    if (::stat(text.c_str(), &st) != 0) return NotFound(text + ": cannot open: " + std::strerror(errno));
    // Read a line at a time: a pipe or /dev/stdin streams; a directory
    // would read as no lines at all.
    if (S_ISDIR(st.st_mode)) return InvalidArgument(text + " is a directory; give text files, one sentence per line");
    inputs.push_back({"text", text});
  }
  if (!FLAGS_print) RETURN_IF_ERROR(CheckOutputPaths(inputs, {{"--out", FLAGS_out}}));
  ASSIGN_OR_RETURN(const BertTokenizer tokenizer, BertTokenizer::FromVocabFile(FLAGS_vocab, FLAGS_lower_case));
  TokenCorpus corpus;
  corpus.vocab_size = tokenizer.vocab_size();
  corpus.special = tokenizer.special();
  int64_t lines = 0, tokens = 0, unknown = 0;
  for (const std::string& text : texts) {
    std::ifstream in(text, std::ios::binary);
    if (!in) return NotFound(text + ": cannot open");
    corpus.documents.emplace_back();
    for (std::string line; std::getline(in, line);) {
      const std::vector<uint32_t> ids = tokenizer.Encode(line);
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
      for (uint32_t id : ids) unknown += id == tokenizer.unk() ? 1 : 0;
      tokens += static_cast<int64_t>(ids.size());
      corpus.documents.back().push_back(ids);
    }
    if (in.bad()) return DataLoss(text + ": a read failed part way: " + std::strerror(errno));
    if (corpus.documents.back().empty()) corpus.documents.pop_back();
  }
  if (FLAGS_print) return Status::Ok();
  RETURN_IF_ERROR(WriteTokenShard(FLAGS_out, corpus));
  std::printf("tokenize_text: %lld lines, %zu documents, %lld tokens (%lld [UNK]) to %s\n",
              static_cast<long long>(lines), corpus.documents.size(), static_cast<long long>(tokens),
              static_cast<long long>(unknown), FLAGS_out.c_str());
  return Status::Ok();
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::SetUsageMessage("tokenize_text --vocab vocab.txt --out corpus.tokens TEXT...");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const std::vector<std::string> texts(argv + 1, argv + argc);
  return ddp::RunTool("tokenize_text", [&] { return ddp::Run(texts); });
}
