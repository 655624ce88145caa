// gpt_decode.h — GPT-2 inference with a key/value cache, for sampling (zerotrain sample, train
// --sample-every).
//
// The decoder holds its own fp32 copy of the weights on `dev` (one buffer, parameters in
// make_gpt's order and shapes) and, per layer, a key and a value cache [n_head, n_ctx, head_dim]
// (fp32). prefill(tokens) runs one forward over the prompt with the training ops (the model's
// attention kernel, tiled or materialised, over the whole prompt) and stores every position's
// keys and values;
// step(token) runs one forward over only the new position: its q, k, v, its k and v appended to
// the cache (ops::kv_cache_write), its attention over cache rows 0..pos (ops::attention_decode).
// Both return the logits of the last position, [vocab_size] fp32 on the host. Every op is a
// backend-dispatched zt::ops entry point, so the same code runs on the CPU and CUDA backends.
//
// Context: positions run 0..n_ctx-1 (wpe has n_ctx rows); at most n_ctx tokens are ever in the
// cache, so a sequence can grow to n_ctx + 1 tokens (the logits at position n_ctx-1 choose the
// last one). step() at position n_ctx is a ZT_CHECK failure: callers stop at capacity().
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/allocator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/model/sampler.h"

namespace zt {

// The parameters of make_gpt(cfg) (names, shapes, forward order), allocating nothing.
std::vector<ParamSpec> gpt_param_specs(const GptConfig& cfg, Device& dev, Stream& stream);

class GptDecoder {
 public:
  // weights: one fp32 vector per parameter of make_gpt(cfg) (forward order, HF names), each of
  // the parameter's numel (ZT_CHECK). The values are uploaded on `stream` and not kept.
  GptDecoder(const GptConfig& cfg, const std::vector<std::vector<float>>& weights, Device& dev, Stream& stream);
  ~GptDecoder();  // drains the stream before the buffers are freed
  GptDecoder(const GptDecoder&) = delete;
  GptDecoder& operator=(const GptDecoder&) = delete;

  // Empties the cache: the next call is prefill().
  void reset() { pos_ = 0; }
  // Tokens in the cache (the position the next token takes).
  int64_t position() const { return pos_; }
  // The most tokens the cache holds: n_ctx.
  int64_t capacity() const { return cfg_.n_ctx; }
  // Needs an empty cache and 1 <= tokens.size() <= n_ctx, ids in [0, vocab_size) (ZT_CHECK:
  // callers validate user input first). Logits of the last token.
  std::vector<float> prefill(const std::vector<int32_t>& tokens);
  // Appends one token at position(); needs position() < n_ctx. Logits of that token.
  std::vector<float> step(int32_t token);

 private:
  TensorView param(int index) const;
  TensorView act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const;
  void embed(const std::vector<int32_t>& tokens);
  void block(int64_t l, int64_t n);
  std::vector<float> head(int64_t n);

  GptConfig cfg_;
  Device& dev_;
  Stream& stream_;
  std::vector<ParamSpec> specs_;
  std::vector<int64_t> offset_;  // element offset of each parameter in weights_
  DeviceBuffer weights_;         // fp32, every parameter
  std::vector<DeviceBuffer> k_cache_, v_cache_;  // per layer [H, n_ctx, hs] fp32
  DeviceBuffer tokens_, x_, mid_, ln_, mean_, rstd_, qkv_, atty_, proj_, fc_, fc_gelu_, att_, logits_;
  std::vector<float> host_logits_;
  int64_t pos_ = 0;
};

// What generate() produced: the new tokens (not the prompt), and whether it stopped before
// `count` because the sequence reached n_ctx + 1 tokens (no position left for another forward).
struct Generation {
  std::vector<int32_t> tokens;
  bool context_full = false;
};

// From an empty cache: prefill(prompt), then up to `count` tokens, token i chosen by
// sample_token(logits, o, i) and fed back through step(). The prompt holds 1..n_ctx tokens.
Generation generate(GptDecoder& decoder, const std::vector<int32_t>& prompt, int64_t count, const SamplingOptions& o);

}  // namespace zt
