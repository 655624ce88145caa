// train_progress.cpp — the trainer's progress lines (train_progress.h).
#include "train_progress.h"

#include <algorithm>
#include <cstdio>

#include "observe.h"

namespace zt {

int64_t progress_interval(const TrainArgs& args, const DsConfig& cfg) {
  if (args.log_every != 0) return args.log_every;
  if (cfg.steps_per_print && *cfg.steps_per_print > 0) return *cfg.steps_per_print;
  return std::max<int64_t>(1, args.steps / 10);
}

std::string step_line(const StepStats& st, const StepThroughput& tp, size_t peak_mem_bytes, bool breakdown,
                      std::optional<double> val_loss) {
  char mfu[48] = "";
  if (tp.has_mfu()) std::snprintf(mfu, sizeof(mfu), " | MFU %.1f%%", 100.0 * tp.tflops * 1e12 / tp.peak_flops);
  const std::string times = breakdown && st.breakdown ? breakdown_text(*st.breakdown) : "";
  char skipped[96] = "";
  if (st.skipped_steps > 0)
    std::snprintf(skipped, sizeof(skipped), "%s | %lld step(s) skipped so far",
                  st.skipped ? " | SKIPPED (non-finite gradients)" : "", static_cast<long long>(st.skipped_steps));
  char val[48] = "";
  if (val_loss) std::snprintf(val, sizeof(val), " | val loss %.6f", *val_loss);
  char line[1024];
  std::snprintf(line, sizeof(line),
                "step %5lld | loss %.6f%s | lr %.3e | grad norm %.4f (clip x%.3f) | loss scale %g%s | %.1f ms | %.0f "
                "tok/s | %.3f TFLOP/s%s | peak mem %.1f MiB",
                static_cast<long long>(st.step), st.loss, val, st.lr, st.grad_norm, st.clip_coefficient, st.loss_scale,
                skipped, tp.step_s * 1e3, tp.tokens_per_s, tp.tflops, mfu, peak_mem_bytes / 1048576.0);
  return line + times + "\n";
}

std::string epoch_line(int64_t k, int64_t global_batch, int64_t sequences_per_epoch) {
  const int64_t S = sequences_per_epoch;
  if (S <= 0) return "";
  const int64_t first = k * global_batch, last = first + global_batch - 1;
  const int64_t e_first = first == 0 ? 1 : (first - 1) / S + 1;  // 0-based epochs starting in [first, last], > 0
  const int64_t e_last = last / S;
  if (e_first > e_last) return "";
  char line[160];
  if (e_first == e_last)
    std::snprintf(line, sizeof(line), "data: epoch %lld begins at step %lld (global sequence %lld)\n",
                  static_cast<long long>(e_first + 1), static_cast<long long>(k + 1), static_cast<long long>(e_first * S));
  else
    std::snprintf(line, sizeof(line), "data: epochs %lld-%lld begin during step %lld (%lld sequences per epoch)\n",
                  static_cast<long long>(e_first + 1), static_cast<long long>(e_last + 1), static_cast<long long>(k + 1),
                  static_cast<long long>(S));
  return line;
}

}  // namespace zt
