// llama_config.cpp — the Llama model file (model_config.h): Hugging Face LlamaConfig keys, so an
// HF config.json is a model file as it is.
#include <cmath>
#include <set>
#include <string>

#include "config_parse.h"
#include "zerotrain/model/model_config.h"

namespace zt {
namespace {

using json = nlohmann::json;
using namespace model_detail;

// HF keys that describe the checkpoint rather than the computation: accepted with any value.
const std::set<std::string> kInformational = {
    "architectures", "torch_dtype", "dtype",        "transformers_version", "bos_token_id",
    "eos_token_id",  "pad_token_id", "use_cache",   "model_type",           "initializer_range"};

// HF keys that select a variant of the architecture: accepted only with the value zerotrain's
// Llama computes (no dropout, one tensor-parallel slice, SiLU gate, no biases).
struct Fixed {
  const char* key;
  json value;
  const char* meaning;
};
const Fixed kFixed[] = {{"attention_dropout", 0.0, "attention dropout is not implemented"},
                        {"pretraining_tp", 1, "the sliced-matmul emulation of tensor-parallel pretraining is not implemented"},
                        {"hidden_act", "silu", "the MLP is SwiGLU (SiLU gate)"},
                        {"attention_bias", false, "the projections have no biases"},
                        {"mlp_bias", false, "the projections have no biases"}};

double get_positive_number(const json& doc, const std::string& source, const char* key, double dflt) {
  auto it = doc.find(key);
  if (it == doc.end()) return dflt;
  if (!it->is_number() || !(it->get<double>() > 0.0) || !std::isfinite(it->get<double>()))
    fail(source, key, "expected a positive finite number, got " + it->dump());
  return it->get<double>();
}

// Llama 3's scaling keys of a rope_scaling / rope_parameters object `o` (named `key` in
// messages), besides rope_type (and, in rope_parameters, rope_theta).
RopeScaling parse_llama3_scaling(const json& o, const std::string& source, const char* key) {
  static const std::set<std::string> kKeys = {"factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_position_embeddings"};
  for (auto it = o.begin(); it != o.end(); ++it) {
    if (it.key() == "rope_type" || it.key() == "type" || (it.key() == "rope_theta" && std::string(key) == "rope_parameters"))
      continue;
    if (!kKeys.count(it.key()))
      fail(source, key, "key \"" + it.key() + "\" is not a llama3 rotary-scaling key (expected factor, "
                        "low_freq_factor, high_freq_factor, original_max_position_embeddings)");
  }
  RopeScaling r;
  for (const char* k : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    auto it = o.find(k);
    if (it == o.end()) fail(source, key, std::string("llama3 rotary scaling needs \"") + k + "\"");
    if (!it->is_number() || !(it->get<double>() > 0.0) || !std::isfinite(it->get<double>()))
      fail(source, key, std::string("\"") + k + "\": expected a positive finite number, got " + it->dump());
  }
  r.factor = o["factor"].get<double>();
  r.low_freq_factor = o["low_freq_factor"].get<double>();
  r.high_freq_factor = o["high_freq_factor"].get<double>();
  r.original_max_position_embeddings = o["original_max_position_embeddings"].get<double>();
  if (r.factor < 1.0) fail(source, key, "\"factor\": expected >= 1, got " + o["factor"].dump());
  if (std::floor(r.original_max_position_embeddings) != r.original_max_position_embeddings)
    fail(source, key, "\"original_max_position_embeddings\": expected a whole number of positions, got " +
                      o["original_max_position_embeddings"].dump());
  if (!(r.high_freq_factor > r.low_freq_factor))
    fail(source, key, "\"high_freq_factor\" (" + o["high_freq_factor"].dump() + ") must be greater than "
                      "\"low_freq_factor\" (" + o["low_freq_factor"].dump() + ")");
  return r;
}

// The rope type an object names: "rope_type", or the legacy "type"; "default" when absent.
std::string rope_type(const json& o, const std::string& source, const char* key) {
  auto it = o.find("rope_type");
  if (it == o.end()) it = o.find("type");
  if (it == o.end()) return "default";
  if (!it->is_string()) fail(source, key, "rope_type: expected a string, got " + it->dump());
  return it->get<std::string>();
}

// rope_theta and the rotary scaling: rope_scaling absent, null or {"rope_type": "llama3", ...}
// (Llama 3.1/3.2); transformers 5 writes both into rope_parameters {"rope_type": "default" |
// "llama3", "rope_theta": θ, ...} instead.
void parse_rope(const json& doc, const std::string& source, LlamaConfig& c) {
  c.rope_theta = get_positive_number(doc, source, "rope_theta", 10000.0);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto o = doc.find(key);
    if (o == doc.end() || o->is_null()) continue;
    if (!o->is_object()) fail(source, key, "expected an object or null, got " + o->dump());
    const std::string type = rope_type(*o, source, key);
    const bool params = std::string(key) == "rope_parameters";
    if (type == "llama3") {
      c.rope_scaling = parse_llama3_scaling(*o, source, key);
    } else if (!(params && type == "default")) {
      fail(source, key, "rope_type \"" + type + "\" is not supported (zerotrain's Llama implements plain rotary "
                        "positions and Llama 3's \"llama3\" scaling)");
    } else {
      for (auto it = o->begin(); it != o->end(); ++it)
        if (it.key() != "rope_type" && it.key() != "rope_theta")
          fail(source, key, "key \"" + it.key() + "\" is not supported with rope_type \"default\" (expected "
                            "rope_type, rope_theta)");
    }
    if (params) c.rope_theta = get_positive_number(*o, source, "rope_theta", c.rope_theta);
  }
}

bool get_bool(const json& doc, const std::string& source, const char* key, bool dflt) {
  auto it = doc.find(key);
  if (it == doc.end()) return dflt;
  if (!it->is_boolean()) fail(source, key, "expected true or false, got " + it->dump());
  return it->get<bool>();
}

void check_fixed(const json& doc, const std::string& source) {
  for (const Fixed& f : kFixed) {
    auto it = doc.find(f.key);
    if (it == doc.end()) continue;
    const bool same = f.value.is_number() ? it->is_number() && it->get<double>() == f.value.get<double>() : *it == f.value;
    if (!same) fail(source, f.key, "expected " + f.value.dump() + " (" + f.meaning + "), got " + it->dump());
  }
}

std::set<std::string> allowed_keys() {
  std::set<std::string> k = {"vocab_size",   "hidden_size",   "intermediate_size",       "num_hidden_layers",
                             "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
                             "rms_norm_eps", "rope_theta",    "rope_scaling",            "rope_parameters",
                             "tie_word_embeddings", "n_ctx",  "init_std",                "attention"};
  k.insert(kInformational.begin(), kInformational.end());
  for (const Fixed& f : kFixed) k.insert(f.key);
  return k;
}

}  // namespace

LlamaConfig parse_llama_config(const json& doc, const std::string& source) {
  check_keys(doc, source, allowed_keys());
  check_fixed(doc, source);
  if (auto t = doc.find("model_type"); t != doc.end() && *t != "llama")
    fail(source, "model_type", "expected \"llama\", got " + t->dump());
  LlamaConfig c;
  c.vocab_size = get_positive_int(doc, source, "vocab_size", int64_t(1) << 30);
  c.hidden_size = get_positive_int(doc, source, "hidden_size", int64_t(1) << 20);
  c.intermediate_size = get_positive_int(doc, source, "intermediate_size", int64_t(1) << 22);
  c.num_hidden_layers = get_positive_int(doc, source, "num_hidden_layers", 4096);
  c.num_attention_heads = get_positive_int(doc, source, "num_attention_heads", 4096);
  c.num_key_value_heads =
      doc.contains("num_key_value_heads") ? get_positive_int(doc, source, "num_key_value_heads", 4096) : c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(source, "num_key_value_heads", "num_attention_heads (" + std::to_string(c.num_attention_heads) +
                                            ") must be a multiple of num_key_value_heads (" +
                                            std::to_string(c.num_key_value_heads) + ")");
  if (doc.contains("head_dim") && !doc["head_dim"].is_null()) {
    c.head_dim = get_positive_int(doc, source, "head_dim", 65536);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(source, "hidden_size", "must be divisible by num_attention_heads (" + std::to_string(c.hidden_size) + " % " +
                                      std::to_string(c.num_attention_heads) + " != 0), or head_dim given");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0)
    fail(source, "head_dim", "the head size must be even (rotary positions rotate channel pairs), got " +
                                 std::to_string(c.head_dim));
  c.max_position_embeddings = get_positive_int(doc, source, "max_position_embeddings", int64_t(1) << 24);
  c.n_ctx = doc.contains("n_ctx") ? get_positive_int(doc, source, "n_ctx", int64_t(1) << 20)
                                  : std::min<int64_t>(c.max_position_embeddings, int64_t(1) << 20);
  if (c.n_ctx > c.max_position_embeddings)
    fail(source, "n_ctx", "must be <= max_position_embeddings (" + std::to_string(c.max_position_embeddings) + "), got " +
                              std::to_string(c.n_ctx));
  c.rms_norm_eps = get_positive_number(doc, source, "rms_norm_eps", 1e-6);
  parse_rope(doc, source, c);
  c.tie_word_embeddings = get_bool(doc, source, "tie_word_embeddings", false);
  c.init_std = get_init_std(doc, source, get_init_std(doc, source, 0.02f, "initializer_range"));
  if (auto a = doc.find("attention"); a != doc.end() && *a != "tiled")
    fail(source, "attention", "expected \"tiled\" (the only attention of zerotrain's Llama), got " + a->dump());
  return c;
}

int64_t llama_num_params(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, qo = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const int64_t block = 2 * C + 2 * qo * C + 2 * kv * C + 3 * c.intermediate_size * C;
  return c.vocab_size * C * (c.tie_word_embeddings ? 1 : 2) + c.num_hidden_layers * block + C;
}

}  // namespace zt
