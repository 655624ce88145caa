// CUDA vs CPU backend: the fused linear ops (linear_forward / linear_backward). Shapes cover both
// CUDA paths — aligned bf16/fp16 shapes take cuBLASLt epilogues (linear_plan::select says so, and
// the test asserts it), odd or misaligned shapes and fp32 take the unfused fallback — both weight
// layouts, with and without bias / GELU. Plus: the GELU epilogue is the tanh approximation
// (math::gelu), the fused backward is deterministic, and the padded LM head's strided ops agree.
#include <cstdint>

#include "gpu_test_util.h"
#include "zerotrain/kernels/linear_plan.h"
#include "zerotrain/kernels/math.h"

namespace zt::gputest {
namespace {

struct Shape {
  int64_t N, IC, OC;
  int64_t offset;  // elements of padding in front of inp (1: misaligned → fallback)
};
const Shape kShapes[] = {{64, 128, 256, 0}, {256, 64, 192, 0}, {37, 29, 53, 0}, {64, 128, 256, 1}, {8, 8, 8, 0}};

std::string what(const char* op, const Shape& s, bool trans_w, bool flag, DType dt) {
  std::ostringstream o;
  o << op << " N=" << s.N << " IC=" << s.IC << " OC=" << s.OC << (s.offset ? " misaligned" : "")
    << (trans_w ? " trans_w" : "") << (flag ? " gelu" : "") << tag(dt);
  return o.str();
}

class GpuLinear : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuLinear, ForwardMatchesCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    for (bool trans_w : {false, true}) {
      for (bool gelu : {false, true}) {
        for (bool has_bias : {true, false}) {
          const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
          Dual x(*this, *gpu_, dt, {N, IC}, uniform(N * IC), sh.offset), w(*this, *gpu_, dt, {IC * OC}, uniform(IC * OC));
          Dual b(*this, *gpu_, dt, {OC}, uniform(OC));
          Dual out(*this, *gpu_, dt, {N, OC}, uniform(N * OC)), pre(*this, *gpu_, dt, {N, OC}, uniform(N * OC));
          for (int side = 0; side < 2; ++side) {
            Stream& st = side ? gs() : cs();
            auto v = [&](Dual& d) { return side ? d.gpu() : d.cpu(); };
            ops::linear_forward(st, v(out), gelu ? v(pre) : TensorView{}, v(x), v(w), has_bias ? v(b) : TensorView{},
                                N, IC, OC, trans_w, gelu);
          }
          sync();
          const std::string tagw = what("linear_forward", sh, trans_w, gelu, dt) + (has_bias ? "" : " no-bias");
          const double atol = tol(dt, 1e-6 * std::sqrt(double(IC)) + 1e-6);
          expect_close(out.gpu_values(), out.cpu_values(), tol(dt), atol, tagw + " out");
          if (gelu) expect_close(pre.gpu_values(), pre.cpu_values(), tol(dt), atol, tagw + " pre");
        }
      }
    }
  }
}

TEST_P(GpuLinear, BackwardMatchesCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : kShapes) {
    for (bool trans_w : {false, true}) {
      for (bool gelu_in : {false, true}) {
        const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
        Dual x(*this, *gpu_, dt, {N, IC}, uniform(N * IC), sh.offset), w(*this, *gpu_, dt, {IC * OC}, uniform(IC * OC));
        Dual dy(*this, *gpu_, dt, {N, OC}, uniform(N * OC)), pre(*this, *gpu_, dt, {N, IC}, uniform(N * IC, -3, 3));
        Dual dw(*this, *gpu_, dt, {IC * OC}, uniform(IC * OC)), db(*this, *gpu_, dt, {OC}, uniform(OC));
        Dual dx(*this, *gpu_, dt, {N, IC}, uniform(N * IC, 1e3f, 2e3f));  // overwritten
        for (int side = 0; side < 2; ++side) {
          Stream& st = side ? gs() : cs();
          auto v = [&](Dual& d) { return side ? d.gpu() : d.cpu(); };
          ops::linear_backward(st, v(dx), v(dw), v(db), v(dy), v(x), v(w), gelu_in ? v(pre) : TensorView{}, N, IC, OC,
                               trans_w);
        }
        sync();
        const std::string tagw = what("linear_backward", sh, trans_w, gelu_in, dt);
        expect_close(dw.gpu_values(), dw.cpu_values(), tol(dt), tol(dt, 1e-6 * std::sqrt(double(N)) + 1e-6),
                     tagw + " dweight");
        // The epilogue's bias gradient is rounded to the dtype before it is accumulated: 2 roundings.
        expect_close(db.gpu_values(), db.cpu_values(), 2 * tol(dt), tol(dt, 1e-6 * std::sqrt(double(N)) + 1e-6),
                     tagw + " dbias");
        expect_close(dx.gpu_values(), dx.cpu_values(), 2 * tol(dt), tol(dt, 1e-6 * std::sqrt(double(OC)) + 1e-6),
                     tagw + " dinp");
      }
    }
  }
}

// The aligned bf16 shapes above must really exercise cuBLASLt (not only the fallback).
TEST_F(GpuTest, AlignedBf16ShapesSelectEpilogues) {
  linear_plan::Query q;
  q.dtype = DType::BF16;
  q.gemm = linear_plan::forward_gemm(64, 128, 256, false, true, true);
  EXPECT_TRUE(linear_plan::select(q).use_lt) << linear_plan::select(q).reason;
  q.gemm = linear_plan::dweight_gemm(64, 128, 256, true, true);
  EXPECT_EQ(linear_plan::select(q).epilogue, linear_plan::Epilogue::BGradB);
  q.gemm = linear_plan::dinp_gemm(64, 128, 256, false, true);
  EXPECT_EQ(linear_plan::select(q).epilogue, linear_plan::Epilogue::DGelu);
}

// cuBLASLt's GELU epilogue must be GPT-2's tanh approximation (math::gelu), not erf GELU: with
// inp = I (8×8) and W holding exact bf16 values, pre = W exactly and out = gelu(W) rounded once.
// At x = -3 the two GELUs differ by 11%, at -2.5 by 2%: far above one bf16 rounding (0.4%).
TEST_F(GpuTest, GeluEpilogueIsTheTanhApproximation) {
  const int64_t n = 8;
  std::vector<float> eye(n * n, 0.0f), wv(n * n);
  for (int64_t i = 0; i < n; ++i) eye[i * n + i] = 1.0f;
  const float xs[] = {-3.5f, -3.0f, -2.75f, -2.5f, -2.25f, -1.5f, 0.5f, 2.0f};
  for (int64_t i = 0; i < n * n; ++i) wv[i] = xs[i % 8];
  Dual x(*this, *gpu_, DType::BF16, {n, n}, eye), w(*this, *gpu_, DType::BF16, {n * n}, wv);
  Dual b(*this, *gpu_, DType::BF16, {n}, std::vector<float>(n, 0.0f));
  Dual out(*this, *gpu_, DType::BF16, {n, n}, std::vector<float>(n * n, 0.0f));
  Dual pre(*this, *gpu_, DType::BF16, {n, n}, std::vector<float>(n * n, 0.0f));
  linear_plan::Query q;
  q.dtype = DType::BF16;
  q.gemm = linear_plan::forward_gemm(n, n, n, false, true, true);
  ASSERT_TRUE(linear_plan::select(q).use_lt) << "this shape must take GELU_AUX_BIAS";
  ops::linear_forward(gs(), out.gpu(), pre.gpu(), x.gpu(), w.gpu(), b.gpu(), n, n, n, false, true);
  sync();
  const std::vector<float> got = out.gpu_values(), p = pre.gpu_values();
  for (int64_t i = 0; i < n * n; ++i) {
    EXPECT_EQ(p[i], wv[i]) << "pre[" << i << "]";
    const float want = bf16_bits_to_f32(f32_to_bf16_bits(math::gelu(wv[i])));
    EXPECT_NEAR(got[i], want, 8e-3 * std::fabs(want) + 1e-6) << "gelu(" << wv[i] << ")";
  }
}

TEST_P(GpuLinear, BackwardIsDeterministic) {
  const DType dt = GetParam();
  const int64_t N = 512, IC = 256, OC = 768;
  Dual x(*this, *gpu_, dt, {N, IC}, uniform(N * IC)), w(*this, *gpu_, dt, {IC * OC}, uniform(IC * OC));
  Dual dy(*this, *gpu_, dt, {N, OC}, uniform(N * OC)), pre(*this, *gpu_, dt, {N, IC}, uniform(N * IC, -3, 3));
  std::vector<std::vector<uint8_t>> runs[3];
  for (int r = 0; r < 2; ++r) {
    Dual dw(*this, *gpu_, dt, {IC * OC}, std::vector<float>(IC * OC, 0.0f)), db(*this, *gpu_, dt, {OC},
                                                                               std::vector<float>(OC, 0.0f));
    Dual dx(*this, *gpu_, dt, {N, IC}, std::vector<float>(N * IC, 0.0f));
    ops::linear_backward(gs(), dx.gpu(), dw.gpu(), db.gpu(), dy.gpu(), x.gpu(), w.gpu(), pre.gpu(), N, IC, OC, false);
    sync();
    runs[0].push_back(dw.gpu_raw());
    runs[1].push_back(db.gpu_raw());
    runs[2].push_back(dx.gpu_raw());
  }
  for (auto& r : runs) EXPECT_EQ(r[0], r[1]) << tag(dt);
}

// The padded LM head's strided ops (vocab_pad.h): GPU vs CPU, padding columns untouched.
TEST_P(GpuLinear, PaddedHeadOpsMatchCpu) {
  const DType dt = GetParam();
  const int64_t N = 64, C = 96, V = 1000, Vp = 1024;
  Dual lnf(*this, *gpu_, dt, {N, C}, uniform(N * C)), wte(*this, *gpu_, dt, {V, C}, uniform(V * C));
  Dual logits(*this, *gpu_, dt, {N, Vp}, uniform(N * Vp, 7.0f, 7.5f));  // padding: recognisable values
  const std::vector<float> before = logits.cpu_values();
  std::vector<int32_t> t(N);
  for (int64_t i = 0; i < N; ++i) t[i] = static_cast<int32_t>((i * 37) % V);
  t[5] = -1;
  DualInts targets(*this, *gpu_, t);
  Dual losses(*this, *gpu_, DType::F32, {N}, std::vector<float>(N, 0.0f));
  Dual dwte(*this, *gpu_, dt, {V, C}, uniform(V * C)), dC(*this, *gpu_, dt, {N, C}, uniform(N * C));
  for (int side = 0; side < 2; ++side) {
    Stream& st = side ? gs() : cs();
    auto v = [&](Dual& d) { return side ? d.gpu() : d.cpu(); };
    ops::gemm_ld(st, false, true, N, V, C, 1.0f, v(lnf), C, v(wte), C, 0.0f, v(logits), Vp);
    ops::softmax_cross_entropy_ld(st, v(losses), v(logits), v(logits), side ? targets.gpu() : targets.cpu(), 1.0f, V,
                                  Vp);
    ops::gemm_ld(st, true, false, V, C, N, 0.5f, v(logits), Vp, v(lnf), C, 1.0f, v(dwte), C);
    ops::gemm_ld(st, false, false, N, C, V, 0.5f, v(logits), Vp, v(wte), C, 0.0f, v(dC), C);
  }
  sync();
  expect_close(losses.gpu_values(), losses.cpu_values(), tol(dt), tol(dt, 1e-5), "padded head losses" + tag(dt));
  const std::vector<float> g = logits.gpu_values(), c = logits.cpu_values();
  expect_close(g, c, 2 * tol(dt), tol(dt, 1e-5), "padded head dlogits" + tag(dt));
  int touched = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = V; j < Vp; ++j) touched += (g[i * Vp + j] != before[i * Vp + j]) + (c[i * Vp + j] != before[i * Vp + j]);
  EXPECT_EQ(touched, 0) << "padding columns were written" << tag(dt);
  expect_close(dwte.gpu_values(), dwte.cpu_values(), 2 * tol(dt), tol(dt, 1e-5 * std::sqrt(double(N))), "dwte" + tag(dt));
  expect_close(dC.gpu_values(), dC.cpu_values(), 2 * tol(dt), tol(dt, 1e-5 * std::sqrt(double(V))), "dC" + tag(dt));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuLinear, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace zt::gputest
