// sample_setup.cpp — weights and prompts for sampling (sample_setup.h).
#include "sample_setup.h"

#include "zerotrain/ckpt/checkpoint.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/ckpt/weights_export.h"
#include "zerotrain/core/check.h"
#include "zerotrain/model/weights_io.h"

namespace zt {
namespace {
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
}  // namespace

std::vector<std::vector<float>> read_weights_for_sampling(const std::string& path, const std::vector<ParamSpec>& specs) {
  const std::string file = ckptfs::is_dir(path) ? weights_file_of(path + "/") : path;
  if (ckptfs::is_dir(path) && !ckptfs::exists(file))
    throw InputError("--weights " + path + ": a folder without model.safetensors; expected a weights file or a folder "
                     "written by train --save-weights DIR/");
  const ModelWeightsReader reader(file, specs);
  std::vector<std::vector<float>> out(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    out[i].resize(static_cast<size_t>(specs[i].numel));
    reader.read_param_slice(static_cast<int>(i), 0, specs[i].numel, out[i].data());
  }
  return out;
}

std::vector<std::vector<float>> read_checkpoint_for_sampling(const std::string& dir, const std::string& tag,
                                                             const std::vector<ParamSpec>& specs) {
  const std::string tag_dir = resolve_checkpoint_path(dir, tag);
  const CheckpointWeights ckpt(tag_dir, /*allow_non_finite=*/false, "sample from");
  const std::vector<ParamSpec>& have = ckpt.specs();
  for (size_t i = 0; i < std::max(have.size(), specs.size()); ++i) {
    const bool same = i < have.size() && i < specs.size() && have[i].name == specs[i].name && have[i].shape == specs[i].shape;
    if (same) continue;
    const std::string found = i < have.size() ? "\"" + have[i].name + "\" " + shape_text(have[i].shape) : "nothing";
    const std::string want = i < specs.size() ? "\"" + specs[i].name + "\" " + shape_text(specs[i].shape) : "nothing";
    throw InputError("--resume " + tag_dir + ": parameter " + std::to_string(i) + " is " + found +
                     "; the --model file expects " + want + " (a checkpoint of another model)");
  }
  std::vector<std::vector<float>> out(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    out[i].resize(static_cast<size_t>(specs[i].numel));
    ckpt.read(static_cast<int>(i), out[i].data());
  }
  return out;
}

std::vector<int32_t> encode_prompt(const TextCodec& codec, const std::string& text, const ModelConfig& cfg,
                                   const std::string& flag) {
  const int64_t n_ctx = cfg.context_length(), vocab = cfg.vocab_size();
  const std::vector<uint32_t> ids = codec.encode(text);
  if (ids.empty()) throw InputError(flag + " '': empty prompt; expected at least one token of text");
  if (static_cast<int64_t>(ids.size()) > n_ctx)
    throw InputError(flag + ": the prompt is " + std::to_string(ids.size()) + " tokens, more than the model's n_ctx=" +
                     std::to_string(n_ctx));
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= static_cast<uint64_t>(vocab))
      throw InputError(flag + ": token " + std::to_string(ids[i]) + " at position " + std::to_string(i) + " (" +
                       codec.describe() + ") is outside the model's vocabulary [0, " + std::to_string(vocab) + ")");
    out.push_back(static_cast<int32_t>(ids[i]));
  }
  return out;
}

std::string decode_tokens(const TextCodec& codec, const std::vector<int32_t>& ids) {
  return codec.decode(std::vector<uint32_t>(ids.begin(), ids.end()));
}

}  // namespace zt
