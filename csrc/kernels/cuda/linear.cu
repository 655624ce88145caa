// linear.cu — the fused linear ops on the CUDA backend (op_list.h: linear_forward, linear_backward).
// Each GEMM is described column-major by linear_plan.h (the mapping is written down there) and
// runs either as one cublasLtMatmul with an epilogue (BIAS, GELU_AUX[_BIAS], BGRADA/BGRADB,
// DGELU) or, when linear_plan::select says so, as the unfused fallback: cublasGemmEx (gemm.cu)
// followed by our bias / GELU kernels. ZT_LINEAR_LT=0 forces the fallback everywhere;
// ZT_LINEAR_LOG=1 prints each GEMM shape's path once to stderr (for the device check's logs).
// Also gemm_ld (the padded LM head, zerotrain/model/vocab_pad.h): cublasGemmEx with explicit lds.
//
// Resources (RAII): one cublasLtHandle_t per device (process-lifetime, like stream_resources'
// cache; its device bytes, if any, recorded as CublasWorkspace outside-tracker memory); a cache
// of matmul descriptors, matrix layouts and the heuristic's algorithm per GEMM shape (Plan, owning
// its descriptors). The workspace is the stream's cuBLAS workspace (cublas_workspace()).
// Bias gradients: cuBLASLt OVERWRITES its bias-gradient vector (in the output dtype), while our
// dbias ACCUMULATES, so the epilogue writes into the stream's scratch and accumulate() adds it.
#include <cublasLt.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "cuda_common.cuh"
#include "zerotrain/core/outside_memory.h"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/kernels/linear_plan.h"
#include "zerotrain/core/cublas_api.h"

namespace zt::cuda_detail {
namespace {

using linear_plan::Epilogue;

cudaDataType_t lt_type(DType t) { return t == DType::BF16 ? CUDA_R_16BF : t == DType::F16 ? CUDA_R_16F : CUDA_R_32F; }

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::GeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::BGradA: return CUBLASLT_EPILOGUE_BGRADA;
    case Epilogue::BGradB: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::Default: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool lt_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ZT_LINEAR_LT");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// Per-device cuBLASLt handle; never destroyed (the CUDA runtime may be unloading at exit).
cublasLtHandle_t lt_handle(int device) {
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t>* handles = new std::map<int, cublasLtHandle_t>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  size_t free0 = 0, free1 = 0, total = 0;
  const bool known = cudaMemGetInfo(&free0, &total) == cudaSuccess;
  cublasLtHandle_t h = nullptr;
  ZT_CUBLAS_CHECK(cublas_api().cublasLtCreate(&h));
  if (known && cudaMemGetInfo(&free1, &total) == cudaSuccess && free0 > free1)
    add_outside_bytes(device, OutsideCategory::CublasWorkspace, static_cast<int64_t>(free0 - free1));
  cudaGetLastError();
  (*handles)[device] = h;
  return h;
}

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublas_api().cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublas_api().cublasLtMatrixLayoutDestroy(l); }
};
struct PrefDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublas_api().cublasLtMatmulPreferenceDestroy(p); }
};

// One cached GEMM shape: descriptors (owned) and the heuristic's algorithm. Pointers (bias, aux)
// are set on `desc` per call, under the cache mutex.
struct Plan {
  std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter> desc;
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter> a, b, d;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false: the heuristic had no algorithm → fallback for this shape
};

using PlanKey = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int>;

std::mutex& plan_mu() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::map<PlanKey, std::unique_ptr<Plan>>& plans() {
  static auto* p = new std::map<PlanKey, std::unique_ptr<Plan>>();  // never destroyed, see above
  return *p;
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  ZT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

// Builds (once per shape) the plan for g with epilogue e. Called with plan_mu() held.
Plan& plan_for(int device, DType dt, const linear_plan::Gemm& g, Epilogue e, size_t ws_bytes) {
  PlanKey key{device, static_cast<int>(dt), g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldd, g.ld_aux,
              static_cast<int>(e)};
  auto& slot = plans()[key];
  if (slot) return *slot;
  auto p = std::make_unique<Plan>();
  cublasLtMatmulDesc_t desc = nullptr;
  ZT_CUBLAS_CHECK(cublas_api().cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  p->desc.reset(desc);
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(e));
  if (g.ld_aux > 0) set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ld_aux);
  // Alignment-dependent algorithm choice: promise 16-byte pointers (select() checked them) by
  // setting placeholder 16-byte-aligned addresses for bias and aux before the heuristic.
  void* placeholder = reinterpret_cast<void*>(uintptr_t(256));
  if (e != Epilogue::Default && e != Epilogue::DGelu && e != Epilogue::GeluAux)
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, placeholder);
  if (g.ld_aux > 0) set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, placeholder);
  const cudaDataType_t t = lt_type(dt);
  auto layout = [&](int64_t rows, int64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t l = nullptr;
    ZT_CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
    return l;
  };
  // Stored shapes (column-major): op(A) is m×k, so A is k×m when transposed; likewise B.
  p->a.reset(g.trans_a ? layout(g.k, g.m, g.lda) : layout(g.m, g.k, g.lda));
  p->b.reset(g.trans_b ? layout(g.n, g.k, g.ldb) : layout(g.k, g.n, g.ldb));
  p->d.reset(layout(g.m, g.n, g.ldd));
  cublasLtMatmulPreference_t pref = nullptr;
  ZT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PrefDeleter> pref_owner(pref);
  ZT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                       sizeof(ws_bytes)));
  const uint32_t align = 16;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    ZT_CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t st = cublas_api().cublasLtMatmulAlgoGetHeuristic(lt_handle(device), desc, p->a.get(), p->b.get(),
                                                           p->d.get(), p->d.get(), pref, 1, &result, &count);
  p->found = st == CUBLAS_STATUS_SUCCESS && count > 0;
  if (p->found) p->algo = result.algo;
  slot = std::move(p);
  return *slot;
}

void log_path(DType dt, const linear_plan::Gemm& g, const std::string& path);

// Runs g as cublasLtMatmul with epilogue e: D = alpha·op(A)·op(B) + beta·D. bias: bias input or
// bias-gradient output (nullptr when e has none); aux: GELU aux (pre, written; gelu_pre, read).
// Returns false (nothing enqueued) when no algorithm exists for the shape.
bool lt_matmul(Stream& s, DType dt, const linear_plan::Gemm& g, Epilogue e, const void* A, const void* B, void* D,
               float beta, void* bias, void* aux) {
  size_t ws_bytes = 0;
  void* ws = cublas_workspace(s, &ws_bytes);
  int device = 0;
  ZT_CUDA_CHECK(cudaStreamGetDevice(native(s), &device));
  std::lock_guard<std::mutex> lock(plan_mu());
  Plan& p = plan_for(device, dt, g, e, ws_bytes);
  log_path(dt, g, p.found ? std::string("cuBLASLt ") + linear_plan::epilogue_name(e)
                          : std::string("fallback: no cuBLASLt algorithm for ") + linear_plan::epilogue_name(e));
  if (!p.found) return false;
  if (bias) set_desc(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux) set_desc(p.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  const float alpha = 1.0f;
  ZT_CUBLAS_CHECK(cublas_api().cublasLtMatmul(lt_handle(device), p.desc.get(), &alpha, A, p.a.get(), B, p.b.get(), &beta, D,
                                 p.d.get(), D, p.d.get(), &p.algo, ws, ws_bytes, native(s)));
  return true;
}

uint64_t bits(std::initializer_list<const void*> ptrs) {
  uint64_t b = 0;
  for (const void* p : ptrs) b |= reinterpret_cast<uintptr_t>(p);
  return b;
}

// ZT_LINEAR_LOG=1: one line per distinct (shape, epilogue, path).
void log_path(DType dt, const linear_plan::Gemm& g, const std::string& path) {
  static const bool on = [] {
    const char* v = std::getenv("ZT_LINEAR_LOG");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (!on) return;
  static std::mutex mu;
  static auto* seen = new std::map<std::string, bool>();
  const std::string line = std::string("linear: ") + dtype_name(dt) + " m=" + std::to_string(g.m) + " n=" +
                           std::to_string(g.n) + " k=" + std::to_string(g.k) + " want " +
                           linear_plan::epilogue_name(g.want) + " -> " + path;
  std::lock_guard<std::mutex> lock(mu);
  if ((*seen)[line]) return;
  (*seen)[line] = true;
  std::fprintf(stderr, "%s\n", line.c_str());
}

linear_plan::Choice choose(DType dt, const linear_plan::Gemm& g, std::initializer_list<const void*> ptrs) {
  linear_plan::Query q;
  q.dtype = dt;
  q.gemm = g;
  q.address_bits = bits(ptrs);
  q.lt_enabled = lt_enabled();
  linear_plan::Choice c = linear_plan::select(q);
  if (!c.use_lt) log_path(dt, g, "fallback: " + c.reason);
  return c;
}

TensorView flat(void* data, DType dt, int64_t n) {
  TensorView v;
  v.data = data;
  v.dtype = dt;
  v.device = DeviceKind::CUDA;
  v.ndim = 1;
  v.shape[0] = n;
  return v;
}

}  // namespace
}  // namespace zt::cuda_detail

namespace zt::cuda_ops {
using namespace cuda_detail;

void linear_forward(Stream& s, const TensorView& out, const TensorView& pre, const TensorView& inp,
                    const TensorView& weight, const TensorView& bias, int64_t N, int64_t IC, int64_t OC, bool trans_w,
                    bool gelu) {
  if (N == 0 || OC == 0) return;
  const bool has_bias = bias.data != nullptr;
  const DType dt = inp.dtype;
  const linear_plan::Gemm g = linear_plan::forward_gemm(N, IC, OC, trans_w, has_bias, gelu);
  const TensorView& y = gelu ? pre : out;
  const auto c = choose(dt, g, {inp.data, weight.data, out.data, gelu ? pre.data : nullptr, bias.data});
  // Lt: A = weight, B = inp, D = out; GELU epilogues write gelu(y) to D and y to aux (pre).
  if (c.use_lt && lt_matmul(s, dt, g, c.epilogue, weight.data, inp.data, out.data, 0.0f,
                            has_bias ? bias.data : nullptr, gelu ? pre.data : nullptr))
    return;
  gemm(s, false, trans_w, N, OC, IC, 1.0f, inp, weight, 0.0f, y);
  if (has_bias) bias_add(s, y, bias);
  if (gelu) gelu_forward(s, out, pre);
}

void linear_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                     const TensorView& dout, const TensorView& inp, const TensorView& weight,
                     const TensorView& gelu_pre, int64_t N, int64_t IC, int64_t OC, bool trans_w) {
  if (IC == 0 || OC == 0) return;
  const DType dt = inp.dtype;
  const bool has_bias = dbias.data != nullptr;
  // dW (+ bias gradient of dout). The epilogue's bias gradient overwrites: into scratch, then +=.
  // fp32 gradients (accumulated straight into fp32) take the unfused path: cublasGemmEx with 16-bit
  // operands and an fp32 C (beta 1), then the column-sum bias gradient into fp32.
  const bool same_dtype_grads = dweight.dtype == dt;
  const linear_plan::Gemm gw = linear_plan::dweight_gemm(N, IC, OC, trans_w, has_bias);
  void* bgrad = has_bias && same_dtype_grads ? scratch(s, static_cast<size_t>(OC) * dtype_size(dt)) : nullptr;
  const auto cw = choose(dt, gw, {inp.data, dout.data, dweight.data, bgrad});
  // Lt operands: trans_w false: A = dout, B = inp; true: A = inp, B = dout (linear_plan.h).
  const void* wa = trans_w ? inp.data : dout.data;
  const void* wb = trans_w ? dout.data : inp.data;
  if (same_dtype_grads && cw.use_lt && lt_matmul(s, dt, gw, cw.epilogue, wa, wb, dweight.data, 1.0f, bgrad, nullptr)) {
    if (has_bias) accumulate(s, dbias, flat(bgrad, dt, OC), 1.0f, false);
  } else {
    if (!trans_w) gemm(s, true, false, IC, OC, N, 1.0f, inp, dout, 1.0f, dweight);
    else gemm(s, true, false, OC, IC, N, 1.0f, dout, inp, 1.0f, dweight);
    if (has_bias) bias_grad(s, dbias, dout);
  }
  if (dinp.data == nullptr || N == 0) return;
  const bool has_gelu = gelu_pre.data != nullptr;
  const linear_plan::Gemm gx = linear_plan::dinp_gemm(N, IC, OC, trans_w, has_gelu);
  const auto cx = choose(dt, gx, {weight.data, dout.data, dinp.data, has_gelu ? gelu_pre.data : nullptr});
  if (cx.use_lt && lt_matmul(s, dt, gx, cx.epilogue, weight.data, dout.data, dinp.data, 0.0f, nullptr,
                             const_cast<void*>(gelu_pre.data)))
    return;
  if (!has_gelu) {
    gemm(s, false, !trans_w, N, IC, OC, 1.0f, dout, weight, 0.0f, dinp);
    return;
  }
  // Unfused GELU backward: dx = dout·Wᵀ into scratch, dinp = 0 + dx ⊙ gelu'(gelu_pre).
  TensorView dx = flat(scratch(s, static_cast<size_t>(N * IC) * dtype_size(dt)), dt, N * IC);
  gemm(s, false, !trans_w, N, IC, OC, 1.0f, dout, weight, 0.0f, dx);
  ZT_CUDA_CHECK(cudaMemsetAsync(dinp.data, 0, dinp.nbytes(), native(s)));
  gelu_backward(s, dinp, gelu_pre, dx);
}

void gemm_ld(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const TensorView& A, int64_t lda, const TensorView& B, int64_t ldb, float beta, const TensorView& C,
             int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {  // C = beta C on the M×N block only (the padding columns are not ours to touch)
    ZT_CHECK(beta == 0.0f || beta == 1.0f, "gemm_ld: K == 0 supports beta 0 or 1 only");
    if (beta == 0.0f)
      ZT_CUDA_CHECK(cudaMemset2DAsync(C.data, static_cast<size_t>(ldc) * dtype_size(C.dtype), 0,
                                      static_cast<size_t>(N) * dtype_size(C.dtype), static_cast<size_t>(M), native(s)));
    return;
  }
  gemm_rowmajor(s, trans_a, trans_b, M, N, K, alpha, A.data, lda, 0, B.data, ldb, 0, A.dtype, beta, C.data, ldc, 0,
                C.dtype, 1);
}

}  // namespace zt::cuda_ops
