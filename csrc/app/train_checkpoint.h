// train_checkpoint.h — `zerotrain train`'s checkpoint flags over ckpt/checkpoint.h:
// --resume DIR [--tag T] at start-up, --save-checkpoint DIR [--save-every N] [--keep-last K]
// after every N-th global step and at the end. Every call is collective.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/ckpt/checkpoint.h"

namespace zt {

class TrainCheckpoints {
 public:
  using Log = std::function<void(const std::string& line)>;  // rank 0 prints
  TrainCheckpoints(const TrainArgs& args, const ModelConfig& model_cfg, const DsConfig& cfg, const Model& model,
                   ZeroEngine& engine, Communicator& comm, Device& dev, Log log);
  // Before anything is trained: the save directory can be created and written (exit 2 if not).
  void check_save_dir();
  // --resume: loads the checkpoint; returns the next global step (0 without --resume) and sets
  // *seed to the checkpoint's unless --seed was given.
  int64_t resume(uint64_t* seed);
  // After global step `step`: saves when --save-every divides it.
  void after_step(int64_t step);
  // At the end of training: saves unless this step is already saved (or was just resumed from DIR).
  void at_end(int64_t step);
  // train --eval-every, after every evaluation: the validation state recorded in every later
  // save's meta.json.
  void set_validation(const ValidationState& v);
  // After resume(): the checkpoint's validation state when this run continues it (the same
  // --eval-data and --eval-batches; otherwise a warning says it starts afresh), else nullptr.
  const ValidationState* resumed_validation() const { return carried_ ? &info_.validation : nullptr; }
  // --keep-best, after an evaluation that improved: DIR/best, written as any checkpoint is (a
  // fresh directory installed atomically), without moving DIR/latest.
  void save_best(int64_t step);
  // Graceful stop (stop_signals.h), every rank after the same step: saves as at_end when
  // --save-checkpoint is set, rank 0 prints "stopped by signal SIG at step N, checkpoint at PATH"
  // (or "no checkpoint: --save-checkpoint not set"), and every rank throws AgreedFailure(kExitStopped).
  [[noreturn]] void stop(int64_t step, int signal);

 private:
  void save(int64_t step);
  void report(const SavedCheckpoint& s);
  bool carry_validation(const ValidationState& v, std::vector<std::string>* warnings);
  void agreed(const std::function<void()>& step);  // checkpoint errors: one message, one exit code
  const TrainArgs& args_;
  CheckpointRunInfo info_;
  ZeroEngine& engine_;
  Communicator& comm_;
  Device& dev_;
  Log log_;
  int64_t saved_step_ = -1;  // step of the last checkpoint in --save-checkpoint DIR made or read by this run
  std::string saved_path_;   // its directory
  bool carried_ = false;     // info_.validation came from the resumed checkpoint
};

}  // namespace zt
