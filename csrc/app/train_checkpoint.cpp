// train_checkpoint.cpp — the trainer's checkpoint flags (train_checkpoint.h).
#include "train_checkpoint.h"

#include <sys/stat.h>

#include <cstdio>

#include "rank_agreement.h"
#include "stop_signals.h"
#include "zerotrain/ckpt/ckpt_fs.h"

namespace zt {

namespace {
std::string mib(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  return s;
}

// Same directory, however it is spelled.
bool same_dir(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
}  // namespace

TrainCheckpoints::TrainCheckpoints(const TrainArgs& args, const ModelConfig& model_cfg, const DsConfig& cfg,
                                   const Model& model, ZeroEngine& engine, Communicator& comm, Device& dev, Log log)
    : args_(args), engine_(engine), comm_(comm), dev_(dev), log_(std::move(log)) {
  info_.model = model_cfg;
  info_.params = model.params();
  info_.data_spec = args.data;
  info_.seed = args.seed;
  info_.train_batch_size = cfg.train_batch_size;
  info_.micro_batch = cfg.train_micro_batch_size_per_gpu;
  info_.gradient_accumulation_steps = cfg.gradient_accumulation_steps;
  info_.lr_schedule = schedule_from(cfg, engine.options().optimizer)->name();
  info_.tag_validation = cfg.checkpoint_tag_validation;
  info_.allow_non_finite = args.allow_non_finite;
}

// The ckpt layer agrees on every error (each rank throws); agreed() turns that into one message
// from the lowest failing rank and the same exit code on every rank (rank_agreement.h).
void TrainCheckpoints::agreed(const std::function<void()>& step) {
  run_agreed([this](const std::vector<int64_t>& v) { return comm_.max_over_ranks(v, "checkpoint verdict"); }, comm_.rank(),
             comm_.world_size(), "zerotrain train", step);
}

void TrainCheckpoints::check_save_dir() {
  if (!args_.save_checkpoint.empty()) agreed([&] { check_checkpoint_dir(comm_, dev_, args_.save_checkpoint); });
}

int64_t TrainCheckpoints::resume(uint64_t* seed) {
  if (args_.resume.empty()) return 0;
  ResumedCheckpoint r;
  agreed([&] { r = load_checkpoint(engine_, comm_, dev_, args_.resume, args_.tag, info_); });
  if (!args_.seed_given) *seed = r.seed;
  else if (r.seed != args_.seed)
    r.warnings.push_back("--seed " + std::to_string(args_.seed) + " differs from the checkpoint's " +
                         std::to_string(r.seed) + ": the data continues with the new seed");
  info_.seed = *seed;
  carried_ = carry_validation(r.validation, &r.warnings);
  if (comm_.rank() == 0)
    for (const std::string& w : r.warnings) std::fprintf(stderr, "warning: resume: %s\n", w.c_str());
  const ZeroEngine::Counters& c = r.counters;
  char line[512];
  std::snprintf(line, sizeof(line),
                "resumed from %s: step %lld (%lld skipped), lr %.3e, loss scale %g; rank 0 read %s through a %s (%lld B) "
                "buffer in %.2f s\n",
                r.path.c_str(), static_cast<long long>(c.global_steps),
                static_cast<long long>(c.global_steps - c.successful_steps), engine_.current_lr(),
                c.loss_scaler.cur_scale, mib(r.bytes_read_this_rank).c_str(), mib(r.read_buffer_bytes).c_str(),
                static_cast<long long>(r.read_buffer_bytes), r.seconds);
  log_(line);
  if (!r.resharded.empty()) log_("resharded: " + r.resharded + "\n");
  if (carried_) {
    const ValidationState& v = info_.validation;
    std::snprintf(line, sizeof(line), "validation: continues from the checkpoint: best val loss %.6f at step %lld, "
                  "%lld evaluation(s) since\n", v.best_loss, static_cast<long long>(v.best_step),
                  static_cast<long long>(v.evals_since_best));
    log_(v.best_step >= 0 ? line : "validation: continues from the checkpoint: no finite val loss yet, " +
                                       std::to_string(v.evals_since_best) + " evaluation(s)\n");
  }
  if (!args_.save_checkpoint.empty() && same_dir(ckptfs::join(args_.save_checkpoint, r.tag), r.path)) {
    saved_step_ = c.global_steps;
    saved_path_ = r.path;
  }
  return c.global_steps;
}

void TrainCheckpoints::save(int64_t step) {
  SavedCheckpoint s;
  agreed([&] {
    s = save_checkpoint(engine_, comm_, dev_, args_.save_checkpoint, default_checkpoint_tag(step), info_,
                        static_cast<int>(args_.keep_last));
  });
  saved_step_ = step;
  saved_path_ = s.path;
  report(s);
}

void TrainCheckpoints::report(const SavedCheckpoint& s) {
  log_("saved checkpoint " + s.path + ": " + mib(s.bytes_this_rank) + " on rank 0, " + mib(s.bytes_total) +
       " in all, " + std::to_string(s.seconds).substr(0, 5) + " s\n");
}

void TrainCheckpoints::set_validation(const ValidationState& v) { info_.validation = v; }

// The best loss and the patience count mean something only on the same validation batches.
bool TrainCheckpoints::carry_validation(const ValidationState& v, std::vector<std::string>* warnings) {
  if (!v.any() || args_.eval_data.empty()) return false;
  if (v.eval_data != args_.eval_data || (v.eval_batches != 0 && v.eval_batches != args_.eval_batches)) {
    warnings->push_back("the checkpoint's validation state was measured on --eval-data '" + v.eval_data + "' (" +
                        (v.eval_batches ? std::to_string(v.eval_batches) : std::string("?")) + " batches), this run "
                        "evaluates '" + args_.eval_data + "' (" + std::to_string(args_.eval_batches) +
                        " batches): the best val loss and --early-stop's count start afresh");
    return false;
  }
  info_.validation = v;
  info_.validation.eval_batches = args_.eval_batches;
  return true;
}

void TrainCheckpoints::save_best(int64_t step) {
  SavedCheckpoint s;
  agreed([&] {
    s = save_checkpoint(engine_, comm_, dev_, args_.save_checkpoint, "best", info_, 0, /*point_latest=*/false);
  });
  log_("best val loss so far (step " + std::to_string(step) + "): ");
  report(s);
}

void TrainCheckpoints::after_step(int64_t step) {
  if (args_.save_checkpoint.empty() || args_.save_every <= 0 || step % args_.save_every != 0) return;
  save(step);
}

void TrainCheckpoints::at_end(int64_t step) {
  if (args_.save_checkpoint.empty() || saved_step_ == step) return;
  save(step);
}

void TrainCheckpoints::stop(int64_t step, int signal) {
  at_end(step);
  if (comm_.rank() == 0) {
    const std::string where =
        args_.save_checkpoint.empty() ? "no checkpoint: --save-checkpoint not set" : "checkpoint at " + saved_path_;
    std::fprintf(stderr, "zerotrain train: stopped by signal %s at step %lld, %s (exit %d)\n", stop_signal_name(signal),
                 static_cast<long long>(step), where.c_str(), kExitStopped);
    std::fflush(stderr);
  }
  throw AgreedFailure(kExitStopped);
}

}  // namespace zt
