// rope.h — the rotary position embedding's cos/sin table (ops::rope_forward / rope_backward).
#pragma once
#include <cstdint>
#include <vector>

namespace zt {

// fp32 [n_positions, hs], row p = cos(p·f_0) .. cos(p·f_{hs/2-1}) | sin(p·f_0) .. sin(p·f_{hs/2-1})
// with f_i = theta^(−2i/hs) (Hugging Face's inv_freq), each entry computed in double and rounded
// once. InputError unless theta is a finite number > 0 (rope_theta), hs is even and > 0 (the
// head size) and n_positions >= 0.
std::vector<float> rope_table(double theta, int64_t hs, int64_t n_positions);

}  // namespace zt
