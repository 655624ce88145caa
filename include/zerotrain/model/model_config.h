// model_config.h — the parsed form of a model file (configs/models/*.json).
//
//   MLP: {"type": "mlp", "dims": [in, h1, ..., out], "activation": "gelu"|"relu",
//         "task": "regression"|"classification", "init_std": s (optional)}
//   GPT: {"type": "gpt", "vocab_size": V, "n_ctx": T, "n_layer": L, "n_head": H, "n_embd": C,
//         "init_std": s (optional, default 0.02),
//         "attention": "tiled" (default: memory-efficient, O(B·H·T) statistics) | "materialised"
//                      (keeps the B·H·T·T probabilities; for teaching and testing)}
//   Llama: Hugging Face LlamaConfig keys (an HF config.json is a model file as it is; "model_type":
//         "llama" stands for "type": "llama"): vocab_size, hidden_size, intermediate_size,
//         num_hidden_layers, num_attention_heads, num_key_value_heads (default num_attention_heads),
//         max_position_embeddings, rms_norm_eps (default 1e-6), rope_theta (default 10000),
//         rope_scaling (null, or Llama 3's {"rope_type": "llama3", "factor", "low_freq_factor",
//         "high_freq_factor", "original_max_position_embeddings"}; transformers 5's rope_parameters
//         holding the same), tie_word_embeddings (default false), head_dim (default hidden_size / num_attention_heads),
//         initializer_range (default 0.02); zerotrain's own optional keys: "n_ctx" (the context the
//         activations are sized for, <= max_position_embeddings, default max_position_embeddings),
//         "init_std" (overrides initializer_range), "attention": "tiled". HF's informational keys
//         are accepted; those that select another architecture must hold Llama's value
//         (llama_config.cpp lists them).
// Keys "name", "description" and any key starting with "_" are free-form and ignored; any other
// unknown key is an error (catches typos). Every error is an InputError naming file and key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "zerotrain/model/rope.h"

namespace zt {

enum class Activation : uint8_t { GELU, ReLU };
enum class MlpTask : uint8_t { Regression, Classification };

struct MlpConfig {
  std::vector<int64_t> dims;       // [in, h1, ..., out], >= 2 entries, all > 0
  Activation activation = Activation::GELU;
  MlpTask task = MlpTask::Regression;
  // Normal std of every weight; <= 0 means the fan-in default 1/sqrt(in) per layer.
  float init_std = 0.0f;
};

enum class AttentionKind : uint8_t { Tiled, Materialised };

struct GptConfig {
  int64_t vocab_size = 0, n_ctx = 0, n_layer = 0, n_head = 0, n_embd = 0;
  AttentionKind attention = AttentionKind::Tiled;
  float init_std = 0.02f;          // GPT-2: 0.02; c_proj weights use init_std / sqrt(2 L)
};

// Llama (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no biases).
struct LlamaConfig {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;
  int64_t max_position_embeddings = 0;  // the rotary table's length
  int64_t n_ctx = 0;                    // activations' context, <= max_position_embeddings
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  RopeScaling rope_scaling;             // Llama 3's (rope_scaling "llama3"); disabled by default
  bool tie_word_embeddings = false;
  float init_std = 0.02f;               // every projection and the embedding; norms start at 1
};

struct ModelConfig {
  enum class Type : uint8_t { MLP, GPT, Llama } type = Type::MLP;
  std::string source;              // file path (or "<string>") for messages
  std::string name;                // optional "name" key
  MlpConfig mlp;
  GptConfig gpt;
  LlamaConfig llama;

  bool is_token_model() const { return type != Type::MLP; }  // GPT, Llama: tokens in, logits out
  const char* type_name() const;   // "mlp" | "gpt" | "llama"
  int64_t vocab_size() const;      // token models; 0 for the MLP
  int64_t context_length() const;  // token models' n_ctx; 1 for the MLP (one sample, one row)
  int64_t hidden_size() const;     // residual width; the MLP's widest hidden layer (else its input)
  int64_t num_heads() const;       // attention (query) heads; 0 for the MLP
  int64_t num_layers() const;      // transformer blocks; the MLP's linear layers
};

// InputError when the file is missing, not JSON, or fails validation.
ModelConfig parse_model_config_file(const std::string& path);  // regular file <= kMaxModelFileBytes, no duplicate keys
// Number of parameters the model will have (double: a hostile file may ask for more than 2^63).
double model_param_count(const ModelConfig& m);
// Same validation on an already-parsed document; `source` names it in messages.
ModelConfig parse_model_config(const nlohmann::json& doc, const std::string& source);
// The Llama part of parse_model_config (llama_config.cpp); InputError naming source and key.
LlamaConfig parse_llama_config(const nlohmann::json& doc, const std::string& source);
int64_t llama_num_params(const LlamaConfig& c);

}  // namespace zt
