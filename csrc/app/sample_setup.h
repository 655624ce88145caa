// sample_setup.h — what `zerotrain sample` and `train --sample-every` share: the weights as host
// fp32 tensors (a weights file, an HF folder or a checkpoint), the prompt as token ids, and the
// printed sample.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/data/text_codec.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"

namespace zt {

// F.safetensors, or a folder holding model.safetensors (train --save-weights DIR/); fp32, bf16 and
// fp16 files, widened to fp32. InputError naming the file for a missing file, a missing tensor,
// a shape that is not `specs`' (the --model file's), or a NaN/Inf value.
std::vector<std::vector<float>> read_weights_for_sampling(const std::string& path, const std::vector<ParamSpec>& specs);
// The master weights of checkpoint DIR (its `latest`, or `tag`): InputError naming the checkpoint
// when its parameters' names or shapes are not `specs`'.
std::vector<std::vector<float>> read_checkpoint_for_sampling(const std::string& dir, const std::string& tag,
                                                             const std::vector<ParamSpec>& specs);

// The prompt's ids under `codec`: InputError naming `flag` when it is empty, longer than n_ctx
// tokens, or holds an id outside the model's vocabulary.
std::vector<int32_t> encode_prompt(const TextCodec& codec, const std::string& text, const ModelConfig& cfg,
                                   const std::string& flag);
std::string decode_tokens(const TextCodec& codec, const std::vector<int32_t>& ids);

}  // namespace zt
