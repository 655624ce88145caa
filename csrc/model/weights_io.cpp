// weights_io.cpp — map model parameters onto safetensors tensors (see weights_io.h).
#include "zerotrain/model/weights_io.h"

#include <cmath>
#include <map>
#include <set>

#include "zerotrain/core/check.h"
#include "zerotrain/core/finite.h"
#include "zerotrain/model/hf_folder.h"

namespace zt {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Tensors a GPT-2 checkpoint carries that are not parameters here.
bool ignorable(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") || name == "lm_head.weight";
}

const std::string kPrefix = "transformer.";

std::string bare_name(const std::string& name) {
  return name.compare(0, kPrefix.size(), kPrefix) == 0 ? name.substr(kPrefix.size()) : name;
}

// A found tensor must have the parameter's shape and a readable dtype.
void check_entry(const std::string& path, const SafetensorsEntry& e, const ParamSpec& p) {
  if (e.shape != p.shape)
    throw InputError("safetensors file " + path + ": tensor \"" + e.name + "\" has shape " + shape_str(e.shape) +
                     ", the model expects " + shape_str(p.shape));
  if (!e.convertible)
    throw InputError("safetensors file " + path + ": tensor \"" + e.name + "\" has dtype " + e.dtype_name +
                     "; expected F32, BF16 or F16");
}

}  // namespace

ModelWeightsReader::ModelWeightsReader(const std::string& path, const std::vector<ParamSpec>& specs,
                                       bool allow_non_finite)
    : specs_(specs), allow_non_finite_(allow_non_finite) {
  const HfWeightFiles w = is_weights_folder(path) ? hf_weight_files(path) : HfWeightFiles{{path}, "", {}};
  if (w.index.empty()) {
    map_single_file(w.files.front());
    return;
  }
  for (const std::string& f : w.files) files_.push_back(std::make_unique<SafetensorsReader>(f));
  map_shards(w.index, w.weight_map);
}

void ModelWeightsReader::map_single_file(const std::string& path) {
  files_.push_back(std::make_unique<SafetensorsReader>(path));
  const SafetensorsReader& file = *files_.front();
  std::set<const SafetensorsEntry*> used;
  for (const ParamSpec& p : specs_) {
    const SafetensorsEntry* e = file.find(p.name);
    const SafetensorsEntry* prefixed = file.find(kPrefix + p.name);
    if (e && prefixed)
      throw InputError("safetensors file " + path + ": both \"" + p.name + "\" and \"" + kPrefix + p.name + "\" present");
    if (!e) e = prefixed;
    if (!e) throw InputError("safetensors file " + path + ": missing parameter \"" + p.name + "\" (shape " + shape_str(p.shape) + ")");
    check_entry(path, *e, p);
    used.insert(e);
    entry_of_param_.push_back({&file, e});
  }
  for (const SafetensorsEntry& e : file.entries()) {
    if (used.count(&e) || ignorable(bare_name(e.name))) continue;
    throw InputError("safetensors file " + path + ": unexpected tensor \"" + e.name +
                     "\" (the model has no parameter of that name; wrong model file?)");
  }
}

// Sharded: every parameter through its weight_map entry; every tensor of the map and of the
// shards is a parameter or an ignorable buffer.
void ModelWeightsReader::map_shards(const std::string& index, const std::map<std::string, std::string>& weight_map) {
  std::map<std::string, const SafetensorsReader*> by_path;
  for (const auto& f : files_) by_path[f->path()] = f.get();
  for (const ParamSpec& p : specs_) {
    auto it = weight_map.find(p.name);
    const auto prefixed = weight_map.find(kPrefix + p.name);
    if (it != weight_map.end() && prefixed != weight_map.end())
      throw InputError("weights index " + index + ": both \"" + p.name + "\" and \"" + kPrefix + p.name + "\" listed");
    if (it == weight_map.end()) it = prefixed;
    if (it == weight_map.end())
      throw InputError("weights index " + index + ": no \"weight_map\" entry for parameter \"" + p.name + "\" (shape " +
                       shape_str(p.shape) + ")");
    const SafetensorsReader& file = *by_path.at(it->second);
    const SafetensorsEntry* e = file.find(it->first);
    if (!e)
      throw InputError("safetensors file " + file.path() + ": missing tensor \"" + it->first + "\", which " + index +
                       " places in this shard");
    check_entry(file.path(), *e, p);
    entry_of_param_.push_back({&file, e});
  }
  check_no_unexpected(index, weight_map);
}

// Every tensor the index lists or a shard holds is a parameter or an ignorable buffer.
void ModelWeightsReader::check_no_unexpected(const std::string& index,
                                             const std::map<std::string, std::string>& weight_map) const {
  std::set<std::string> params;
  for (const ParamSpec& p : specs_) params.insert(p.name);
  for (const auto& [name, path] : weight_map)
    if (!params.count(bare_name(name)) && !ignorable(bare_name(name)))
      throw InputError("weights index " + index + ": unexpected tensor \"" + name +
                       "\" (the model has no parameter of that name; wrong model file?)");
  for (const auto& f : files_)
    for (const SafetensorsEntry& e : f->entries()) {
      const std::string bare = bare_name(e.name);
      if (params.count(bare) || ignorable(bare)) continue;
      throw InputError("safetensors file " + f->path() + ": unexpected tensor \"" + e.name +
                       "\" (the model has no parameter of that name; wrong model file?)");
    }
}

void ModelWeightsReader::read_param_slice(int index, int64_t begin, int64_t count, float* out) const {
  ZT_CHECK(index >= 0 && index < static_cast<int>(specs_.size()), "read_param_slice: bad index " + std::to_string(index));
  const Located& at = entry_of_param_[static_cast<size_t>(index)];
  const SafetensorsEntry& e = *at.entry;
  at.file->read_f32(e, begin, count, out);
  // Non-finite initial weights would make every step overflow and be skipped: refuse them.
  if (allow_non_finite_) return;
  const std::string problem = non_finite_problem("tensor \"" + e.name + "\"", out, count, begin);
  if (!problem.empty())
    throw InputError("safetensors file " + at.file->path() + ": " + problem + "; expected finite initial weights " +
                     kAllowNonFiniteHint);
}

void save_model_weights(const std::string& path, const std::vector<ParamSpec>& specs, DType file_dtype,
                        const std::function<void(int index, float* out)>& fetch,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Decl> decls;
  for (const ParamSpec& p : specs) decls.push_back({p.name, file_dtype, p.shape});
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", "pt");
  meta.emplace("producer", "zerotrain");
  SafetensorsWriter writer(path, decls, meta);
  std::vector<float> f32;
  std::vector<unsigned char> converted;
  for (size_t i = 0; i < specs.size(); ++i) {
    f32.assign(static_cast<size_t>(specs[i].numel), 0.0f);
    fetch(static_cast<int>(i), f32.data());
    if (file_dtype == DType::F32) {
      writer.write_next(f32.data());
    } else {
      converted.resize(f32.size() * dtype_size(file_dtype));
      convert(f32.data(), DType::F32, converted.data(), file_dtype, f32.size());
      writer.write_next(converted.data());
    }
  }
  writer.finish();
}

}  // namespace zt
