// hf_folder.h — a Hugging Face model folder as --init-from reads it (docs/usage.md, weights).
//
// The folder holds model.safetensors, or (when there is none) model.safetensors.index.json with
// "weight_map": {tensor name: shard file name} and the shards it names (model-0000x-of-0000y.safetensors,
// plain names inside the folder); config.json is optional. A GPT-2 config.json (what
// `--save-weights DIR/` writes: vocab_size, n_positions, n_embd, n_layer, n_head) or a Llama one
// (LlamaConfig's keys: a Llama model file as it is) either checks the --model file or, without
// --model, is the model. Every problem is an InputError naming the file.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "zerotrain/model/model_config.h"

namespace zt {

// Whether `path` names a directory (a folder for --init-from, not a safetensors file).
bool is_weights_folder(const std::string& path);

struct HfWeightFiles {
  std::vector<std::string> files;                 // paths of the safetensors files, sorted
  std::string index;                              // the index's path ("" for model.safetensors)
  std::map<std::string, std::string> weight_map;  // tensor -> file path (empty for model.safetensors)
};

// The folder's weight files; InputError when it has neither model.safetensors nor an index, the
// index is malformed (not JSON, no "weight_map" object, a value that is not a plain file name), or
// a shard it names is missing.
HfWeightFiles hf_weight_files(const std::string& dir);

// DIR/config.json when it exists, else "".
std::string hf_config_path(const std::string& dir);

// The GPT model a GPT-2 config.json describes (n_positions -> n_ctx, initializer_range ->
// init_std), or the Llama model a "model_type": "llama" one is; InputError naming the file and
// the key (neither, a missing or bad size, an architecture zerotrain's GPT is not:
// activation_function other than gelu_new, n_inner other than 4·n_embd, untied embeddings).
ModelConfig model_config_from_hf(const std::string& config_path);

// InputError naming the field and both values when `model` (from `model_source`) is not the
// model config.json describes.
void check_model_matches_hf(const ModelConfig& model, const std::string& model_source, const std::string& config_path);

}  // namespace zt
