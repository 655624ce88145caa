// CUDA vs CPU backend: parameter gradients accumulated straight into fp32 from bf16 ops (stages
// 0-1 with bf16 compute): linear_backward (cuBLAS GEMM with bf16 operands and an fp32 C, beta 1;
// the column-sum bias gradient into fp32) on aligned and odd shapes, gemm_ld (the padded LM head),
// bias_grad, layernorm_backward, rmsnorm_backward and embedding_backward. Both backends sum the
// same exact products in fp32 in different orders, so they agree to fp32 accumulation error —
// far inside one bf16 rounding — and both accumulate onto what the gradient held.
#include <cstdint>

#include "gpu_test_util.h"

namespace zt::gputest {
namespace {

// fp32 sums of n terms of magnitude <= 1 in different orders: a few fp32 ulps of sqrt(n).
double fp32_sum_tol(int64_t n) { return 1e-6 * std::sqrt(static_cast<double>(n)) + 1e-6; }

TEST_F(GpuTest, Fp32GradsFromBf16LinearAndHead) {
  const DType dt = DType::BF16;
  struct Shape { int64_t N, IC, OC; };
  for (Shape sh : {Shape{64, 128, 256}, Shape{37, 29, 53}}) {
    for (bool trans_w : {false, true}) {
      const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
      Dual x(*this, *gpu_, dt, {N, IC}, uniform(N * IC)), w(*this, *gpu_, dt, {IC * OC}, uniform(IC * OC));
      Dual dy(*this, *gpu_, dt, {N, OC}, uniform(N * OC)), dx(*this, *gpu_, dt, {N, IC}, {});
      Dual dw(*this, *gpu_, DType::F32, {IC * OC}, uniform(IC * OC)), db(*this, *gpu_, DType::F32, {OC}, uniform(OC));
      const std::vector<float> dw0 = dw.cpu_values();
      ops::linear_backward(cs(), dx.cpu(), dw.cpu(), db.cpu(), dy.cpu(), x.cpu(), w.cpu(), TensorView{}, N, IC, OC,
                           trans_w);
      ops::linear_backward(gs(), dx.gpu(), dw.gpu(), db.gpu(), dy.gpu(), x.gpu(), w.gpu(), TensorView{}, N, IC, OC,
                           trans_w);
      sync();
      const std::string what = "linear_backward N=" + std::to_string(N) + " IC=" + std::to_string(IC) +
                               " OC=" + std::to_string(OC) + (trans_w ? " trans_w" : "");
      expect_close(dw.gpu_values(), dw.cpu_values(), 1e-5, fp32_sum_tol(N), what + " dweight (fp32)");
      expect_close(db.gpu_values(), db.cpu_values(), 1e-5, fp32_sum_tol(N), what + " dbias (fp32)");
      expect_close(dx.gpu_values(), dx.cpu_values(), tol(dt), tol(dt, fp32_sum_tol(OC)), what + " dinp (bf16)");
      // It accumulated: the gradient moved away from where it started (dy, x are non-zero).
      EXPECT_NE(dw.gpu_values(), dw0) << what;
    }
  }
  // The padded LM head: dW[V,C] += alpha dlogitsᵀ·x with dlogits rows Vp apart, C fp32.
  const int64_t N = 48, V = 77, Vp = 128, C = 64;
  Dual dl(*this, *gpu_, dt, {N, Vp}, uniform(N * Vp)), x(*this, *gpu_, dt, {N, C}, uniform(N * C));
  Dual dw(*this, *gpu_, DType::F32, {V * C}, uniform(V * C));
  ops::gemm_ld(cs(), true, false, V, C, N, 0.25f, dl.cpu(), Vp, x.cpu(), C, 1.0f, dw.cpu(), C);
  ops::gemm_ld(gs(), true, false, V, C, N, 0.25f, dl.gpu(), Vp, x.gpu(), C, 1.0f, dw.gpu(), C);
  sync();
  expect_close(dw.gpu_values(), dw.cpu_values(), 1e-5, fp32_sum_tol(N), "gemm_ld head dW (fp32)");
}

TEST_F(GpuTest, Fp32GradsFromBf16NormsBiasAndEmbedding) {
  const DType dt = DType::BF16;
  for (auto [N, C] : {std::pair<int64_t, int64_t>{64, 256}, {37, 200}, {300, 768}}) {
    const std::string sz = " N=" + std::to_string(N) + " C=" + std::to_string(C);
    Dual x(*this, *gpu_, dt, {N, C}, uniform(N * C, -2, 2)), dy(*this, *gpu_, dt, {N, C}, uniform(N * C));
    Dual w(*this, *gpu_, dt, {C}, uniform(C)), b(*this, *gpu_, dt, {C}, uniform(C));
    Dual db(*this, *gpu_, DType::F32, {C}, uniform(C));
    ops::bias_grad(cs(), db.cpu(), dy.cpu());
    ops::bias_grad(gs(), db.gpu(), dy.gpu());
    Dual out(*this, *gpu_, dt, {N, C}, {}), mean(*this, *gpu_, DType::F32, {N}, {}), rstd(*this, *gpu_, DType::F32, {N}, {});
    Dual dx(*this, *gpu_, dt, {N, C}, {}), lw(*this, *gpu_, DType::F32, {C}, uniform(C));
    Dual lb(*this, *gpu_, DType::F32, {C}, uniform(C)), rw(*this, *gpu_, DType::F32, {C}, uniform(C));
    for (int side = 0; side < 2; ++side) {
      Stream& st = side ? gs() : cs();
      auto v = [&](Dual& d) { return side ? d.gpu() : d.cpu(); };
      ops::layernorm_forward(st, v(out), v(mean), v(rstd), v(x), v(w), v(b), 1e-5f);
      ops::layernorm_backward(st, v(dx), v(lw), v(lb), v(dy), v(x), v(w), v(mean), v(rstd));
      ops::rmsnorm_forward(st, v(out), v(rstd), v(x), v(w), 1e-5f);
      ops::rmsnorm_backward(st, v(dx), v(rw), v(dy), v(x), v(w), v(rstd));
    }
    sync();
    expect_close(db.gpu_values(), db.cpu_values(), 1e-5, fp32_sum_tol(N), "bias_grad (fp32)" + sz);
    // Normalised inputs reach |x̂| ~ 4: four times the plain sums' bound.
    expect_close(lw.gpu_values(), lw.cpu_values(), 1e-5, 4 * fp32_sum_tol(N), "layernorm dweight (fp32)" + sz);
    expect_close(lb.gpu_values(), lb.cpu_values(), 1e-5, fp32_sum_tol(N), "layernorm dbias (fp32)" + sz);
    expect_close(rw.gpu_values(), rw.cpu_values(), 1e-5, 4 * fp32_sum_tol(N), "rmsnorm dweight (fp32)" + sz);
  }
  // Embedding: the same grouping and order on both backends (stable sort by token), so the fp32
  // sums are the same operations: bitwise.
  const int64_t B = 4, T = 33, C = 96, V = 50;
  std::vector<int32_t> toks(static_cast<size_t>(B * T));
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 13 + i / 7) % V);
  DualInts tokens(*this, *gpu_, toks);
  Dual dout(*this, *gpu_, dt, {B, T, C}, uniform(B * T * C));
  Dual dwte(*this, *gpu_, DType::F32, {V, C}, uniform(V * C)), dwpe(*this, *gpu_, DType::F32, {T, C}, uniform(T * C));
  ops::embedding_backward(cs(), dwte.cpu(), dwpe.cpu(), dout.cpu(), tokens.cpu(), B, T, C);
  ops::embedding_backward(gs(), dwte.gpu(), dwpe.gpu(), dout.gpu(), tokens.gpu(), B, T, C);
  sync();
  EXPECT_EQ(dwte.gpu_raw(), dwte.cpu_raw()) << "embedding dwte (fp32)";
  EXPECT_EQ(dwpe.gpu_raw(), dwpe.cpu_raw()) << "embedding dwpe (fp32)";
}

}  // namespace
}  // namespace zt::gputest
