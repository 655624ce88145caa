// non_finite.cpp — the verdicts of NonFiniteWatch (non_finite.h).
#include "non_finite.h"

#include <cmath>
#include <cstdio>

namespace zt {

std::string NonFiniteWatch::after_step(const StepStats& st) {
  // A skipped step always has a non-finite gradient norm; an applied one counts when it is
  // non-finite too (bf16 with check_grad_overflow false), so a run of NaN never goes unnoticed.
  in_a_row_ = (st.skipped || st.non_finite) ? in_a_row_ + 1 : 0;
  if (max_in_a_row_ <= 0 || in_a_row_ < max_in_a_row_) return "";
  char m[512];
  if (skipping_)
    std::snprintf(m, sizeof(m),
                  "the last %lld steps were all skipped (gradient overflow: NaN/Inf; %lld skipped in all); stopping "
                  "(--max-skipped-steps %lld). Check the initial weights and lower the learning rate",
                  static_cast<long long>(in_a_row_), static_cast<long long>(st.skipped_steps),
                  static_cast<long long>(max_in_a_row_));
  else
    std::snprintf(m, sizeof(m),
                  "the last %lld steps all had a non-finite loss or gradient norm (NaN/Inf), applied to the weights "
                  "because bf16.check_grad_overflow is false; stopping (--max-skipped-steps %lld). Lower the "
                  "learning rate, or leave check_grad_overflow on so such steps are skipped",
                  static_cast<long long>(in_a_row_), static_cast<long long>(max_in_a_row_));
  return m;
}

std::string NonFiniteWatch::after_last_step(const StepStats& st) const {
  if (std::isfinite(st.loss)) return "";
  char m[512];
  std::snprintf(m, sizeof(m),
                "the final loss is %s (step %lld; %lld step(s) skipped for non-finite gradients): training diverged, "
                "so no final checkpoint or weights were written. Lower the learning rate, or resume from an earlier "
                "checkpoint",
                std::isnan(st.loss) ? "NaN" : st.loss > 0 ? "+Inf" : "-Inf", static_cast<long long>(st.step),
                static_cast<long long>(st.skipped_steps));
  return m;
}

}  // namespace zt
