// decoder.h — token models' inference with a key/value cache, for sampling (zerotrain sample,
// train --sample-every): one interface over GptDecoder (gpt_decode.h) and LlamaDecoder
// (llama_decode.h).
//
// A decoder holds its own fp32 copy of the weights on its device and a key/value cache per layer.
// prefill(tokens) runs one forward over the prompt with the model's training ops and stores every
// position's keys and values; step(token) runs one forward over only the new position against the
// cache. Both return the logits of the last position, [vocab_size] fp32 on the host.
//
// Context: positions run 0..n_ctx-1; at most n_ctx tokens are ever in the cache, so a sequence can
// grow to n_ctx + 1 tokens (the logits at position n_ctx-1 choose the last one). step() at
// position n_ctx is a ZT_CHECK failure: callers stop at capacity().
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "zerotrain/core/allocator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/model/sampler.h"

namespace zt {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Empties the cache: the next call is prefill().
  void reset() { pos_ = 0; }
  // Tokens in the cache (the position the next token takes).
  int64_t position() const { return pos_; }
  // The most tokens the cache holds: n_ctx.
  int64_t capacity() const { return n_ctx_; }
  // Needs an empty cache and 1 <= tokens.size() <= n_ctx, ids in [0, vocab_size) (ZT_CHECK:
  // callers validate user input first). Logits of the last token.
  std::vector<float> prefill(const std::vector<int32_t>& tokens);
  // Appends one token at position(); needs position() < n_ctx. Logits of that token.
  std::vector<float> step(int32_t token);

 protected:
  // name: the class, for ZT_CHECK messages; n_ctx and n_layers: the model's; kv_width: the
  // channels one position keeps per layer in each of the key and the value cache.
  Decoder(const char* name, int64_t n_ctx, int64_t n_layers, int64_t kv_width, Device& dev, Stream& stream);
  // The model's forward over n = tokens.size() new rows at positions pos_..pos_+n-1: embed them
  // into the residual stream, run block l over them (and the cache rows 0..pos_+n-1), and return
  // the logits of row n-1, [vocab_size] fp32 on the host (logits_to_host).
  virtual void embed(const std::vector<int32_t>& tokens) = 0;
  virtual void block(int64_t l, int64_t n) = 0;
  virtual std::vector<float> head(int64_t n) = 0;
  // Waits for the stream and returns the device buffer `logits` ([vocab] fp32) as a host vector.
  std::vector<float> logits_to_host(const DeviceBuffer& logits, int64_t vocab);
  // An fp32 device buffer of n elements.
  DeviceBuffer alloc_f32(int64_t n, MemCategory c = MemCategory::Activations);
  // Uploads the ids to tokens_ and waits (the vector is the caller's).
  void upload_tokens(const std::vector<int32_t>& tokens);

  Device& dev_;
  Stream& stream_;  // every op of the decoder runs on it
  int64_t pos_ = 0;  // tokens in the cache
  std::vector<DeviceBuffer> k_cache_, v_cache_;  // per layer, n_ctx · kv_width fp32 each
  DeviceBuffer tokens_;                          // int32 [n_ctx], the ids of the rows being run

 private:
  std::vector<float> forward(const std::vector<int32_t>& tokens);

  const char* name_;
  int64_t n_ctx_, n_layers_;
};

// The parameters of make_model(cfg) (names, shapes, forward order), allocating nothing. cfg is a
// token model (GPT or Llama; ZT_CHECK).
std::vector<ParamSpec> decoder_param_specs(const ModelConfig& cfg, Device& dev, Stream& stream);
// The decoder of cfg's model type over `weights`: one fp32 vector per parameter of
// decoder_param_specs(cfg) (ZT_CHECK), uploaded on `stream` and not kept.
std::unique_ptr<Decoder> make_decoder(const ModelConfig& cfg, const std::vector<std::vector<float>>& weights,
                                      Device& dev, Stream& stream);

// What generate() produced: the new tokens (not the prompt), and whether it stopped before
// `count` because the sequence reached n_ctx + 1 tokens (no position left for another forward).
struct Generation {
  std::vector<int32_t> tokens;
  bool context_full = false;
};

// From an empty cache: prefill(prompt), then up to `count` tokens, token i chosen by
// sample_token(logits, o, i) and fed back through step(). The prompt holds 1..n_ctx tokens.
Generation generate(Decoder& decoder, const std::vector<int32_t>& prompt, int64_t count, const SamplingOptions& o);

}  // namespace zt
