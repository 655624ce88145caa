// linear_plan.h — how the CUDA backend runs the fused linear ops (op_list.h: linear_forward,
// linear_backward): the column-major cuBLAS(Lt) description of each of their GEMMs, and the pure
// host choice between a cuBLASLt epilogue and the unfused fallback (cublasGemmEx + our bias /
// GELU kernels). Host code only, so the CPU CI tests every rule (tests/kernels/test_linear.cpp);
// csrc/kernels/cuda/linear.cu follows the choice.
//
// Row-major → column-major (as csrc/kernels/cuda/gemm.cu): a row-major X[r,c] is the column-major Xᵀ
// (c×r, ld c). With inp[N,IC], W [IC,OC] (or [OC,IC] when trans_w), out[N,OC]:
//   forward  D = outᵀ  (OC×N,  ld OC) = op(W)·inpᵀ;      m=OC, n=N,  k=IC. Bias (length m = OC)
//            is CUBLASLT_EPILOGUE_BIAS's "one value per row of D"; pre is the GELU aux (ld OC).
//   dweight  trans_w false: D = dWᵀ (OC×IC, ld OC) = doutᵀ·inp,  A = dout → bias grad BGRADA
//                           (A's rows = D's rows = OC, summed over k = N).
//            trans_w true:  D = dWᵀ (IC×OC, ld IC) = inpᵀ·dout,  B = dout → BGRADB
//                           (D's columns = OC, summed over k = N).
//   dinp     D = dinpᵀ (IC×N, ld IC) = op(W)·doutᵀ;  m=IC, n=N, k=OC. The bias grad cannot come
//            from this GEMM (its k is OC, not N). gelu_pre is the DGELU aux (ld IC).
#pragma once
#include <cstdint>
#include <string>

#include "zerotrain/core/dtype.h"

namespace zt::linear_plan {

// The cuBLASLt epilogues the linear ops use (names as in cublasLt.h, CUBLASLT_EPILOGUE_*).
enum class Epilogue { Default, Bias, GeluAux, GeluAuxBias, BGradA, BGradB, DGelu };
const char* epilogue_name(Epilogue e);

// One column-major GEMM D[m,n] = op(A)[m,k] · op(B)[k,n] (+ beta D); lds in elements.
struct Gemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t ld_aux = 0;  // the GELU aux (pre / gelu_pre) leading dimension; 0 when no aux
  Epilogue want = Epilogue::Default;
};

// The three GEMMs of the linear ops, with the epilogue each would like.
Gemm forward_gemm(int64_t N, int64_t IC, int64_t OC, bool trans_w, bool has_bias, bool gelu);
Gemm dweight_gemm(int64_t N, int64_t IC, int64_t OC, bool trans_w, bool has_bias);
Gemm dinp_gemm(int64_t N, int64_t IC, int64_t OC, bool trans_w, bool has_gelu_pre);

struct Query {
  DType dtype = DType::BF16;
  Gemm gemm;
  // Bitwise OR of every device address the GEMM touches (A, B, D, bias, aux): its lowest set
  // bit bounds their common alignment. 0 means "all 256-byte aligned" (no pointers yet).
  uint64_t address_bits = 0;
  bool lt_enabled = true;  // false: ZT_LINEAR_LT=0 (forced fallback, for A/B runs)
};

struct Choice {
  bool use_lt = false;   // true: cublasLtMatmul with `epilogue`; false: the unfused fallback
  Epilogue epilogue = Epilogue::Default;
  std::string reason;    // why (for logs and tests)
};

// Rules, in order (first that applies decides):
//  1. want == Default: nothing to fuse → fallback (cublasGemmEx, as ops::gemm).
//  2. !lt_enabled → fallback.
//  3. dtype F32 → fallback: fp32 stays on the ops::gemm path (no TF32, the reference path the
//     GPU tests compare against); epilogues are for the 16-bit compute dtypes.
//  4. m, n or k is 0, or any of m, n, k, lds exceeds INT32_MAX → fallback.
//  5. Any address not 16-byte aligned → fallback (cuBLASLt's vectorised epilogue loads; we also
//     ask the heuristic for 16-byte minimum alignment).
//  6. lda, ldb or ldd not a multiple of 8 elements (16 bytes for bf16/fp16) → fallback.
//  7. GELU aux (GeluAux, GeluAuxBias, DGelu): ld_aux must be a multiple of 8 and >= m
//     (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) → else fallback.
//  8. Otherwise cuBLASLt with `want`. (At run time the launcher still falls back, with reason
//     "no cuBLASLt algorithm", when the heuristic returns none.)
Choice select(const Query& q);

}  // namespace zt::linear_plan
