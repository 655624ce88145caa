// weights_io.cpp — map model parameters onto safetensors tensors (see weights_io.h).
#include "zerotrain/model/weights_io.h"

#include <cmath>
#include <set>

#include "zerotrain/core/check.h"
#include "zerotrain/core/finite.h"

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

}  // namespace

ModelWeightsReader::ModelWeightsReader(const std::string& path, const std::vector<ParamSpec>& specs,
                                       bool allow_non_finite)
    : file_(path), specs_(specs), allow_non_finite_(allow_non_finite) {
  std::set<const SafetensorsEntry*> used;
  for (const ParamSpec& p : specs_) {
    const SafetensorsEntry* e = file_.find(p.name);
    const SafetensorsEntry* prefixed = file_.find(kPrefix + p.name);
    if (e && prefixed)
      throw InputError("safetensors file " + path + ": both \"" + p.name + "\" and \"" + kPrefix + p.name + "\" present");
    if (!e) e = prefixed;
    if (!e) throw InputError("safetensors file " + path + ": missing parameter \"" + p.name + "\" (shape " + shape_str(p.shape) + ")");
    if (e->shape != p.shape)
      throw InputError("safetensors file " + path + ": tensor \"" + e->name + "\" has shape " + shape_str(e->shape) +
                       ", the model expects " + shape_str(p.shape));
    if (!e->convertible)
      throw InputError("safetensors file " + path + ": tensor \"" + e->name + "\" has dtype " + e->dtype_name +
                       "; expected F32, BF16 or F16");
    used.insert(e);
    entry_of_param_.push_back(e);
  }
  for (const SafetensorsEntry& e : file_.entries()) {
    if (used.count(&e)) continue;
    std::string bare = e.name.compare(0, kPrefix.size(), kPrefix) == 0 ? e.name.substr(kPrefix.size()) : e.name;
    if (ignorable(bare)) continue;
    throw InputError("safetensors file " + path + ": unexpected tensor \"" + e.name +
                     "\" (the model has no parameter of that name; wrong model file?)");
  }
}

void ModelWeightsReader::read_param_slice(int index, int64_t begin, int64_t count, float* out) const {
  ZT_CHECK(index >= 0 && index < static_cast<int>(specs_.size()), "read_param_slice: bad index " + std::to_string(index));
  const SafetensorsEntry& e = *entry_of_param_[index];
  file_.read_f32(e, begin, count, out);
  // Non-finite initial weights would make every step overflow and be skipped: refuse them.
  if (allow_non_finite_) return;
  const std::string problem = non_finite_problem("tensor \"" + e.name + "\"", out, count, begin);
  if (!problem.empty())
    throw InputError("safetensors file " + file_.path() + ": " + problem + "; expected finite initial weights " +
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
