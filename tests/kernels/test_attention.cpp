// Causal self-attention: forward (out, att probabilities) against a double reference; backward
// (dqkv) against central finite differences of the double forward; determinism.
#include "attention_ref.h"
#include "kernel_test_util.h"

namespace zt::test {
namespace {

struct Dims { int64_t B, T, C, H; };

std::vector<double> attention_ref(const std::vector<double>& qkv, Dims d, std::vector<double>* att = nullptr) {
  return causal_attention_ref(qkv, d.B, d.T, d.C, d.H, att);
}

class AttentionTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(AttentionTest, ForwardMatchesReferenceBackwardMatchesFiniteDifferences) {
  const DType dt = GetParam();
  // T=66 spans two query blocks of the CPU kernel (64 rows each, cpu_attention.cpp).
  for (Dims d : {Dims{1, 1, 4, 1}, Dims{2, 5, 8, 2}, Dims{1, 7, 12, 3}, Dims{2, 9, 16, 4}, Dims{1, 66, 8, 1}}) {
    const std::string tag = dt_tag(dt) + " B" + std::to_string(d.B) + " T" + std::to_string(d.T) + " C" +
                            std::to_string(d.C) + " H" + std::to_string(d.H);
    HostTensor qkv = random_tensor(rng_, dt, {d.B, d.T, 3 * d.C}, -1.5, 1.5), out(dt, {d.B, d.T, d.C});
    HostTensor att(DType::F32, {d.B, d.H, d.T, d.T}), datt(DType::F32, {d.B, d.H, d.T, d.T});
    HostTensor dout = random_tensor(rng_, dt, {d.B, d.T, d.C}), dqkv = random_tensor(rng_, dt, {d.B, d.T, 3 * d.C});
    auto x = qkv.values(), dy = dout.values(), dx0 = dqkv.values();
    ops::attention_forward(s(), out.view(), att.view(), qkv.view(), d.B, d.T, d.C, d.H);
    ops::attention_backward(s(), dqkv.view(), datt.view(), dout.view(), qkv.view(), att.view(), d.B, d.T, d.C, d.H);
    sync();
    std::vector<double> att_ref;
    auto want = attention_ref(x, d, &att_ref);
    expect_close(out.values(), want, dtype_eps(dt) * 4, dtype_eps(dt) * 2, "attention out" + tag);
    // att is fp32 but computed from dtype inputs; rows above the diagonal are exactly zero.
    expect_close(att.values(), att_ref, 1e-6, 1e-5, "attention att" + tag);
    auto loss = [&](const std::vector<double>& xx) { return dot(dy, attention_ref(xx, d)); };
    expect_accumulated(dqkv.values(), dx0, numeric_grad(loss, x), grad_rel(dt), "attention dqkv" + tag);
  }
}

TEST_P(AttentionTest, BackwardIsDeterministicAcrossThreadCounts) {
  const DType dt = GetParam();
  Dims d{2, 32, 32, 4};
  HostTensor qkv = random_tensor(rng_, dt, {d.B, d.T, 3 * d.C}), out(dt, {d.B, d.T, d.C});
  HostTensor att(DType::F32, {d.B, d.H, d.T, d.T}), datt(DType::F32, {d.B, d.H, d.T, d.T});
  HostTensor dout = random_tensor(rng_, dt, {d.B, d.T, d.C});
  HostTensor d1(dt, {d.B, d.T, 3 * d.C}), d4(dt, {d.B, d.T, 3 * d.C});
  ops::attention_forward(s(), out.view(), att.view(), qkv.view(), d.B, d.T, d.C, d.H);
  ops::attention_backward(s(), d1.view(), datt.view(), dout.view(), qkv.view(), att.view(), d.B, d.T, d.C, d.H);
  set_stream_omp_threads(s(), 4);
  ops::attention_backward(s(), d4.view(), datt.view(), dout.view(), qkv.view(), att.view(), d.B, d.T, d.C, d.H);
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(d1.raw(), d4.raw());
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, AttentionTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
