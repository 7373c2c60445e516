// `tokens:PATH`: BERT pretraining from tokenized text shards, with the
// samples built on the fly as Google's create_pretraining_data builds them,
// but anew each epoch (dynamic masking, as RoBERTa and NVIDIA's BERT do).
//
// A shard (`*.tokens`, little-endian; tools/tokenize_text writes them):
//
//   offset  size  field
//   0       8     magic "DDPTOKEN"
//   8       4     version (1)
//   12      4     bytes per token id: 2 (uint16) or 4 (uint32)
//   16      8     token count T
//   24      8     sentence count S
//   32      8     document count D
//   40      4     vocabulary size (every id is below it)
//   44      16    the ids of [PAD], [CLS], [SEP], [MASK] (4 x uint32)
//   60      4     CRC-32 (zlib's) of everything after the header
//   64            the T token ids, then zeros to a multiple of 8 bytes
//                 S + 1 uint64: sentence s is tokens [off[s], off[s+1])
//                 D + 1 uint64: document d is sentences [off[d], off[d+1])
//
// PATH is a shard, a directory (its `*.tokens` files in sorted order), or
// several of either separated by commas; the shards must share their
// vocabulary size and special ids.
//
// Samples: each document's sentences are grouped, in order, into chunks
// of about --seq-len - 3 tokens; chunk i is sample i (its count is the
// epoch's). For sample i in epoch e, draws keyed by (seed, e, i), never the
// rank: segment A is the chunk's first k sentences (k drawn), B the rest
// (IsNext, label 0) or, half the time and always for a one-sentence chunk,
// sentences from a random point of another document (NotNext, label 1);
// the pair is trimmed to fit, a token at a time from the longer segment's
// front or back; [CLS] A [SEP] B [SEP], segment ids 0 then 1, padding after.
// MLM: round(15%) of the non-special positions (at least one), chosen by a
// keyed shuffle; 80% become [MASK], 10% a random id of the vocabulary, 10%
// stay.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/token_dataset.h"
#include "runtime/status.h"

namespace ddp {

inline constexpr char kTokenShardMagic[8] = {'D', 'D', 'P', 'T', 'O', 'K', 'E', 'N'};
inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderBytes = 64;

struct SpecialTokens {
  uint32_t pad = 0, cls = 101, sep = 102, mask = 103;  // bert-base-uncased's
};

// A corpus to write: documents of sentences of token ids.
struct TokenCorpus {
  std::vector<std::vector<std::vector<uint32_t>>> documents;
  uint32_t vocab_size = 30522;
  SpecialTokens special;
};

// Writes `corpus` as one shard (uint16 ids when the vocabulary fits, else
// uint32); the message names the path.
Status WriteTokenShard(const std::string& path, const TokenCorpus& corpus);

// Opens PATH (above) as BERT pretraining data of sequences of `options.seq_len`
// tokens. Errors name `flag` and the shard at fault: a wrong magic, version
// or id width, a file shorter or longer than its header says, a failed
// CRC-32, offsets out of order, an id outside the shard's vocabulary or the
// model's, shards that disagree, a PATH with no shards.
StatusOr<std::unique_ptr<TokenDataset>> OpenTokenShards(const std::string& flag, const std::string& path,
                                                        const TokenDataOptions& options);

}  // namespace ddp
