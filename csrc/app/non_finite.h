// non_finite.h — how `zerotrain train` ends when training goes non-finite (docs/optim.md
// "Non-finite steps"). Every rank sees the same StepStats (the loss and the gradient norm are
// agreed), so every rank reaches the same verdict at the same step.
#pragma once
#include <cstdint>
#include <string>

#include "zerotrain/zero/engine.h"

namespace zt {

class NonFiniteWatch {
 public:
  // max_in_a_row: --max-skipped-steps (0: never stop early); skipping: EngineOptions::check_overflow.
  NonFiniteWatch(int64_t max_in_a_row, bool skipping) : max_in_a_row_(max_in_a_row), skipping_(skipping) {}
  // After every step: "" to go on, else why the run stops now (the last max_in_a_row steps all
  // had a non-finite gradient norm or loss).
  std::string after_step(const StepStats& st);
  // After the last step: "" when its loss is finite, else why the run failed.
  std::string after_last_step(const StepStats& st) const;

 private:
  int64_t max_in_a_row_;
  bool skipping_;
  int64_t in_a_row_ = 0;
};

}  // namespace zt
