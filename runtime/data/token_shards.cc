#include "runtime/data/token_shards.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "runtime/data/sample_rng.h"
#include "runtime/durable_files.h"

namespace ddp {
namespace {

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
uint32_t GetU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint64_t Align8(uint64_t n) { return (n + 7) / 8 * 8; }

// One shard, memory-mapped and checked.
struct Shard {
  std::string path;
  const uint8_t* base = nullptr;
  size_t size = 0;
  int token_bytes = 2;
  uint64_t tokens = 0, sentences = 0, documents = 0;
  uint32_t vocab_size = 0;
  SpecialTokens special;
  const uint64_t* sentence_offsets = nullptr;  // S + 1
  const uint64_t* document_offsets = nullptr;  // D + 1

  ~Shard() {
    if (base != nullptr) ::munmap(const_cast<uint8_t*>(base), size);
  }
  uint32_t Token(uint64_t i) const {
    const uint8_t* p = base + kTokenShardHeaderBytes + i * token_bytes;
    if (token_bytes == 2) {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    return GetU32(p);
  }
};

StatusOr<std::unique_ptr<Shard>> OpenShard(const std::string& path) {
  auto shard = std::make_unique<Shard>();
  shard->path = path;
  // Non-blocking: a FIFO with no writer is refused, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return NotFound(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Internal(path + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + " is not a regular file (a device, FIFO or socket), not a token shard");
  }
  shard->size = static_cast<size_t>(st.st_size);
  if (shard->size < static_cast<size_t>(kTokenShardHeaderBytes)) {
    ::close(fd);
    return InvalidArgument(path + ": " + std::to_string(shard->size) + " bytes, shorter than a token shard's " +
                           std::to_string(kTokenShardHeaderBytes) + "-byte header (truncated?)");
  }
  void* mapped = ::mmap(nullptr, shard->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) return Internal(path + ": cannot map: " + std::strerror(errno));
  shard->base = static_cast<const uint8_t*>(mapped);
  const uint8_t* h = shard->base;
  if (std::memcmp(h, kTokenShardMagic, 8) != 0) {
    return InvalidArgument(path + ": not a token shard (its first bytes are not \"DDPTOKEN\"; tools/tokenize_text "
                           "writes shards)");
  }
  if (GetU32(h + 8) != kTokenShardVersion) {
    return InvalidArgument(path + ": token shard version " + std::to_string(GetU32(h + 8)) + ", this build reads " +
                           std::to_string(kTokenShardVersion));
  }
  const uint32_t width = GetU32(h + 12);
  if (width != 2 && width != 4) {
    return InvalidArgument(path + ": token ids of " + std::to_string(width) +
                           " bytes; shards hold uint16 (2) or uint32 (4) ids");
  }
  shard->token_bytes = static_cast<int>(width);
  shard->tokens = GetU64(h + 16);
  shard->sentences = GetU64(h + 24);
  shard->documents = GetU64(h + 32);
  shard->vocab_size = GetU32(h + 40);
  shard->special = {GetU32(h + 44), GetU32(h + 48), GetU32(h + 52), GetU32(h + 56)};
  // Counts that could not fit in the file cannot overflow what follows.
  const uint64_t limit = shard->size;
  if (shard->tokens > limit || shard->sentences > limit || shard->documents > limit) {
    return InvalidArgument(path + ": header counts (" + std::to_string(shard->tokens) + " tokens, " +
                           std::to_string(shard->sentences) + " sentences) exceed the file's " +
                           std::to_string(shard->size) + " bytes (truncated or corrupt)");
  }
  const uint64_t expected = kTokenShardHeaderBytes + Align8(shard->tokens * width) + 8 * (shard->sentences + 1) +
                            8 * (shard->documents + 1);
  if (expected != shard->size) {
    return InvalidArgument(path + ": " + std::to_string(shard->size) + " bytes, its header says " +
                           std::to_string(expected) + (shard->size < expected ? " (truncated)" : " (trailing bytes)"));
  }
  const uint32_t crc = Crc32(h + kTokenShardHeaderBytes, shard->size - kTokenShardHeaderBytes);
  if (crc != GetU32(h + 60)) return InvalidArgument(path + ": fails its CRC-32 check (corrupt)");
  const uint8_t* offsets = h + kTokenShardHeaderBytes + Align8(shard->tokens * width);
  shard->sentence_offsets = reinterpret_cast<const uint64_t*>(offsets);
  shard->document_offsets = shard->sentence_offsets + shard->sentences + 1;
  auto monotone = [](const uint64_t* off, uint64_t n, uint64_t last) {
    if (off[0] != 0 || off[n] != last) return false;
    for (uint64_t i = 0; i < n; ++i) {
      if (off[i] > off[i + 1]) return false;
    }
    return true;
  };
  if (!monotone(shard->sentence_offsets, shard->sentences, shard->tokens) ||
      !monotone(shard->document_offsets, shard->documents, shard->sentences)) {
    return InvalidArgument(path + ": sentence or document offsets out of order (corrupt)");
  }
  for (uint64_t i = 0; i < shard->tokens; ++i) {
    if (shard->Token(i) >= shard->vocab_size) {
      return InvalidArgument(path + ": token " + std::to_string(i) + " is id " + std::to_string(shard->Token(i)) +
                             ", outside its vocabulary of " + std::to_string(shard->vocab_size));
    }
  }
  return shard;
}

// PATH's shard files, in order.
StatusOr<std::vector<std::string>> ShardPaths(const std::string& spec) {
  std::vector<std::string> paths;
  std::stringstream list(spec);
  for (std::string item; std::getline(list, item, ',');) {
    struct stat st;
    if (item.empty()) continue;
    if (::stat(item.c_str(), &st) != 0) return NotFound(item + ": no such file or directory");
    if (!S_ISDIR(st.st_mode)) {
      paths.push_back(item);
      continue;
    }
    std::vector<std::string> found;
    for (const std::string& name : ListDirectory(item)) {
      if (name.size() > 7 && name.compare(name.size() - 7, 7, ".tokens") == 0) found.push_back(item + "/" + name);
    }
    if (found.empty()) return InvalidArgument(item + ": a directory without *.tokens shards");
    paths.insert(paths.end(), found.begin(), found.end());
  }
  if (paths.empty()) return InvalidArgument("'" + spec + "' names no shards");
  return paths;
}

// A contiguous run of one shard's tokens.
struct Span {
  const Shard* shard;
  uint64_t begin, end;
  int64_t size() const { return static_cast<int64_t>(end - begin); }
};

class ShardedTokens : public TokenDataset {
 public:
  struct Document {
    const Shard* shard;
    uint64_t first_sentence, sentences;
  };
  struct Chunk {
    int64_t document;
    uint64_t first_sentence, sentences;  // within the shard
  };

  ShardedTokens(std::vector<std::unique_ptr<Shard>> shards, const TokenDataOptions& options)
      : shards_(std::move(shards)), options_(options) {
    special_ = shards_.front()->special;
    vocab_size_ = shards_.front()->vocab_size;
    const uint64_t target = static_cast<uint64_t>(options_.seq_len - 3);
    for (const auto& shard : shards_) {
      for (uint64_t d = 0; d < shard->documents; ++d) {
        const uint64_t s0 = shard->document_offsets[d], s1 = shard->document_offsets[d + 1];
        if (s1 == s0) continue;
        const int64_t doc = static_cast<int64_t>(documents_.size());
        documents_.push_back({shard.get(), s0, s1 - s0});
        // Whole sentences, in order, until the chunk holds the target.
        uint64_t first = s0, tokens = 0;
        for (uint64_t s = s0; s < s1; ++s) {
          tokens += shard->sentence_offsets[s + 1] - shard->sentence_offsets[s];
          if (tokens >= target || s + 1 == s1) {
            chunks_.push_back({doc, first, s + 1 - first});
            first = s + 1;
            tokens = 0;
          }
        }
      }
    }
  }

  int64_t size() const override { return static_cast<int64_t>(chunks_.size()); }
  int64_t seq_len() const override { return options_.seq_len; }
  int64_t max_predictions() const override { return MaskedCount(options_.seq_len); }
  TokenTask task() const override { return TokenTask::kPretraining; }
  bool ReadsFiles() const override { return true; }

  TokenBatch Fill(const int64_t* indices, int64_t count, int64_t epoch) const override {
    const int64_t t = options_.seq_len;
    TokenBatch batch;
    batch.input_ids = Tensor::Zeros({count, t}, DType::kI64);
    batch.token_type_ids = Tensor::Zeros({count, t}, DType::kI64);
    batch.attention_mask = Tensor::Zeros({count, t}, DType::kI64);
    batch.labels = Tensor::Empty({count, t}, DType::kI64);
    batch.next_sentence_label = Tensor::Empty({count}, DType::kI64);
    for (int64_t b = 0; b < count; ++b) {
      CHECK(indices[b] >= 0 && indices[b] < size()) << "sample " << indices[b] << " of " << size();
      Build(indices[b], epoch, batch.input_ids.data<int64_t>() + b * t, batch.token_type_ids.data<int64_t>() + b * t,
            batch.attention_mask.data<int64_t>() + b * t, batch.labels.data<int64_t>() + b * t,
            batch.next_sentence_label.data<int64_t>() + b);
    }
    return batch;
  }

 private:
  Span Sentences(const Shard* shard, uint64_t first, uint64_t count) const {
    return {shard, shard->sentence_offsets[first], shard->sentence_offsets[first + count]};
  }

  void Build(int64_t index, int64_t epoch, int64_t* ids, int64_t* types, int64_t* mask, int64_t* labels,
             int64_t* nsp) const {
    SampleRng rng(options_.seed, kPretrainingStream, epoch, index);
    const Chunk& chunk = chunks_[index];
    const Document& doc = documents_[chunk.document];
    const int64_t max_tokens = options_.seq_len - 3;
    const uint64_t a_sentences = chunk.sentences >= 2 ? 1 + rng.Below(static_cast<int64_t>(chunk.sentences - 1)) : 1;
    Span a = Sentences(doc.shard, chunk.first_sentence, a_sentences), b{doc.shard, 0, 0};
    const bool random_next = chunk.sentences == 1 || rng.Uniform() < 0.5;
    if (random_next) {
      // Sentences from a random point of another document (the same one
      // only when there is no other), as many as fill the sequence.
      int64_t other = chunk.document;
      for (int tries = 0; tries < 10 && other == chunk.document; ++tries) {
        other = rng.Below(static_cast<int64_t>(documents_.size()));
      }
      const Document& d = documents_[other];
      const uint64_t start = d.first_sentence + rng.Below(static_cast<int64_t>(d.sentences));
      uint64_t end = start;
      const int64_t target = max_tokens - a.size();
      while (end < d.first_sentence + d.sentences &&
             static_cast<int64_t>(d.shard->sentence_offsets[end] - d.shard->sentence_offsets[start]) < target) {
        ++end;
      }
      b = Sentences(d.shard, start, std::max<uint64_t>(end - start, 1));
    } else {
      b = Sentences(doc.shard, chunk.first_sentence + a_sentences, chunk.sentences - a_sentences);
    }
    // Trimmed a token at a time from the longer segment's front or back.
    while (a.size() + b.size() > max_tokens) {
      Span& longer = a.size() > b.size() ? a : b;
      if (rng.Uniform() < 0.5) {
        ++longer.begin;
      } else {
        --longer.end;
      }
    }
    int64_t at = 0;
    std::vector<int64_t> candidates;
    ids[at++] = special_.cls;
    auto put = [&](const Span& s, int64_t type) {
      for (uint64_t i = s.begin; i < s.end; ++i) {
        candidates.push_back(at);
        types[at] = type;
        ids[at++] = s.shard->Token(i);
      }
    };
    put(a, 0);
    ids[at++] = special_.sep;
    const int64_t b_start = at;
    put(b, 1);
    ids[at++] = special_.sep;
    for (int64_t i = b_start; i < at; ++i) types[i] = 1;
    for (int64_t i = 0; i < options_.seq_len; ++i) {
      mask[i] = i < at ? 1 : 0;
      labels[i] = -100;
      if (i >= at) ids[i] = special_.pad;
    }
    *nsp = random_next ? 1 : 0;
    // MLM: round(15%) of the sequence's length (at least one), among the
    // segments' positions, in a keyed shuffle's order; 80/10/10.
    const int64_t wanted = MaskedCount(at);
    const int64_t chosen = std::min<int64_t>(wanted, static_cast<int64_t>(candidates.size()));
    for (int64_t k = 0; k < chosen; ++k) {
      const int64_t j = k + rng.Below(static_cast<int64_t>(candidates.size()) - k);
      std::swap(candidates[k], candidates[j]);
      const int64_t pos = candidates[k];
      labels[pos] = ids[pos];
      if (rng.Uniform() < 0.8) {
        ids[pos] = special_.mask;
      } else if (rng.Uniform() >= 0.5) {
        ids[pos] = rng.Below(vocab_size_);
      }
    }
  }

  std::vector<std::unique_ptr<Shard>> shards_;
  TokenDataOptions options_;
  SpecialTokens special_;
  int64_t vocab_size_ = 0;
  std::vector<Document> documents_;
  std::vector<Chunk> chunks_;
};

}  // namespace

Status WriteTokenShard(const std::string& path, const TokenCorpus& corpus) {
  const uint32_t width = corpus.vocab_size <= 65536 ? 2 : 4;
  std::string body;
  std::vector<uint64_t> sentence_offsets = {0}, document_offsets = {0};
  uint64_t tokens = 0;
  for (const auto& document : corpus.documents) {
    for (const auto& sentence : document) {
      for (uint32_t id : sentence) {
        if (id >= corpus.vocab_size) {
          return InvalidArgument(path + ": id " + std::to_string(id) + " is outside the vocabulary of " +
                                 std::to_string(corpus.vocab_size));
        }
        if (width == 2) {
          const uint16_t v = static_cast<uint16_t>(id);
          body.append(reinterpret_cast<const char*>(&v), 2);
        } else {
          PutU32(&body, id);
        }
      }
      tokens += sentence.size();
      sentence_offsets.push_back(tokens);
    }
    document_offsets.push_back(sentence_offsets.size() - 1);
  }
  body.resize(Align8(body.size()), '\0');
  for (uint64_t o : sentence_offsets) PutU64(&body, o);
  for (uint64_t o : document_offsets) PutU64(&body, o);
  std::string file(kTokenShardMagic, 8);
  PutU32(&file, kTokenShardVersion);
  PutU32(&file, width);
  PutU64(&file, tokens);
  PutU64(&file, sentence_offsets.size() - 1);
  PutU64(&file, document_offsets.size() - 1);
  PutU32(&file, corpus.vocab_size);
  for (uint32_t id : {corpus.special.pad, corpus.special.cls, corpus.special.sep, corpus.special.mask}) {
    PutU32(&file, id);
  }
  PutU32(&file, Crc32(body.data(), body.size()));
  file += body;
  return WriteFileDurably(path, file);
}

StatusOr<std::unique_ptr<TokenDataset>> OpenTokenShards(const std::string& flag, const std::string& spec,
                                                        const TokenDataOptions& options) {
  const std::string where = flag + " tokens:" + spec;
  if (options.seq_len < 8 || options.seq_len > options.max_positions) {
    return InvalidArgument("--seq-len " + std::to_string(options.seq_len) + " is outside [8, " +
                           std::to_string(options.max_positions) + "], " + options.model + "'s positions");
  }
  StatusOr<std::vector<std::string>> paths = ShardPaths(spec);
  if (!paths.ok()) return Status(paths.status().code(), where + ": " + paths.status().message());
  std::vector<std::unique_ptr<Shard>> shards;
  for (const std::string& path : *paths) {
    StatusOr<std::unique_ptr<Shard>> shard = OpenShard(path);
    if (!shard.ok()) return Status(shard.status().code(), flag + " " + shard.status().message());
    const Shard& s = **shard;
    if (s.vocab_size > options.vocab_size) {
      return InvalidArgument(flag + " " + path + ": its vocabulary of " + std::to_string(s.vocab_size) +
                             " is larger than " + options.model + "'s " + std::to_string(options.vocab_size));
    }
    const SpecialTokens& p = s.special;
    if (std::max({p.pad, p.cls, p.sep, p.mask}) >= s.vocab_size) {
      return InvalidArgument(flag + " " + path + ": a special token id is outside its vocabulary of " +
                             std::to_string(s.vocab_size));
    }
    if (!shards.empty()) {
      const Shard& f = *shards.front();
      if (s.vocab_size != f.vocab_size || p.pad != f.special.pad || p.cls != f.special.cls ||
          p.sep != f.special.sep || p.mask != f.special.mask) {
        return InvalidArgument(flag + " " + path + ": its vocabulary size or special ids differ from " + f.path +
                               "'s (shards of one corpus share one vocabulary)");
      }
    }
    shards.push_back(std::move(*shard));
  }
  auto data = std::make_unique<ShardedTokens>(std::move(shards), options);
  if (data->size() == 0) return InvalidArgument(where + ": the shards hold no sentences");
  return std::unique_ptr<TokenDataset>(std::move(data));
}

}  // namespace ddp
