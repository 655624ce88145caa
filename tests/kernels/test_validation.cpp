// The zt::ops entry points reject inconsistent arguments (programming errors: ZT_CHECK exits)
// before anything is enqueued.
#include "kernel_test_util.h"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::test {
namespace {

class ValidationDeathTest : public KernelTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    KernelTest::SetUp();
  }
};

TEST_F(ValidationDeathTest, GemmShapeMismatch) {
  HostTensor A(DType::F32, {3, 4}), B(DType::F32, {4, 5}), C(DType::F32, {3, 6});
  EXPECT_DEATH(ops::gemm(s(), false, false, 3, 5, 4, 1.0f, A.view(), B.view(), 0.0f, C.view()), "C has shape");
}

TEST_F(ValidationDeathTest, GemmDtypeMismatch) {
  HostTensor A(DType::F32, {3, 4}), B(DType::BF16, {4, 5}), C(DType::F32, {3, 5});
  EXPECT_DEATH(ops::gemm(s(), false, false, 3, 5, 4, 1.0f, A.view(), B.view(), 0.0f, C.view()), "B is bf16");
}

TEST_F(ValidationDeathTest, TensorOnWrongDevice) {
  HostTensor x(DType::F32, {8});
  TensorView v = x.view();
  v.device = DeviceKind::CUDA;
  EXPECT_DEATH(ops::scale(s(), v, 2.0f), "is on");
}

TEST_F(ValidationDeathTest, AttentionHeadsMustDivideChannels) {
  HostTensor qkv(DType::F32, {1, 2, 3 * 6}), out(DType::F32, {1, 2, 6}), att(DType::F32, {1, 4, 2, 2});
  EXPECT_DEATH(ops::attention_forward(s(), out.view(), att.view(), qkv.view(), 1, 2, 6, 4), "not divisible");
}

TEST_F(ValidationDeathTest, LayerNormStatsMustBeFp32) {
  HostTensor x(DType::BF16, {2, 4}), w(DType::BF16, {4}), b(DType::BF16, {4}), out(DType::BF16, {2, 4});
  HostTensor mean(DType::BF16, {2}), rstd(DType::F32, {2});
  EXPECT_DEATH(ops::layernorm_forward(s(), out.view(), mean.view(), rstd.view(), x.view(), w.view(), b.view(), 1e-5f),
               "mean is bf16");
}

TEST_F(ValidationDeathTest, EmbeddingNeedsEnoughPositions) {
  std::vector<int32_t> tok(2 * 5, 0);
  HostTensor out(DType::F32, {2, 5, 3}), wte(DType::F32, {4, 3}), wpe(DType::F32, {4, 3});
  EXPECT_DEATH(ops::embedding_forward(s(), out.view(), tok.data(), wte.view(), wpe.view(), 2, 5, 3), "fewer than T");
}

TEST_F(ValidationDeathTest, TokenOutOfVocabularyFailsOnTheStream) {
  std::vector<int32_t> tok{0, 7};
  HostTensor out(DType::F32, {1, 2, 3}), wte(DType::F32, {4, 3}), wpe(DType::F32, {2, 3});
  EXPECT_DEATH(
      {
        ops::embedding_forward(s(), out.view(), tok.data(), wte.view(), wpe.view(), 1, 2, 3);
        sync();
      },
      "outside the vocabulary");
}

TEST_F(ValidationDeathTest, AdamRejectsFp16Master) {
  HostTensor p(DType::F16, {4}), m(DType::F32, {4}), v(DType::F32, {4}), g(DType::F32, {4});
  math::AdamParams a{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, 1.0f, true};
  EXPECT_DEATH(ops::adam_step(s(), p.view(), m.view(), v.view(), g.view(), 1.0f, a, TensorView()), "fp32 or bf16");
}

TEST_F(ValidationDeathTest, ConvertingCastCannotOverlap) {
  HostTensor buf(DType::F32, {8});
  TensorView src = buf.view();
  TensorView dst(buf.view().data, DType::BF16, {8});
  EXPECT_DEATH(ops::cast(s(), dst, src), "overlaps");
}

#if !defined(ZT_WITH_CUDA)
TEST_F(ValidationDeathTest, CudaStreamWithoutCudaBackend) {
  // A stream that claims to be CUDA reaches the dispatch only in a CPU-only build.
  class FakeCudaStream final : public Stream {
   public:
    DeviceKind kind() const override { return DeviceKind::CUDA; }
    const std::string& name() const override { return name_; }
    void wait(Event&) override {}
    void synchronize() override {}
    void enqueue_host(std::function<void()>) override {}
    void* native_handle() const override { return nullptr; }
   private:
    std::string name_ = "fake-cuda";
  } fake;
  HostTensor x(DType::F32, {8});
  TensorView v = x.view();
  v.device = DeviceKind::CUDA;
  EXPECT_DEATH(ops::scale(fake, v, 2.0f), "CUDA backend is not built");
}
#endif

}  // namespace
}  // namespace zt::test

// ZT_CUDA_SYNC_CHECK's value: 0 / unset off, 1 on, anything else an input error naming it.
TEST(Validation, SyncCheckVariable) {
  EXPECT_FALSE(zt::kernels::parse_sync_check(nullptr));
  EXPECT_FALSE(zt::kernels::parse_sync_check(""));
  EXPECT_FALSE(zt::kernels::parse_sync_check("0"));
  EXPECT_TRUE(zt::kernels::parse_sync_check("1"));
  try {
    zt::kernels::parse_sync_check("yes");
    ADD_FAILURE() << "expected an InputError";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ZT_CUDA_SYNC_CHECK"), std::string::npos) << e.what();
  }
}
