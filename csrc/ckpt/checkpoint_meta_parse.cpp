// checkpoint_meta_parse.cpp — meta.json on load: its checksum, then every value's type and range
// and the consistency of counters, shards and tensors (docs/checkpoints.md "Verification").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include "ckpt_internal.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/core/check.h"
#include "zerotrain/io/safetensors.h"

namespace zt::ckpt {

namespace {

constexpr int64_t kMaxWorld = int64_t(1) << 20;          // ranks a checkpoint may have been saved on
constexpr int64_t kMaxNumel = int64_t(1) << 48;          // elements of one parameter
constexpr int64_t kMaxSamples = int64_t(1) << 62;        // global_steps x train_batch_size
constexpr int64_t kMaxBatch = int64_t(1) << 31;          // train_batch_size
constexpr int64_t kMaxShardBytes = int64_t(1) << 60;
constexpr int64_t kMaxHysteresis = int64_t(1) << 62;     // |cur_hysteresis|: the scaler decrements it
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

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
  // An integer in [lo, hi]; a float, a string or a value beyond int64 is refused, never wrapped.
  int64_t integer(const json& obj, const std::string& key, const std::string& where, int64_t lo,
                  int64_t hi = kInt64Max) const {
    const json& v = at(obj, key, where);
    const bool in_int64 = v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(kInt64Max));
    if (!in_int64 || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail("\"" + where + key + "\" must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "], got " + v.dump());
    return v.get<int64_t>();
  }
  std::string string(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_string()) fail("\"" + where + key + "\" must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  double positive_finite(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = at(obj, key, where);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
      fail("\"" + where + key + "\" must be a finite number > 0, got " + v.dump());
    return v.get<double>();
  }
  std::vector<int64_t> shape(const json& obj, const std::string& key, const std::string& where, int64_t* numel) const {
    const json& v = at(obj, key, where);
    if (!v.is_array()) fail("\"" + where + key + "\" must be an array");
    std::vector<int64_t> s;
    *numel = 1;
    for (const json& d : v) {
      const bool ok = d.is_number_integer() && (d.is_number_unsigned() || d.get<int64_t>() >= 0) &&
                      d.get<uint64_t>() <= uint64_t(kMaxNumel);
      if (!ok) fail("\"" + where + key + "\" has a bad dimension " + d.dump());
      s.push_back(d.get<int64_t>());
      if (s.back() != 0 && *numel > kMaxNumel / s.back())
        fail("\"" + where + key + "\" " + v.dump() + " has more than 2^48 elements");
      *numel *= s.back();
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

// "format" and "version", then the checksum: an edited or damaged file fails here, before any
// of its values is believed.
void check_format_and_checksum(const Reader& rd, Meta& m) {
  const json& d = m.doc;
  if (!d.is_object() || !d.contains("format") || d["format"] != kFormat) rd.fail("\"format\" is not \"" + std::string(kFormat) + "\"");
  const int64_t version = rd.integer(d, "version", "", 0);
  if (version == kVersionWithoutChecksum) {
    m.warnings.push_back("checkpoint " + m.file + " is format version 1 (an older zerotrain), without a meta.json "
                         "checksum: its values are range-checked but an edit cannot be detected");
    return;
  }
  if (version != kVersion)
    rd.fail("version " + d["version"].dump() + " is not supported (this zerotrain reads versions " +
            std::to_string(kVersionWithoutChecksum) + " and " + std::to_string(kVersion) + ")");
  const std::string recorded = rd.string(d, kMetaChecksumKey, "");
  const std::string actual = meta_checksum(d);
  if (recorded != actual)
    throw InputError("checkpoint " + m.file + ": meta.json checksum mismatch (xxh64 of its content is " + actual +
                     ", \"" + kMetaChecksumKey + "\" records " + recorded + "): the file was edited or damaged");
}

void parse_shards(const Reader& rd, const json& d, Meta& m) {
  const json& shards = rd.at(d, "shards", "");
  if (!shards.is_array() || static_cast<int64_t>(shards.size()) != m.world)
    rd.fail("\"shards\" must list one shard per rank (" + std::to_string(m.world) + ")");
  for (int r = 0; r < m.world; ++r) {
    const json& s = shards[static_cast<size_t>(r)];
    Meta::Shard sh;
    sh.rank = static_cast<int>(rd.integer(s, "rank", "shards[].", 0, m.world - 1));
    sh.file = rd.string(s, "file", "shards[].");
    sh.bytes = rd.integer(s, "bytes", "shards[].", 8, kMaxShardBytes);
    sh.xxh64 = rd.string(s, "xxh64", "shards[].");
    if (sh.rank != r) rd.fail("shards[" + std::to_string(r) + "].rank is " + std::to_string(sh.rank));
    if (sh.file != shard_file_name(r, m.world)) rd.fail("shards[" + std::to_string(r) + "].file is \"" + sh.file + "\"");
    m.shards.push_back(sh);
  }
}

// Tensors: one per (state, param), pieces tiling the parameter exactly once, no more bytes than
// the shards hold.
void parse_tensors(const Reader& rd, const json& d, Meta& m) {
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
    const int64_t numel = m.params[static_cast<size_t>(p)].numel;
    int64_t tensor_numel = 0;
    if (rd.shape(t, "shape", "tensors[].", &tensor_numel) != m.params[static_cast<size_t>(p)].shape)
      rd.fail("tensor \"" + state + "/" + param + "\" has a shape other than its parameter's");
    std::vector<Meta::Piece>& pcs = m.pieces[s][static_cast<size_t>(p)];
    for (const json& q : rd.at(t, "pieces", "tensors[].")) {
      Meta::Piece pc;
      pc.rank = static_cast<int>(rd.integer(q, "rank", "tensors[].pieces[].", 0, m.world - 1));
      pc.begin = rd.integer(q, "begin", "tensors[].pieces[].", 0, numel);
      pc.count = rd.integer(q, "count", "tensors[].pieces[].", 1, numel);
      pcs.push_back(pc);
    }
    std::sort(pcs.begin(), pcs.end(), [](const Meta::Piece& a, const Meta::Piece& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const Meta::Piece& pc : pcs) {
      if (pc.begin != at) rd.fail("tensor \"" + state + "/" + param + "\": its pieces do not tile it");
      at += pc.count;
    }
    if (at != numel) rd.fail("tensor \"" + state + "/" + param + "\": its pieces do not cover it");
  }
  for (size_t s = 0; s < m.states.size(); ++s)
    for (size_t p = 0; p < m.params.size(); ++p)
      if (!seen[s][p]) rd.fail("no tensor \"" + m.states[s].name + "/" + m.params[p].name + "\"");
  // Every element of every state sits in some shard: the shards must be at least that large.
  double need = 0, have = 0;
  for (const Meta::State& st : m.states)
    for (const Meta::Param& q : m.params) need += static_cast<double>(q.numel) * static_cast<double>(dtype_size(st.dtype));
  for (const Meta::Shard& sh : m.shards) have += static_cast<double>(sh.bytes);
  if (need > have)
    rd.fail("its tensors need " + std::to_string(static_cast<int64_t>(need)) + " bytes, its shards hold " +
            std::to_string(static_cast<int64_t>(have)));
}

// Steps, LR position, loss scaler and data cursor: counters in range and consistent.
void parse_counters(const Reader& rd, const json& d, Meta& m) {
  const json& data = rd.at(d, "data", "");
  m.data_spec = rd.string(data, "spec", "data.");
  m.train_batch_size = rd.integer(data, "train_batch_size", "data.", 1, kMaxBatch);
  const json& steps = rd.at(d, "steps", "");
  ZeroEngine::Counters& c = m.counters;
  c.global_steps = rd.integer(steps, "global_steps", "steps.", 0, kMaxSamples / m.train_batch_size);
  c.successful_steps = rd.integer(steps, "successful_steps", "steps.", 0, c.global_steps);
  rd.integer(steps, "skipped_steps", "steps.", c.global_steps - c.successful_steps, c.global_steps - c.successful_steps);
  if (rd.integer(data, "next_global_batch", "data.", 0) != c.global_steps)
    rd.fail("data.next_global_batch differs from steps.global_steps");
  rd.integer(data, "samples_consumed", "data.", c.global_steps * m.train_batch_size, c.global_steps * m.train_batch_size);
  const json& lr = rd.at(d, "lr_schedule", "");
  m.lr_schedule = rd.string(lr, "type", "lr_schedule.");
  c.lr_last_batch_iteration = rd.integer(lr, "last_batch_iteration", "lr_schedule.", -1, c.global_steps);
  const json& ls = rd.at(d, "loss_scaler", "");
  m.loss_scaler_flavor = rd.string(ls, "flavor", "loss_scaler.");
  c.loss_scaler.cur_scale = rd.positive_finite(ls, "cur_scale", "loss_scaler.");
  c.loss_scaler.cur_iter = rd.integer(ls, "cur_iter", "loss_scaler.", 0, c.global_steps);
  c.loss_scaler.last_overflow_iter = rd.integer(ls, "last_overflow_iter", "loss_scaler.", -1, c.loss_scaler.cur_iter - 1);
  c.loss_scaler.cur_hysteresis = rd.integer(ls, "cur_hysteresis", "loss_scaler.", -kMaxHysteresis, kMaxHysteresis);
  const json& seed = rd.at(d, "seed", "");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<int64_t>() >= 0))
    rd.fail("\"seed\" must be an integer in [0, 2^64), got " + seed.dump());
  m.seed = seed.get<uint64_t>();
}

// "validation" (optional: a run without --eval-every has none). evals_since_best and eval_batches
// are absent in checkpoints of older versions: 0.
void parse_validation(const Reader& rd, const json& d, Meta& m) {
  if (!d.contains("validation")) return;
  const json& v = rd.at(d, "validation", "");
  ValidationState& s = m.validation;
  s.eval_data = rd.string(v, "eval_data", "validation.");
  s.best_step = rd.integer(v, "best_step", "validation.", -1, m.counters.global_steps);
  if (v.contains("eval_batches")) s.eval_batches = rd.integer(v, "eval_batches", "validation.", 1);
  if (v.contains("evals_since_best")) s.evals_since_best = rd.integer(v, "evals_since_best", "validation.", 0);
  if (s.best_step < 0) return;
  const json& loss = rd.at(v, "best_loss", "validation.");
  if (!loss.is_number() || !std::isfinite(loss.get<double>()))
    rd.fail("\"validation.best_loss\" must be a finite number, got " + loss.dump());
  s.best_loss = loss.get<double>();
}

}  // namespace

Meta parse_meta(const std::string& tag_dir) {
  const std::string file = ckptfs::join(tag_dir, "meta.json");
  if (!ckptfs::is_file(file))
    throw InputError("checkpoint " + tag_dir + ": no meta.json (not a checkpoint directory, or an incomplete save)");
  return parse_meta_doc(tag_dir, file, ckptfs::read_file(file, "checkpoint"));
}

Meta parse_meta_doc(const std::string& tag_dir, const std::string& file, const std::string& text) {
  Meta m;
  m.dir = tag_dir;
  m.file = file;
  Reader rd(m.file);
  try {
    m.doc = json::parse(text);
  } catch (const json::exception& e) {
    rd.fail(std::string("not valid JSON: ") + e.what());
  }
  check_format_and_checksum(rd, m);
  const json& d = m.doc;
  m.tag = rd.string(d, "tag", "");
  if (!valid_checkpoint_tag(m.tag)) rd.fail("\"tag\" \"" + m.tag + "\" is not a checkpoint tag");
  const json& model = rd.at(d, "model", "");
  m.model = parse_model_config(rd.at(model, "config", "model."), m.file + " model.config");
  std::set<std::string> names;
  const json& params = rd.at(model, "params", "model.");
  if (!params.is_array()) rd.fail("\"model.params\" must be an array");
  for (const json& p : params) {
    Meta::Param q;
    q.name = rd.string(p, "name", "model.params[].");
    q.shape = rd.shape(p, "shape", "model.params[].", &q.numel);
    if (q.name.empty() || q.name == "__metadata__") rd.fail("\"model.params[].name\" \"" + q.name + "\" is not a parameter name");
    if (!names.insert(q.name).second) rd.fail("parameter \"" + q.name + "\" listed twice in \"model.params\"");
    m.params.push_back(q);
  }
  const json& zero = rd.at(d, "zero", "");
  m.stage = static_cast<int>(rd.integer(zero, "stage", "zero.", 0, 3));
  m.world = static_cast<int>(rd.integer(zero, "world_size", "zero.", 1, kMaxWorld));
  const json& prec = rd.at(d, "precision", "");
  m.compute_dtype = rd.string(prec, "compute", "precision.");
  m.master_dtype = rd.string(prec, "master", "precision.");
  m.moments_dtype = rd.string(prec, "moments", "precision.");
  const json& opt = rd.at(d, "optimizer", "");
  m.optimizer_type = rd.string(opt, "type", "optimizer.");
  const json& states = rd.at(opt, "states", "optimizer.");
  if (!states.is_array()) rd.fail("\"optimizer.states\" must be an array");
  for (const json& s : states) {
    Meta::State st;
    st.name = rd.string(s, "name", "optimizer.states[].");
    st.dtype = state_dtype(rd, rd.string(s, "dtype", "optimizer.states[]."));
    for (const Meta::State& other : m.states)
      if (other.name == st.name) rd.fail("optimizer state \"" + st.name + "\" listed twice");
    m.states.push_back(st);
  }
  if (m.states.empty() || m.states[0].name != "master") rd.fail("optimizer.states must start with \"master\"");
  parse_counters(rd, d, m);
  parse_validation(rd, d, m);
  parse_shards(rd, d, m);
  parse_tensors(rd, d, m);
  return m;
}

}  // namespace zt::ckpt
