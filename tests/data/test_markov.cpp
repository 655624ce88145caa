// markov: data — the exact best loss against brute force and Monte Carlo, and the sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zerotrain/data/markov.h"

namespace {

// Exact expected cross-entropy by enumerating every sequence of T+1 tokens (tiny V, T).
double brute_force_best_loss(const zt::MarkovDataset& d, int64_t V, int K, int64_t T) {
  const int64_t len = T + 1;
  int64_t total = 1;
  for (int64_t i = 0; i < len; ++i) total *= V;
  std::vector<int32_t> x(len);
  double expected = 0;
  for (int64_t code = 0; code < total; ++code) {
    int64_t c = code;
    for (int64_t i = 0; i < len; ++i) { x[i] = static_cast<int32_t>(c % V); c /= V; }
    // P(sequence) and the loss of the true conditional at each target.
    double logp = 0, loss = 0;
    for (int64_t n = 0; n < len; ++n) {
      double p = n < K ? 1.0 / V : d.prob(d.context_at(x.data(), n), x[n]);
      logp += std::log(p);
      if (n >= 1) loss -= std::log(p);
    }
    expected += std::exp(logp) * loss;
  }
  return expected / T;
}

}  // namespace

TEST(Markov, BestLossMatchesBruteForce) {
  struct Case { int64_t V; int K; int64_t T; };
  for (Case c : {Case{3, 2, 5}, Case{4, 1, 6}, Case{3, 3, 5}, Case{5, 0, 4}, Case{2, 4, 9}}) {
    zt::MarkovDataset d(c.V, c.K, 42, 0.5, c.T, 4);
    EXPECT_NEAR(d.best_loss(), brute_force_best_loss(d, c.V, c.K, c.T), 1e-12)
        << "V=" << c.V << " K=" << c.K << " T=" << c.T;
  }
}

TEST(Markov, BestLossMatchesMonteCarlo) {
  const int64_t V = 16, T = 64;
  const int K = 2;
  zt::MarkovDataset d(V, K, 7, 0.5, T, 32);
  // Monte Carlo estimate of the true chain's cross-entropy over generated sequences.
  const int64_t n_seq = 4000;
  std::vector<int32_t> seq(T + 1);
  double sum = 0;
  std::vector<double> per_pos(T, 0.0);
  for (int64_t g = 0; g < n_seq; ++g) {
    d.sequence(g, seq.data());
    for (int64_t p = 0; p < T; ++p) {
      int64_t n = p + 1;
      double q = n < K ? 1.0 / V : d.prob(d.context_at(seq.data(), n), seq[n]);
      per_pos[p] -= std::log(q);
      sum -= std::log(q);
    }
  }
  double mc = sum / (n_seq * T);
  EXPECT_NEAR(d.best_loss(), mc, 0.01) << "exact " << d.best_loss() << " vs MC " << mc;
  // Non-trivial: well below uniform, well above 0.
  EXPECT_LT(d.best_loss(), std::log(double(V)) - 0.3);
  EXPECT_GT(d.best_loss(), 0.3);
  // First K-1 positions see an independent uniform token: ln V exactly.
  EXPECT_DOUBLE_EQ(d.position_entropy()[0], std::log(double(V)));
  EXPECT_NEAR(per_pos[0] / n_seq, std::log(double(V)), 1e-12);
  EXPECT_NEAR(per_pos[T - 1] / n_seq, d.position_entropy()[T - 1], 0.06);
}

TEST(Markov, SamplerFollowsTheTable) {
  const int64_t V = 4, T = 256;
  zt::MarkovDataset d(V, 1, 3, 0.5, T, 8);
  std::vector<double> counts(V * V, 0.0), ctx(V, 0.0);
  std::vector<int32_t> seq(T + 1);
  for (int64_t g = 0; g < 400; ++g) {
    d.sequence(g, seq.data());
    for (int64_t n = 1; n <= T; ++n) {
      counts[seq[n - 1] * V + seq[n]] += 1;
      ctx[seq[n - 1]] += 1;
    }
  }
  for (int64_t c = 0; c < V; ++c) {
    ASSERT_GT(ctx[c], 1000);
    for (int64_t x = 0; x < V; ++x) {
      double p = d.prob(c, static_cast<int32_t>(x));
      double se = std::sqrt(p * (1 - p) / ctx[c]);
      EXPECT_NEAR(counts[c * V + x] / ctx[c], p, 5 * se + 1e-3) << "c=" << c << " x=" << x;
    }
  }
}

TEST(Markov, TokensInRangeAndTemperatureMatters) {
  zt::MarkovDataset sharp(32, 1, 5, 0.25, 32, 4), flat(32, 1, 5, 4.0, 32, 4);
  EXPECT_LT(sharp.best_loss(), flat.best_loss());
  EXPECT_LT(flat.best_loss(), std::log(32.0));
  zt::Batch b;
  sharp.fill(9, 0, 4, b);
  EXPECT_EQ(b.B, 4);
  EXPECT_EQ(b.T, 32);
  for (int32_t t : b.inputs) { EXPECT_GE(t, 0); EXPECT_LT(t, 32); }
  for (int32_t t : b.targets) { EXPECT_GE(t, 0); EXPECT_LT(t, 32); }
}
