// quantize_ops.cpp — quantize_blockwise / dequantize_blockwise (ZT_ENGINE_OP in kernels/op_list.h):
// the CPU kernels, then the validated entry points. Per-element math: kernels/quantize_math.h.
//
// The quantiser runs in two passes so that no two threads write one byte: block scales in
// parallel over blocks, then the payload in parallel over bytes (with 4 bits and an odd block
// size, one byte holds elements of two blocks).
#include <cmath>
#include <string>

#include "zerotrain/kernels/dispatch.h"
#include "zerotrain/kernels/quantize_math.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt::cpu_ops {

namespace {
template <typename T>
void quantize_typed(uint8_t* q, float* scales, const T* x, int64_t n, int64_t block, int bits) {
  const int64_t nb = quant::num_blocks(n, block);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t b = 0; b < nb; ++b) {
    float absmax = 0.0f;
    bool finite = true;
    for (int64_t i = b * block, e = std::min(n, i + block); i < e; ++i) {
      const float v = to_f32(x[i]);
      finite = finite && std::isfinite(v);
      absmax = std::fmax(absmax, std::fabs(v));
    }
    scales[b] = quant::block_scale(absmax, finite, bits);
  }
  const int64_t bytes = quant::payload_bytes(n, bits);
  const int per = bits == 8 ? 1 : 2;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t j = 0; j < bytes; ++j) {
    int v[2] = {0, 0};
    for (int k = 0; k < per && j * per + k < n; ++k) {
      const int64_t i = j * per + k;
      v[k] = quant::quantize(to_f32(x[i]), scales[i / block], bits);
    }
    q[j] = bits == 8 ? static_cast<uint8_t>(static_cast<int8_t>(v[0])) : quant::pack_int4(v[0], v[1]);
  }
}

template <typename T>
void dequantize_typed(T* x, const uint8_t* q, const float* scales, int64_t n, int64_t block, int bits,
                      bool accumulate) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const float d = static_cast<float>(quant::load(q, i, bits)) * scales[i / block];
    x[i] = from_f32<T>(accumulate ? to_f32(x[i]) + d : d);
  }
}
}  // namespace

void quantize_blockwise(uint8_t* q, float* scales, const TensorView& x, int64_t block, int bits) {
  switch (x.dtype) {
    case DType::F32: quantize_typed(q, scales, static_cast<const float*>(x.data), x.numel(), block, bits); break;
    case DType::BF16: quantize_typed(q, scales, static_cast<const bf16*>(x.data), x.numel(), block, bits); break;
    case DType::F16: quantize_typed(q, scales, static_cast<const fp16*>(x.data), x.numel(), block, bits); break;
  }
}

void dequantize_blockwise(const TensorView& x, const uint8_t* q, const float* scales, int64_t block, int bits,
                          bool accumulate) {
  const int64_t n = x.numel();
  switch (x.dtype) {
    case DType::F32: dequantize_typed(static_cast<float*>(x.data), q, scales, n, block, bits, accumulate); break;
    case DType::BF16: dequantize_typed(static_cast<bf16*>(x.data), q, scales, n, block, bits, accumulate); break;
    case DType::F16: dequantize_typed(static_cast<fp16*>(x.data), q, scales, n, block, bits, accumulate); break;
  }
}

}  // namespace zt::cpu_ops

namespace zt::zero_ops {

namespace {
void check_quantized(const Stream& s, const char* op, const TensorView& x, const void* q, const void* scales,
                     int64_t block, int bits) {
  const std::string w = std::string("zero_ops::") + op + ": ";
  ZT_CHECK(bits == 4 || bits == 8, w + "bits is " + std::to_string(bits) + ", expected 4 or 8");
  ZT_CHECK(block >= 1, w + "block is " + std::to_string(block) + ", expected >= 1");
  ZT_CHECK(x.device == s.kind(), w + "x is on " + device_kind_name(x.device) + " but the stream is " +
                                     device_kind_name(s.kind()));
  ZT_CHECK(x.numel() == 0 || (x.data != nullptr && q != nullptr && scales != nullptr),
           w + "x, q and scales need storage for " + std::to_string(x.numel()) + " elements");
}
}  // namespace

void quantize_blockwise(Stream& s, uint8_t* q, float* scales, const TensorView& x, int64_t block, int bits) {
  check_quantized(s, "quantize_blockwise", x, q, scales, block, bits);
  if (x.numel() == 0) return;
  dispatch::quantize_blockwise(s, q, scales, x, block, bits);
}

void dequantize_blockwise(Stream& s, const TensorView& x, const uint8_t* q, const float* scales, int64_t block,
                          int bits, bool accumulate) {
  check_quantized(s, "dequantize_blockwise", x, q, scales, block, bits);
  if (x.numel() == 0) return;
  dispatch::dequantize_blockwise(s, x, q, scales, block, bits, accumulate);
}

}  // namespace zt::zero_ops
