// RMSNorm: forward (out, rstd) against the double reference; the reference's analytic backward
// against central finite differences, the kernel's backward (dinp +=, dweight +=) against it;
// thread-count independence (bitwise). Embedding without a position table (Llama).
#include "kernel_test_util.h"
#include "llama_ops_ref.h"

namespace zt::test {
namespace {

constexpr double kEps = 1e-5;

// Tolerance relative to each element's magnitude: fp32 arithmetic for fp32, one rounding to the
// storage type otherwise.
double op_rel(DType t) { return t == DType::F32 ? 1e-5 : dtype_eps(t); }

class RmsNormTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST(RmsNormReference, AnalyticBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(7);
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {1, 6}, {3, 5}, {4, 17}}) {
    auto x = random_values(rng, N * C, DType::F32, -2.0, 2.0), w = random_values(rng, C, DType::F32, 0.5, 1.5);
    auto dy = random_values(rng, N * C, DType::F32);
    std::vector<double> dx, dw;
    rmsnorm_backward_ref(dy, x, w, N, C, kEps, &dx, &dw);
    auto loss_x = [&](const std::vector<double>& xx) { return dot(dy, rmsnorm_ref(xx, w, N, C, kEps)); };
    auto loss_w = [&](const std::vector<double>& ww) { return dot(dy, rmsnorm_ref(x, ww, N, C, kEps)); };
    const std::string tag = " N" + std::to_string(N) + " C" + std::to_string(C);
    expect_close(dx, numeric_grad(loss_x, x), 1e-7, 1e-6, "rmsnorm reference dx" + tag);
    expect_close(dw, numeric_grad(loss_w, w), 1e-7, 1e-6, "rmsnorm reference dw" + tag);
  }
}

TEST_P(RmsNormTest, ForwardAndBackwardMatchReference) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {1, 64}, {3, 5}, {7, 33}, {5, 257}, {16, 288}}) {
    HostTensor x = random_tensor(rng_, dt, {N, C}, -2.0, 2.0), w = random_tensor(rng_, dt, {C}, 0.5, 1.5);
    HostTensor out(dt, {N, C}), rstd(DType::F32, {N}), dout = random_tensor(rng_, dt, {N, C});
    HostTensor dx = random_tensor(rng_, dt, {N, C}), dw = random_tensor(rng_, dt, {C});
    auto xv = x.values(), wv = w.values(), dy = dout.values(), dx0 = dx.values(), dw0 = dw.values();

    ops::rmsnorm_forward(s(), out.view(), rstd.view(), x.view(), w.view(), static_cast<float>(kEps));
    ops::rmsnorm_backward(s(), dx.view(), dw.view(), dout.view(), x.view(), w.view(), rstd.view());
    sync();

    const std::string tag = dt_tag(dt) + " N" + std::to_string(N) + " C" + std::to_string(C);
    std::vector<double> rs_ref(N);
    auto want = rmsnorm_ref(xv, wv, N, C, kEps, &rs_ref);
    std::vector<double> mag(N * C);
    for (int64_t i = 0; i < N * C; ++i) mag[i] = std::fabs(want[i]) + 1e-3;
    expect_close_mag(out.values(), want, mag, op_rel(dt), "rmsnorm out" + tag);
    expect_close(rstd.values(), rs_ref, 0.0, 2e-6, "rmsnorm rstd" + tag);

    std::vector<double> gx, gw;
    rmsnorm_backward_ref(dy, xv, wv, N, C, kEps, &gx, &gw);
    expect_accumulated(dx.values(), dx0, gx, op_rel(dt), "rmsnorm dinp" + tag);
    expect_accumulated(dw.values(), dw0, gw, op_rel(dt), "rmsnorm dweight" + tag);
  }
}

TEST_P(RmsNormTest, IndependentOfThreadCount) {
  const DType dt = GetParam();
  const int64_t N = 129, C = 200;
  HostTensor x = random_tensor(rng_, dt, {N, C}), w = random_tensor(rng_, dt, {C}), dout = random_tensor(rng_, dt, {N, C});
  HostTensor out1(dt, {N, C}), rs1(DType::F32, {N}), dx1(dt, {N, C}), dw1(dt, {C});
  HostTensor out4(dt, {N, C}), rs4(DType::F32, {N}), dx4(dt, {N, C}), dw4(dt, {C});
  ops::rmsnorm_forward(s(), out1.view(), rs1.view(), x.view(), w.view(), 1e-6f);
  ops::rmsnorm_backward(s(), dx1.view(), dw1.view(), dout.view(), x.view(), w.view(), rs1.view());
  set_stream_omp_threads(s(), 4);
  ops::rmsnorm_forward(s(), out4.view(), rs4.view(), x.view(), w.view(), 1e-6f);
  ops::rmsnorm_backward(s(), dx4.view(), dw4.view(), dout.view(), x.view(), w.view(), rs4.view());
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(out1.raw(), out4.raw());
  EXPECT_EQ(rs1.raw(), rs4.raw());
  EXPECT_EQ(dx1.raw(), dx4.raw());
  EXPECT_EQ(dw1.raw(), dw4.raw());
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, RmsNormTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class EmbeddingNoPositionsTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

// Without wpe the output is the token rows exactly; without dwpe, dwte is what it is with dwpe.
TEST_P(EmbeddingNoPositionsTest, TokenRowsOnly) {
  const DType dt = GetParam();
  const int64_t B = 3, T = 5, C = 7, V = 6;
  std::vector<int32_t> tok(B * T);
  for (int64_t i = 0; i < B * T; ++i) tok[i] = static_cast<int32_t>((i * 5 + 1) % V);
  tok[3] = tok[4] = 2;  // a repeated token
  HostTensor wte = random_tensor(rng_, dt, {V, C}), out(dt, {B, T, C}), dout = random_tensor(rng_, dt, {B, T, C});
  HostTensor dwte = random_tensor(rng_, dt, {V, C}), dwte_pe = dwte, dwpe(dt, {T, C});
  ops::embedding_forward(s(), out.view(), tok.data(), wte.view(), TensorView{}, B, T, C);
  ops::embedding_backward(s(), dwte.view(), TensorView{}, dout.view(), tok.data(), B, T, C);
  ops::embedding_backward(s(), dwte_pe.view(), dwpe.view(), dout.view(), tok.data(), B, T, C);
  sync();
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < C; ++j) ASSERT_EQ(out.get(i * C + j), wte.get(tok[i] * C + j)) << "row " << i;
  EXPECT_EQ(dwte.raw(), dwte_pe.raw());
  // And dwte is its reference: each token's rows of dout summed onto its initial value.
  HostTensor dwte0 = random_tensor(rng_, dt, {V, C});
  std::vector<double> init = dwte0.values(), grad(V * C, 0.0);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < C; ++j) grad[tok[i] * C + j] += dout.get(i * C + j);
  ops::embedding_backward(s(), dwte0.view(), TensorView{}, dout.view(), tok.data(), B, T, C);
  sync();
  expect_accumulated(dwte0.values(), init, grad, op_rel(dt), "embedding dwte without dwpe" + dt_tag(dt));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, EmbeddingNoPositionsTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
