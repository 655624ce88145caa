// model_config.h — the parsed form of a model file (configs/models/*.json).
//
//   MLP: {"type": "mlp", "dims": [in, h1, ..., out], "activation": "gelu"|"relu",
//         "task": "regression"|"classification", "init_std": s (optional)}
//   GPT: {"type": "gpt", "vocab_size": V, "n_ctx": T, "n_layer": L, "n_head": H, "n_embd": C,
//         "init_std": s (optional, default 0.02),
//         "attention": "tiled" (default: memory-efficient, O(B·H·T) statistics) | "materialised"
//                      (keeps the B·H·T·T probabilities; for teaching and testing)}
// Keys "name", "description" and any key starting with "_" are free-form and ignored; any other
// unknown key is an error (catches typos). Every error is an InputError naming file and key.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

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

struct ModelConfig {
  enum class Type : uint8_t { MLP, GPT } type = Type::MLP;
  std::string source;              // file path (or "<string>") for messages
  std::string name;                // optional "name" key
  MlpConfig mlp;
  GptConfig gpt;
};

// InputError when the file is missing, not JSON, or fails validation.
ModelConfig parse_model_config_file(const std::string& path);  // regular file <= kMaxModelFileBytes, no duplicate keys
// Number of parameters the model will have (double: a hostile file may ask for more than 2^63).
double model_param_count(const ModelConfig& m);
// Same validation on an already-parsed document; `source` names it in messages.
ModelConfig parse_model_config(const nlohmann::json& doc, const std::string& source);

}  // namespace zt
