// Token + position embedding: forward against a reference, backward against finite differences
// (repeated tokens, wpe with more positions than T), determinism across thread counts.
#include "kernel_test_util.h"

namespace zt::test {
namespace {

class EmbeddingTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

std::vector<double> embedding_ref(const std::vector<int32_t>& tok, const std::vector<double>& wte,
                                  const std::vector<double>& wpe, int64_t B, int64_t T, int64_t C) {
  std::vector<double> out(B * T * C);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t j = 0; j < C; ++j) out[i * C + j] = wte[tok[i] * C + j] + wpe[(i % T) * C + j];
  return out;
}

TEST_P(EmbeddingTest, ForwardAndFiniteDifferenceBackward) {
  const DType dt = GetParam();
  struct Dims { int64_t B, T, C, V, Tmax; };
  for (Dims d : {Dims{1, 1, 1, 1, 1}, Dims{2, 5, 3, 4, 7}, Dims{3, 8, 17, 11, 8}}) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(d.V - 1));
    std::vector<int32_t> tok(d.B * d.T);
    for (auto& t : tok) t = pick(rng_);
    tok[0] = static_cast<int32_t>(d.V - 1);
    HostTensor wte = random_tensor(rng_, dt, {d.V, d.C}), wpe = random_tensor(rng_, dt, {d.Tmax, d.C});
    HostTensor out(dt, {d.B, d.T, d.C}), dout = random_tensor(rng_, dt, {d.B, d.T, d.C});
    HostTensor dwte = random_tensor(rng_, dt, {d.V, d.C}), dwpe = random_tensor(rng_, dt, {d.Tmax, d.C});
    auto te = wte.values(), pe = wpe.values(), dy = dout.values(), dte0 = dwte.values(), dpe0 = dwpe.values();
    ops::embedding_forward(s(), out.view(), tok.data(), wte.view(), wpe.view(), d.B, d.T, d.C);
    ops::embedding_backward(s(), dwte.view(), dwpe.view(), dout.view(), tok.data(), d.B, d.T, d.C);
    sync();
    const std::string tag = dt_tag(dt) + " B" + std::to_string(d.B) + " T" + std::to_string(d.T);
    auto want = embedding_ref(tok, te, pe, d.B, d.T, d.C);
    std::vector<double> mag(want.size());
    for (size_t i = 0; i < mag.size(); ++i) mag[i] = std::fabs(want[i]) + 1e-3;
    expect_close_mag(out.values(), want, mag, dtype_eps(dt), "embedding out" + tag);
    auto loss_te = [&](const std::vector<double>& w) { return dot(dy, embedding_ref(tok, w, pe, d.B, d.T, d.C)); };
    auto loss_pe = [&](const std::vector<double>& w) { return dot(dy, embedding_ref(tok, te, w, d.B, d.T, d.C)); };
    auto g_pe = numeric_grad(loss_pe, pe);
    expect_accumulated(dwte.values(), dte0, numeric_grad(loss_te, te), grad_rel(dt), "embedding dwte" + tag);
    expect_accumulated(dwpe.values(), dpe0, g_pe, grad_rel(dt), "embedding dwpe" + tag);
    // Rows of wpe beyond T are untouched (bitwise).
    for (int64_t i = d.T * d.C; i < d.Tmax * d.C; ++i) EXPECT_EQ(dwpe.get(i), dpe0[i]);
  }
}

TEST_P(EmbeddingTest, BackwardIndependentOfThreadCount) {
  const DType dt = GetParam();
  const int64_t B = 4, T = 64, C = 96, V = 50;
  std::uniform_int_distribution<int32_t> pick(0, V - 1);
  std::vector<int32_t> tok(B * T);
  for (auto& t : tok) t = pick(rng_);
  HostTensor dout = random_tensor(rng_, dt, {B, T, C});
  HostTensor te1(dt, {V, C}), pe1(dt, {T, C}), te4(dt, {V, C}), pe4(dt, {T, C});
  ops::embedding_backward(s(), te1.view(), pe1.view(), dout.view(), tok.data(), B, T, C);
  set_stream_omp_threads(s(), 4);
  ops::embedding_backward(s(), te4.view(), pe4.view(), dout.view(), tok.data(), B, T, C);
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(te1.raw(), te4.raw());
  EXPECT_EQ(pe1.raw(), pe4.raw());
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, EmbeddingTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
