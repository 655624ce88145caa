// dataset.h — training data sources and the global-batch → rank/micro-batch split (docs/data.md).
//
// A Dataset is a pure function of (global batch index k, sample index s within the batch): the
// content of global batch k is fixed by the spec and the seed and does not depend on the world
// size or on how the batch is split into micro-batches. Each rank fills only its own samples.
//
// Spec strings (the --data flag):
//   markov:vocab=V,order=K,seed=S,temperature=τ   random order-K Markov chain over V tokens
//   teacher:noise=σ,seed=S                         MLP regression from a random teacher network
//   text:PATH                                      any file as bytes (token ids 0..255)
//   tokens:PATH[,format=auto|llmc|raw]             uint16 tokens: llm.c header (magic 20240520)
//                                                  or raw uint16 (nanoGPT); auto detects the magic
//   jsonl:PATH[,field=text][,sep=0]                JSON lines: each line's string field, as bytes,
//                                                  documents separated by token `sep`
//   text:/tokens:/jsonl: ...,split=F               0 < F < 1: the first F of each file's tokens
//                                                  (DatasetShape::holdout: the rest, 1 - F)
//   text:/tokens:/jsonl: ...,shuffle=1             windows in a new order every epoch (the seed's)
// PATH may list several files, directories and globs separated by ':' (token_stream.h).
// Every key is optional (defaults in docs/data.md). Bad specs and bad files are InputErrors that
// name the spec or the file.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/model/model.h"

namespace zt {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string describe() const = 0;  // one line: kind, sizes, best loss
  // Token ids are < vocab_size(); 0 for a dataset without tokens (teacher).
  virtual int64_t vocab_size() const = 0;
  // Best achievable mean loss per position (token data: nats of cross-entropy; teacher: MSE);
  // NaN when unknown (file data).
  virtual double best_loss() const { return std::numeric_limits<double>::quiet_NaN(); }
  // File data: the sequences one epoch (one pass over the files) holds; 0 for generated data.
  virtual int64_t sequences_per_epoch() const { return 0; }
  // Writes samples [first_sample, first_sample + count) of global batch `global_batch_index` into
  // `out` (resized): token data fills inputs/targets int32 [count, T] (targets = inputs shifted by
  // one); the teacher fills features [count, in] and targets_f [count, out]. Thread-compatible:
  // const, so several threads may fill different batches at once.
  virtual void fill(int64_t global_batch_index, int64_t first_sample, int64_t count, Batch& out) const = 0;
};

// Fills `out` with `count` token samples of length T: sequence(i, seq) writes the T+1 tokens of
// the batch's i-th requested sample; inputs are seq[0..T), targets seq[1..T].
void fill_token_batch(int64_t count, int64_t T, const std::function<void(int64_t i, int32_t* seq)>& sequence,
                      Batch& out);

// What the model and the batch configuration tell the data layer.
struct DatasetShape {
  // Token models (GPT).
  int64_t vocab_size = 0;
  int64_t n_ctx = 0;                 // T: sequence length of a sample
  // MLP models: [in, h1, ..., out], the hidden activation and the task.
  std::vector<int64_t> mlp_dims;
  bool mlp_relu = false;             // false: GELU (tanh approximation), true: ReLU
  bool mlp_classification = false;   // the teacher needs a regression MLP
  int64_t global_batch = 0;          // B = train_batch_size
  uint64_t seed = 0;                 // the run's seed; a spec's seed= overrides it
  // Token files: this process checks token ids in part `validate_shard` of `validate_shards`
  // (train: its rank of the world; the ranks agree on the verdict). Default: the whole file.
  int validate_shard = 0;
  int validate_shards = 1;
  // Validation data (train --eval-data): a text:/tokens: spec with split=F reads the tokens after
  // the first F of the file instead of the first F.
  bool holdout = false;
};

// Parses `spec` and opens the source. InputError on an unknown kind, a bad key=value, a value out
// of range, a missing/empty/short/malformed file, a token id >= vocab_size, or a spec that does
// not fit the model (token data for an MLP, teacher data for a GPT).
std::unique_ptr<Dataset> make_dataset(const std::string& spec, const DatasetShape& shape);

// Global batches 0..steps-1 of `global_batch` samples address samples below 2^62 (every data
// source's cursor arithmetic is exact there); InputError naming --steps otherwise.
constexpr int64_t kMaxDataSamples = int64_t(1) << 62;
void check_data_cursor(int64_t steps, int64_t global_batch);

// The split convention: global batch k holds B = world * gas * mbs samples; rank `rank` at
// micro-step `micro_step` (0..gas-1) reads samples [first, first + mbs) with
//   first = (rank * gas + micro_step) * mbs
// i.e. each rank owns one contiguous run of gas*mbs samples, read in micro-step order. The set of
// samples in a global batch is always 0..B-1, whatever world and gas are.
int64_t sample_range(int rank, int world, int micro_step, int gas, int64_t mbs);

}  // namespace zt
