// quantize_math.h — block-wise symmetric quantisation, per element (ZT_HD: the CPU kernels and
// the CUDA kernels run this same arithmetic, so the CPU is the reference of the GPU bit for bit).
// Layout and contract: quantize_blockwise / dequantize_blockwise in op_list.h.
//
// Error bound: for a finite block with scale s = absmax / qmax, every element round-trips within
// s / 2 (round to nearest; |x / s| <= qmax, so the clamp never cuts), before the dequantised value is
// rounded into the destination dtype.
#pragma once
#include <cmath>
#include <cstdint>

#include "zerotrain/core/dtype.h"

namespace zt::quant {

ZT_HD int qmax(int bits) { return (1 << (bits - 1)) - 1; }  // 127 (int8), 7 (int4)

// Bytes of the quantised payload of n elements.
ZT_HD int64_t payload_bytes(int64_t n, int bits) { return bits == 8 ? n : (n + 1) / 2; }
ZT_HD int64_t num_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

// scale of a block from its largest |x| and whether every element is finite.
ZT_HD float block_scale(float absmax, bool finite, int bits) {
  if (!finite) return NAN;
  return absmax / static_cast<float>(qmax(bits));
}

// The quantised value of x in a block of scale s (0 when s is 0; NaN scales never reach here:
// their payload is written as 0 and dequantises to NaN through the scale).
ZT_HD int quantize(float x, float s, int bits) {
  if (!(s > 0.0f)) return 0;
  const float q = rintf(x / s);  // round half to even, as on the CPU
  const float m = static_cast<float>(qmax(bits));
  return static_cast<int>(fminf(fmaxf(q, -m), m));
}

ZT_HD uint8_t pack_int4(int lo, int hi) {
  return static_cast<uint8_t>((static_cast<unsigned>(lo) & 0xFu) | ((static_cast<unsigned>(hi) & 0xFu) << 4));
}
// Element i of a payload (sign-extended).
ZT_HD int load(const uint8_t* q, int64_t i, int bits) {
  if (bits == 8) return static_cast<int8_t>(q[i]);
  const unsigned nib = (q[i >> 1] >> ((i & 1) * 4)) & 0xFu;
  return static_cast<int>(nib ^ 8u) - 8;
}

}  // namespace zt::quant
