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

json hf_gpt2_config(const json& c, DType dtype) {
  const char* torch_dtype = dtype == DType::BF16 ? "bfloat16" : dtype == DType::F16 ? "float16" : "float32";
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
  return {
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
}

namespace {

// Checked access to meta.json fields; every failure names the file and the key.
class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError("checkpoint " + file_ + ": " + what + " (not a zerotrain checkpoint, or a damaged one)");
  }
  const json& at(const json& obj, const std::string& key, const std::string& where) const {
    if (!obj.is_object() || !obj.contains(key)) fail("missing \"" + where + key + "\"");
    return obj.at(key);
  }
  int64_t integer(const json& obj, const std::string& key, const std::string& where, int64_t lo) const {
    const json& v = at(obj, key, where);
    if (!v.is_number_integer() || v.get<int64_t>() < lo)
      fail("\"" + where + key + "\" must be an integer >= " + std::to_string(lo) + ", got " + v.dump());
    return v.get<int64_t>();
  }
  std::string string(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_string()) fail("\"" + where + key + "\" must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  double number(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_number()) fail("\"" + where + key + "\" must be a number, got " + v.dump());
    return v.get<double>();
  }
  std::vector<int64_t> shape(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_array()) fail("\"" + where + key + "\" must be an array");
    std::vector<int64_t> s;
    for (const json& d : v) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) fail("\"" + where + key + "\" has a bad dimension " + d.dump());
      s.push_back(d.get<int64_t>());
    }
    return s;
  }

 private:
  std::string file_;
};

DType state_dtype(const Reader& rd, const std::string& name) {
  if (name == "F32") return DType::F32;
  if (name == "BF16") return DType::BF16;
  if (name == "F16") return DType::F16;
  rd.fail("unknown state dtype \"" + name + "\"");
}

}  // namespace

Meta parse_meta(const std::string& tag_dir) {
  Meta m;
  m.dir = tag_dir;
  m.file = ckptfs::join(tag_dir, "meta.json");
  if (!ckptfs::is_file(m.file))
    throw InputError("checkpoint " + tag_dir + ": no meta.json (not a checkpoint directory, or an incomplete save)");
  const std::string text = ckptfs::read_file(m.file, "checkpoint");
  Reader rd(m.file);
  try {
    m.doc = json::parse(text);
  } catch (const json::exception& e) {
    rd.fail(std::string("not valid JSON: ") + e.what());
  }
  const json& d = m.doc;
  if (!d.is_object() || !d.contains("format") || d["format"] != kFormat) rd.fail("\"format\" is not \"" + std::string(kFormat) + "\"");
  if (rd.integer(d, "version", "", 0) != kVersion)
    rd.fail("version " + d["version"].dump() + " is not supported (this zerotrain reads version " + std::to_string(kVersion) + ")");
  m.tag = rd.string(d, "tag", "");
  const json& model = rd.at(d, "model", "");
  rd.at(model, "config", "model.");
  for (const json& p : rd.at(model, "params", "model.")) {
    Meta::Param q;
    q.name = rd.string(p, "name", "model.params[].");
    q.shape = rd.shape(p, "shape", "model.params[].");
    q.numel = 1;
    for (int64_t s : q.shape) q.numel *= s;
    m.params.push_back(q);
  }
  const json& zero = rd.at(d, "zero", "");
  m.stage = static_cast<int>(rd.integer(zero, "stage", "zero.", 0));
  m.world = static_cast<int>(rd.integer(zero, "world_size", "zero.", 1));
  const json& prec = rd.at(d, "precision", "");
  m.compute_dtype = rd.string(prec, "compute", "precision.");
  m.master_dtype = rd.string(prec, "master", "precision.");
  m.moments_dtype = rd.string(prec, "moments", "precision.");
  const json& opt = rd.at(d, "optimizer", "");
  m.optimizer_type = rd.string(opt, "type", "optimizer.");
  for (const json& s : rd.at(opt, "states", "optimizer.")) {
    Meta::State st;
    st.name = rd.string(s, "name", "optimizer.states[].");
    st.dtype = state_dtype(rd, rd.string(s, "dtype", "optimizer.states[]."));
    m.states.push_back(st);
  }
  if (m.states.empty() || m.states[0].name != "master") rd.fail("optimizer.states must start with \"master\"");
  const json& steps = rd.at(d, "steps", "");
  m.counters.global_steps = rd.integer(steps, "global_steps", "steps.", 0);
  m.counters.successful_steps = rd.integer(steps, "successful_steps", "steps.", 0);
  if (m.counters.successful_steps > m.counters.global_steps) rd.fail("steps.successful_steps exceeds steps.global_steps");
  const json& lr = rd.at(d, "lr_schedule", "");
  m.lr_schedule = rd.string(lr, "type", "lr_schedule.");
  m.counters.lr_last_batch_iteration = rd.integer(lr, "last_batch_iteration", "lr_schedule.", -1);
  const json& ls = rd.at(d, "loss_scaler", "");
  m.loss_scaler_flavor = rd.string(ls, "flavor", "loss_scaler.");
  m.counters.loss_scaler.cur_scale = rd.number(ls, "cur_scale", "loss_scaler.");
  m.counters.loss_scaler.cur_iter = rd.integer(ls, "cur_iter", "loss_scaler.", 0);
  m.counters.loss_scaler.last_overflow_iter = rd.integer(ls, "last_overflow_iter", "loss_scaler.", -1);
  m.counters.loss_scaler.cur_hysteresis = rd.integer(ls, "cur_hysteresis", "loss_scaler.", INT64_MIN);
  const json& data = rd.at(d, "data", "");
  m.data_spec = rd.string(data, "spec", "data.");
  m.train_batch_size = rd.integer(data, "train_batch_size", "data.", 0);
  if (rd.integer(data, "next_global_batch", "data.", 0) != m.counters.global_steps)
    rd.fail("data.next_global_batch differs from steps.global_steps");
  const json& seed = rd.at(d, "seed", "");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0)) rd.fail("\"seed\" must be a non-negative integer");
  m.seed = seed.get<uint64_t>();

  const json& shards = rd.at(d, "shards", "");
  if (!shards.is_array() || static_cast<int>(shards.size()) != m.world)
    rd.fail("\"shards\" must list one shard per rank (" + std::to_string(m.world) + ")");
  for (int r = 0; r < m.world; ++r) {
    const json& s = shards[static_cast<size_t>(r)];
    Meta::Shard sh;
    sh.rank = static_cast<int>(rd.integer(s, "rank", "shards[].", 0));
    sh.file = rd.string(s, "file", "shards[].");
    sh.bytes = rd.integer(s, "bytes", "shards[].", 8);
    sh.xxh64 = rd.string(s, "xxh64", "shards[].");
    if (sh.rank != r) rd.fail("shards[" + std::to_string(r) + "].rank is " + std::to_string(sh.rank));
    if (sh.file != shard_file_name(r, m.world)) rd.fail("shards[" + std::to_string(r) + "].file is \"" + sh.file + "\"");
    m.shards.push_back(sh);
  }

  // Tensors: one per (state, param), pieces tiling the parameter exactly once.
  m.pieces.assign(m.states.size(), std::vector<std::vector<Meta::Piece>>(m.params.size()));
  std::vector<std::vector<bool>> seen(m.states.size(), std::vector<bool>(m.params.size(), false));
  const json& tensors = rd.at(d, "tensors", "");
  if (!tensors.is_array()) rd.fail("\"tensors\" must be an array");
  for (const json& t : tensors) {
    const std::string state = rd.string(t, "state", "tensors[].");
    const std::string param = rd.string(t, "param", "tensors[].");
    size_t s = 0;
    while (s < m.states.size() && m.states[s].name != state) ++s;
    const int p = m.param_index(param);
    if (s == m.states.size() || p < 0) rd.fail("tensor \"" + state + "/" + param + "\" names an unknown state or parameter");
    if (seen[s][static_cast<size_t>(p)]) rd.fail("tensor \"" + state + "/" + param + "\" listed twice");
    seen[s][static_cast<size_t>(p)] = true;
    if (rd.shape(t, "shape", "tensors[].") != m.params[static_cast<size_t>(p)].shape)
      rd.fail("tensor \"" + state + "/" + param + "\" has a shape other than its parameter's");
    std::vector<Meta::Piece>& pcs = m.pieces[s][static_cast<size_t>(p)];
    for (const json& q : rd.at(t, "pieces", "tensors[].")) {
      Meta::Piece pc;
      pc.rank = static_cast<int>(rd.integer(q, "rank", "tensors[].pieces[].", 0));
      pc.begin = rd.integer(q, "begin", "tensors[].pieces[].", 0);
      pc.count = rd.integer(q, "count", "tensors[].pieces[].", 1);
      if (pc.rank >= m.world) rd.fail("tensor \"" + state + "/" + param + "\": piece of rank " + std::to_string(pc.rank));
      pcs.push_back(pc);
    }
    std::sort(pcs.begin(), pcs.end(), [](const Meta::Piece& a, const Meta::Piece& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const Meta::Piece& pc : pcs) {
      if (pc.begin != at) rd.fail("tensor \"" + state + "/" + param + "\": its pieces do not tile it");
      at += pc.count;
    }
    if (at != m.params[static_cast<size_t>(p)].numel) rd.fail("tensor \"" + state + "/" + param + "\": its pieces do not cover it");
  }
  for (size_t s = 0; s < m.states.size(); ++s)
    for (size_t p = 0; p < m.params.size(); ++p)
      if (!seen[s][p]) rd.fail("no tensor \"" + m.states[s].name + "/" + m.params[p].name + "\"");
  return m;
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
