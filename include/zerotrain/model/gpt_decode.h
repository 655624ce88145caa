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
// The context rules and the call contract are Decoder's (decoder.h).
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/allocator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/decoder.h"
#include "zerotrain/model/decoder_weights.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"

namespace zt {

// The parameters of make_gpt(cfg) (names, shapes, forward order), allocating nothing.
std::vector<ParamSpec> gpt_param_specs(const GptConfig& cfg, Device& dev, Stream& stream);

class GptDecoder final : public Decoder {
 public:
  // weights: one fp32 vector per parameter of make_gpt(cfg) (forward order, HF names), each of
  // the parameter's numel (ZT_CHECK). The values are uploaded on `stream` and not kept.
  GptDecoder(const GptConfig& cfg, const std::vector<std::vector<float>>& weights, Device& dev, Stream& stream);
  ~GptDecoder() override;  // drains the stream before the buffers are freed
  GptDecoder(const GptDecoder&) = delete;
  GptDecoder& operator=(const GptDecoder&) = delete;

 private:
  TensorView param(int index) const { return weights_.param(index); }
  TensorView act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const;
  void embed(const std::vector<int32_t>& tokens) override;
  void block(int64_t l, int64_t n) override;
  std::vector<float> head(int64_t n) override;

  GptConfig cfg_;
  DecoderWeights weights_;
  DeviceBuffer x_, mid_, ln_, mean_, rstd_, qkv_, atty_, proj_, fc_, fc_gelu_, att_, logits_;
};

}  // namespace zt
