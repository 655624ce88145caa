// linear_plan (zerotrain/kernels/linear_plan.h): the column-major description of the fused
// linear ops' GEMMs and the cuBLASLt-epilogue-or-fallback choice. Pure host code: the CUDA
// backend's selection rules are tested here, in CI, without a GPU.
#include <gtest/gtest.h>

#include "zerotrain/kernels/linear_plan.h"

namespace zt::linear_plan {
namespace {

Query bf16(const Gemm& g) {
  Query q;
  q.dtype = DType::BF16;
  q.gemm = g;
  q.address_bits = 0x7f0000001000ull;  // 4096-byte aligned
  return q;
}

TEST(LinearPlan, ForwardMappingConv1DAndLinearLayouts) {
  // GPT-2 fc: N = 8·1024, IC = 768, OC = 3072, W [IC,OC].
  Gemm g = forward_gemm(8192, 768, 3072, /*trans_w=*/false, /*has_bias=*/true, /*gelu=*/true);
  EXPECT_FALSE(g.trans_a);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.m, 3072);  // D = outᵀ: OC × N
  EXPECT_EQ(g.n, 8192);
  EXPECT_EQ(g.k, 768);
  EXPECT_EQ(g.lda, 3072);
  EXPECT_EQ(g.ldb, 768);
  EXPECT_EQ(g.ldd, 3072);
  EXPECT_EQ(g.ld_aux, 3072);  // pre is laid out like out
  EXPECT_EQ(g.want, Epilogue::GeluAuxBias);
  // nn.Linear layout W [OC,IC]: A is used transposed, ld IC.
  g = forward_gemm(10, 24, 40, true, true, false);
  EXPECT_TRUE(g.trans_a);
  EXPECT_EQ(g.lda, 24);
  EXPECT_EQ(g.want, Epilogue::Bias);
  EXPECT_EQ(g.ld_aux, 0);
  EXPECT_EQ(forward_gemm(10, 24, 40, false, false, true).want, Epilogue::GeluAux);
  EXPECT_EQ(forward_gemm(10, 24, 40, false, false, false).want, Epilogue::Default);
}

TEST(LinearPlan, BiasGradientComesFromTheDweightGemm) {
  // W [IC,OC]: D = dWᵀ (OC×IC) = doutᵀ·inp, dout is A → BGRADA over k = N.
  Gemm g = dweight_gemm(8192, 768, 3072, false, true);
  EXPECT_EQ(g.want, Epilogue::BGradA);
  EXPECT_EQ(g.m, 3072);
  EXPECT_EQ(g.n, 768);
  EXPECT_EQ(g.k, 8192);
  EXPECT_FALSE(g.trans_a);
  EXPECT_TRUE(g.trans_b);
  EXPECT_EQ(g.lda, 3072);
  EXPECT_EQ(g.ldb, 768);
  EXPECT_EQ(g.ldd, 3072);
  // W [OC,IC]: D = dWᵀ (IC×OC) = inpᵀ·dout, dout is B → BGRADB (D's columns = OC).
  g = dweight_gemm(64, 24, 40, true, true);
  EXPECT_EQ(g.want, Epilogue::BGradB);
  EXPECT_EQ(g.m, 24);
  EXPECT_EQ(g.n, 40);
  EXPECT_EQ(g.k, 64);
  EXPECT_EQ(g.ldd, 24);
  EXPECT_EQ(dweight_gemm(64, 24, 40, true, false).want, Epilogue::Default);
}

TEST(LinearPlan, DinpGemmCarriesTheDgeluAux) {
  Gemm g = dinp_gemm(8192, 3072, 768, false, true);  // c_proj backward: IC = 4C
  EXPECT_TRUE(g.trans_a);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.m, 3072);
  EXPECT_EQ(g.n, 8192);
  EXPECT_EQ(g.k, 768);
  EXPECT_EQ(g.lda, 768);
  EXPECT_EQ(g.ldb, 768);
  EXPECT_EQ(g.ldd, 3072);
  EXPECT_EQ(g.ld_aux, 3072);
  EXPECT_EQ(g.want, Epilogue::DGelu);
  g = dinp_gemm(5, 24, 40, true, false);
  EXPECT_FALSE(g.trans_a);
  EXPECT_EQ(g.lda, 24);
  EXPECT_EQ(g.want, Epilogue::Default);
}

TEST(LinearPlan, SelectsEpilogueForAlignedBf16AndFp16) {
  for (DType dt : {DType::BF16, DType::F16}) {
    Query q = bf16(forward_gemm(8192, 768, 3072, false, true, true));
    q.dtype = dt;
    Choice c = select(q);
    EXPECT_TRUE(c.use_lt) << c.reason;
    EXPECT_EQ(c.epilogue, Epilogue::GeluAuxBias);
  }
  EXPECT_EQ(select(bf16(dweight_gemm(8192, 768, 2304, false, true))).epilogue, Epilogue::BGradA);
  EXPECT_EQ(select(bf16(dinp_gemm(8192, 3072, 768, false, true))).epilogue, Epilogue::DGelu);
}

TEST(LinearPlan, FallbackRulesWithReasons) {
  const Gemm fc = forward_gemm(8192, 768, 3072, false, true, true);
  auto expect_fallback = [](const Query& q, const std::string& why) {
    const Choice c = select(q);
    EXPECT_FALSE(c.use_lt) << why;
    EXPECT_EQ(c.epilogue, Epilogue::Default);
    EXPECT_NE(c.reason.find(why), std::string::npos) << c.reason;
  };
  expect_fallback(bf16(forward_gemm(8192, 768, 768, false, false, false)), "nothing to fuse");
  Query q = bf16(fc);
  q.lt_enabled = false;
  expect_fallback(q, "ZT_LINEAR_LT=0");
  q = bf16(fc);
  q.dtype = DType::F32;
  expect_fallback(q, "fp32");
  expect_fallback(bf16(forward_gemm(0, 768, 3072, false, true, true)), "empty");
  q = bf16(fc);
  q.address_bits |= 8;  // one operand only 8-byte aligned
  expect_fallback(q, "16-byte aligned");
  q = bf16(fc);
  q.address_bits |= 2;
  expect_fallback(q, "16-byte aligned");
  // Odd channel counts: lds not multiples of 8 elements (e.g. an MLP with 10 inputs).
  expect_fallback(bf16(forward_gemm(64, 10, 32, true, true, false)), "multiple of 8");
  expect_fallback(bf16(dweight_gemm(64, 16, 12, false, true)), "multiple of 8");
  // Aux ld below m (a hand-built description) or not a multiple of 8.
  Gemm bad = fc;
  bad.ld_aux = 1024;
  expect_fallback(bf16(bad), "aux");
  bad.ld_aux = 3076;
  expect_fallback(bf16(bad), "aux");
  Gemm huge = fc;
  huge.n = int64_t(1) << 32;
  expect_fallback(bf16(huge), "INT32_MAX");
}

TEST(LinearPlan, EpilogueNames) {
  EXPECT_STREQ(epilogue_name(Epilogue::GeluAuxBias), "GELU_AUX_BIAS");
  EXPECT_STREQ(epilogue_name(Epilogue::BGradA), "BGRADA");
  EXPECT_STREQ(epilogue_name(Epilogue::DGelu), "DGELU");
}

}  // namespace
}  // namespace zt::linear_plan
