// tokens:PATH: shards written and read back, samples built as the header
// of token_shards.h says (chunks, segments, NSP, trimming, [CLS]/[SEP],
// segment ids, padding), masks at BERT's rates, draws keyed by (seed,
// epoch, index) alone, and every kind of bad shard refused by name.
#include "runtime/data/token_shards.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/durable_files.h"
#include "runtime/testing/temp_path.h"

namespace ddp {
namespace {

// Token ids that say where they came from: 1000 + 1000 d + 10 s + k for
// token k of sentence s of document d (sentences of 3 to 7 tokens).
TokenCorpus Corpus(int documents, int sentences) {
  TokenCorpus corpus;
  corpus.vocab_size = 30522;
  for (int d = 0; d < documents; ++d) {
    corpus.documents.emplace_back();
    for (int s = 0; s < sentences; ++s) {
      std::vector<uint32_t> sentence;
      for (int k = 0; k < 3 + (d + s) % 5; ++k) sentence.push_back(static_cast<uint32_t>(1000 + 1000 * d + 10 * s + k));
      corpus.documents.back().push_back(sentence);
    }
  }
  return corpus;
}

TokenDataOptions Options(int64_t seq_len) {
  TokenDataOptions o;
  o.seq_len = seq_len;
  o.seed = 11;
  o.model = "bert-base";
  return o;
}

std::unique_ptr<TokenDataset> Open(const std::string& spec, int64_t seq_len = 32) {
  StatusOr<std::unique_ptr<TokenDataset>> data = OpenTokenShards("--data", spec, Options(seq_len));
  EXPECT_TRUE(data.ok()) << data.status().message();
  return data.ok() ? std::move(*data) : nullptr;
}

std::string Error(const std::string& spec) {
  StatusOr<std::unique_ptr<TokenDataset>> data = OpenTokenShards("--data", spec, Options(32));
  return data.ok() ? "opened" : data.status().message();
}

TEST(TokenShardsTest, SamplesAreBertPairsOfTheCorpusSentences) {
  const std::string path = testing::TempPath("pairs.tokens");
  ASSERT_TRUE(WriteTokenShard(path, Corpus(4, 12)).ok());
  auto data = Open(path);
  ASSERT_NE(data, nullptr);
  EXPECT_TRUE(data->ReadsFiles());
  EXPECT_EQ(data->seq_len(), 32);
  ASSERT_GE(data->size(), 8);
  std::vector<int64_t> all(data->size());
  for (int64_t i = 0; i < data->size(); ++i) all[i] = i;
  const TokenBatch b = data->Fill(all.data(), data->size(), 0);
  int next = 0, not_next = 0;
  for (int64_t i = 0; i < data->size(); ++i) {
    const int64_t* ids = b.input_ids.data<int64_t>() + i * 32;
    const int64_t* types = b.token_type_ids.data<int64_t>() + i * 32;
    const int64_t* mask = b.attention_mask.data<int64_t>() + i * 32;
    const int64_t* labels = b.labels.data<int64_t>() + i * 32;
    ASSERT_EQ(ids[0], 101) << i;
    int64_t length = 0;
    while (length < 32 && mask[length] == 1) ++length;
    for (int64_t k = length; k < 32; ++k) {
      ASSERT_EQ(mask[k], 0);
      ASSERT_EQ(ids[k], 0);  // [PAD]
      ASSERT_EQ(labels[k], -100);
    }
    ASSERT_EQ(ids[length - 1], 102);
    int64_t sep = 1;
    while (ids[sep] != 102) ++sep;
    // The original tokens (a masked one's is its label) of A and B.
    auto original = [&](int64_t k) { return labels[k] != -100 ? labels[k] : ids[k]; };
    std::vector<int64_t> a, bb;
    for (int64_t k = 1; k < sep; ++k) {
      a.push_back(original(k));
      EXPECT_EQ(types[k], 0);
    }
    for (int64_t k = sep + 1; k < length - 1; ++k) {
      bb.push_back(original(k));
      EXPECT_EQ(types[k], 1);
    }
    EXPECT_EQ(types[0], 0);
    EXPECT_EQ(types[sep], 0);
    EXPECT_EQ(types[length - 1], 1);
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(bb.empty());
    // Within a segment, consecutive tokens of one document, in order.
    auto contiguous = [](const std::vector<int64_t>& s) {
      for (size_t k = 1; k < s.size(); ++k) {
        const int64_t p = s[k - 1] - 1000, q = s[k] - 1000;
        const bool next_token = q == p + 1, next_sentence = q / 1000 == p / 1000 && (q % 1000) / 10 == (p % 1000) / 10 + 1 && q % 10 == 0;
        if (!next_token && !next_sentence) return false;
      }
      return true;
    };
    EXPECT_TRUE(contiguous(a)) << i;
    EXPECT_TRUE(contiguous(bb)) << i;
    const int64_t doc_a = (a.front() - 1000) / 1000, doc_b = (bb.front() - 1000) / 1000;
    if (b.next_sentence_label.data<int64_t>()[i] == 0) {
      ++next;
      EXPECT_EQ(doc_a, doc_b) << i;
      // B follows A in the chunk: its first sentence comes after A's last.
      EXPECT_GT(((bb.front() - 1000) % 1000) / 10, ((a.back() - 1000) % 1000) / 10) << i;
    } else {
      ++not_next;
      EXPECT_NE(doc_a, doc_b) << i;
    }
  }
  EXPECT_GT(next, 0);
  EXPECT_GT(not_next, 0);
}

TEST(TokenShardsTest, DrawsAreKeyedBySeedEpochAndIndexAlone) {
  const std::string path = testing::TempPath("keyed.tokens");
  ASSERT_TRUE(WriteTokenShard(path, Corpus(3, 20)).ok());
  auto data = Open(path);
  const std::vector<int64_t> some = {5, 2, 9};
  const TokenBatch x = data->Fill(some.data(), 3, 4), again = data->Fill(some.data(), 3, 4);
  EXPECT_EQ(0, std::memcmp(x.input_ids.raw_data(), again.input_ids.raw_data(), x.input_ids.nbytes()));
  // Sample 2 alone is row 1 of the batch above: no draw depends on its place.
  const int64_t two = 2;
  const TokenBatch alone = data->Fill(&two, 1, 4);
  EXPECT_EQ(0, std::memcmp(alone.input_ids.raw_data(), x.input_ids.data<int64_t>() + 32, 32 * sizeof(int64_t)));
  EXPECT_EQ(0, std::memcmp(alone.labels.raw_data(), x.labels.data<int64_t>() + 32, 32 * sizeof(int64_t)));
  // Another epoch: other masks (or pairs) for some sample.
  const TokenBatch later = data->Fill(some.data(), 3, 5);
  EXPECT_NE(0, std::memcmp(x.input_ids.raw_data(), later.input_ids.raw_data(), x.input_ids.nbytes()));
}

TEST(TokenShardsTest, MasksAndPairsFollowBertsRates) {
  // Sequences of 128 over 25 documents of 60 sentences: most chunks hold
  // several sentences, so about half the pairs are NotNext.
  const std::string path = testing::TempPath("rates.tokens");
  TokenCorpus corpus = Corpus(25, 60);
  ASSERT_TRUE(WriteTokenShard(path, corpus).ok());
  auto data = Open(path, 128);
  int64_t positions = 0, masked = 0, as_mask = 0, kept = 0, not_next = 0, samples = 0;
  for (int64_t epoch = 0; epoch < 20; ++epoch) {
    std::vector<int64_t> all(data->size());
    for (int64_t i = 0; i < data->size(); ++i) all[i] = i;
    const TokenBatch b = data->Fill(all.data(), data->size(), epoch);
    for (int64_t i = 0; i < b.input_ids.numel(); ++i) {
      positions += b.attention_mask.data<int64_t>()[i];
      const int64_t label = b.labels.data<int64_t>()[i];
      if (label == -100) continue;
      ++masked;
      const int64_t id = b.input_ids.data<int64_t>()[i];
      as_mask += id == 103;
      kept += id == label;
    }
    for (int64_t i = 0; i < data->size(); ++i) not_next += b.next_sentence_label.data<int64_t>()[i];
    samples += data->size();
  }
  const double mask_rate = static_cast<double>(masked) / positions;
  const double mask_share = static_cast<double>(as_mask) / masked, kept_share = static_cast<double>(kept) / masked;
  const double not_next_share = static_cast<double>(not_next) / samples;
  std::printf("masked %.4f of positions; of those [MASK] %.4f, unchanged %.4f, random %.4f; NotNext %.4f of %lld\n",
              mask_rate, mask_share, kept_share, 1 - mask_share - kept_share, not_next_share,
              static_cast<long long>(samples));
  EXPECT_NEAR(mask_rate, 0.15, 0.005);  // round(15%) of each sequence
  EXPECT_NEAR(mask_share, 0.80, 0.02);
  EXPECT_NEAR(kept_share, 0.10, 0.02);
  EXPECT_NEAR(not_next_share, 0.5, 0.05);
}

TEST(TokenShardsTest, DirectoriesAndListsJoinShardsInOrder) {
  const std::string dir = testing::TempPath("shard_dir");
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteTokenShard(dir + "/b.tokens", Corpus(2, 10)).ok());
  ASSERT_TRUE(WriteTokenShard(dir + "/a.tokens", Corpus(3, 10)).ok());
  ASSERT_TRUE(WriteFileDurably(dir + "/notes.txt", "not a shard").ok());
  const int64_t a = Open(dir + "/a.tokens")->size(), b = Open(dir + "/b.tokens")->size();
  EXPECT_EQ(Open(dir)->size(), a + b);
  EXPECT_EQ(Open(dir + "/a.tokens," + dir + "/b.tokens," + dir + "/a.tokens")->size(), 2 * a + b);
}

TEST(TokenShardsTest, BadShardsAreRefusedByName) {
  const std::string good = testing::TempPath("good.tokens");
  ASSERT_TRUE(WriteTokenShard(good, Corpus(2, 5)).ok());
  const std::string bytes = ReadWholeFile(good).value();
  auto variant = [&](const std::string& name, std::string contents) {
    const std::string path = testing::TempPath(name);
    EXPECT_TRUE(WriteFileDurably(path, contents).ok());
    return path;
  };
  std::string p = variant("magic.tokens", "NOTTOKEN" + bytes.substr(8));
  EXPECT_EQ(Error(p), "--data " + p + ": not a token shard (its first bytes are not \"DDPTOKEN\"; tools/tokenize_text "
                      "writes shards)");
  std::string width = bytes;
  width[12] = 3;
  p = variant("width.tokens", width);
  EXPECT_EQ(Error(p), "--data " + p + ": token ids of 3 bytes; shards hold uint16 (2) or uint32 (4) ids");
  std::string version = bytes;
  version[8] = 9;
  p = variant("version.tokens", version);
  EXPECT_EQ(Error(p), "--data " + p + ": token shard version 9, this build reads 1");
  p = variant("cut.tokens", bytes.substr(0, bytes.size() - 16));
  EXPECT_EQ(Error(p), "--data " + p + ": " + std::to_string(bytes.size() - 16) + " bytes, its header says " +
                          std::to_string(bytes.size()) + " (truncated)");
  p = variant("long.tokens", bytes + "extra!!!");
  EXPECT_NE(Error(p).find("(trailing bytes)"), std::string::npos);
  p = variant("tiny.tokens", bytes.substr(0, 20));
  EXPECT_EQ(Error(p), "--data " + p + ": 20 bytes, shorter than a token shard's 64-byte header (truncated?)");
  std::string flipped = bytes;
  flipped[70] ^= 0x10;
  p = variant("flipped.tokens", flipped);
  EXPECT_EQ(Error(p), "--data " + p + ": fails its CRC-32 check (corrupt)");
  // A vocabulary larger than the model's.
  TokenCorpus big = Corpus(2, 5);
  big.vocab_size = 40000;
  ASSERT_TRUE(WriteTokenShard(testing::TempPath("big.tokens"), big).ok());
  EXPECT_EQ(Error(testing::TempPath("big.tokens")),
            "--data " + testing::TempPath("big.tokens") + ": its vocabulary of 40000 is larger than bert-base's 30522");
  // Shards of different vocabularies.
  TokenCorpus other = Corpus(2, 5);
  other.special.mask = 104;
  ASSERT_TRUE(WriteTokenShard(testing::TempPath("other.tokens"), other).ok());
  EXPECT_NE(Error(good + "," + testing::TempPath("other.tokens")).find("its vocabulary size or special ids differ from"),
            std::string::npos);
  EXPECT_EQ(Error(testing::TempPath("none.tokens")),
            "--data tokens:" + testing::TempPath("none.tokens") + ": " + testing::TempPath("none.tokens") + ": no such file or directory");
  ASSERT_TRUE(MakeDirectories(testing::TempPath("no_shards")).ok());
  EXPECT_EQ(Error(testing::TempPath("no_shards")), "--data tokens:" + testing::TempPath("no_shards") + ": " + testing::TempPath("no_shards") +
                                              ": a directory without *.tokens shards");
  // Writing refuses ids outside the vocabulary.
  TokenCorpus bad = Corpus(1, 2);
  bad.documents[0][0][0] = 30522;
  EXPECT_NE(WriteTokenShard(testing::TempPath("bad.tokens"), bad).message().find("id 30522 is outside the vocabulary"),
            std::string::npos);
}

}  // namespace
}  // namespace ddp
