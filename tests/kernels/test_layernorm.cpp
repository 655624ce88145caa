// LayerNorm: forward (out, mean, rstd) against a double reference; backward (dinp, dweight,
// dbias) against central finite differences of the double forward; thread-count independence.
#include "kernel_test_util.h"

namespace zt::test {
namespace {

constexpr double kEps = 1e-5;

// out[N,C] for inputs x[N,C], w[C], b[C]; optional mean/rstd outputs.
std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& b, int64_t N, int64_t C, std::vector<double>* mean = nullptr,
                                  std::vector<double>* rstd = nullptr) {
  std::vector<double> out(N * C);
  for (int64_t i = 0; i < N; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < C; ++j) m += x[i * C + j];
    m /= C;
    for (int64_t j = 0; j < C; ++j) v += (x[i * C + j] - m) * (x[i * C + j] - m);
    v /= C;
    double rs = 1.0 / std::sqrt(v + kEps);
    for (int64_t j = 0; j < C; ++j) out[i * C + j] = (x[i * C + j] - m) * rs * w[j] + b[j];
    if (mean) (*mean)[i] = m;
    if (rstd) (*rstd)[i] = rs;
  }
  return out;
}

class LayerNormTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(LayerNormTest, ForwardMatchesReferenceBackwardMatchesFiniteDifferences) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 2}, {3, 5}, {7, 33}, {4, 64}}) {
    HostTensor x = random_tensor(rng_, dt, {N, C}, -2.0, 2.0), w = random_tensor(rng_, dt, {C}, 0.5, 1.5);
    HostTensor b = random_tensor(rng_, dt, {C}), out(dt, {N, C});
    HostTensor mean(DType::F32, {N}), rstd(DType::F32, {N});
    HostTensor dout = random_tensor(rng_, dt, {N, C});
    HostTensor dx = random_tensor(rng_, dt, {N, C}), dw = random_tensor(rng_, dt, {C}), db = random_tensor(rng_, dt, {C});
    auto xv = x.values(), wv = w.values(), bv = b.values(), dy = dout.values();
    auto dx0 = dx.values(), dw0 = dw.values(), db0 = db.values();

    ops::layernorm_forward(s(), out.view(), mean.view(), rstd.view(), x.view(), w.view(), b.view(), kEps);
    ops::layernorm_backward(s(), dx.view(), dw.view(), db.view(), dout.view(), x.view(), w.view(), mean.view(),
                            rstd.view());
    sync();

    const std::string tag = dt_tag(dt) + " N" + std::to_string(N) + " C" + std::to_string(C);
    std::vector<double> m_ref(N), rs_ref(N);
    auto want = layernorm_ref(xv, wv, bv, N, C, &m_ref, &rs_ref);
    std::vector<double> mag(N * C);
    for (int64_t i = 0; i < N * C; ++i) mag[i] = std::fabs(want[i]) + std::fabs(bv[i % C]) + 1e-2;
    expect_close_mag(out.values(), want, mag, dtype_eps(dt) * 2, "layernorm out" + tag);
    expect_close(mean.values(), m_ref, 1e-6, 1e-5, "layernorm mean" + tag);
    expect_close(rstd.values(), rs_ref, 1e-6, 1e-4, "layernorm rstd" + tag);

    auto loss_x = [&](const std::vector<double>& xx) { return dot(dy, layernorm_ref(xx, wv, bv, N, C)); };
    auto loss_w = [&](const std::vector<double>& ww) { return dot(dy, layernorm_ref(xv, ww, bv, N, C)); };
    auto loss_b = [&](const std::vector<double>& bb) { return dot(dy, layernorm_ref(xv, wv, bb, N, C)); };
    expect_accumulated(dx.values(), dx0, numeric_grad(loss_x, xv), grad_rel(dt), "layernorm dinp" + tag);
    expect_accumulated(dw.values(), dw0, numeric_grad(loss_w, wv), grad_rel(dt), "layernorm dweight" + tag);
    expect_accumulated(db.values(), db0, numeric_grad(loss_b, bv), grad_rel(dt), "layernorm dbias" + tag);
  }
}

TEST_P(LayerNormTest, BackwardIndependentOfThreadCount) {
  const DType dt = GetParam();
  const int64_t N = 129, C = 200;
  HostTensor x = random_tensor(rng_, dt, {N, C}), w = random_tensor(rng_, dt, {C}), b = random_tensor(rng_, dt, {C});
  HostTensor out(dt, {N, C}), mean(DType::F32, {N}), rstd(DType::F32, {N}), dout = random_tensor(rng_, dt, {N, C});
  HostTensor dx1(dt, {N, C}), dw1(dt, {C}), db1(dt, {C}), dx4(dt, {N, C}), dw4(dt, {C}), db4(dt, {C});
  ops::layernorm_forward(s(), out.view(), mean.view(), rstd.view(), x.view(), w.view(), b.view(), 1e-5f);
  ops::layernorm_backward(s(), dx1.view(), dw1.view(), db1.view(), dout.view(), x.view(), w.view(), mean.view(),
                          rstd.view());
  set_stream_omp_threads(s(), 4);
  HostTensor out4(dt, {N, C}), mean4(DType::F32, {N}), rstd4(DType::F32, {N});
  ops::layernorm_forward(s(), out4.view(), mean4.view(), rstd4.view(), x.view(), w.view(), b.view(), 1e-5f);
  ops::layernorm_backward(s(), dx4.view(), dw4.view(), db4.view(), dout.view(), x.view(), w.view(), mean.view(),
                          rstd.view());
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(out.raw(), out4.raw());
  EXPECT_EQ(rstd.raw(), rstd4.raw());
  EXPECT_EQ(dx1.raw(), dx4.raw());
  EXPECT_EQ(dw1.raw(), dw4.raw());
  EXPECT_EQ(db1.raw(), db4.raw());
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LayerNormTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
