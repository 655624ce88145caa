// rope.cpp — the rotary table (zerotrain/model/rope.h).
#include "zerotrain/model/rope.h"

#include <cmath>
#include <sstream>
#include <string>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

// Llama 3's rescaling of one inverse frequency (rope.h).
double llama3_scaled(double f, const RopeScaling& s) {
  const double kTwoPi = 6.283185307179586476925286766559;
  const double wavelength = kTwoPi / f, L = s.original_max_position_embeddings;
  if (wavelength < L / s.high_freq_factor) return f;
  if (wavelength > L / s.low_freq_factor) return f / s.factor;
  const double smooth = (L / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

}  // namespace

std::vector<float> rope_table(double theta, int64_t hs, int64_t n_positions, const RopeScaling& scaling) {
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
  if (scaling.enabled() &&
      !(scaling.factor >= 1.0 && scaling.low_freq_factor > 0.0 && scaling.high_freq_factor > scaling.low_freq_factor &&
        scaling.original_max_position_embeddings > 0.0)) {
    throw InputError("rope_scaling (llama3) needs factor >= 1, 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings > 0");
  }
  const int64_t half = hs / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hs));
    if (scaling.enabled()) freq[i] = llama3_scaled(freq[i], scaling);
  }
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
