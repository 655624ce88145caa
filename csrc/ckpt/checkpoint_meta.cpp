// checkpoint_meta.cpp — meta.json: what a save records, and its validation on load.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "ckpt_internal.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/ckpt/xxhash64.h"
#include "zerotrain/core/check.h"
#include "zerotrain/io/safetensors.h"

namespace zt {

bool valid_checkpoint_tag(const std::string& tag) {
  if (tag.empty() || tag.size() > 200 || tag[0] == '.') return false;
  for (char c : tag)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

std::string default_checkpoint_tag(int64_t global_steps) { return "global_step" + std::to_string(global_steps); }

namespace ckpt {

std::string shard_file_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.safetensors", rank, world);
  return name;
}

std::string Meta::shard_path(int rank) const { return ckptfs::join(dir, shards[static_cast<size_t>(rank)].file); }

int Meta::param_index(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string loss_scaler_flavor_name(LossScalerFlavor f) {
  switch (f) {
    case LossScalerFlavor::Zero: return "dynamic (ZeRO, hysteresis)";
    case LossScalerFlavor::NonZero: return "dynamic (stage 0)";
    case LossScalerFlavor::Static: return "static";
  }
  return "?";
}

namespace {
// A float config value as the short decimal it was written as (0.02, not 0.019999999552965164).
double tidy(float v) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.7g", static_cast<double>(v));
  return std::strtod(s, nullptr);
}
}  // namespace

json model_config_json(const ModelConfig& m) {
  if (m.type == ModelConfig::Type::Llama) {
    const LlamaConfig& c = m.llama;
    json j = {{"type", "llama"},
              {"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden_size},
              {"intermediate_size", c.intermediate_size},
              {"num_hidden_layers", c.num_hidden_layers},
              {"num_attention_heads", c.num_attention_heads},
              {"num_key_value_heads", c.num_key_value_heads},
              {"head_dim", c.head_dim},
              {"max_position_embeddings", c.max_position_embeddings},
              {"n_ctx", c.n_ctx},
              {"rms_norm_eps", c.rms_norm_eps},
              {"rope_theta", c.rope_theta},
              {"tie_word_embeddings", c.tie_word_embeddings},
              {"init_std", tidy(c.init_std)}};
    if (c.rope_scaling.enabled())
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           // an integer, as Hugging Face writes it
                           {"original_max_position_embeddings",
                            static_cast<int64_t>(c.rope_scaling.original_max_position_embeddings)}};
    return j;
  }
  if (m.type == ModelConfig::Type::GPT) {
    const GptConfig& g = m.gpt;
    return {{"type", "gpt"},       {"vocab_size", g.vocab_size}, {"n_ctx", g.n_ctx},
            {"n_layer", g.n_layer}, {"n_head", g.n_head},         {"n_embd", g.n_embd},
            {"init_std", tidy(g.init_std)}};
  }
  json j = {{"type", "mlp"},
            {"dims", m.mlp.dims},
            {"activation", m.mlp.activation == Activation::ReLU ? "relu" : "gelu"},
            {"task", m.mlp.task == MlpTask::Classification ? "classification" : "regression"}};
  if (m.mlp.init_std > 0) j["init_std"] = tidy(m.mlp.init_std);
  return j;
}

namespace {
const char* torch_dtype_name(DType dtype) {
  return dtype == DType::BF16 ? "bfloat16" : dtype == DType::F16 ? "float16" : "float32";
}
}  // namespace

json hf_gpt2_config(const json& c, DType dtype) {
  const char* torch_dtype = torch_dtype_name(dtype);
  // zerotrain's GPT is GPT-2: pre-LN blocks, GELU (tanh), LayerNorm eps 1e-5, tied wte / lm_head,
  // Conv1D weights stored [in, out]; no dropout.
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.at("vocab_size")},
          {"n_positions", c.at("n_ctx")},
          {"n_ctx", c.at("n_ctx")},
          {"n_embd", c.at("n_embd")},
          {"n_layer", c.at("n_layer")},
          {"n_head", c.at("n_head")},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"initializer_range", c.value("init_std", 0.02)},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", true},
          {"use_cache", true},
          {"torch_dtype", torch_dtype}};
}

json hf_llama_config(const json& c, DType dtype) {
  // zerotrain's Llama: RMSNorm, SwiGLU (SiLU), rotary positions (plain or Llama 3's scaling), no
  // biases, no dropout.
  // n_ctx is zerotrain's (the context a model built from this file is sized for); transformers
  // keeps it as an extra attribute.
  json out = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}};
  for (const char* k : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
                        "tie_word_embeddings", "n_ctx"})
    out[k] = c.at(k);
  out["rope_scaling"] = c.value("rope_scaling", json());
  out["hidden_act"] = "silu";
  out["attention_bias"] = false;
  out["mlp_bias"] = false;
  out["attention_dropout"] = 0.0;
  out["pretraining_tp"] = 1;
  out["initializer_range"] = c.value("init_std", 0.02);
  out["use_cache"] = true;
  out["torch_dtype"] = torch_dtype_name(dtype);
  return out;
}

json hf_model_config(const ModelConfig& m, DType dtype) {
  switch (m.type) {
    case ModelConfig::Type::GPT: return hf_gpt2_config(model_config_json(m), dtype);
    case ModelConfig::Type::Llama: return hf_llama_config(model_config_json(m), dtype);
    case ModelConfig::Type::MLP: break;
  }
  return nullptr;
}

json build_meta(const ZeroEngine& engine, const std::string& tag, const CheckpointRunInfo& info,
                const std::vector<Meta::Shard>& shards) {
  const ZeroPlan& plan = engine.plan();
  const EngineOptions& o = engine.options();
  const ZeroEngine::Counters c = engine.counters();
  json params = json::array();
  for (const ParamSpec& p : info.params) params.push_back({{"name", p.name}, {"shape", p.shape}});
  json states = json::array();
  const std::vector<ZeroEngine::CheckpointState> st = engine.checkpoint_states();
  for (const auto& s : st) states.push_back({{"name", s.name}, {"dtype", safetensors_dtype_name(s.dtype)}});
  // Every rank's pieces, from the plan (the same on every rank).
  std::vector<std::vector<json>> by_param(info.params.size());
  for (int r = 0; r < plan.world; ++r)
    for (const ZeroEngine::ParamPiece& pc : engine.checkpoint_pieces(r))
      by_param[static_cast<size_t>(pc.param)].push_back({{"rank", r}, {"begin", pc.begin}, {"count", pc.count}});
  json tensors = json::array();
  for (const auto& s : st) {
    for (size_t p = 0; p < info.params.size(); ++p) {
      json pieces = by_param[p];
      std::sort(pieces.begin(), pieces.end(), [](const json& a, const json& b) { return a["begin"] < b["begin"]; });
      tensors.push_back({{"name", s.name + "/" + info.params[p].name},
                         {"state", s.name},
                         {"param", info.params[p].name},
                         {"shape", info.params[p].shape},
                         {"dtype", safetensors_dtype_name(s.dtype)},
                         {"pieces", pieces}});
    }
  }
  json shard_list = json::array();
  for (const Meta::Shard& s : shards)
    shard_list.push_back({{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}, {"xxh64", s.xxh64}});
  const LossScaler::State& ls = c.loss_scaler;
  json doc = {
      {"format", kFormat},
      {"version", kVersion},
      {"tag", tag},
      {"producer", "zerotrain"},
      {"model", {{"config", model_config_json(info.model)}, {"num_params", plan.numel}, {"params", params}}},
      {"zero",
       {{"stage", o.stage},
        {"world_size", plan.world},
        {"plan_hash", hex64(plan.hash())},
        {"reduce_bucket_size", o.reduce_bucket_size},
        {"padded_numel", plan.padded_numel},
        {"shard_numel", plan.shard_numel}}},
      {"precision",
       {{"compute", dtype_name(o.compute_dtype)},
        {"master", dtype_name(o.master_dtype)},
        {"moments", dtype_name(o.moments_dtype)},
        {"grad_accum", dtype_name(o.grad_accum_dtype)},
        {"communication", dtype_name(o.wire_dtype)},
        {"params16", "not stored: the compute-dtype parameters are cast(master), rebuilt on load"}}},
      {"optimizer", {{"type", o.optimizer.type}, {"states", states}}},
      {"steps",
       {{"global_steps", c.global_steps},
        {"successful_steps", c.successful_steps},
        {"skipped_steps", c.global_steps - c.successful_steps}}},
      {"lr_schedule", {{"type", info.lr_schedule}, {"last_batch_iteration", c.lr_last_batch_iteration}, {"lr", engine.current_lr()}}},
      {"loss_scaler",
       {{"flavor", loss_scaler_flavor_name(o.loss_scaler.flavor)},
        {"cur_scale", ls.cur_scale},
        {"cur_iter", ls.cur_iter},
        {"last_overflow_iter", ls.last_overflow_iter},
        {"cur_hysteresis", ls.cur_hysteresis}}},
      {"data",
       {{"spec", info.data_spec},
        {"next_global_batch", c.global_steps},
        {"train_batch_size", info.train_batch_size},
        {"micro_batch", info.micro_batch},
        {"gradient_accumulation_steps", info.gradient_accumulation_steps},
        {"samples_consumed", c.global_steps * info.train_batch_size}}},
      {"seed", info.seed},
      {"shards", shard_list},
      {"tensors", tensors},
  };
  const ValidationState& v = info.validation;
  if (v.any())
    doc["validation"] = {{"eval_data", v.eval_data}, {"eval_batches", v.eval_batches},
                         {"best_loss", v.best_step >= 0 ? json(v.best_loss) : json()}, {"best_step", v.best_step},
                         {"evals_since_best", v.evals_since_best}};
  doc[kMetaChecksumKey] = meta_checksum(doc);
  return doc;
}

std::string meta_checksum(const json& doc) {
  json body = doc;
  body.erase(kMetaChecksumKey);
  const std::string text = body.dump();  // compact, keys sorted: independent of the file's layout
  return hex64(xxh64(text.data(), text.size()));
}

std::string size_problem(const Meta& m, int rank) {
  const std::string path = m.shard_path(rank);
  const int64_t have = ckptfs::file_size(path);
  const int64_t want = m.shards[static_cast<size_t>(rank)].bytes;
  if (have < 0) return "checkpoint shard " + path + " is missing";
  if (have < want)
    return "checkpoint shard " + path + " is truncated: " + std::to_string(have) + " bytes, meta.json records " +
           std::to_string(want);
  if (have > want)
    return "checkpoint shard " + path + " has " + std::to_string(have) + " bytes, meta.json records " +
           std::to_string(want) + " (damaged, or from another save)";
  return "";
}

std::string verify_shard(const Meta& m, int rank) {
  std::string problem = size_problem(m, rank);
  if (!problem.empty()) return problem;
  const std::string path = m.shard_path(rank);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "checkpoint shard " + path + ": cannot open for reading";
  std::vector<unsigned char> buf(kHashReadBytes);
  Xxh64 h;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(buf.data(), n);
  const bool err = std::ferror(f);
  std::fclose(f);
  if (err) return "checkpoint shard " + path + ": read error";
  const std::string got = hex64(h.digest()), want = m.shards[static_cast<size_t>(rank)].xxh64;
  if (got != want)
    return "checkpoint shard " + path + ": checksum mismatch (xxh64 " + got + ", meta.json records " + want +
           "); the file is corrupt";
  return "";
}

}  // namespace ckpt

std::string resolve_checkpoint_path(const std::string& dir, const std::string& tag) {
  if (!tag.empty()) {
    if (!valid_checkpoint_tag(tag)) throw InputError("checkpoint tag '" + tag + "': expected one name of [A-Za-z0-9._-], not starting with '.'");
    const std::string p = ckptfs::join(dir, tag);
    if (!ckptfs::is_dir(p)) {
      std::string found;
      for (const std::string& n : ckptfs::list_dir(dir))
        if (ckptfs::is_file(ckptfs::join(ckptfs::join(dir, n), "meta.json"))) found += (found.empty() ? "" : ", ") + n;
      throw InputError("checkpoint tag '" + tag + "' does not exist in " + dir +
                       (found.empty() ? std::string(" (no checkpoints there)") : " (found: " + found + ")"));
    }
    return p;
  }
  if (ckptfs::is_file(ckptfs::join(dir, "meta.json"))) return dir;
  if (!ckptfs::is_dir(dir)) throw InputError("checkpoint directory " + dir + " does not exist");
  const std::string latest = ckptfs::join(dir, "latest");
  if (!ckptfs::is_file(latest))
    throw InputError("checkpoint directory " + dir + " has no 'latest' file (name a tag with --tag, or DIR/TAG)");
  std::string t = ckptfs::read_file(latest, "checkpoint");
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (!valid_checkpoint_tag(t)) throw InputError("checkpoint " + latest + ": '" + t + "' is not a checkpoint tag");
  const std::string p = ckptfs::join(dir, t);
  if (!ckptfs::is_dir(p)) throw InputError("checkpoint " + latest + " names '" + t + "', which does not exist in " + dir);
  return p;
}

nlohmann::json read_checkpoint_meta(const std::string& tag_dir) { return ckpt::parse_meta(tag_dir).doc; }

}  // namespace zt
