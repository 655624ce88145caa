// token_file.h — `text:` and `tokens:` data: a token stream read from a file in order.
//
// Formats:
//   Bytes — any file; every byte is a token (0..255).
//   Llmc  — llm.c: a 256 x int32 little-endian header (magic 20240520, version 1, token count N)
//           followed by N uint16 tokens; the file size must be exactly 1024 + 2N bytes. Version 2
//           (vocabularies over 65536, `zerotrain tokenize encode`): uint32 tokens, 1024 + 4N bytes.
//   Raw   — nanoGPT: the whole file is uint16 tokens (an even number of bytes).
//   Auto  — Llmc if the file starts with the magic, else Raw.
// Stream order (documented in docs/data.md): with N tokens and T = n_ctx, the stream holds
// S = floor((N - 1) / T) sequences per pass; sequence i is the T+1 tokens starting at
// offset (i mod S)·T (inputs = first T, targets = last T), so a pass walks the file in order and
// wraps to the start when the next sequence would run past the end. Global batch k holds
// sequences k·B … k·B+B-1. The file is validated once at open (every token < vocab_size), and
// each fill() reads only the sequences asked for (pread), so a rank reads only its own part.
#pragma once
#include <cstdint>
#include <string>

#include "zerotrain/data/dataset.h"

namespace zt {

// The tokens a TokenFileDataset reads, a fraction of the file's: the first floor(split·N) or,
// holdout, the rest; split 1 is the whole file. The part must hold n_ctx + 1 tokens.
struct TokenFilePart {
  double split = 1;
  bool holdout = false;
};

class TokenFileDataset final : public Dataset {
 public:
  enum class Format { Bytes, Llmc, Raw, Auto };
  static constexpr int32_t kLlmcMagic = 20240520;
  static constexpr int64_t kLlmcHeaderBytes = 256 * 4;

  // InputError (naming the file) when it is missing, unreadable, empty, malformed, shorter than
  // n_ctx + 1 tokens, or holds a token >= model_vocab.
  using Part = TokenFilePart;
  TokenFileDataset(const std::string& path, Format format, int64_t model_vocab, int64_t n_ctx,
                   int64_t global_batch,
                   int validate_shard = 0, int validate_shards = 1, Part part = {});
  ~TokenFileDataset() override;
  TokenFileDataset(const TokenFileDataset&) = delete;
  TokenFileDataset& operator=(const TokenFileDataset&) = delete;

  std::string describe() const override;
  int64_t vocab_size() const override { return vocab_; }
  int64_t sequences_per_epoch() const override { return seq_per_pass_; }
  void fill(int64_t global_batch_index, int64_t first_sample, int64_t count, Batch& out) const override;

  int64_t num_tokens() const { return ntok_; }  // in the part read
  int64_t sequences_per_pass() const { return seq_per_pass_; }
  Format format() const { return format_; }  // resolved (never Auto)
  // Offset (in tokens) of global sequence i within the file's token stream.
  int64_t sequence_offset(int64_t i) const { return (i % seq_per_pass_) * T_; }
  // The T+1 tokens of sequence i (inputs and targets of fill()).
  void read_sequence(int64_t i, int32_t* seq) const { read_tokens(sequence_offset(i), T_ + 1, seq); }
  const std::string& path() const { return path_; }

 private:
  // Checks the token ids of shard `shard` of `shards` equal parts of the file (each rank checks
  // one part; the ranks agree on the verdict before training, so the file is read once per job).
  void validate_tokens(int shard, int shards);
  void select_part(const Part& part);
  void read_tokens(int64_t first, int64_t count, int32_t* out) const;  // tokens [first, first+count)

  std::string path_;
  Format format_;
  int fd_ = -1;               // owned; closed in the destructor
  int64_t data_offset_ = 0;   // byte offset of token 0
  int64_t token_bytes_ = 1;   // 1 (Bytes), 2 or 4 (llm.c version 2)
  int64_t ntok_ = 0;
  int64_t vocab_;             // ids are validated < vocab_
  int64_t T_, B_;
  int64_t seq_per_pass_ = 0;
  std::string part_;          // describe(): "" or ", first 90% (split=0.9)"
};

}  // namespace zt
