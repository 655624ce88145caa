// model_reference.h — plain double-precision reference losses of the built-in models, written
// straight from the math (no shared code with csrc/model), for finite-difference gradient checks.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/model/model_config.h"

namespace zt::ref {

// Logits [B*T, V] of every position (row b*T + t), flat as for gpt_loss.
std::vector<double> gpt_logits(const GptConfig& c, const std::vector<double>& flat, const std::vector<int32_t>& tokens,
                               int64_t B, int64_t T);

// flat: all parameters in the model's forward order (HF GPT-2 names/layouts), as doubles.
// Mean cross-entropy over the positions whose target is not ignored (target < 0), as PyTorch's
// cross_entropy(ignore_index=-1, reduction='mean').
double gpt_loss(const GptConfig& c, const std::vector<double>& flat, const std::vector<int32_t>& tokens,
                const std::vector<int32_t>& targets, int64_t B, int64_t T);

// Regression: mean over batch and outputs of (y - t)^2; classification: mean cross-entropy over the
// rows whose target is not ignored.
double mlp_loss(const MlpConfig& c, const std::vector<double>& flat, const std::vector<float>& features,
                const std::vector<float>& targets_f, const std::vector<int32_t>& targets, int64_t B);

}  // namespace zt::ref
