// weights_io.h — a model's parameters in a safetensors file or a Hugging Face folder (--init-from,
// --save-weights).
//
// A folder (model/hf_folder.h) is read from its model.safetensors, or from the shards its
// model.safetensors.index.json maps each tensor to: a parameter without a weight_map entry, or
// missing from the shard the entry names, is an InputError naming the index or the shard.
// Names are the ParamSpec names (Hugging Face GPT-2 names for the GPT). On load:
//  * a tensor may carry a "transformer." prefix (GPT2LMHeadModel exports);
//  * the buffers "*.attn.bias" / "*.attn.masked_bias" and the tied "lm_head.weight" are ignored;
//  * any other tensor the model does not have, a missing parameter, a shape that is not the
//    parameter's shape, or a dtype other than F32/BF16/F16 is an InputError naming the file.
// Values are read as fp32 slices so each rank can load only its shard.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/io/safetensors.h"
#include "zerotrain/model/model.h"

namespace zt {

class ModelWeightsReader {
 public:
  // Validates the header(s) against `specs`. path: a safetensors file or a folder.
  // allow_non_finite: read_param_slice passes NaN/Inf through.
  ModelWeightsReader(const std::string& path, const std::vector<ParamSpec>& specs, bool allow_non_finite = false);
  // Elements [begin, begin+count) of parameter `index` (forward order), as fp32; InputError naming
  // the tensor and element when one is NaN/Inf (unless allowed).
  void read_param_slice(int index, int64_t begin, int64_t count, float* out) const;
  const SafetensorsReader& file() const { return *files_.front(); }  // the first (or only) file

 private:
  void map_single_file(const std::string& path);
  void map_shards(const std::string& index, const std::map<std::string, std::string>& weight_map);
  void check_no_unexpected(const std::string& index, const std::map<std::string, std::string>& weight_map) const;
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::vector<ParamSpec> specs_;
  struct Located {
    const SafetensorsReader* file;
    const SafetensorsEntry* entry;
  };
  std::vector<Located> entry_of_param_;  // parallel to specs_
  bool allow_non_finite_ = false;
};

// Writes every parameter in forward order under its ParamSpec name, converted to `file_dtype`.
// fetch(index, out) must fill out[0..numel) with parameter `index` as fp32 (host); it is called
// once per parameter, in order, so only one parameter is staged at a time.
void save_model_weights(const std::string& path, const std::vector<ParamSpec>& specs, DType file_dtype,
                        const std::function<void(int index, float* out)>& fetch,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace zt
