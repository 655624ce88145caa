// llama_decode.h — Llama inference with a key/value cache, for sampling (zerotrain sample, train
// --sample-every); the call contract and context rules are Decoder's (decoder.h).
//
// The decoder holds its own fp32 copy of the weights on `dev` (make_llama's parameters, order and
// shapes) and, per layer, a key and a value cache [num_key_value_heads, n_ctx, head_dim] (fp32):
// grouped-query attention caches the Hkv key/value heads only. prefill(tokens) runs llama.cpp's
// block forward over the prompt (rotary positions 0..n-1, the tiled grouped-query attention);
// step(token) runs it over the new position only: q and k rotated at that position, k and v
// appended to the cache (ops::kv_cache_write_gqa), attention over cache rows 0..pos
// (ops::attention_decode_gqa). Every op is a backend-dispatched zt::ops entry point, so the same
// code runs on the CPU and CUDA backends.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/core/allocator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/decoder.h"
#include "zerotrain/model/decoder_weights.h"
#include "zerotrain/model/model_config.h"

namespace zt {

class LlamaDecoder final : public Decoder {
 public:
  // weights: one fp32 vector per parameter of make_llama(cfg) (forward order, HF names), each of
  // the parameter's numel (ZT_CHECK). The values are uploaded on `stream` and not kept.
  LlamaDecoder(const LlamaConfig& cfg, const std::vector<std::vector<float>>& weights, Device& dev, Stream& stream);
  ~LlamaDecoder() override;  // drains the stream before the buffers are freed
  LlamaDecoder(const LlamaDecoder&) = delete;
  LlamaDecoder& operator=(const LlamaDecoder&) = delete;

 private:
  TensorView act(const DeviceBuffer& b, std::initializer_list<int64_t> dims) const;
  void embed(const std::vector<int32_t>& tokens) override;
  void block(int64_t l, int64_t n) override;
  std::vector<float> head(int64_t n) override;

  LlamaConfig cfg_;
  int64_t qw_, kw_;  // H·hs, Hkv·hs
  DecoderWeights weights_;
  // Activations, fp32, n_ctx rows (a forward over n rows uses the first n): x [T,C] (the residual
  // stream, updated in place), mid, ln, proj [T,C], rstd [T], q and atty [T,qw], k and v [T,kw],
  // gate, up, act [T,I], att (the prefill's attention statistics [H,T,2]), rope [n_ctx,hs] (the
  // table, uploaded once), logits [V].
  DeviceBuffer x_, mid_, ln_, rstd_, q_, k_, v_, atty_, proj_, gate_, up_, act_, att_, rope_, logits_;
};

}  // namespace zt
