// checkpoint_load.cpp — resume: resolve the tag (agreed across ranks), validate meta.json against
// this run's model and optimizer, verify every shard (size on every rank, checksums split over
// the ranks), then fill this rank's states from just the byte ranges its plan owns.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "ckpt_internal.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/finite.h"
#include "zerotrain/io/safetensors.h"

namespace zt {

namespace {

using ckpt::Meta;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The checkpoint must be of this model (same parameter names and shapes) and hold exactly the
// optimizer states this run keeps. "" when it does.
std::string compatibility_problem(const Meta& m, const ZeroEngine& engine, const CheckpointRunInfo& info) {
  const std::string where = "checkpoint " + m.file + ": ";
  for (const ParamSpec& p : info.params) {
    const int i = m.param_index(p.name);
    if (i < 0) return where + "has no parameter \"" + p.name + "\" (a checkpoint of another model?)";
    if (m.params[static_cast<size_t>(i)].shape != p.shape)
      return where + "parameter \"" + p.name + "\" has shape " + shape_str(m.params[static_cast<size_t>(i)].shape) +
             ", the model has " + shape_str(p.shape) + " (a checkpoint of another model?)";
  }
  if (m.params.size() != info.params.size()) {
    for (const Meta::Param& q : m.params) {
      bool found = false;
      for (const ParamSpec& p : info.params) found = found || p.name == q.name;
      if (!found) return where + "has parameter \"" + q.name + "\", which the model lacks (a checkpoint of another model?)";
    }
  }
  std::string have, want;
  for (const Meta::State& s : m.states) have += (have.empty() ? "" : ", ") + s.name;
  for (const auto& s : engine.checkpoint_states()) want += (want.empty() ? "" : ", ") + s.name;
  if (have != want)
    return where + "holds optimizer states [" + have + "] (optimizer " + m.optimizer_type + "), this run's optimizer (" +
           engine.options().optimizer.type + ") keeps [" + want + "]; resume with the checkpoint's optimizer";
  return "";
}

// Reads (state, param, range) as fp32 from the old shards, opening each shard once. Never throws
// (the caller is inside a collective load): the first problem is kept and zeros are returned.
class PieceReader {
 public:
  PieceReader(const Meta& m, bool allow_non_finite)
      : m_(m), files_(static_cast<size_t>(m.world)), allow_non_finite_(allow_non_finite) {}
  void read(int state, const std::string& param, int64_t begin, int64_t count, float* out) {
    const int p = m_.param_index(param);
    const std::vector<Meta::Piece>& pieces = m_.pieces[static_cast<size_t>(state)][static_cast<size_t>(p)];
    const std::string name = m_.states[static_cast<size_t>(state)].name + "/" + param;
    const int64_t end = begin + count;
    for (const Meta::Piece& pc : pieces) {
      const int64_t lo = std::max(begin, pc.begin), hi = std::min(end, pc.begin + pc.count);
      if (hi <= lo) continue;
      if (!error.empty()) {
        std::fill(out + (lo - begin), out + (hi - begin), 0.0f);
        continue;
      }
      try {
        const SafetensorsReader& f = file(pc.rank);
        const SafetensorsEntry* e = f.find(name);
        if (!e || e->numel != pc.count || e->dtype != m_.states[static_cast<size_t>(state)].dtype)
          throw InputError("checkpoint shard " + f.path() + ": tensor \"" + name + "\" is missing or not as meta.json records");
        f.read_f32(*e, lo - pc.begin, hi - lo, out + (lo - begin));
        const std::string nf = allow_non_finite_ ? "" : non_finite_problem("tensor \"" + name + "\"", out + (lo - begin), hi - lo, lo);
        if (!nf.empty())
          throw InputError("checkpoint shard " + f.path() + ": " + nf + "; a checkpoint must hold finite weights and "
                           "optimizer states " + kAllowNonFiniteHint);
        bytes += (hi - lo) * static_cast<int64_t>(dtype_size(e->dtype));
      } catch (const InputError& x) {
        error = x.what();
        std::fill(out + (lo - begin), out + (hi - begin), 0.0f);
      }
    }
  }
  std::string error;
  int64_t bytes = 0;

 private:
  const SafetensorsReader& file(int rank) {
    std::unique_ptr<SafetensorsReader>& f = files_[static_cast<size_t>(rank)];
    if (!f) f = std::make_unique<SafetensorsReader>(m_.shard_path(rank));
    return *f;
  }
  const Meta& m_;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  bool allow_non_finite_;
};

}  // namespace

ResumedCheckpoint load_checkpoint(ZeroEngine& engine, Communicator& comm, Device& dev, const std::string& dir,
                                  const std::string& tag_arg, const CheckpointRunInfo& info) {
  const auto t0 = std::chrono::steady_clock::now();
  ResumedCheckpoint out;
  const int rank = comm.rank(), world = comm.world_size();

  // 1. The tag: --tag, else DIR/latest; every rank must see the same (checkpoint.tag_validation).
  std::string err, tag_dir;
  try {
    tag_dir = resolve_checkpoint_path(dir, tag_arg);
  } catch (const InputError& e) {
    err = e.what();
  }
  agree_or_throw(comm, dev, err);
  std::string seen = tag_dir;
  while (seen.size() > 1 && seen.back() == '/') seen.pop_back();
  if (seen.find('/') != std::string::npos) seen = seen.substr(seen.find_last_of('/') + 1);
  const std::string tag = ckpt::agree_on_tag(comm, dev, seen, info.tag_validation, &out.warnings);
  out.tag = tag;
  out.path = tag_dir == dir ? dir : ckptfs::join(dir, tag);

  // 2. meta.json and whether it fits this run.
  Meta m;
  try {
    m = ckpt::parse_meta(out.path);
    err = compatibility_problem(m, engine, info);
    out.warnings.insert(out.warnings.end(), m.warnings.begin(), m.warnings.end());
  } catch (const InputError& e) {
    err = e.what();
  }
  agree_or_throw(comm, dev, err);

  // 3. Every shard: its size (every rank), its checksum (shard s by rank s mod world).
  for (int s = 0; s < m.world && err.empty(); ++s) err = ckpt::size_problem(m, s);
  for (int s = rank; s < m.world && err.empty(); s += world) err = ckpt::verify_shard(m, s);
  agree_or_throw(comm, dev, err);

  // 4. The states this rank's plan owns, from whichever old shards hold them.
  PieceReader reader(m, info.allow_non_finite);
  std::vector<int> meta_state(engine.checkpoint_states().size());
  for (size_t s = 0; s < meta_state.size(); ++s) meta_state[s] = static_cast<int>(s);  // same order (checked above)
  out.read_buffer_bytes = engine.load_checkpoint_state(
      [&](int s, int p, int64_t begin, int64_t count, float* values) {
        reader.read(meta_state[static_cast<size_t>(s)], info.params[static_cast<size_t>(p)].name, begin, count, values);
      },
      ckpt::kChunkElems);
  agree_or_throw(comm, dev, reader.error);
  out.bytes_read_this_rank = reader.bytes;

  // 5. Counters, LR position, loss scaler; what differs from the saved run.
  const EngineOptions& o = engine.options();
  ZeroEngine::Counters c = m.counters;
  if (m.loss_scaler_flavor != ckpt::loss_scaler_flavor_name(o.loss_scaler.flavor)) {
    out.warnings.push_back("the checkpoint's loss scaler is " + m.loss_scaler_flavor + ", this run's is " +
                           ckpt::loss_scaler_flavor_name(o.loss_scaler.flavor) + ": the loss scaler starts afresh");
    c.loss_scaler = engine.counters().loss_scaler;
  }
  engine.restore_counters(c);
  out.counters = c;
  out.seed = m.seed;
  out.data_spec = m.data_spec;
  out.validation = m.validation;
  out.saved_world = m.world;
  out.saved_stage = m.stage;
  if (m.world != world || m.stage != o.stage)
    out.resharded = "saved at ZeRO stage " + std::to_string(m.stage) + " on " + std::to_string(m.world) +
                    " rank(s), loaded at stage " + std::to_string(o.stage) + " on " + std::to_string(world);
  if (m.master_dtype != dtype_name(o.master_dtype) || m.moments_dtype != dtype_name(o.moments_dtype))
    out.warnings.push_back("the checkpoint keeps master weights in " + m.master_dtype + " and moments in " +
                           m.moments_dtype + "; this run keeps " + dtype_name(o.master_dtype) + " and " +
                           dtype_name(o.moments_dtype) + " (converted, round to nearest even)");
  if (m.compute_dtype != dtype_name(o.compute_dtype))
    out.warnings.push_back("the checkpoint was trained in " + m.compute_dtype + ", this run computes in " +
                           dtype_name(o.compute_dtype));
  if (m.optimizer_type != o.optimizer.type)
    out.warnings.push_back("the checkpoint's optimizer is " + m.optimizer_type + ", this run's is " + o.optimizer.type);
  if (m.train_batch_size != info.train_batch_size)
    out.warnings.push_back("train_batch_size " + std::to_string(info.train_batch_size) + " differs from the checkpoint's " +
                           std::to_string(m.train_batch_size) + ": the data continues at global batch " +
                           std::to_string(c.global_steps) + " of the new size, not at the same sample");
  if (m.data_spec != info.data_spec)
    out.warnings.push_back("--data '" + info.data_spec + "' differs from the checkpoint's '" + m.data_spec + "'");
  if (m.lr_schedule != info.lr_schedule)
    out.warnings.push_back("the LR schedule " + info.lr_schedule + " differs from the checkpoint's " + m.lr_schedule +
                           " (its position, step " + std::to_string(c.lr_last_batch_iteration) + ", is kept)");
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace zt
