// checkpoint.h — sharded, world-size-free training checkpoints (DeepSpeed-style DIR/<tag>/ +
// DIR/latest), crash-safe saves, resume at any world size and stage, and `consolidate`.
//
// On disk (docs/checkpoints.md has the full description):
//   DIR/latest                         the tag of the newest complete checkpoint ("global_step40\n")
//   DIR/<tag>/meta.json                everything but the per-element states: the model, the
//                                      stage/world/plan it was saved under, precision, step
//                                      counters, LR position, loss scaler, data cursor, seed,
//                                      and for every tensor where each rank's pieces sit, plus
//                                      each shard's size and XXH64 checksum
//   DIR/<tag>/shard-RRRRR-of-NNNNN.safetensors
//                                      rank R's pieces: "<state>/<param>" 1-D tensors in the
//                                      state's own dtype (master fp32/bf16, exp_avg, exp_avg_sq
//                                      or momentum)
// Rank r writes the real part of its slice of every bucket (ZeroEngine::checkpoint_pieces), so
// the pieces tile each parameter once whatever the stage. Loading asks, per parameter, for the
// element ranges the new plan's optimizer updates, and reads just those bytes from whichever
// old shards hold them.
//
// Save protocol: rank 0 creates DIR/.tmp-<tag>.<host>.<pid>/; each rank writes, fsyncs and
// hashes its shard; rank 0 writes meta.json with the checksums, fsyncs, installs the directory
// as DIR/<tag> (atomic rename or exchange), then replaces DIR/latest atomically. A crash at any
// point leaves `latest` naming a complete checkpoint. A save creates and deletes only names it
// owns: an existing DIR/<tag> is replaced, and --keep-last removes a global_step<N>, only when
// it is a zerotrain checkpoint (a directory with a meta.json of this format); a .tmp-* entry is
// removed only when it is a temporary of a save whose process is gone (same host, pid not alive).
//
// Every problem with the inputs (missing/truncated/corrupt shard, meta.json of another model,
// unknown tag, unwritable directory) is an InputError agreed by every rank: all ranks throw, and
// rank 0's message names the file (exit 2 in the CLI).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/zero/engine.h"

namespace zt {

// train --eval-every's state (meta.json "validation"): the validation data and batch count, the
// best validation loss so far and the step it was measured after (best_step < 0: no finite loss
// yet), and the evaluations since that best (--early-stop's patience counter).
struct ValidationState {
  std::string eval_data;
  int64_t eval_batches = 0;      // 0 in a checkpoint that does not record it
  double best_loss = 0;
  int64_t best_step = -1;
  int64_t evals_since_best = 0;  // 0 in a checkpoint that does not record it
  bool any() const { return best_step >= 0 || evals_since_best > 0; }  // something evaluated
};

// What the trainer records beside the engine's state (and compares on resume).
struct CheckpointRunInfo {
  ModelConfig model;
  std::vector<ParamSpec> params;            // the engine's model, Model::params()
  std::string data_spec;
  uint64_t seed = 0;
  int64_t train_batch_size = 0, micro_batch = 0, gradient_accumulation_steps = 0;
  std::string lr_schedule;                  // LrSchedule::name()
  std::string tag_validation = "WARN";      // checkpoint.tag_validation: WARN | IGNORE | FAIL
  bool allow_non_finite = false;            // load: NaN/Inf states pass (else InputError naming the tensor)
  // train --eval-every (meta.json "validation"; written once something was evaluated).
  ValidationState validation;
};

struct SavedCheckpoint {
  std::string path;                         // DIR/<tag>
  int64_t bytes_this_rank = 0;              // this rank's shard file
  int64_t bytes_total = 0;                  // all shards + meta.json (rank 0; 0 elsewhere)
  double seconds = 0;
};

// Collective. Saves DIR/<tag> and points DIR/latest at it (unless point_latest is false: train
// --keep-best's DIR/best); keep_last > 0 then removes all but the newest keep_last
// "global_step<N>" zerotrain checkpoints of DIR (never the one `latest` names).
SavedCheckpoint save_checkpoint(ZeroEngine& engine, Communicator& comm, Device& dev, const std::string& dir,
                                const std::string& tag, const CheckpointRunInfo& info, int keep_last = 0,
                                bool point_latest = true);

struct ResumedCheckpoint {
  std::string path, tag;
  ZeroEngine::Counters counters;
  uint64_t seed = 0;
  std::string data_spec;
  ValidationState validation;               // meta.json "validation" (validation.any() false: none)
  int64_t saved_world = 0, saved_stage = 0;
  std::vector<std::string> warnings;        // differences from the saved run (rank 0 prints them)
  std::string resharded;                    // "" or "saved at stage S on N ranks, loaded at ..."
  int64_t bytes_read_this_rank = 0;
  int64_t read_buffer_bytes = 0;            // the staging one state chunk passes through
  double seconds = 0;
};

// Collective. Loads DIR/<tag> (tag "" = the one DIR/latest names) into `engine`: optimizer
// states for this rank's plan, params = cast(master), counters, LR position and loss scaler.
ResumedCheckpoint load_checkpoint(ZeroEngine& engine, Communicator& comm, Device& dev, const std::string& dir,
                                  const std::string& tag, const CheckpointRunInfo& info);

// Collective: DIR can be created and written (rank 0 probes it); InputError on every rank if not.
void check_checkpoint_dir(Communicator& comm, Device& dev, const std::string& dir);

// ---- single process (consolidate) ----
// DIR[/TAG]: a checkpoint directory (holds meta.json) or a directory whose `latest` names one.
std::string resolve_checkpoint_path(const std::string& dir_or_tag_dir, const std::string& tag = "");
// meta.json, validated (InputError naming the file).
nlohmann::json read_checkpoint_meta(const std::string& tag_dir);
// A checkpoint's master weights, one parameter at a time (consolidate, zerotrain sample
// --resume). The constructor reads meta.json and verifies every shard's size and checksum
// (InputError naming the file); read() fills values[0..numel) of parameter `param` (forward
// order) as fp32, an InputError naming the tensor when one is NaN/Inf unless allow_non_finite.
class CheckpointWeights {
 public:
  // use: the verb of the refusal on a NaN/Inf weight ("refusing to <use> non-finite weights").
  CheckpointWeights(const std::string& tag_dir, bool allow_non_finite = false, const std::string& use = "export");
  ~CheckpointWeights();
  CheckpointWeights(const CheckpointWeights&) = delete;
  CheckpointWeights& operator=(const CheckpointWeights&) = delete;
  const std::vector<ParamSpec>& specs() const;  // names, shapes, numel as meta.json records them
  const ModelConfig& model() const;             // the model the checkpoint was saved from
  const std::vector<std::string>& warnings() const;  // e.g. an older meta.json without a checksum
  void read(int param, float* values) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Streams the master weights into one safetensors file (parameter order, `dtype`), one
// tensor in memory at a time, after verifying every shard's size and checksum. `out` ending in
// '/' or naming a directory: an HF-ready folder (model.safetensors, + config.json for a GPT).
// A NaN/Inf weight is an InputError naming the tensor unless allow_non_finite. Warnings (an
// older meta.json without a checksum) go to `warnings`.
void consolidate_checkpoint(const std::string& tag_dir, const std::string& out, DType dtype,
                            bool allow_non_finite = false, std::vector<std::string>* warnings = nullptr);

// A tag must be one path component: [A-Za-z0-9._-]+, not starting with '.', at most 200 chars.
bool valid_checkpoint_tag(const std::string& tag);
std::string default_checkpoint_tag(int64_t global_steps);  // "global_step<K>"

// Every rank passes its error ("" when fine). If any rank has one, every rank throws InputError;
// rank 0's is the first error in rank order. Collective (a host gather and a one-float all-reduce).
void agree_or_throw(Communicator& comm, Device& dev, const std::string& my_error);

}  // namespace zt
