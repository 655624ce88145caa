// linear_plan.cpp — the column-major GEMM descriptions and the cuBLASLt-or-fallback choice of the
// fused linear ops (zerotrain/kernels/linear_plan.h). Pure host code, no CUDA.
#include "zerotrain/kernels/linear_plan.h"

#include <climits>

namespace zt::linear_plan {

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::Default: return "DEFAULT";
    case Epilogue::Bias: return "BIAS";
    case Epilogue::GeluAux: return "GELU_AUX";
    case Epilogue::GeluAuxBias: return "GELU_AUX_BIAS";
    case Epilogue::BGradA: return "BGRADA";
    case Epilogue::BGradB: return "BGRADB";
    case Epilogue::DGelu: return "DGELU";
  }
  return "?";
}

Gemm forward_gemm(int64_t N, int64_t IC, int64_t OC, bool trans_w, bool has_bias, bool gelu) {
  Gemm g;
  // A = W: [IC,OC] row-major is col-major OC×IC (ld OC), used as is; [OC,IC] is IC×OC (ld IC), transposed.
  g.trans_a = trans_w;
  g.trans_b = false;  // B = inp: col-major IC×N, ld IC
  g.m = OC, g.n = N, g.k = IC;
  g.lda = trans_w ? IC : OC;
  g.ldb = IC;
  g.ldd = OC;
  if (gelu) {
    g.ld_aux = OC;  // pre[N,OC] is col-major OC×N like D
    g.want = has_bias ? Epilogue::GeluAuxBias : Epilogue::GeluAux;
  } else {
    g.want = has_bias ? Epilogue::Bias : Epilogue::Default;
  }
  return g;
}

Gemm dweight_gemm(int64_t N, int64_t IC, int64_t OC, bool trans_w, bool has_bias) {
  Gemm g;
  g.k = N;
  g.trans_a = false, g.trans_b = true;
  if (!trans_w) {  // D = dWᵀ (OC×IC) = doutᵀ(OC×N, ld OC) · inp (inp col-major IC×N, ld IC, transposed)
    g.m = OC, g.n = IC;
    g.lda = OC, g.ldb = IC, g.ldd = OC;
    g.want = has_bias ? Epilogue::BGradA : Epilogue::Default;
  } else {  // D = dWᵀ (IC×OC) = inpᵀ(IC×N, ld IC) · dout (dout col-major OC×N, ld OC, transposed)
    g.m = IC, g.n = OC;
    g.lda = IC, g.ldb = OC, g.ldd = IC;
    g.want = has_bias ? Epilogue::BGradB : Epilogue::Default;
  }
  return g;
}

Gemm dinp_gemm(int64_t N, int64_t IC, int64_t OC, bool trans_w, bool has_gelu_pre) {
  Gemm g;
  // A = W: [IC,OC] row-major is col-major OC×IC (ld OC) → transposed to IC×OC; [OC,IC] is IC×OC (ld IC) as is.
  g.trans_a = !trans_w;
  g.trans_b = false;  // B = dout: col-major OC×N, ld OC
  g.m = IC, g.n = N, g.k = OC;
  g.lda = trans_w ? IC : OC;
  g.ldb = OC;
  g.ldd = IC;
  if (has_gelu_pre) {
    g.ld_aux = IC;  // gelu_pre[N,IC] is col-major IC×N like D
    g.want = Epilogue::DGelu;
  }
  return g;
}

namespace {
bool uses_aux(Epilogue e) { return e == Epilogue::GeluAux || e == Epilogue::GeluAuxBias || e == Epilogue::DGelu; }
Choice fallback(std::string why) { return Choice{false, Epilogue::Default, std::move(why)}; }
}  // namespace

Choice select(const Query& q) {
  const Gemm& g = q.gemm;
  if (g.want == Epilogue::Default) return fallback("nothing to fuse: cublasGemmEx");
  if (!q.lt_enabled) return fallback("cuBLASLt disabled (ZT_LINEAR_LT=0)");
  if (q.dtype == DType::F32) return fallback("fp32 stays on cublasGemmEx (the reference path)");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return fallback("empty GEMM (m, n or k is 0)");
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldd, g.ld_aux}) {
    if (v > INT_MAX) return fallback("a dimension or leading dimension exceeds INT32_MAX");
  }
  if (q.address_bits % 16 != 0) return fallback("an operand address is not 16-byte aligned");
  if (g.lda % 8 != 0 || g.ldb % 8 != 0 || g.ldd % 8 != 0)
    return fallback("a leading dimension is not a multiple of 8 elements (16 bytes)");
  if (uses_aux(g.want) && (g.ld_aux % 8 != 0 || g.ld_aux < g.m))
    return fallback("GELU aux leading dimension not a multiple of 8 or below m");
  return Choice{true, g.want, std::string("cuBLASLt epilogue ") + epilogue_name(g.want)};
}

}  // namespace zt::linear_plan
