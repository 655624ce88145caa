// adam.cu — Adam/AdamW step on the CUDA backend; per element exactly math::adam_update
// (math.h), the same code the CPU backend runs.
//
// Master weights P and moments M (m and v share a dtype) are template parameters (fp32 | bf16);
// the gradient's dtype and the optional param_out's dtype are read at run time (a uniform
// branch) to keep the instantiations at four. param_out receives the rounded master weight.
// Memory-bound: one grid-stride pass, each element read and written once.
//
// adam_step_multi (the engine's step over its shard): the chunks are coalesced (contiguous
// neighbours merged: stages 0 and 3 give one chunk) and passed by value, up to kAdamMaxChunks
// per launch, in a __grid_constant__ table. The launch's work is the chunks' groups of 8
// elements laid end to end (group_begin: prefix sums of ceil(n/8)); a thread walks its groups
// in a grid-stride loop, advancing its chunk index monotonically. A full group of a chunk whose
// operands all start 16-byte aligned (bit k of `vec`) moves with 128-bit loads/stores; partial
// groups and unaligned chunks run element by element. Per element exactly adam_kernel's math.
#include "cuda_common.cuh"
#include "map_kernel.cuh"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/vector_path.h"

namespace zt::cuda_detail {
namespace {

template <typename P, typename M>
__global__ void adam_kernel(P* p, M* m, M* v, const void* g, DType g_type, void* out, DType out_type, int64_t n,
                            float grad_scale, math::AdamParams a) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float pi = to_f32(p[i]), mi = to_f32(m[i]), vi = to_f32(v[i]);
    math::adam_update(pi, mi, vi, ld_dyn(g, g_type, i) * grad_scale, a);
    P pr = from_f32<P>(pi);
    p[i] = pr;
    m[i] = from_f32<M>(mi);
    v[i] = from_f32<M>(vi);
    if (out) st_dyn(out, out_type, i, to_f32(pr));
  }
}

constexpr int kAdamMaxChunks = 48;  // the table is ~1.9 KB of kernel parameters (limit 4 KB)
struct AdamTable {
  int count = 0;
  uint64_t vec = 0;                          // bit k: chunk k's operands start 16-byte aligned
  int64_t group_begin[kAdamMaxChunks + 1];   // prefix sums of ceil(n / 8)
  int64_t p[kAdamMaxChunks], g[kAdamMaxChunks], o[kAdamMaxChunks], n[kAdamMaxChunks];
};

// 8 elements of a runtime-typed buffer (the gradient / param_out), 16-byte aligned.
__device__ __forceinline__ void load_group_dyn(float (&dst)[kMapChunk], const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::BF16: load_group_typed(dst, static_cast<const bf16*>(p) + i); break;
    case DType::F16: load_group_typed(dst, static_cast<const fp16*>(p) + i); break;
    default: load_group_typed(dst, static_cast<const float*>(p) + i); break;
  }
}
__device__ __forceinline__ void store_group_dyn(void* p, DType t, int64_t i, const float (&src)[kMapChunk]) {
  switch (t) {
    case DType::BF16: store_group_typed(static_cast<bf16*>(p) + i, src); break;
    case DType::F16: store_group_typed(static_cast<fp16*>(p) + i, src); break;
    default: store_group_typed(static_cast<float*>(p) + i, src); break;
  }
}

template <typename P, typename M>
__global__ void adam_multi_kernel(P* p, M* m, M* v, const void* g, DType g_type, void* out, DType out_type,
                                  const __grid_constant__ AdamTable t, float grad_scale, math::AdamParams a) {
  const int64_t total = t.group_begin[t.count];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int k = 0;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < total; q += stride) {
    while (q >= t.group_begin[k + 1]) ++k;
    const int64_t e0 = (q - t.group_begin[k]) * kMapChunk;
    const int64_t cnt = min(static_cast<int64_t>(kMapChunk), t.n[k] - e0);
    const int64_t ip = t.p[k] + e0, ig = t.g[k] + e0, io = t.o[k] + e0;
    if (cnt == kMapChunk && ((t.vec >> k) & 1u)) {
      float pv[kMapChunk], mv[kMapChunk], vv[kMapChunk], gv[kMapChunk], rounded[kMapChunk];
      load_group_typed(pv, p + ip);
      load_group_typed(mv, m + ip);
      load_group_typed(vv, v + ip);
      load_group_dyn(gv, g, g_type, ig);
#pragma unroll
      for (int j = 0; j < kMapChunk; ++j) {
        math::adam_update(pv[j], mv[j], vv[j], gv[j] * grad_scale, a);
        rounded[j] = to_f32(from_f32<P>(pv[j]));  // what p stores (exact in P)
      }
      store_group_typed(p + ip, rounded);
      store_group_typed(m + ip, mv);
      store_group_typed(v + ip, vv);
      if (out) store_group_dyn(out, out_type, io, rounded);
    } else {
      for (int64_t j = 0; j < cnt; ++j) {
        float pi = to_f32(p[ip + j]), mi = to_f32(m[ip + j]), vi = to_f32(v[ip + j]);
        math::adam_update(pi, mi, vi, ld_dyn(g, g_type, ig + j) * grad_scale, a);
        P pr = from_f32<P>(pi);
        p[ip + j] = pr;
        m[ip + j] = from_f32<M>(mi);
        v[ip + j] = from_f32<M>(vi);
        if (out) st_dyn(out, out_type, io + j, to_f32(pr));
      }
    }
  }
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace zt::cuda_detail;

namespace {
// Calls launch(P{}, M{}) for the master dtype p and the moments' dtype m (each fp32 or bf16).
template <typename Launch>
void with_adam_types(DType p, DType m, const Launch& launch) {
  if (p == DType::F32) {
    if (m == DType::F32) launch(float{}, float{}); else launch(float{}, bf16{});
  } else {
    if (m == DType::F32) launch(bf16{}, float{}); else launch(bf16{}, bf16{});
  }
}
}  // namespace

void adam_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
               float grad_scale, const math::AdamParams& a, const TensorView& param_out) {
  const int64_t n = p.numel();
  if (n == 0) return;
  const unsigned grid = grid_for(n, 256, 4);
  auto launch = [&](auto ptag, auto mtag) {
    using P = decltype(ptag);
    using M = decltype(mtag);
    adam_kernel<P, M><<<grid, 256, 0, native(s)>>>(static_cast<P*>(p.data), static_cast<M*>(m.data),
                                                   static_cast<M*>(v.data), g.data, g.dtype, param_out.data,
                                                   param_out.dtype, n, grad_scale, a);
    ZT_CUDA_LAUNCH_CHECK();
  };
  ZT_CHECK(p.dtype != DType::F16 && m.dtype != DType::F16, "adam_step: master and moments are fp32 or bf16");
  with_adam_types(p.dtype, m.dtype, launch);
}

void adam_step_multi(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
                     float grad_scale, const math::AdamParams& a, const TensorView& param_out,
                     const std::vector<AdamChunk>& chunks) {
  ZT_CHECK(p.dtype != DType::F16 && m.dtype != DType::F16, "adam_step_multi: master and moments are fp32 or bf16");
  const std::vector<AdamChunk> list = coalesce_adam_chunks(chunks);
  const size_t pb = dtype_size(p.dtype), mb = dtype_size(m.dtype), gb = dtype_size(g.dtype);
  const size_t ob = param_out.data ? dtype_size(param_out.dtype) : 1;
  auto at = [](const void* base, int64_t i, size_t eb) { return static_cast<const char*>(base) + i * static_cast<int64_t>(eb); };
  for (const ChunkLaunch& l : chunk_launches(static_cast<int64_t>(list.size()), kAdamMaxChunks)) {
    AdamTable t;
    t.count = l.count;
    t.group_begin[0] = 0;
    for (int k = 0; k < l.count; ++k) {
      const AdamChunk& c = list[static_cast<size_t>(l.first + k)];
      t.p[k] = c.p;
      t.g[k] = c.g;
      t.o[k] = c.out;
      t.n[k] = c.n;
      t.group_begin[k + 1] = t.group_begin[k] + (c.n + kMapChunk - 1) / kMapChunk;
      const bool aligned = aligned16(at(p.data, c.p, pb)) && aligned16(at(m.data, c.p, mb)) &&
                           aligned16(at(v.data, c.p, mb)) && aligned16(at(g.data, c.g, gb)) &&
                           (!param_out.data || aligned16(at(param_out.data, c.out, ob)));
      if (aligned) t.vec |= uint64_t(1) << k;
    }
    const int64_t groups = t.group_begin[l.count];
    if (groups == 0) continue;
    const unsigned grid = grid_for(groups, 256);
    auto launch = [&](auto ptag, auto mtag) {
      using P = decltype(ptag);
      using M = decltype(mtag);
      adam_multi_kernel<P, M><<<grid, 256, 0, native(s)>>>(static_cast<P*>(p.data), static_cast<M*>(m.data),
                                                           static_cast<M*>(v.data), g.data, g.dtype, param_out.data,
                                                           param_out.dtype, t, grad_scale, a);
      ZT_CUDA_LAUNCH_CHECK();
    };
    with_adam_types(p.dtype, m.dtype, launch);
  }
}

}  // namespace zt::cuda_ops
