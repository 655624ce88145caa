// token_stream.h — file data as one stream of windows: several files, a directory or a glob;
// per-epoch shuffling (docs/data.md, "Several files", "Shuffling").
//
// A TokenSource is one file's tokens cut into W = floor((N - 1) / T) windows of T+1 tokens
// (window i starts at token i·T; the last N - 1 - W·T tokens are not used). The stream is the
// sources in order: S = sum of their W windows per epoch, and no window spans two files.
// Global sequence g is in epoch e = g / S at position p = g mod S; without shuffling it is
// window p of the stream, with shuffling window perm_e(p), perm_e a keyed bijection on [0, S)
// (WindowPermutation) that depends only on (seed, e). Every sequence is therefore a pure function
// of (sources, seed, g): the same on every rank, for any world size and micro-batch split, and a
// resumed run continues with exactly the sequences an uninterrupted one would read.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/data/dataset.h"

namespace zt {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t windows() const = 0;                      // floor((N - 1) / T) >= 1
  virtual int64_t tokens() const = 0;                       // N
  virtual void window(int64_t i, int32_t* seq) const = 0;   // the T+1 tokens from i·T, i < windows()
  virtual std::string describe() const = 0;                 // one line (the single-source stream's describe)
  virtual const std::string& path() const = 0;
};

// A keyed bijection on [0, n): a balanced Feistel network on the smallest even number of bits
// covering n (at least 2), six rounds keyed (seed, epoch, round), and cycle-walking back into
// [0, n) (expected fewer than four network evaluations; the domain is below 4n). O(1) memory.
class WindowPermutation {
 public:
  WindowPermutation(int64_t n, uint64_t seed, uint64_t epoch);
  int64_t operator()(int64_t i) const;  // i in [0, n)

 private:
  uint64_t network(uint64_t x) const;
  int64_t n_;
  int half_bits_ = 1;
  uint64_t mask_ = 1;
  uint64_t round_keys_[6] = {};
};

class TokenStreamDataset final : public Dataset {
 public:
  // kind: "text", "tokens" or "jsonl" (describe()); vocab: the largest id any source may hold + 1.
  TokenStreamDataset(std::string kind, std::vector<std::unique_ptr<TokenSource>> sources, int64_t vocab, int64_t n_ctx,
                     int64_t global_batch, bool shuffle, uint64_t seed);

  std::string describe() const override;
  int64_t vocab_size() const override { return vocab_; }
  int64_t sequences_per_epoch() const override { return windows_; }
  void fill(int64_t global_batch_index, int64_t first_sample, int64_t count, Batch& out) const override;

  // Window of the stream that global sequence g reads (epoch g / S, permuted when shuffling).
  int64_t window_of(int64_t g) const;
  // The T+1 tokens of global sequence g.
  void sequence(int64_t g, int32_t* seq) const;
  size_t num_sources() const { return sources_.size(); }

 private:
  std::string kind_;
  std::vector<std::unique_ptr<TokenSource>> sources_;
  std::vector<int64_t> first_window_;  // [sources + 1]: prefix sums of windows()
  int64_t vocab_, T_, B_;
  int64_t windows_ = 0;                // S
  bool shuffle_;
  uint64_t seed_;
};

// The files a PATHS list names, in stream order. PATHS is one or more items separated by ':'; an
// item holding '*', '?' or '[' is a glob (glob(3), its matches sorted bytewise), an existing
// directory stands for its regular files (not hidden, not recursive) sorted by name, anything else
// is one file. InputError naming the spec when a glob matches nothing, a directory holds no file or
// an item is empty.
std::vector<std::string> expand_data_paths(const std::string& spec, const std::string& paths);

}  // namespace zt
