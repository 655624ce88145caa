// mlp.h — multi-layer perceptron workload: Linear (+activation) layers, MSE or cross-entropy.
//
// Units: one per Linear layer, unit i = fc.i (+ activation when not last); the last unit also
// computes the loss. Weights are PyTorch Linear layout: fc.{i}.weight [out, in], fc.{i}.bias [out].
// Init: weights N(0, init_std) when the model file sets init_std, else N(0, 1/sqrt(in)) (fan-in);
// biases 0. Loss: regression = mean squared error over batch and outputs; classification = mean
// cross-entropy over the batch (Batch.targets [B] class ids; negative ids are ignored).
#pragma once
#include <memory>

#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"

namespace zt {

std::unique_ptr<Model> make_mlp(const MlpConfig& cfg, const ModelOptions& opt);
// Every buffer make_mlp allocates for opt; pure.
std::vector<BufferSpec> mlp_buffer_plan(const MlpConfig& cfg, const ModelOptions& opt);

// Builds the model a parsed model file describes.
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& opt);

}  // namespace zt
