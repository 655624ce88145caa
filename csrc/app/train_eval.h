// train_eval.h — `zerotrain train`'s validation: --eval-data SPEC --eval-every N [--eval-batches K],
// --keep-best and --early-stop P.
//
// An evaluation runs after every N-th step and after the last one: every rank evaluates its part
// of the K fixed global batches 0..K-1 of the validation data (each split across ranks and
// micro-steps exactly like a training batch, dataset.h's sample_range), one
// ZeroEngine::eval_loss per micro-batch. The ranks' sums meet in one host exchange and every
// rank adds them in rank order, so the validation loss — the mean over the K global batches of
// each batch's mean micro-batch loss, as the training loss is defined — is the same number on
// every rank, and so are the early-stop decisions made from it.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "train_checkpoint.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/data/dataset.h"

namespace zt {

// The --eval-data source (nullptr without it): `shape` is the training data's; a text:/tokens:
// spec with split=F reads the part after the first F of the file (DatasetShape::holdout).
// InputError naming --eval-data and the spec.
std::unique_ptr<Dataset> make_eval_data(const TrainArgs& args, DatasetShape shape);

class TrainEval {
 public:
  // data: the --eval-data source (nullptr without --eval-every).
  // resumed: the validation state a resumed checkpoint carries (nullptr: start afresh).
  TrainEval(const TrainArgs& args, std::unique_ptr<Dataset> data, int64_t micro_batch, int gas,
            const ValidationState* resumed = nullptr);
  bool enabled() const { return data_ != nullptr; }
  // After global step `step`: whether this run evaluates now (every N-th step and the last one).
  bool due(int64_t step, int64_t last_step) const;
  // Collective: the validation loss under the engine's current parameters.
  double evaluate(ZeroEngine& engine, Communicator& comm);

  // The outcome of recording an evaluation's loss after step `step`.
  struct Verdict {
    bool improved = false;  // lower than every earlier validation loss of this run
    bool stop = false;      // --early-stop: this many evaluations in a row did not improve
  };
  Verdict record(double loss, int64_t step);
  // Every rank, after the evaluated step's progress line: record(); the state (best, patience
  // count) is recorded in later checkpoints' meta.json, and an improvement, with --keep-best, is
  // saved as DIR/best.
  // Returns true, after rank 0 printed stop_reason(), when --early-stop ends training here.
  bool conclude(double loss, int64_t step, TrainCheckpoints& ckpt, const std::function<void(const std::string&)>& log);
  double best_loss() const { return best_loss_; }
  int64_t best_step() const { return best_step_; }
  // "early stop: val loss has not improved for P evaluations (best X at step S)"
  std::string stop_reason() const;

 private:
  std::unique_ptr<Dataset> data_;
  std::string spec_;
  int64_t every_ = 0, batches_ = 0, patience_ = 0, micro_batch_ = 1;
  bool keep_best_ = false;
  int gas_ = 1;
  double best_loss_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_step_ = -1;
  int64_t since_best_ = 0;  // evaluations since the best one
};

}  // namespace zt
