// Elementwise ops and simple reductions: bias add/grad, GELU, ReLU, residual add, scale.
#include "kernel_test_util.h"

namespace zt::test {
namespace {

class ElementwiseTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST_P(ElementwiseTest, BiasAddAndGrad) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {33, 65}, {300, 130}}) {
    HostTensor out = random_tensor(rng_, dt, {N, C}), bias = random_tensor(rng_, dt, {C});
    auto o0 = out.values(), b = bias.values();
    ops::bias_add(s(), out.view(), bias.view());
    // bias_grad: dbias += column sums; dout = the original out values.
    HostTensor dout(dt, {N, C});
    dout.fill(o0);
    HostTensor dbias = random_tensor(rng_, dt, {C});
    auto db0 = dbias.values();
    ops::bias_grad(s(), dbias.view(), dout.view());
    sync();
    std::vector<double> want(N * C), mag(N * C);
    for (int64_t i = 0; i < N * C; ++i) {
      want[i] = o0[i] + b[i % C];
      mag[i] = std::fabs(o0[i]) + std::fabs(b[i % C]);
    }
    expect_close_mag(out.values(), want, mag, dtype_eps(dt), "bias_add" + dt_tag(dt));
    std::vector<double> gw(C), gm(C);
    for (int64_t j = 0; j < C; ++j) {
      gw[j] = db0[j];
      gm[j] = std::fabs(db0[j]);
      for (int64_t i = 0; i < N; ++i) gw[j] += o0[i * C + j], gm[j] += std::fabs(o0[i * C + j]);
    }
    expect_close_mag(dbias.values(), gw, gm, dtype_eps(dt), "bias_grad" + dt_tag(dt));
  }
}

TEST_P(ElementwiseTest, BiasGradIndependentOfThreadCount) {
  const DType dt = GetParam();
  const int64_t N = 517, C = 131;
  HostTensor dout = random_tensor(rng_, dt, {N, C});
  HostTensor d1(dt, {C}), d4(dt, {C});
  ops::bias_grad(s(), d1.view(), dout.view());
  set_stream_omp_threads(s(), 4);
  ops::bias_grad(s(), d4.view(), dout.view());
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(d1.raw(), d4.raw());
}

TEST_P(ElementwiseTest, GeluForwardAndFiniteDifferenceBackward) {
  const DType dt = GetParam();
  const int64_t n = 1001;
  HostTensor x = random_tensor(rng_, dt, {n}, -4.0, 4.0), out(dt, {n});
  HostTensor dout = random_tensor(rng_, dt, {n}), dinp = random_tensor(rng_, dt, {n});
  auto xv = x.values(), dy = dout.values(), dx0 = dinp.values();
  ops::gelu_forward(s(), out.view(), x.view());
  ops::gelu_backward(s(), dinp.view(), x.view(), dout.view());
  sync();
  std::vector<double> want(n), mag(n);
  for (int64_t i = 0; i < n; ++i) want[i] = gelu_ref(xv[i]), mag[i] = std::fabs(want[i]) + std::fabs(xv[i]) * 1e-2;
  expect_close_mag(out.values(), want, mag, dtype_eps(dt), "gelu_forward" + dt_tag(dt));
  // d/dx of L = sum dout * gelu(x); elementwise, so each FD perturbs one input.
  std::vector<double> grad(n);
  for (int64_t i = 0; i < n; ++i) {
    const double h = 1e-6;
    grad[i] = dy[i] * (gelu_ref(xv[i] + h) - gelu_ref(xv[i] - h)) / (2 * h);
  }
  expect_accumulated(dinp.values(), dx0, grad, grad_rel(dt), "gelu_backward" + dt_tag(dt));
}

TEST_P(ElementwiseTest, ReluForwardBackward) {
  const DType dt = GetParam();
  const int64_t n = 257;
  HostTensor x = random_tensor(rng_, dt, {n}), out(dt, {n});
  x.set(0, 0.0);  // relu'(0) = 0
  HostTensor dout = random_tensor(rng_, dt, {n}), dinp = random_tensor(rng_, dt, {n});
  auto xv = x.values(), dy = dout.values(), dx0 = dinp.values();
  ops::relu_forward(s(), out.view(), x.view());
  ops::relu_backward(s(), dinp.view(), x.view(), dout.view());
  sync();
  std::vector<double> want(n), grad(n);
  for (int64_t i = 0; i < n; ++i) {
    want[i] = xv[i] > 0 ? xv[i] : 0.0;
    grad[i] = xv[i] > 0 ? dy[i] : 0.0;
  }
  expect_close(out.values(), want, 0, 0, "relu_forward" + dt_tag(dt));
  expect_accumulated(dinp.values(), dx0, grad, dtype_eps(dt), "relu_backward" + dt_tag(dt));
}

// One fp32 add and one rounding per element, over lengths that cross the kernels' chunks and
// the parallel threshold, with the output aliasing either input.
TEST_P(ElementwiseTest, ResidualAddAllowsAliasing) {
  const DType dt = GetParam();
  for (const int64_t n : {1000, 70001}) {
    HostTensor a = random_tensor(rng_, dt, {n}), b = random_tensor(rng_, dt, {n}), out(dt, {n}), want(dt, {n});
    HostTensor b2 = b;
    auto av = a.values(), bv = b.values();
    // The sum of two fp32 values is exact in double: its float is the fp32 add's rounding.
    for (int64_t i = 0; i < n; ++i) want.set(i, static_cast<float>(av[i] + bv[i]));
    ops::residual_add(s(), out.view(), a.view(), b.view());
    ops::residual_add(s(), a.view(), a.view(), b.view());     // out aliases a
    ops::residual_add(s(), b2.view(), out.view(), b2.view());  // out aliases b
    sync();
    EXPECT_EQ(out.raw(), want.raw()) << "residual_add" << dt_tag(dt) << " n=" << n;
    EXPECT_EQ(a.raw(), out.raw());
    for (int64_t i = 0; i < n; ++i) want.set(i, static_cast<float>(out.get(i) + bv[i]));
    EXPECT_EQ(b2.raw(), want.raw()) << "residual_add aliasing b" << dt_tag(dt) << " n=" << n;
  }
}

TEST_P(ElementwiseTest, ScaleMultipliesInPlace) {
  const DType dt = GetParam();
  const int64_t n = 777;
  HostTensor x = random_tensor(rng_, dt, {n});
  auto xv = x.values();
  ops::scale(s(), x.view(), 0.375f);
  sync();
  std::vector<double> want(n), mag(n);
  for (int64_t i = 0; i < n; ++i) want[i] = 0.375 * xv[i], mag[i] = std::fabs(want[i]);
  expect_close_mag(x.values(), want, mag, dtype_eps(dt), "scale" + dt_tag(dt));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, ElementwiseTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
