// train_sample.h — `zerotrain train --sample-every N --sample-prompt TEXT [--sample-tokens K]
// [--sample-temperature t]`: text from the model being trained, every N steps and after the last.
//
// Every rank takes part in one collective per sample: the fp32 master weights are all-gathered
// bucket by bucket to rank 0 (ZeroEngine::stream_parameters, what --save-weights runs; at stage 3
// the only way to see whole parameters). Rank 0 then generates on a private host CPU device
// (model/decoder.h: a key/value cache, one forward per token) and prints each line of the
// prompt + sample as "sample @ step S: ...". Nothing the training reads is touched — the
// parameters, gradients, optimizer states, data cursor — so the losses are bitwise those of a run
// without samples; the training device holds only the gather's one bucket at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/data/text_codec.h"
#include "zerotrain/model/sampler.h"
#include "zerotrain/zero/engine.h"

namespace zt {

// Phase A (no collective): InputError when the flags ask for samples of a model that is not a
// token model (an MLP), or a prompt the model cannot take (empty, longer than n_ctx, a byte outside the vocabulary).
void check_sample_flags(const TrainArgs& args, const ModelConfig& model);

class TrainSampler {
 public:
  TrainSampler(const TrainArgs& args, const ModelConfig& model);
  bool enabled() const { return every_ > 0; }
  // After global step `step`: every N-th step and the last one.
  bool due(int64_t step, int64_t last_step) const;
  // Collective: the weights to rank 0, which generates and prints the sample. specs: the
  // trained model's parameters.
  void sample(ZeroEngine& engine, Communicator& comm, const std::vector<ParamSpec>& specs, int64_t step);

 private:
  int64_t every_ = 0, tokens_ = 0;
  ModelConfig model_;
  std::string prompt_text_;
  std::vector<int32_t> prompt_;
  SamplingOptions options_;
  std::unique_ptr<TextCodec> codec_;  // byte-level unless a tokenizer is given
};

}  // namespace zt
