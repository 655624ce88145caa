// attention.cu — causal self-attention (GPT-2 layout) on the CUDA backend, first version:
// cuBLAS strided-batched GEMMs over the heads of one batch row + warp-per-row causal softmax.
//
// Layout: qkv[B,T,3C] (q | k | v), head h owns channels [h*hs, (h+1)*hs) of each, hs = C/H, so
// for a fixed b the heads of q are H matrices [T,hs] with row stride 3C and head stride hs —
// exactly a strided batch. att[B,H,T,T] (fp32) holds the probabilities, zero above the diagonal.
//
// 16-bit inputs: cuBLAS cannot mix an fp32 operand with a 16-bit one, so the probabilities
// (forward, dV) and the score gradients (dQ, dK) are rounded to the compute dtype into the
// stream's scratch ([H,T,T], one batch row at a time) before the GEMMs that consume them.
// The fp32 att / datt tensors keep the unrounded values.
#include "cuda_common.cuh"
#include "map_kernel.cuh"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::cuda_detail {
namespace {

constexpr int kWarpsPerBlock = 8;

// rows = H*T rows of `att` (one batch row); row r is query t = r % T. Scores are already
// scaled. Writes softmax over keys 0..t and zeros after; p16 (optional) gets a rounded copy.
template <typename T>
__global__ void causal_softmax_kernel(float* att, T* p16, int64_t rows, int64_t T_) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const int64_t t = r % T_;
  float* row = att + r * T_;
  float maxv = -INFINITY;
  for (int64_t j = lane; j <= t; j += 32) maxv = fmaxf(maxv, row[j]);
  maxv = warp_max(maxv);
  float sum = 0.0f;
  for (int64_t j = lane; j <= t; j += 32) sum += expf(row[j] - maxv);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t j = lane; j < T_; j += 32) {
    float p = j <= t ? expf(row[j] - maxv) * inv : 0.0f;
    row[j] = p;
    if (p16) p16[r * T_ + j] = from_f32<T>(p);
  }
}

// In place on datt (= dP on entry): dS = scale * P * (dP - sum_k P dP) on keys 0..t, 0 after.
template <typename T>
__global__ void causal_softmax_backward_kernel(float* datt, T* ds16, const float* att, float scale, int64_t rows,
                                               int64_t T_) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const int64_t t = r % T_;
  float* drow = datt + r * T_;
  const float* prow = att + r * T_;
  float pdp = 0.0f;
  for (int64_t j = lane; j <= t; j += 32) pdp += prow[j] * drow[j];
  pdp = warp_sum(pdp);
  for (int64_t j = lane; j < T_; j += 32) {
    float ds = j <= t ? prow[j] * (drow[j] - pdp) * scale : 0.0f;
    drow[j] = ds;
    if (ds16) ds16[r * T_ + j] = from_f32<T>(ds);
  }
}

struct IdentityOp {
  __device__ float operator()(int64_t, float x, float, float) const { return x; }
};

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

template <typename T>
void attention_forward_typed(Stream& s, T* out, float* att, const T* qkv, int64_t B, int64_t T_, int64_t C,
                             int64_t H) {
  const int64_t hs = C / H, TT = T_ * T_;
  const DType dt = dtype_of<T>::value;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const bool narrow = dt != DType::F32;
  T* p16 = narrow ? static_cast<T*>(scratch(s, static_cast<size_t>(H * TT) * sizeof(T))) : nullptr;
  for (int64_t b = 0; b < B; ++b) {
    const T* q = qkv + b * T_ * 3 * C;
    float* att_b = att + b * H * TT;
    // scores[h] = sc * q[h] k[h]^T : [T,T]
    gemm_rowmajor(s, false, true, T_, T_, hs, sc, q, 3 * C, hs, q + C, 3 * C, hs, dt, 0.0f, att_b, T_, TT,
                  DType::F32, H);
    causal_softmax_kernel<T><<<row_blocks(H * T_), kWarpsPerBlock * 32, 0, native(s)>>>(att_b, p16, H * T_, T_);
    ZT_CUDA_LAUNCH_CHECK();
    // out[b, :, h*hs:(h+1)*hs] = P[h] v[h] : [T,hs]
    const void* P = narrow ? static_cast<const void*>(p16) : static_cast<const void*>(att_b);
    gemm_rowmajor(s, false, false, T_, hs, T_, 1.0f, P, T_, TT, q + 2 * C, 3 * C, hs, dt, 0.0f, out + b * T_ * C, C,
                  hs, dt, H);
  }
}

template <typename T>
void attention_backward_typed(Stream& s, T* dqkv, float* datt, const T* dout, const T* qkv, const float* att,
                              int64_t B, int64_t T_, int64_t C, int64_t H) {
  const int64_t hs = C / H, TT = T_ * T_;
  const DType dt = dtype_of<T>::value;
  const float sc = math::attention_scale(static_cast<int>(hs));
  const bool narrow = dt != DType::F32;
  // Holds P rounded (for dV), then dS rounded (for dQ, dK); stream order separates the uses.
  T* x16 = narrow ? static_cast<T*>(scratch(s, static_cast<size_t>(H * TT) * sizeof(T))) : nullptr;
  for (int64_t b = 0; b < B; ++b) {
    const T* q = qkv + b * T_ * 3 * C;
    const T* k = q + C;
    const T* v = q + 2 * C;
    T* dq = dqkv + b * T_ * 3 * C;
    T* dk = dq + C;
    T* dv = dq + 2 * C;
    const T* dy = dout + b * T_ * C;
    const float* att_b = att + b * H * TT;
    float* datt_b = datt + b * H * TT;
    // dP[h] = dout[h] v[h]^T : [T,T]
    gemm_rowmajor(s, false, true, T_, T_, hs, 1.0f, dy, C, hs, v, 3 * C, hs, dt, 0.0f, datt_b, T_, TT, DType::F32, H);
    // dv[h] += P[h]^T dout[h] : [T,hs]
    const void* P = att_b;
    if (narrow) {
      launch_map<float, T, 1>(s, H * TT, x16, att_b, nullptr, nullptr, IdentityOp{});
      P = x16;
    }
    gemm_rowmajor(s, true, false, T_, hs, T_, 1.0f, P, T_, TT, dy, C, hs, dt, 1.0f, dv, 3 * C, hs, dt, H);
    causal_softmax_backward_kernel<T><<<row_blocks(H * T_), kWarpsPerBlock * 32, 0, native(s)>>>(
        datt_b, x16, att_b, sc, H * T_, T_);
    ZT_CUDA_LAUNCH_CHECK();
    const void* dS = narrow ? static_cast<const void*>(x16) : static_cast<const void*>(datt_b);
    // dq[h] += dS[h] k[h] ; dk[h] += dS[h]^T q[h] : [T,hs]
    gemm_rowmajor(s, false, false, T_, hs, T_, 1.0f, dS, T_, TT, k, 3 * C, hs, dt, 1.0f, dq, 3 * C, hs, dt, H);
    gemm_rowmajor(s, true, false, T_, hs, T_, 1.0f, dS, T_, TT, q, 3 * C, hs, dt, 1.0f, dk, 3 * C, hs, dt, H);
  }
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

void attention_forward(Stream& s, const TensorView& out, const TensorView& att, const TensorView& qkv, int64_t B,
                       int64_t T, int64_t C, int64_t H) {
  if (B == 0 || T == 0 || C == 0) return;
  ZT_DISPATCH_DTYPE(out.dtype, X,
                    attention_forward_typed<X>(s, static_cast<X*>(out.data), static_cast<float*>(att.data),
                                               static_cast<const X*>(qkv.data), B, T, C, H));
}

void attention_backward(Stream& s, const TensorView& dqkv, const TensorView& datt_scratch, const TensorView& dout,
                        const TensorView& qkv, const TensorView& att, int64_t B, int64_t T, int64_t C, int64_t H) {
  if (B == 0 || T == 0 || C == 0) return;
  ZT_DISPATCH_DTYPE(dqkv.dtype, X,
                    attention_backward_typed<X>(s, static_cast<X*>(dqkv.data), static_cast<float*>(datt_scratch.data),
                                                static_cast<const X*>(dout.data), static_cast<const X*>(qkv.data),
                                                static_cast<const float*>(att.data), B, T, C, H));
}

}  // namespace zt::cuda_ops
