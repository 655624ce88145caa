// weights_export.cpp — streaming weights files from a live engine (--save-weights) and from a
// checkpoint's shards (consolidate), one tensor at a time (weights_export.h).
#include "zerotrain/ckpt/weights_export.h"

#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "ckpt_internal.h"
#include "zerotrain/ckpt/checkpoint.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/finite.h"
#include "zerotrain/io/safetensors.h"

namespace zt {

struct WeightsFileWriter::Impl {
  std::vector<ParamSpec> specs;
  DType dtype;
  SafetensorsWriter file;
  int next = 0;
  std::vector<unsigned char> converted;
  Impl(const std::string& path, const std::vector<ParamSpec>& s, DType t, const std::vector<SafetensorsWriter::Decl>& d)
      : specs(s), dtype(t), file(path, d, {{"format", "pt"}, {"producer", "zerotrain"}}) {}
};

namespace {
std::vector<SafetensorsWriter::Decl> decls_of(const std::vector<ParamSpec>& specs, DType dtype) {
  std::vector<SafetensorsWriter::Decl> d;
  for (const ParamSpec& p : specs) d.push_back({p.name, dtype, p.shape});
  return d;
}
}  // namespace

WeightsFileWriter::WeightsFileWriter(const std::string& path, const std::vector<ParamSpec>& specs, DType dtype)
    : impl_(new Impl(path, specs, dtype, decls_of(specs, dtype))) {}

WeightsFileWriter::~WeightsFileWriter() { delete impl_; }

void WeightsFileWriter::write(int param, const float* values) {
  Impl& w = *impl_;
  ZT_CHECK(param == w.next && param < static_cast<int>(w.specs.size()), "WeightsFileWriter: parameters out of order");
  ++w.next;
  const size_t n = static_cast<size_t>(w.specs[static_cast<size_t>(param)].numel);
  if (w.dtype == DType::F32) return w.file.write_next(values);
  w.converted.resize(n * dtype_size(w.dtype));
  convert(values, DType::F32, w.converted.data(), w.dtype, n);
  w.file.write_next(w.converted.data());
}

void WeightsFileWriter::finish() { impl_->file.finish(); }

bool is_folder_target(const std::string& out) { return !out.empty() && (out.back() == '/' || ckptfs::is_dir(out)); }

std::string weights_file_of(const std::string& out) {
  return is_folder_target(out) ? ckptfs::join(out, "model.safetensors") : out;
}

void write_hf_config_if_folder(const std::string& out, const ModelConfig& model, DType dtype) {
  const nlohmann::json config = ckpt::hf_model_config(model, dtype);
  if (!is_folder_target(out) || config.is_null()) return;
  ckptfs::write_file_atomically(ckptfs::join(out, "config.json"), config.dump(2) + "\n");
}

std::string export_weights(ZeroEngine& engine, Communicator& comm, Device& dev, const std::vector<ParamSpec>& specs,
                           const ModelConfig& model, const std::string& out, DType dtype) {
  const bool root = comm.rank() == 0;
  const std::string file = weights_file_of(out);
  std::string err;
  std::unique_ptr<WeightsFileWriter> w;
  if (root) {
    try {
      if (is_folder_target(out)) ckptfs::make_dirs(out);
      w = std::make_unique<WeightsFileWriter>(file, specs, dtype);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  // Every rank takes part in every gather, whatever happens to the file on rank 0.
  engine.stream_parameters(0, [&](int p, const float* values) {
    if (!w || !err.empty()) return;
    try {
      w->write(p, values);
    } catch (const InputError& e) {
      err = e.what();
    }
  });
  if (root && err.empty()) {
    try {
      w->finish();
      write_hf_config_if_folder(out, model, dtype);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  w.reset();
  agree_or_throw(comm, dev, err);
  return file;
}

// ---- consolidate: a checkpoint's master weights into one file, tensor by tensor ----

struct CheckpointWeights::Impl {
  ckpt::Meta meta;
  bool allow_non_finite = false;
  std::string use;  // "export", "sample from": what a non-finite weight refuses
  std::vector<ParamSpec> specs;
  std::vector<std::unique_ptr<SafetensorsReader>> shards;  // opened on first use
};

CheckpointWeights::CheckpointWeights(const std::string& tag_dir, bool allow_non_finite, const std::string& use)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.use = use;
  w.meta = ckpt::parse_meta(tag_dir);
  w.allow_non_finite = allow_non_finite;
  for (int s = 0; s < w.meta.world; ++s) {
    const std::string problem = ckpt::verify_shard(w.meta, s);
    if (!problem.empty()) throw InputError(problem);
  }
  for (const ckpt::Meta::Param& p : w.meta.params) {
    ParamSpec s;
    s.name = p.name;
    s.shape = p.shape;
    s.numel = p.numel;
    w.specs.push_back(s);
  }
  w.shards.resize(static_cast<size_t>(w.meta.world));
}

CheckpointWeights::~CheckpointWeights() = default;

const std::vector<ParamSpec>& CheckpointWeights::specs() const { return impl_->specs; }
const ModelConfig& CheckpointWeights::model() const { return impl_->meta.model; }
const std::vector<std::string>& CheckpointWeights::warnings() const { return impl_->meta.warnings; }

void CheckpointWeights::read(int param, float* values) const {
  Impl& w = *impl_;
  const ParamSpec& spec = w.specs.at(static_cast<size_t>(param));
  std::fill(values, values + spec.numel, 0.0f);
  const std::string name = "master/" + spec.name;
  for (const ckpt::Meta::Piece& pc : w.meta.pieces[0][static_cast<size_t>(param)]) {
    std::unique_ptr<SafetensorsReader>& f = w.shards[static_cast<size_t>(pc.rank)];
    if (!f) f = std::make_unique<SafetensorsReader>(w.meta.shard_path(pc.rank));
    const SafetensorsEntry* e = f->find(name);
    if (!e || e->numel != pc.count)
      throw InputError("checkpoint shard " + f->path() + ": tensor \"" + name + "\" is missing or not as meta.json records");
    f->read_f32(*e, 0, pc.count, values + pc.begin);
    const std::string nf = w.allow_non_finite ? "" : non_finite_problem("tensor \"" + name + "\"", values + pc.begin, pc.count, pc.begin);
    if (!nf.empty())
      throw InputError("checkpoint shard " + f->path() + ": " + nf + "; refusing to " + w.use + " non-finite weights " +
                       kAllowNonFiniteHint);
  }
}

void consolidate_checkpoint(const std::string& tag_dir, const std::string& out, DType dtype, bool allow_non_finite,
                            std::vector<std::string>* warnings) {
  const CheckpointWeights ckpt_weights(tag_dir, allow_non_finite);
  if (warnings) warnings->insert(warnings->end(), ckpt_weights.warnings().begin(), ckpt_weights.warnings().end());
  const std::vector<ParamSpec>& specs = ckpt_weights.specs();
  if (is_folder_target(out)) ckptfs::make_dirs(out);
  const std::string file = weights_file_of(out);
  WeightsFileWriter w(file, specs, dtype);
  std::vector<float> values;
  for (size_t p = 0; p < specs.size(); ++p) {
    values.assign(static_cast<size_t>(specs[p].numel), 0.0f);
    ckpt_weights.read(static_cast<int>(p), values.data());
    w.write(static_cast<int>(p), values.data());
  }
  w.finish();
  write_hf_config_if_folder(out, ckpt_weights.model(), dtype);
}

}  // namespace zt
