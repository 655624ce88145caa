// train_eval.cpp — the trainer's validation loop (train_eval.h).
#include "train_eval.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "zerotrain/core/check.h"

namespace zt {

std::unique_ptr<Dataset> make_eval_data(const TrainArgs& args, DatasetShape shape) {
  if (args.eval_data.empty()) return nullptr;
  shape.holdout = true;
  try {
    return make_dataset(args.eval_data, shape);
  } catch (const InputError& e) {
    const std::string m = e.what();
    // The data layer names its spec as --data: this one is the validation data.
    throw InputError("train: " + (m.rfind("--data ", 0) == 0 ? "--eval-data " + m.substr(7) : "--eval-data: " + m));
  }
}

TrainEval::TrainEval(const TrainArgs& args, std::unique_ptr<Dataset> data, int64_t micro_batch, int gas,
                     const ValidationState* resumed)
    : data_(std::move(data)), spec_(args.eval_data), every_(args.eval_every), batches_(args.eval_batches),
      patience_(args.early_stop), micro_batch_(micro_batch), keep_best_(args.keep_best), gas_(gas) {
  ZT_CHECK(!data_ || every_ > 0, "validation data without --eval-every");
  if (!resumed) return;
  best_loss_ = resumed->best_step >= 0 ? resumed->best_loss : best_loss_;
  best_step_ = resumed->best_step;
  since_best_ = resumed->evals_since_best;
}

bool TrainEval::due(int64_t step, int64_t last_step) const {
  return enabled() && (step % every_ == 0 || step == last_step);
}

double TrainEval::evaluate(ZeroEngine& engine, Communicator& comm) {
  const int rank = comm.rank(), world = comm.world_size();
  Batch batch;
  double mine = 0;  // this rank's micro-batch losses, summed in batch order
  for (int64_t k = 0; k < batches_; ++k)
    for (int j = 0; j < gas_; ++j) {
      data_->fill(k, sample_range(rank, world, j, gas_, micro_batch_), micro_batch_, batch);
      mine += engine.eval_loss(batch);
    }
  // Every rank's sum on every rank, exactly: each rank puts its sum's bits in its own slot, the
  // others hold the smallest int64, and the element-wise maximum over ranks is the gather.
  std::vector<int64_t> slots(static_cast<size_t>(world), INT64_MIN);
  std::memcpy(&slots[static_cast<size_t>(rank)], &mine, sizeof(double));
  const std::vector<int64_t> all = comm.max_over_ranks(slots, "validation loss");
  double sum = 0;
  for (int64_t bits : all) {
    double v;
    std::memcpy(&v, &bits, sizeof(double));
    sum += v;
  }
  return sum / static_cast<double>(batches_ * gas_ * world);
}

TrainEval::Verdict TrainEval::record(double loss, int64_t step) {
  Verdict v;
  v.improved = std::isfinite(loss) && (best_step_ < 0 || loss < best_loss_);
  if (v.improved) {
    best_loss_ = loss;
    best_step_ = step;
    since_best_ = 0;
  } else {
    ++since_best_;
  }
  v.stop = patience_ > 0 && since_best_ >= patience_;
  return v;
}

bool TrainEval::conclude(double loss, int64_t step, TrainCheckpoints& ckpt,
                         const std::function<void(const std::string&)>& log) {
  const Verdict v = record(loss, step);
  ckpt.set_validation(ValidationState{spec_, batches_, best_loss_, best_step_, since_best_});
  if (v.improved && keep_best_) ckpt.save_best(step);
  if (v.stop) log(stop_reason() + "\n");
  return v.stop;
}

std::string TrainEval::stop_reason() const {
  char line[192];
  if (best_step_ < 0)
    std::snprintf(line, sizeof(line), "early stop: val loss has not improved for %lld evaluations (no finite val loss)",
                  static_cast<long long>(since_best_));
  else
    std::snprintf(line, sizeof(line), "early stop: val loss has not improved for %lld evaluations (best %.6f at step %lld)",
                  static_cast<long long>(since_best_), best_loss_, static_cast<long long>(best_step_));
  return line;
}

}  // namespace zt
