// decoder.cpp — what every key/value-cache decoder shares (decoder.h, decoder_weights.h): the
// weights on the device, the model-type dispatch and the generation loop.
#include "zerotrain/model/decoder.h"

#include "zerotrain/core/check.h"
#include "zerotrain/model/decoder_weights.h"
#include "zerotrain/model/gpt_decode.h"
#include "zerotrain/model/llama_decode.h"
#include "zerotrain/model/mlp.h"

namespace zt {

DecoderWeights::DecoderWeights(std::vector<ParamSpec> specs, const std::vector<std::vector<float>>& values,
                               Device& dev, Stream& stream, const char* who)
    : specs_(std::move(specs)), kind_(dev.kind()) {
  ZT_CHECK(values.size() == specs_.size(), std::string(who) + ": " + std::to_string(values.size()) +
                                               " weight tensors for " + std::to_string(specs_.size()) + " parameters");
  int64_t total = 0;
  for (size_t i = 0; i < specs_.size(); ++i) {
    ZT_CHECK(static_cast<int64_t>(values[i].size()) == specs_[i].numel,
             std::string(who) + ": " + specs_[i].name + " has " + std::to_string(values[i].size()) +
                 " values, expected " + std::to_string(specs_[i].numel));
    offset_.push_back(total);
    total += specs_[i].numel;
  }
  buffer_ = dev.alloc(static_cast<size_t>(total) * sizeof(float), MemCategory::Params);
  for (size_t i = 0; i < specs_.size(); ++i)
    dev.memcpy_async(buffer_.as<float>() + offset_[i], values[i].data(), values[i].size() * sizeof(float),
                     CopyKind::HostToDevice, stream);
  stream.synchronize();
}

TensorView DecoderWeights::param(int index) const {
  const ParamSpec& s = specs_[static_cast<size_t>(index)];
  TensorView v(buffer_.as<float>() + offset_[static_cast<size_t>(index)], DType::F32, {}, kind_);
  for (int64_t d : s.shape) v.shape[v.ndim++] = d;
  return v;
}

std::vector<ParamSpec> decoder_param_specs(const ModelConfig& cfg, Device& dev, Stream& stream) {
  ZT_CHECK(cfg.is_token_model(), std::string("decoder_param_specs: a ") + cfg.type_name() + " model has no decoder");
  ModelOptions opt;
  opt.plan_only = true;
  opt.device = &dev;
  opt.stream = &stream;
  return make_model(cfg, opt)->params();
}

std::unique_ptr<Decoder> make_decoder(const ModelConfig& cfg, const std::vector<std::vector<float>>& weights,
                                      Device& dev, Stream& stream) {
  ZT_CHECK(cfg.is_token_model(), std::string("make_decoder: a ") + cfg.type_name() + " model has no decoder");
  if (cfg.type == ModelConfig::Type::Llama) return std::make_unique<LlamaDecoder>(cfg.llama, weights, dev, stream);
  return std::make_unique<GptDecoder>(cfg.gpt, weights, dev, stream);
}

std::vector<float> Decoder::forward(const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  embed(tokens);
  for (int64_t l = 0; l < n_layers_; ++l) block(l, n);
  pos_ += n;
  return head(n);
}

std::vector<float> Decoder::prefill(const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  ZT_CHECK(pos_ == 0, std::string(name_) + "::prefill: the cache holds " + std::to_string(pos_) +
                          " tokens; reset() first");
  ZT_CHECK(n >= 1 && n <= n_ctx_, std::string(name_) + "::prefill: " + std::to_string(n) + " tokens, expected 1.." +
                                      std::to_string(n_ctx_));
  return forward(tokens);
}

std::vector<float> Decoder::step(int32_t token) {
  ZT_CHECK(pos_ > 0, std::string(name_) + "::step: empty cache; prefill() the prompt first");
  ZT_CHECK(pos_ < n_ctx_, std::string(name_) + "::step: the cache is full (n_ctx=" + std::to_string(n_ctx_) + ")");
  return forward({token});
}

Decoder::Decoder(const char* name, int64_t n_ctx, int64_t n_layers, int64_t kv_width, Device& dev, Stream& stream)
    : dev_(dev), stream_(stream), name_(name), n_ctx_(n_ctx), n_layers_(n_layers) {
  for (int64_t l = 0; l < n_layers; ++l) {
    k_cache_.push_back(alloc_f32(n_ctx * kv_width));
    v_cache_.push_back(alloc_f32(n_ctx * kv_width));
  }
  tokens_ = dev.alloc(static_cast<size_t>(n_ctx) * sizeof(int32_t), MemCategory::Activations);
}

DeviceBuffer Decoder::alloc_f32(int64_t n, MemCategory c) { return dev_.alloc(static_cast<size_t>(n) * sizeof(float), c); }

void Decoder::upload_tokens(const std::vector<int32_t>& tokens) {
  dev_.memcpy_async(tokens_.data(), tokens.data(), tokens.size() * sizeof(int32_t), CopyKind::HostToDevice, stream_);
  stream_.synchronize();
}

std::vector<float> Decoder::logits_to_host(const DeviceBuffer& logits, int64_t vocab) {
  std::vector<float> out(static_cast<size_t>(vocab));
  dev_.memcpy_async(out.data(), logits.data(), out.size() * sizeof(float), CopyKind::DeviceToHost, stream_);
  stream_.synchronize();
  return out;
}

Generation generate(Decoder& decoder, const std::vector<int32_t>& prompt, int64_t count, const SamplingOptions& o) {
  Generation g;
  decoder.reset();
  std::vector<float> logits = decoder.prefill(prompt);
  for (int64_t i = 0; i < count; ++i) {
    g.tokens.push_back(sample_token(logits, o, static_cast<uint64_t>(i)));
    if (i + 1 == count) break;
    if (decoder.position() >= decoder.capacity()) {
      g.context_full = true;
      break;
    }
    logits = decoder.step(g.tokens.back());
  }
  return g;
}

}  // namespace zt
