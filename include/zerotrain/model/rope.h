// rope.h — the rotary position embedding's cos/sin table (ops::rope_forward / rope_backward).
#pragma once
#include <cstdint>
#include <vector>

namespace zt {

// Llama 3's frequency scaling (Hugging Face rope_scaling {"rope_type": "llama3", "factor",
// "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}), for contexts
// beyond the one the model was pre-trained at. With L = original_max_position_embeddings and the
// wavelength w_i = 2π / f_i of each frequency: w_i < L / high_freq_factor keeps f_i;
// w_i > L / low_freq_factor divides it by factor; in between f_i becomes
// (1 − s)·f_i / factor + s·f_i with s = (L / w_i − low_freq_factor) / (high_freq_factor − low_freq_factor).
// factor == 0: no scaling (plain rotary positions).
struct RopeScaling {
  double factor = 0.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
  bool enabled() const { return factor != 0.0; }
};

// fp32 [n_positions, hs], row p = cos(p·f_0) .. cos(p·f_{hs/2-1}) | sin(p·f_0) .. sin(p·f_{hs/2-1})
// with f_i = theta^(−2i/hs) (Hugging Face's inv_freq), rescaled by `scaling` when enabled, each
// entry computed in double and rounded once. InputError unless theta is a finite number > 0
// (rope_theta), hs is even and > 0 (the head size) and n_positions >= 0; an enabled scaling must
// have factor >= 1, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0
// (the model file's parser says which key).
std::vector<float> rope_table(double theta, int64_t hs, int64_t n_positions, const RopeScaling& scaling = {});

}  // namespace zt
