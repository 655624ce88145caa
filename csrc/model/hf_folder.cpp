// hf_folder.cpp — Hugging Face folders for --init-from (hf_folder.h).
#include "zerotrain/model/hf_folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxIndexFileBytes = int64_t(64) << 20;  // an index of a very large model is a few MiB

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

json read_json(const std::string& path, const std::string& what) {
  const std::string text = read_regular_file(path, what + " " + path, kMaxIndexFileBytes);
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) throw InputError(what + " " + path + ": not a JSON object");
  return doc;
}

// A config.json size: a positive integer.
int64_t hf_size(const json& cfg, const std::string& path, const char* key) {
  const auto it = cfg.find(key);
  if (it == cfg.end()) throw InputError("config " + path + ": missing \"" + key + "\" (a GPT-2 config.json has it)");
  if (!it->is_number_integer() || it->get<int64_t>() <= 0)
    throw InputError("config " + path + ": \"" + key + "\" must be a positive integer, got " + it->dump());
  return it->get<int64_t>();
}

}  // namespace

bool is_weights_folder(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string hf_config_path(const std::string& dir) {
  const std::string p = join(dir, "config.json");
  return exists(p) ? p : "";
}

HfWeightFiles hf_weight_files(const std::string& dir) {
  HfWeightFiles out;
  const std::string single = join(dir, "model.safetensors");
  if (exists(single)) {
    out.files.push_back(single);
    return out;
  }
  out.index = join(dir, "model.safetensors.index.json");
  if (!exists(out.index))
    throw InputError("--init-from " + dir + ": the folder holds neither model.safetensors nor "
                     "model.safetensors.index.json (a Hugging Face model folder has one of them)");
  const json doc = read_json(out.index, "weights index");
  const auto map = doc.find("weight_map");
  if (map == doc.end() || !map->is_object() || map->empty())
    throw InputError("weights index " + out.index + ": expected a non-empty \"weight_map\" object {tensor: file}");
  std::set<std::string> files;
  for (auto it = map->begin(); it != map->end(); ++it) {
    const std::string file = it->is_string() ? it->get<std::string>() : "";
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      throw InputError("weights index " + out.index + ": \"weight_map\" entry \"" + it.key() + "\" is " + it->dump() +
                       "; expected the name of a safetensors file in the folder");
    const std::string path = join(dir, file);
    if (!files.count(path) && !exists(path))
      throw InputError("weights index " + out.index + ": shard " + path + " (holding \"" + it.key() +
                       "\") is missing");
    files.insert(path);
    out.weight_map[it.key()] = path;
  }
  out.files.assign(files.begin(), files.end());
  return out;
}

namespace {

// A GPT-2 config.json as a GPT model file (n_positions -> n_ctx, initializer_range -> init_std).
ModelConfig gpt_from_hf(const json& cfg, const std::string& path) {
  const auto type = cfg.find("model_type");
  if (type == cfg.end() || *type != "gpt2")
    throw InputError("config " + path + ": \"model_type\" is " + (type == cfg.end() ? "missing" : type->dump()) +
                     "; expected \"gpt2\" (zerotrain's GPT is GPT-2) or \"llama\"");
  const auto act = cfg.find("activation_function");
  if (act != cfg.end() && *act != "gelu_new")
    throw InputError("config " + path + ": \"activation_function\" is " + act->dump() + "; expected \"gelu_new\"");
  const int64_t n_embd = hf_size(cfg, path, "n_embd");
  const auto inner = cfg.find("n_inner");
  if (inner != cfg.end() && !inner->is_null() && *inner != 4 * n_embd)
    throw InputError("config " + path + ": \"n_inner\" is " + inner->dump() + "; zerotrain's GPT has 4 * n_embd = " +
                     std::to_string(4 * n_embd));
  const auto tie = cfg.find("tie_word_embeddings");
  if (tie != cfg.end() && *tie == false)
    throw InputError("config " + path + ": \"tie_word_embeddings\" is false; zerotrain's GPT ties lm_head to wte");
  json doc = {{"type", "gpt"},
              {"vocab_size", hf_size(cfg, path, "vocab_size")},
              {"n_ctx", hf_size(cfg, path, "n_positions")},
              {"n_layer", hf_size(cfg, path, "n_layer")},
              {"n_head", hf_size(cfg, path, "n_head")},
              {"n_embd", n_embd}};
  const auto range = cfg.find("initializer_range");
  if (range != cfg.end() && range->is_number() && range->get<double>() > 0) doc["init_std"] = *range;
  return parse_model_config(doc, "config " + path);
}

}  // namespace

ModelConfig model_config_from_hf(const std::string& path) {
  const json cfg = read_json(path, "config");
  const auto type = cfg.find("model_type");
  if (type != cfg.end() && *type == "llama") return parse_model_config(cfg, "config " + path);  // a model file as it is
  return gpt_from_hf(cfg, path);
}

void check_model_matches_hf(const ModelConfig& model, const std::string& model_source, const std::string& path) {
  const ModelConfig hf = model_config_from_hf(path);
  const char* hf_kind = hf.type == ModelConfig::Type::GPT ? "a GPT-2" : "a llama";
  if (model.type != hf.type)
    throw InputError("--init-from: " + path + " describes " + hf_kind + " model; --model " + model_source + " is " +
                     (model.type == ModelConfig::Type::MLP ? "an MLP" : std::string("a ") + model.type_name() + " model"));
  struct Field {
    const char* hf_key;
    const char* key;
    int64_t hf_value, value;
  };
  std::vector<Field> fields;
  if (hf.type == ModelConfig::Type::GPT) {
    fields = {{"vocab_size", "vocab_size", hf.gpt.vocab_size, model.gpt.vocab_size},
              {"n_positions", "n_ctx", hf.gpt.n_ctx, model.gpt.n_ctx},
              {"n_embd", "n_embd", hf.gpt.n_embd, model.gpt.n_embd},
              {"n_layer", "n_layer", hf.gpt.n_layer, model.gpt.n_layer},
              {"n_head", "n_head", hf.gpt.n_head, model.gpt.n_head}};
  } else {  // the keys that shape the parameters (and which of them exist)
    const LlamaConfig &h = hf.llama, &m = model.llama;
    fields = {{"vocab_size", "vocab_size", h.vocab_size, m.vocab_size},
              {"hidden_size", "hidden_size", h.hidden_size, m.hidden_size},
              {"intermediate_size", "intermediate_size", h.intermediate_size, m.intermediate_size},
              {"num_hidden_layers", "num_hidden_layers", h.num_hidden_layers, m.num_hidden_layers},
              {"num_attention_heads", "num_attention_heads", h.num_attention_heads, m.num_attention_heads},
              {"num_key_value_heads", "num_key_value_heads", h.num_key_value_heads, m.num_key_value_heads},
              {"head_dim", "head_dim", h.head_dim, m.head_dim},
              {"tie_word_embeddings", "tie_word_embeddings", h.tie_word_embeddings, m.tie_word_embeddings}};
  }
  for (const auto& f : fields)
    if (f.hf_value != f.value)
      throw InputError("--init-from: " + path + " has " + f.hf_key + " " + std::to_string(f.hf_value) + ", --model " +
                       model_source + " has " + f.key + " " + std::to_string(f.value) +
                       " (leave --model out to build the model from config.json)");
}

}  // namespace zt
