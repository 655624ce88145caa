// tune_confirm.h — `zerotrain tune --confirm K`: the top K candidates run for real on this machine
// (CPU backend: `mpirun -np N zerotrain train`, short runs in interleaved rounds so load drifts hit
// every candidate alike), and their measured step times printed beside the predicted ones.
#pragma once
#include <cstdint>
#include <vector>

#include "tune.h"

namespace zt {

struct ConfirmOptions {
  int64_t count = 0;    // candidates to run (0: none)
  int64_t steps = 12;   // optimizer steps per run; the first kWarmupSteps are not timed
  int64_t rounds = 3;   // each candidate runs once per round, candidates in turn
};

constexpr int64_t kConfirmWarmupSteps = 2;

// Median of `v` (v not empty).
double median_of(std::vector<double> v);
// Spearman's rank correlation of two equally long series (no ties assumed; 1 for n < 2).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

// Runs the first min(K, fitting) outcomes of `ranked` and prints the comparison. Returns 0, or 1
// when a run failed (its log is named).
int confirm_top(const TuneInputs& in, const std::vector<TuneOutcome>& ranked, const ConfirmOptions& opt);

}  // namespace zt
