// stage3_note.h — one line for `check-config --model` and `train` when a stage-3 config's
// thresholds leave the parameters whole on every rank (nothing gained over stage 2 for them).
#pragma once
#include <string>

#include "estimate.h"

namespace zt {

// "" unless cfg is ZeRO stage 3 and either every parameter is persistent (no more elements than
// stage3_param_persistence_threshold: gathered once, never released) or the gathered ones are all
// live at once at the step's peak (prefetching up to stage3_prefetch_bucket_size /
// stage3_max_live_parameters gathers them all, and stage3_max_reuse_distance keeps each one until
// its backward). Otherwise one line ending in '\n': which case, the tensor
// counts, stage 3's predicted device memory per rank beside stage 2's for the same config (left
// out with offload_param, which stage 2 refuses), and the key to change.
std::string stage3_threshold_note(const DsConfig& cfg, const ModelConfig& model, int world, Recompute recompute,
                                  CommBackend backend, const ClientOptimizer& client);

}  // namespace zt
