// train_checks.h — `zerotrain train`'s input checks that need no device and no collective; they
// run in the first agreed phase (rank_agreement.h), before anything is allocated.
#pragma once
#include <cstdint>

#include "zerotrain/app/train_setup.h"

namespace zt {

// A lower bound of one rank's bytes for this model and config: ZeRO model states (parameters and
// gradients in the compute dtype, fp32 master weights; each divided by the world size where the
// stage shards it) plus, for GPT, the fp32 logits of one micro-batch.
double predicted_rank_bytes(const ModelConfig& m, const EngineOptions& eo, int64_t micro_batch, int world);

// InputError when the lower bound exceeds this node's memory shared by its ranks (CPU device:
// physical memory / ranks on this node). The message gives the predicted and available bytes.
void check_model_fits(const ModelConfig& m, const EngineOptions& eo, int64_t micro_batch, int world, bool cpu_device);

// Every output path of the run (--metrics, --memory-report, --comm-log, --trace, --save-weights)
// is writable before the first step, and no two outputs (nor an output and an input file) name
// the same file (rank 0 checks for all ranks). Removes the temporaries killed runs left for
// --memory-report and --save-weights (remove_stale_temporaries). InputError names the flag.
void check_output_paths(const TrainArgs& args, int world);

}  // namespace zt
