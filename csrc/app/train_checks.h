// train_checks.h — `zerotrain train`'s inputs and their checks that need no device and no
// collective; they run in the first agreed phase (rank_agreement.h), before anything is allocated.
#pragma once
#include <cstdint>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/data/dataset.h"

namespace zt {

// CPU device: InputError when one rank's bytes as `zerotrain estimate --device cpu` predicts them
// (estimate_memory: the device total plus the host total, both host memory here) exceed this
// node's physical memory shared by its ranks. The message gives the predicted and available
// bytes. No check on a CUDA device.
void check_model_fits(const DsConfig& cfg, const ModelConfig& m, int world, Recompute recompute,
                      const ClientOptimizer& client, bool cpu_device);

// Every output path of the run (--metrics, --memory-report, --comm-log, --trace, --save-weights)
// is writable before the first step, and no two outputs (nor an output and an input file) name
// the same file (rank 0 checks for all ranks). Removes the temporaries killed runs left for
// --memory-report and --save-weights (remove_stale_temporaries). InputError names the flag.
void check_output_paths(const TrainArgs& args, int world);

// The run's model: the --model file, checked against --init-from DIR/config.json when the folder
// has one; without --model, the model config.json describes (InputError when --init-from is not
// a folder with a config.json).
ModelConfig train_model_config(const TrainArgs& args);

// The dataset's shape for this run's model and config; a token file is validated by `rank`'s
// share of `world` shards.
DatasetShape dataset_shape(const ModelConfig& m, const DsConfig& cfg, uint64_t seed, int rank, int world);

// The --config file for this model and world size (--strict and --recompute applied).
DsConfig load_config(const TrainArgs& args, const ModelConfig& model_cfg, int world);

}  // namespace zt
