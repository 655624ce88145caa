// rope.cpp — the rotary table (zerotrain/model/rope.h).
#include "zerotrain/model/rope.h"

#include <cmath>
#include <sstream>
#include <string>

#include "zerotrain/core/check.h"

namespace zt {

std::vector<float> rope_table(double theta, int64_t hs, int64_t n_positions) {
  if (!(std::isfinite(theta) && theta > 0.0)) {
    std::ostringstream msg;
    msg << "rope_theta must be a finite number > 0, got " << theta;
    throw InputError(msg.str());
  }
  if (hs <= 0 || hs % 2 != 0) {
    throw InputError("rotary head size (head_dim) must be even and > 0, got " + std::to_string(hs));
  }
  if (n_positions < 0) {
    throw InputError("rotary table positions (max_position_embeddings) must be >= 0, got " +
                     std::to_string(n_positions));
  }
  const int64_t half = hs / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hs));
  std::vector<float> table(static_cast<size_t>(n_positions * hs));
  for (int64_t p = 0; p < n_positions; ++p) {
    float* row = table.data() + p * hs;
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(p) * freq[i];
      row[i] = static_cast<float>(std::cos(a));
      row[half + i] = static_cast<float>(std::sin(a));
    }
  }
  return table;
}

}  // namespace zt
