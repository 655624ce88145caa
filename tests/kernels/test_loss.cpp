// Fused softmax + cross-entropy and MSE: losses against double references, gradients against
// central finite differences, ignored targets, dloss scaling, aliasing dlogits with logits.
#include "kernel_test_util.h"

namespace zt::test {
namespace {

class LossTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

// Per-row -log softmax(x)[target] (0 for ignored rows).
std::vector<double> xent_ref(const std::vector<double>& x, const std::vector<int32_t>& tgt, int64_t N, int64_t V) {
  std::vector<double> loss(N, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    if (tgt[i] < 0) continue;
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, x[i * V + j]);
    for (int64_t j = 0; j < V; ++j) sum += std::exp(x[i * V + j] - mx);
    loss[i] = std::log(sum) + mx - x[i * V + tgt[i]];
  }
  return loss;
}

TEST_P(LossTest, SoftmaxCrossEntropyMatchesReferenceAndFiniteDifferences) {
  const DType dt = GetParam();
  for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 1}, {4, 3}, {9, 17}, {6, 101}}) {
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
    std::vector<int32_t> tgt(N);
    for (auto& t : tgt) t = pick(rng_);
    if (N > 2) tgt[1] = -1;  // ignored
    const float dloss = 0.3f;
    HostTensor logits = random_tensor(rng_, dt, {N, V}, -4.0, 4.0), dlogits(dt, {N, V}), losses(DType::F32, {N});
    auto x = logits.values();
    ops::softmax_cross_entropy(s(), losses.view(), dlogits.view(), logits.view(), tgt.data(), dloss);
    sync();
    const std::string tag = dt_tag(dt) + " N" + std::to_string(N) + " V" + std::to_string(V);
    expect_close(losses.values(), xent_ref(x, tgt, N, V), 1e-6, 1e-5, "xent losses" + tag);
    auto total = [&](const std::vector<double>& xx) {
      double l = 0;
      for (double v : xent_ref(xx, tgt, N, V)) l += dloss * v;
      return l;
    };
    std::vector<double> zero(N * V, 0.0);
    expect_accumulated(dlogits.values(), zero, numeric_grad(total, x), grad_rel(dt), "xent dlogits" + tag);
    if (N > 2) {
      EXPECT_EQ(losses.get(1), 0.0);
      for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dlogits.get(1 * V + j), 0.0);
    }
  }
}

TEST_P(LossTest, SoftmaxCrossEntropyAliasedDlogitsAndScaling) {
  const DType dt = GetParam();
  const int64_t N = 13, V = 50;
  std::uniform_int_distribution<int32_t> pick(0, V - 1);
  std::vector<int32_t> tgt(N);
  for (auto& t : tgt) t = pick(rng_);
  HostTensor logits = random_tensor(rng_, dt, {N, V}, -8.0, 8.0);
  HostTensor separate(dt, {N, V}), quarter(dt, {N, V}), l1(DType::F32, {N}), l2(DType::F32, {N}), l3(DType::F32, {N});
  HostTensor inplace = logits;
  ops::softmax_cross_entropy(s(), l1.view(), separate.view(), logits.view(), tgt.data(), 1.0f);
  ops::softmax_cross_entropy(s(), l2.view(), quarter.view(), logits.view(), tgt.data(), 0.25f);
  ops::softmax_cross_entropy(s(), l3.view(), inplace.view(), inplace.view(), tgt.data(), 1.0f);
  sync();
  EXPECT_EQ(inplace.raw(), separate.raw()) << "dlogits aliasing logits changed the result";
  EXPECT_EQ(l3.raw(), l1.raw());
  EXPECT_EQ(l2.raw(), l1.raw()) << "losses must not depend on dloss";
  // Scaling by a power of 2 is exact, except where fp16 drops into subnormals (ulp 2^-24 there).
  for (int64_t i = 0; i < N * V; ++i) {
    const double want = 0.25 * separate.get(i);
    if (dt == DType::F16 && std::fabs(want) < 0x1p-14) {
      ASSERT_NEAR(quarter.get(i), want, 0x1p-24) << i;
    } else {
      ASSERT_EQ(quarter.get(i), want) << i;
    }
  }
}

TEST_P(LossTest, SoftmaxCrossEntropyIsStableForLargeLogits) {
  const DType dt = GetParam();
  const int64_t N = 2, V = 4;
  std::vector<int32_t> tgt{0, 3};
  HostTensor logits(dt, {N, V}), dl(dt, {N, V}), losses(DType::F32, {N});
  const double big = dt == DType::F16 ? 60000.0 : 1e30;
  const double row[] = {big, big, -big, 0.0};
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < V; ++j) logits.set(i * V + j, row[j]);
  ops::softmax_cross_entropy(s(), losses.view(), dl.view(), logits.view(), tgt.data(), 1.0f);
  sync();
  EXPECT_NEAR(losses.get(0), std::log(2.0), 1e-6);  // two equal maxima
  EXPECT_TRUE(std::isfinite(losses.get(1)) && losses.get(1) > 1e3);
  EXPECT_NEAR(dl.get(0), -0.5, 1e-3);
  EXPECT_NEAR(dl.get(1), 0.5, 1e-3);
  for (int64_t i = 0; i < N * V; ++i) EXPECT_TRUE(std::isfinite(dl.get(i)));
}

TEST_P(LossTest, MseMatchesReferenceAndFiniteDifferences) {
  const DType dt = GetParam();
  for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}, {8, 19}}) {
    HostTensor pred = random_tensor(rng_, dt, {N, K}), target = random_tensor(rng_, dt, {N, K});
    HostTensor dpred = random_tensor(rng_, dt, {N, K}), losses(DType::F32, {N});
    auto p = pred.values(), y = target.values();
    const float dloss = 0.7f;
    ops::mse_loss(s(), losses.view(), dpred.view(), pred.view(), target.view(), dloss);
    sync();
    auto ref = [&](const std::vector<double>& pp) {
      std::vector<double> l(N, 0.0);
      for (int64_t i = 0; i < N; ++i) {
        for (int64_t j = 0; j < K; ++j) l[i] += (pp[i * K + j] - y[i * K + j]) * (pp[i * K + j] - y[i * K + j]);
        l[i] /= K;
      }
      return l;
    };
    const std::string tag = dt_tag(dt) + " N" + std::to_string(N) + " K" + std::to_string(K);
    expect_close(losses.values(), ref(p), 1e-6, 1e-5, "mse losses" + tag);
    auto total = [&](const std::vector<double>& pp) {
      double l = 0;
      for (double v : ref(pp)) l += dloss * v;
      return l;
    };
    std::vector<double> zero(N * K, 0.0);  // dpred overwrites
    expect_accumulated(dpred.values(), zero, numeric_grad(total, p), grad_rel(dt), "mse dpred" + tag);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LossTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
