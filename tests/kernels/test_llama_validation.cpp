// The Llama ops' entry points (RMSNorm, rotary embedding, SwiGLU, embedding without positions)
// reject inconsistent arguments with a message naming the op and the argument (ZT_CHECK exits)
// before anything is enqueued.
#include "kernel_test_util.h"

namespace zt::test {
namespace {

class LlamaValidationDeathTest : public KernelTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    KernelTest::SetUp();
  }
};

TEST_F(LlamaValidationDeathTest, RmsNormShapeMismatch) {
  HostTensor x(DType::F32, {3, 4}), w(DType::F32, {4}), out(DType::F32, {3, 5}), rstd(DType::F32, {3});
  EXPECT_DEATH(ops::rmsnorm_forward(s(), out.view(), rstd.view(), x.view(), w.view(), 1e-5f),
               "ops::rmsnorm_forward: out has shape \\[3, 5\\]");
  HostTensor rstd2(DType::F32, {2});
  EXPECT_DEATH(ops::rmsnorm_forward(s(), x.view(), rstd2.view(), x.view(), w.view(), 1e-5f),
               "ops::rmsnorm_forward: inp has shape");
}

TEST_F(LlamaValidationDeathTest, RmsNormStatsMustBeFp32AndDtypesAgree) {
  HostTensor x(DType::BF16, {2, 4}), w(DType::BF16, {4}), out(DType::BF16, {2, 4}), rstd(DType::BF16, {2});
  EXPECT_DEATH(ops::rmsnorm_forward(s(), out.view(), rstd.view(), x.view(), w.view(), 1e-5f),
               "ops::rmsnorm_forward: rstd is bf16, expected f");
  HostTensor rs(DType::F32, {2}), w32(DType::F32, {4});
  EXPECT_DEATH(ops::rmsnorm_forward(s(), out.view(), rs.view(), x.view(), w32.view(), 1e-5f),
               "ops::rmsnorm_forward: weight is f");
  EXPECT_DEATH(ops::rmsnorm_forward(s(), out.view(), rs.view(), x.view(), w.view(), -1.0f),
               "ops::rmsnorm_forward: eps must be non-negative");
}

TEST_F(LlamaValidationDeathTest, RmsNormBackwardArguments) {
  HostTensor x(DType::F32, {2, 4}), w(DType::F32, {4}), dw(DType::F32, {3}), dy(DType::F32, {2, 4});
  HostTensor dx(DType::F32, {2, 4}), rstd(DType::F32, {2});
  EXPECT_DEATH(ops::rmsnorm_backward(s(), dx.view(), dw.view(), dy.view(), x.view(), w.view(), rstd.view()),
               "ops::rmsnorm_backward: dweight has shape \\[3\\]");
  HostTensor dw4(DType::F32, {4});
  EXPECT_DEATH(ops::rmsnorm_backward(s(), dy.view(), dw4.view(), dy.view(), x.view(), w.view(), rstd.view()),
               "ops::rmsnorm_backward: dinp must not alias dout or inp");
}

TEST_F(LlamaValidationDeathTest, RopeHeadSizeMustBeEven) {
  HostTensor x(DType::F32, {1, 2, 5}), table(DType::F32, {4, 5});
  EXPECT_DEATH(ops::rope_forward(s(), x.view(), table.view(), 1, 2, 1, 5, 0),
               "ops::rope_forward: hs=5 must be even and positive");
}

TEST_F(LlamaValidationDeathTest, RopeTableMustCoverPositions) {
  HostTensor x(DType::F32, {1, 3, 8}), table(DType::F32, {4, 4});
  EXPECT_DEATH(ops::rope_backward(s(), x.view(), table.view(), 1, 3, 2, 4, 2),
               "ops::rope_backward: table has 4 positions, fewer than pos \\+ T = 2 \\+ 3");
  EXPECT_DEATH(ops::rope_forward(s(), x.view(), table.view(), 1, 3, 2, 4, -1), "ops::rope_forward: pos=-1");
}

TEST_F(LlamaValidationDeathTest, RopeShapeAndTableDtype) {
  HostTensor x(DType::F32, {1, 3, 8}), table(DType::F32, {4, 4}), table16(DType::BF16, {4, 4});
  EXPECT_DEATH(ops::rope_forward(s(), x.view(), table.view(), 1, 3, 3, 4, 0), "ops::rope_forward: x has shape");
  EXPECT_DEATH(ops::rope_forward(s(), x.view(), table16.view(), 1, 3, 2, 4, 0),
               "ops::rope_forward: table is bf16, expected f");
  HostTensor table6(DType::F32, {3, 6});
  EXPECT_DEATH(ops::rope_forward(s(), x.view(), table6.view(), 1, 3, 2, 4, 0),
               "ops::rope_forward: table has shape \\[3, 6\\], not a whole number of rows of 4");
}

TEST_F(LlamaValidationDeathTest, SwigluShapesAndAliasing) {
  HostTensor g(DType::F32, {6}), u(DType::F32, {5}), out(DType::F32, {6}), dy(DType::F32, {6});
  EXPECT_DEATH(ops::swiglu_forward(s(), out.view(), g.view(), u.view()), "ops::swiglu_forward: up has shape \\[5\\]");
  HostTensor u6(DType::F32, {6}), dup16(DType::BF16, {6});
  EXPECT_DEATH(ops::swiglu_backward(s(), out.view(), dup16.view(), dy.view(), g.view(), u6.view()),
               "ops::swiglu_backward: dup is bf16");
  EXPECT_DEATH(ops::swiglu_backward(s(), out.view(), out.view(), dy.view(), g.view(), u6.view()),
               "ops::swiglu_backward: dgate and dup must not alias");
}

TEST_F(LlamaValidationDeathTest, EmbeddingWithoutPositionsStillChecksWte) {
  std::vector<int32_t> tok(2 * 3, 0);
  HostTensor out(DType::F32, {2, 3, 4}), wte(DType::BF16, {5, 4});
  EXPECT_DEATH(ops::embedding_forward(s(), out.view(), tok.data(), wte.view(), TensorView{}, 2, 3, 4),
               "ops::embedding_forward: wte is bf16");
}

}  // namespace
}  // namespace zt::test
