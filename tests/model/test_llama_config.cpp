// Llama model files: a Hugging Face config.json as it is, zerotrain's keys, and every bad key or
// value an InputError naming the file and the key.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/model/model_config.h"

namespace zt {
namespace {

using json = nlohmann::json;

// TinyLlama-1.1B's config.json, verbatim (1,100,048,384 parameters).
const char* kTinyLlamaHf = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632,
  "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22,
  "num_key_value_heads": 4, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.35.0", "use_cache": true, "vocab_size": 32000})";

// SmolLM-135M's shapes (tied head, 9 query heads over 3 key/value heads): 134,515,008 parameters.
const char* kSmol = R"({"type": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
  "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 2048,
  "tie_word_embeddings": true, "n_ctx": 256, "init_std": 0.041666})";

const char* kTiny = R"({"type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 16})";

std::string error_of(const json& doc) {
  try {
    parse_model_config(doc, "models/bad.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The document with `key` set to `value` (null value: key removed) fails naming the file, the key and `part`.
void expect_error(const char* base, const std::string& key, const json& value, const std::string& part) {
  json doc = json::parse(base);
  if (value.is_null()) doc.erase(key);
  else doc[key] = value;
  const std::string msg = error_of(doc);
  ASSERT_FALSE(msg.empty()) << key << " = " << value.dump() << " was accepted";
  EXPECT_NE(msg.find("models/bad.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"" + key + "\""), std::string::npos) << msg;
  EXPECT_NE(msg.find(part), std::string::npos) << "missing '" << part << "' in: " << msg;
}

TEST(LlamaConfig, HuggingFaceConfigJsonAsItIs) {
  const ModelConfig m = parse_model_config(json::parse(kTinyLlamaHf), "config.json");
  ASSERT_EQ(m.type, ModelConfig::Type::Llama);
  const LlamaConfig& c = m.llama;
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 5632);
  EXPECT_EQ(c.num_hidden_layers, 22);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_EQ(c.n_ctx, 2048);  // default: max_position_embeddings
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FLOAT_EQ(c.init_std, 0.02f);
  EXPECT_EQ(model_param_count(m), 1100048384.0);
  EXPECT_EQ(llama_num_params(c), 1100048384);
  EXPECT_TRUE(m.is_token_model());
  EXPECT_EQ(m.vocab_size(), 32000);
  EXPECT_EQ(m.context_length(), 2048);
  EXPECT_EQ(m.hidden_size(), 2048);
  EXPECT_EQ(m.num_heads(), 32);
  EXPECT_EQ(m.num_layers(), 22);
  EXPECT_STREQ(m.type_name(), "llama");
}

TEST(LlamaConfig, ZerotrainKeysAndDefaults) {
  const ModelConfig m = parse_model_config(json::parse(kSmol), "x.json");
  EXPECT_TRUE(m.llama.tie_word_embeddings);
  EXPECT_EQ(m.llama.n_ctx, 256);
  EXPECT_EQ(m.llama.head_dim, 64);
  EXPECT_FLOAT_EQ(m.llama.init_std, 0.041666f);
  EXPECT_DOUBLE_EQ(m.llama.rms_norm_eps, 1e-6);     // HF LlamaConfig's default
  EXPECT_DOUBLE_EQ(m.llama.rope_theta, 10000.0);    // HF LlamaConfig's default
  EXPECT_EQ(model_param_count(m), 134515008.0);
  EXPECT_EQ(llama_num_params(m.llama), 134515008);
  json j = json::parse(kTiny);
  EXPECT_EQ(parse_model_config(j, "x").llama.num_key_value_heads, 2);
  j.erase("num_key_value_heads");  // default: multi-head attention
  EXPECT_EQ(parse_model_config(j, "x").llama.num_key_value_heads, 4);
  j["head_dim"] = 16;  // head_dim other than hidden_size / num_attention_heads: q_proj is [H·hs, C]
  EXPECT_EQ(parse_model_config(j, "x").llama.head_dim, 16);
  j["initializer_range"] = 0.01;
  EXPECT_FLOAT_EQ(parse_model_config(j, "x").llama.init_std, 0.01f);
  j["init_std"] = 0.05;  // zerotrain's key wins
  EXPECT_FLOAT_EQ(parse_model_config(j, "x").llama.init_std, 0.05f);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};  // transformers 5's spelling
  EXPECT_DOUBLE_EQ(parse_model_config(j, "x").llama.rope_theta, 500000.0);
  j["attention"] = "tiled";
  EXPECT_NO_THROW(parse_model_config(j, "x"));
}

TEST(LlamaConfig, BadValuesNameTheKey) {
  expect_error(kTiny, "hidden_size", nullptr, "missing");
  expect_error(kTiny, "vocab_size", "64", "positive integer");
  expect_error(kTiny, "num_key_value_heads", 3, "multiple of num_key_value_heads");
  expect_error(kTiny, "hidden_size", 30, "divisible");
  expect_error(kTiny, "head_dim", 7, "even");
  expect_error(kTiny, "n_ctx", 17, "max_position_embeddings");
  expect_error(kTiny, "rms_norm_eps", 0, "positive");
  expect_error(kTiny, "rope_theta", "big", "positive");
  expect_error(kTiny, "tie_word_embeddings", 1, "true or false");
  expect_error(kTiny, "initializer_range", -1, "positive");
  expect_error(kTiny, "attention", "materialised", "tiled");
  expect_error(kTiny, "hidden_act", "gelu", "silu");
  expect_error(kTiny, "attention_bias", true, "no biases");
  expect_error(kTiny, "mlp_bias", true, "no biases");
  expect_error(kTiny, "attention_dropout", 0.1, "dropout");
  expect_error(kTiny, "pretraining_tp", 2, "tensor-parallel");
  const json llama3 = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto with = [&](const char* key, const json& value) {
    json j = llama3;
    j[key] = value;
    return j;
  };
  expect_error(kTiny, "rope_scaling", json{{"rope_type", "llama3"}, {"factor", 32.0}}, "needs \"low_freq_factor\"");
  expect_error(kTiny, "rope_scaling", json{{"rope_type", "linear"}, {"factor", 2.0}}, "\"linear\" is not supported");
  expect_error(kTiny, "rope_scaling", with("factor", 0.5), "expected >= 1");
  expect_error(kTiny, "rope_scaling", with("high_freq_factor", 1.0), "must be greater than");
  expect_error(kTiny, "rope_scaling", with("original_max_position_embeddings", 8192.5),
               "whole number");
  expect_error(kTiny, "rope_scaling", with("beta_fast", 32), "not a llama3 rotary-scaling key");
  expect_error(kTiny, "rope_scaling", "llama3", "expected an object");
  expect_error(kTiny, "rope_parameters", json{{"rope_type", "yarn"}}, "not supported");
  expect_error(kTiny, "rope_parameters", json{{"rope_type", "default"}, {"factor", 2.0}}, "not supported");
  expect_error(kTiny, "num_hiden_layers", 2, "unknown key");
  expect_error(kTiny, "model_type", "mistral", "llama");
}

TEST(LlamaConfig, HuggingFaceConfigOfAnotherArchitecture) {
  json doc = json::parse(kTinyLlamaHf);
  doc["model_type"] = "gpt2";
  const std::string msg = error_of(doc);
  EXPECT_NE(msg.find("\"model_type\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
  doc["model_type"] = "llama";
}

// Llama 3.1 / 3.2's long-context scaling, as their config.json writes it, and transformers 5's
// rope_parameters holding the same.
TEST(LlamaConfig, Llama3RotaryScaling) {
  json doc = json::parse(kTinyLlamaHf);
  EXPECT_FALSE(parse_model_config(doc, "x").llama.rope_scaling.enabled());
  doc["rope_scaling"] = {{"factor", 32.0}, {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                         {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}};
  const RopeScaling r = parse_model_config(doc, "x").llama.rope_scaling;
  EXPECT_TRUE(r.enabled());
  EXPECT_EQ(r.factor, 32.0);
  EXPECT_EQ(r.low_freq_factor, 1.0);
  EXPECT_EQ(r.high_freq_factor, 4.0);
  EXPECT_EQ(r.original_max_position_embeddings, 8192.0);
  json v5 = doc;
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                           {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                           {"original_max_position_embeddings", 8192}};
  const LlamaConfig c = parse_model_config(v5, "x").llama;
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
}

TEST(LlamaConfig, BundledFilesParse) {
  struct F { const char* file; double params; };
  // The real models' shapes: Llama 3.2 1B (tied) 1,235,814,400; Llama 2 7B 6,738,415,616; 13B 13,015,864,320.
  const F files[] = {{"llama-tiny.json", 0}, {"llama-15m.json", 0}, {"llama-3.2-1b.json", 1235814400.0},
                     {"llama-2-7b.json", 6738415616.0}, {"llama-2-13b.json", 13015864320.0}};
  for (const F& f : files) {
    const std::string path = std::string(ZT_SOURCE_DIR) + "/configs/models/" + f.file;
    ModelConfig m;
    ASSERT_NO_THROW(m = parse_model_config_file(path)) << path;
    EXPECT_EQ(m.type, ModelConfig::Type::Llama) << path;
    if (f.params > 0) {
      EXPECT_EQ(model_param_count(m), f.params) << path;
    }
  }
  const ModelConfig m15 = parse_model_config_file(std::string(ZT_SOURCE_DIR) + "/configs/models/llama-15m.json");
  EXPECT_GT(model_param_count(m15), 12e6);
  EXPECT_LT(model_param_count(m15), 18e6);
}

}  // namespace
}  // namespace zt
