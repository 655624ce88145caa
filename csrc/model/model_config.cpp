// model_config.cpp — parse and validate model files (see model_config.h).
#include "zerotrain/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "config_parse.h"

namespace zt {
namespace model_detail {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw InputError("model file " + source + ": key \"" + key + "\": " + what);
}

const json& require(const json& doc, const std::string& source, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end()) fail(source, key, "missing (required)");
  return *it;
}

// A positive integer no larger than `max`.
int64_t get_positive_int(const json& doc, const std::string& source, const char* key, int64_t max) {
  const json& v = require(doc, source, key);
  if (!v.is_number_integer()) fail(source, key, "expected a positive integer, got " + v.dump());
  int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max) ? max + 1 : v.get<int64_t>();
  if (x <= 0) fail(source, key, "expected a positive integer, got " + v.dump());
  if (x > max) fail(source, key, "value " + v.dump() + " is too large (max " + std::to_string(max) + ")");
  return x;
}

float get_init_std(const json& doc, const std::string& source, float dflt, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end()) return dflt;
  if (!it->is_number()) fail(source, key, "expected a positive number, got " + it->dump());
  double s = it->get<double>();
  if (!(s > 0.0) || !std::isfinite(s) || s > 1e3) fail(source, key, "expected a positive finite number, got " + it->dump());
  return static_cast<float>(s);
}

std::string get_string(const json& doc, const std::string& source, const char* key) {
  const json& v = require(doc, source, key);
  if (!v.is_string()) fail(source, key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

void check_keys(const json& doc, const std::string& source, const std::set<std::string>& allowed) {
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    if (allowed.count(k) || k == "type" || k == "name" || k == "description" || (!k.empty() && k[0] == '_')) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    fail(source, k, "unknown key (expected one of: type, " + list + ")");
  }
}

}  // namespace model_detail

namespace {

using namespace model_detail;

constexpr int64_t kMaxDim = int64_t(1) << 24;

MlpConfig parse_mlp(const json& doc, const std::string& source) {
  check_keys(doc, source, {"dims", "activation", "task", "init_std"});
  MlpConfig c;
  const json& dims = require(doc, source, "dims");
  if (!dims.is_array() || dims.size() < 2)
    fail(source, "dims", "expected an array of at least 2 positive integers [in, ..., out], got " + dims.dump());
  for (size_t i = 0; i < dims.size(); ++i) {
    const json& d = dims[i];
    if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(kMaxDim)) ||
        d.get<int64_t>() <= 0 || d.get<int64_t>() > kMaxDim)
      fail(source, "dims", "entry " + std::to_string(i) + " must be a positive integer <= 2^24, got " + d.dump());
    c.dims.push_back(d.get<int64_t>());
  }
  std::string act = get_string(doc, source, "activation");
  if (act == "gelu") c.activation = Activation::GELU;
  else if (act == "relu") c.activation = Activation::ReLU;
  else fail(source, "activation", "expected \"gelu\" or \"relu\", got \"" + act + "\"");
  std::string task = get_string(doc, source, "task");
  if (task == "regression") c.task = MlpTask::Regression;
  else if (task == "classification") c.task = MlpTask::Classification;
  else fail(source, "task", "expected \"regression\" or \"classification\", got \"" + task + "\"");
  if (c.task == MlpTask::Classification && c.dims.back() < 2)
    fail(source, "dims", "a classification MLP needs at least 2 outputs (classes), got " + std::to_string(c.dims.back()));
  c.init_std = get_init_std(doc, source, 0.0f);
  return c;
}

GptConfig parse_gpt(const json& doc, const std::string& source) {
  check_keys(doc, source, {"vocab_size", "n_ctx", "n_layer", "n_head", "n_embd", "init_std", "attention"});
  GptConfig c;
  c.vocab_size = get_positive_int(doc, source, "vocab_size", int64_t(1) << 30);
  c.n_ctx = get_positive_int(doc, source, "n_ctx", int64_t(1) << 20);
  c.n_layer = get_positive_int(doc, source, "n_layer", 4096);
  c.n_head = get_positive_int(doc, source, "n_head", 4096);
  c.n_embd = get_positive_int(doc, source, "n_embd", int64_t(1) << 20);
  if (c.n_embd % c.n_head != 0)
    fail(source, "n_embd", "must be divisible by n_head (" + std::to_string(c.n_embd) + " % " +
                               std::to_string(c.n_head) + " != 0)");
  c.init_std = get_init_std(doc, source, 0.02f);
  if (auto a = doc.find("attention"); a != doc.end()) {
    const std::string v = a->is_string() ? a->get<std::string>() : "";
    if (v == "tiled") c.attention = AttentionKind::Tiled;
    else if (v == "materialised" || v == "materialized") c.attention = AttentionKind::Materialised;
    else fail(source, "attention", "expected \"tiled\" or \"materialised\", got " + a->dump());
  }
  return c;
}

}  // namespace

ModelConfig parse_model_config(const json& doc, const std::string& source) {
  if (!doc.is_object()) throw InputError("model file " + source + ": expected a JSON object at the top level");
  ModelConfig cfg;
  cfg.source = source;
  // A Hugging Face config.json names its architecture with "model_type" (only Llama's is a model file).
  const bool hf = !doc.contains("type") && doc.contains("model_type");
  std::string type = get_string(doc, source, hf ? "model_type" : "type");
  auto name = doc.find("name");
  if (name != doc.end()) {
    if (!name->is_string()) fail(source, "name", "expected a string, got " + name->dump());
    cfg.name = name->get<std::string>();
  }
  if (type == "mlp") {
    cfg.type = ModelConfig::Type::MLP;
    cfg.mlp = parse_mlp(doc, source);
  } else if (type == "gpt") {
    cfg.type = ModelConfig::Type::GPT;
    cfg.gpt = parse_gpt(doc, source);
  } else if (type == "llama") {
    cfg.type = ModelConfig::Type::Llama;
    cfg.llama = parse_llama_config(doc, source);
  } else if (hf) {
    fail(source, "model_type", "expected \"llama\" (the Hugging Face architecture a config.json may describe), got \"" +
                                   type + "\"");
  } else {
    fail(source, "type", "expected \"mlp\", \"gpt\" or \"llama\", got \"" + type + "\"");
  }
  return cfg;
}

ModelConfig parse_model_config_file(const std::string& path) {
  const std::string text = read_regular_file(path, "model file " + path, kMaxModelFileBytes);
  json doc;
  try {
    // A repeated key inside one object is an error (nlohmann would keep the last silently):
    // one key set per open object, checked as each key is read.
    std::vector<std::set<std::string>> open_objects;
    std::string duplicate;
    auto on_event = [&](int /*depth*/, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::object_start) open_objects.emplace_back();
      else if (ev == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
      else if (ev == json::parse_event_t::key && !open_objects.empty() && duplicate.empty() &&
               !open_objects.back().insert(parsed.get<std::string>()).second)
        duplicate = parsed.get<std::string>();
      return true;
    };
    doc = json::parse(text, on_event);
    if (!duplicate.empty()) fail(path, duplicate, "duplicate key (each key may appear once per object)");
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number that overflows a double ("vocab_size": 1e400).
    throw InputError("model file " + path + ": not valid JSON (" + e.what() + ")");
  }
  return parse_model_config(doc, path);
}

double model_param_count(const ModelConfig& m) {
  if (m.type == ModelConfig::Type::Llama) {
    const LlamaConfig& c = m.llama;
    const double C = static_cast<double>(c.hidden_size), hs = static_cast<double>(c.head_dim);
    const double attn = C * hs * static_cast<double>(2 * c.num_attention_heads + 2 * c.num_key_value_heads);
    const double block = 2 * C + attn + 3 * C * static_cast<double>(c.intermediate_size);
    const double embed = static_cast<double>(c.vocab_size) * C * (c.tie_word_embeddings ? 1 : 2);
    return embed + static_cast<double>(c.num_hidden_layers) * block + C;
  }
  if (m.type == ModelConfig::Type::GPT) {
    const double C = static_cast<double>(m.gpt.n_embd);
    const double block = 13.0 * C + 12.0 * C * C;
    return static_cast<double>(m.gpt.vocab_size + m.gpt.n_ctx) * C + static_cast<double>(m.gpt.n_layer) * block + 2 * C;
  }
  double n = 0;
  for (size_t i = 0; i + 1 < m.mlp.dims.size(); ++i)
    n += static_cast<double>(m.mlp.dims[i]) * static_cast<double>(m.mlp.dims[i + 1]) + static_cast<double>(m.mlp.dims[i + 1]);
  return n;
}

const char* ModelConfig::type_name() const {
  switch (type) {
    case Type::MLP: return "mlp";
    case Type::GPT: return "gpt";
    case Type::Llama: return "llama";
  }
  return "?";
}

int64_t ModelConfig::vocab_size() const {
  return type == Type::GPT ? gpt.vocab_size : type == Type::Llama ? llama.vocab_size : 0;
}

int64_t ModelConfig::context_length() const {
  return type == Type::GPT ? gpt.n_ctx : type == Type::Llama ? llama.n_ctx : 1;
}

int64_t ModelConfig::hidden_size() const {
  if (type == Type::GPT) return gpt.n_embd;
  if (type == Type::Llama) return llama.hidden_size;
  int64_t h = 0;
  for (size_t i = 1; i + 1 < mlp.dims.size(); ++i) h = std::max(h, mlp.dims[i]);
  return h > 0 || mlp.dims.empty() ? h : mlp.dims.front();
}

int64_t ModelConfig::num_heads() const {
  return type == Type::GPT ? gpt.n_head : type == Type::Llama ? llama.num_attention_heads : 0;
}

int64_t ModelConfig::num_layers() const {
  if (type == Type::GPT) return gpt.n_layer;
  if (type == Type::Llama) return llama.num_hidden_layers;
  return mlp.dims.empty() ? 0 : static_cast<int64_t>(mlp.dims.size()) - 1;
}

}  // namespace zt
