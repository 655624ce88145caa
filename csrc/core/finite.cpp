// finite.cpp — non_finite_problem (finite.h).
#include "zerotrain/core/finite.h"

#include <cmath>

namespace zt {

std::string non_finite_problem(const std::string& what, const float* v, int64_t n, int64_t first_index) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(v[i])) continue;
    return what + " element " + std::to_string(first_index + i) + " is " + (std::isnan(v[i]) ? "NaN" : "infinite");
  }
  return "";
}

}  // namespace zt
