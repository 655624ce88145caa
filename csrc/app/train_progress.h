// train_progress.h — `zerotrain train`'s progress lines: how often they are printed and what a
// step's line says.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "mfu.h"
#include "zerotrain/app/train_setup.h"

namespace zt {

// Steps between progress lines: --log-every, else steps_per_print, else ~10 lines.
int64_t progress_interval(const TrainArgs& args, const DsConfig& cfg);

// "step     5 | loss 2.345678 | val loss 2.401234 | lr 1.000e-03 | grad norm ... | peak mem 1.2 MiB\n"
// (val loss only on a step that evaluated; the breakdown's times with wall_clock_breakdown).
std::string step_line(const StepStats& st, const StepThroughput& tp, size_t peak_mem_bytes, bool breakdown,
                      std::optional<double> val_loss);

// File data (S = sequences_per_epoch > 0): "data: epoch E begins at step K (global sequence G)\n"
// when global step K = k + 1 (samples [k·B, (k+1)·B)) reads the first sequence of epoch E >= 2
// (epochs counted from 1); "data: epochs E1-E2 begin during step K\n" when it reads several
// epochs' first sequences; "" otherwise.
std::string epoch_line(int64_t k, int64_t global_batch, int64_t sequences_per_epoch);

}  // namespace zt
