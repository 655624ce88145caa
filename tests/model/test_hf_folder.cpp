// Hugging Face folders for --init-from: config.json to a model (and its checks), the sharded index.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/model/hf_folder.h"

namespace {

std::string folder(const std::string& name) {
  const std::string d = ::testing::TempDir() + "zt_hf_" + name;
  ::mkdir(d.c_str(), 0755);
  return d;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

const char* kGpt2 =
    R"({"model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_ctx": 16, "n_embd": 32, "n_layer": 2,
        "n_head": 4, "n_inner": null, "activation_function": "gelu_new", "tie_word_embeddings": true,
        "initializer_range": 0.01})";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(HfFolder, ConfigJsonIsTheModel) {
  const std::string d = folder("config");
  write(d + "/config.json", kGpt2);
  ASSERT_EQ(zt::hf_config_path(d), d + "/config.json");
  const zt::ModelConfig m = zt::model_config_from_hf(d + "/config.json");
  EXPECT_EQ(m.type, zt::ModelConfig::Type::GPT);
  const std::vector<int64_t> sizes = {m.gpt.vocab_size, m.gpt.n_ctx, m.gpt.n_embd, m.gpt.n_layer, m.gpt.n_head};
  EXPECT_EQ(sizes, (std::vector<int64_t>{64, 16, 32, 2, 4}));  // n_positions -> n_ctx
  EXPECT_FLOAT_EQ(m.gpt.init_std, 0.01f);
  EXPECT_EQ(error_of([&] { zt::check_model_matches_hf(m, "m.json", d + "/config.json"); }), "");
  zt::ModelConfig other = m;
  other.gpt.n_ctx = 32;
  EXPECT_NE(error_of([&] { zt::check_model_matches_hf(other, "m.json", d + "/config.json"); })
                .find("has n_positions 16, --model m.json has n_ctx 32"),
            std::string::npos);
  zt::ModelConfig mlp;
  EXPECT_NE(error_of([&] { zt::check_model_matches_hf(mlp, "m.json", d + "/config.json"); }).find("is an MLP"),
            std::string::npos);
}

TEST(HfFolder, ConfigJsonErrorsNameTheKey) {
  const std::string d = folder("bad_config");
  const std::string p = d + "/config.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model_type": "mistral", "vocab_size": 64})", "\"model_type\" is \"mistral\""},
      {R"({"model_type": "llama", "vocab_size": 64})", "key \"hidden_size\": missing"},  // a Llama model file
      {R"({"vocab_size": 64})", "\"model_type\" is missing"},
      {R"({"model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_layer": 2, "n_head": 4})", "missing \"n_embd\""},
      {R"({"model_type": "gpt2", "vocab_size": -1, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4})",
       "\"vocab_size\" must be a positive integer"},
      {R"({"model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
           "activation_function": "relu"})", "\"activation_function\" is \"relu\""},
      {R"({"model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
           "n_inner": 64})", "\"n_inner\" is 64"},
      {R"({"model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
           "tie_word_embeddings": false})", "\"tie_word_embeddings\" is false"},
      {R"({"model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_embd": 30, "n_layer": 2, "n_head": 4})",
       "n_head"},  // the model file's own rule: n_embd divisible by n_head
      {"not json", "not a JSON object"},
  };
  for (const auto& [text, needle] : cases) {
    write(p, text);
    const std::string e = error_of([&] { zt::model_config_from_hf(p); });
    EXPECT_NE(e.find(needle), std::string::npos) << text << " -> " << e;
    EXPECT_NE(e.find(p), std::string::npos) << e;
  }
}

TEST(HfFolder, WeightFilesSingleAndSharded) {
  const std::string single = folder("single");
  write(single + "/model.safetensors", "x");
  write(single + "/model.safetensors.index.json", "ignored: model.safetensors comes first");
  zt::HfWeightFiles w = zt::hf_weight_files(single);
  EXPECT_EQ(w.files, std::vector<std::string>{single + "/model.safetensors"});
  EXPECT_TRUE(w.index.empty());
  const std::string sharded = folder("sharded");
  write(sharded + "/a.safetensors", "x");
  write(sharded + "/b.safetensors", "x");
  const std::string index = sharded + "/model.safetensors.index.json";
  write(index, R"({"metadata": {}, "weight_map": {"wte.weight": "b.safetensors", "wpe.weight": "a.safetensors",
                                                   "h.0.ln_1.weight": "b.safetensors"}})");
  w = zt::hf_weight_files(sharded);
  EXPECT_EQ(w.index, index);
  EXPECT_EQ(w.files, (std::vector<std::string>{sharded + "/a.safetensors", sharded + "/b.safetensors"}));
  EXPECT_EQ(w.weight_map.at("wte.weight"), sharded + "/b.safetensors");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"weight_map": {"wte.weight": "c.safetensors"}})", "shard " + sharded + "/c.safetensors (holding \"wte.weight\") is missing"},
      {R"({"weight_map": {"wte.weight": "../single/model.safetensors"}})", "expected the name of a safetensors file"},
      {R"({"weight_map": {"wte.weight": 3}})", "expected the name of a safetensors file"},
      {R"({"weight_map": {}})", "non-empty \"weight_map\""},
      {R"({"metadata": {}})", "non-empty \"weight_map\""},
      {"[1]", "not a JSON object"},
  };
  for (const auto& [text, needle] : bad) {
    write(index, text);
    const std::string e = error_of([&] { zt::hf_weight_files(sharded); });
    EXPECT_NE(e.find(needle), std::string::npos) << text << " -> " << e;
  }
  EXPECT_NE(error_of([&] { zt::hf_weight_files(folder("empty")); }).find("holds neither"), std::string::npos);
  EXPECT_TRUE(zt::is_weights_folder(sharded));
  EXPECT_FALSE(zt::is_weights_folder(index));
  EXPECT_FALSE(zt::is_weights_folder(""));
}

// A Llama config.json (the keys transformers writes) is the model as it is; --model must agree on
// every key that shapes the parameters.
TEST(HfFolder, LlamaConfigJsonIsTheModel) {
  const std::string d = folder("llama");
  write(d + "/config.json",
        R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 32,
            "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 8, "max_position_embeddings": 16, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
            "rope_scaling": null, "tie_word_embeddings": false, "hidden_act": "silu", "attention_bias": false,
            "mlp_bias": false, "attention_dropout": 0.0, "pretraining_tp": 1, "initializer_range": 0.01,
            "use_cache": true, "torch_dtype": "bfloat16", "transformers_version": "4.46.0"})");
  const zt::ModelConfig m = zt::model_config_from_hf(d + "/config.json");
  ASSERT_EQ(m.type, zt::ModelConfig::Type::Llama);
  EXPECT_EQ(m.llama.num_key_value_heads, 2);
  EXPECT_EQ(m.llama.n_ctx, 16);
  EXPECT_FLOAT_EQ(m.llama.init_std, 0.01f);
  EXPECT_EQ(error_of([&] { zt::check_model_matches_hf(m, "m.json", d + "/config.json"); }), "");
  zt::ModelConfig other = m;
  other.llama.n_ctx = 8;  // the context does not shape the parameters
  EXPECT_EQ(error_of([&] { zt::check_model_matches_hf(other, "m.json", d + "/config.json"); }), "");
  other.llama.num_key_value_heads = 4;
  EXPECT_NE(error_of([&] { zt::check_model_matches_hf(other, "m.json", d + "/config.json"); })
                .find("has num_key_value_heads 2, --model m.json has num_key_value_heads 4"),
            std::string::npos);
  other = m;
  other.llama.tie_word_embeddings = true;
  EXPECT_NE(error_of([&] { zt::check_model_matches_hf(other, "m.json", d + "/config.json"); }).find("tie_word_embeddings"),
            std::string::npos);
  zt::ModelConfig gpt;
  gpt.type = zt::ModelConfig::Type::GPT;
  EXPECT_NE(error_of([&] { zt::check_model_matches_hf(gpt, "m.json", d + "/config.json"); })
                .find("describes a llama model; --model m.json is a gpt model"),
            std::string::npos);
  write(d + "/config.json", R"({"model_type": "mistral", "vocab_size": 64})");
  EXPECT_NE(error_of([&] { zt::model_config_from_hf(d + "/config.json"); }).find("expected \"gpt2\""), std::string::npos);
}
