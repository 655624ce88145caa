// quantize.cu — CUDA launchers of quantize_blockwise / dequantize_blockwise (ZT_ENGINE_OP in
// op_list.h; CPU kernels and entry points in csrc/zero/quantize_ops.cpp). The same two passes as
// the CPU (block scales, then the payload byte by byte) over the same per-element math
// (quantize_math.h), so results equal the CPU's bit for bit.
#include "zerotrain/core/check_cuda.h"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/quantize_math.h"

namespace zt::cuda_ops {

namespace {
constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float elem(const void* x, int64_t i) {
  return to_f32(static_cast<const T*>(x)[i]);
}
__device__ __forceinline__ float load_any(const void* x, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(x)[i];
    case DType::BF16: return elem<bf16>(x, i);
    default: return elem<fp16>(x, i);
  }
}

// One CUDA block per quantisation block: absmax and finiteness by a shared-memory tree reduction.
__global__ void block_scales_kernel(float* scales, const void* x, DType t, int64_t n, int64_t block, int bits) {
  __shared__ float s_max[kThreads];
  __shared__ int s_finite[kThreads];
  const int64_t b = blockIdx.x;  // this CUDA block's quantisation block
  float m = 0.0f;
  int finite = 1;
  for (int64_t i = b * block + threadIdx.x, e = min(n, (b + 1) * block); i < e; i += blockDim.x) {
    const float v = load_any(x, t, i);
    finite &= isfinite(v) ? 1 : 0;
    m = fmaxf(m, fabsf(v));
  }
  s_max[threadIdx.x] = m;
  s_finite[threadIdx.x] = finite;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      s_max[threadIdx.x] = fmaxf(s_max[threadIdx.x], s_max[threadIdx.x + w]);
      s_finite[threadIdx.x] &= s_finite[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) scales[b] = quant::block_scale(s_max[0], s_finite[0] != 0, bits);
}

__global__ void pack_kernel(uint8_t* q, const float* scales, const void* x, DType t, int64_t n, int64_t block,
                            int bits) {
  const int per = bits == 8 ? 1 : 2;
  const int64_t bytes = quant::payload_bytes(n, bits);
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < bytes; j += (int64_t)gridDim.x * blockDim.x) {
    int v[2] = {0, 0};
    for (int k = 0; k < per && j * per + k < n; ++k) {
      const int64_t i = j * per + k;
      v[k] = quant::quantize(load_any(x, t, i), scales[i / block], bits);
    }
    q[j] = bits == 8 ? static_cast<uint8_t>(static_cast<int8_t>(v[0])) : quant::pack_int4(v[0], v[1]);
  }
}

__global__ void dequantize_kernel(void* x, DType t, const uint8_t* q, const float* scales, int64_t n, int64_t block,
                                  int bits, bool accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float d = static_cast<float>(quant::load(q, i, bits)) * scales[i / block];
    switch (t) {
      case DType::F32: {
        float* p = static_cast<float*>(x) + i;
        *p = accumulate ? *p + d : d;
        break;
      }
      case DType::BF16: {
        bf16* p = static_cast<bf16*>(x) + i;
        *p = from_f32<bf16>(accumulate ? to_f32(*p) + d : d);
        break;
      }
      default: {
        fp16* p = static_cast<fp16*>(x) + i;
        *p = from_f32<fp16>(accumulate ? to_f32(*p) + d : d);
        break;
      }
    }
  }
}

int grid_for_items(int64_t n) { return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096)); }
}  // namespace

void quantize_blockwise(Stream& s, uint8_t* q, float* scales, const TensorView& x, int64_t block, int bits) {
  const int64_t n = x.numel();
  const auto stream = static_cast<cudaStream_t>(s.native_handle());
  const int64_t nb = quant::num_blocks(n, block);  // gridDim.x allows 2^31 − 1 blocks
  block_scales_kernel<<<static_cast<unsigned>(nb), kThreads, 0, stream>>>(scales, x.data, x.dtype, n, block, bits);
  ZT_CUDA_CHECK(cudaGetLastError());
  pack_kernel<<<grid_for_items(quant::payload_bytes(n, bits)), kThreads, 0, stream>>>(q, scales, x.data, x.dtype, n,
                                                                                     block, bits);
  ZT_CUDA_CHECK(cudaGetLastError());
}

void dequantize_blockwise(Stream& s, const TensorView& x, const uint8_t* q, const float* scales, int64_t block,
                          int bits, bool accumulate) {
  const int64_t n = x.numel();
  dequantize_kernel<<<grid_for_items(n), kThreads, 0, static_cast<cudaStream_t>(s.native_handle())>>>(
      x.data, x.dtype, q, scales, n, block, bits, accumulate);
  ZT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zt::cuda_ops
