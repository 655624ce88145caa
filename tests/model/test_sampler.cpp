// The sampler (model/sampler.h) on fixed logits: temperature, top-k, top-p, seeded draws, greedy.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "zerotrain/core/check.h"
#include "zerotrain/model/sampler.h"

namespace zt {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 0.5f, 2.0f, -1.0f, 3.0f};

SamplingOptions opts(double t, int64_t k = 0, double p = 1.0, uint64_t seed = 0) {
  SamplingOptions o;
  o.temperature = t;
  o.top_k = k;
  o.top_p = p;
  o.seed = seed;
  return o;
}

double total(const std::vector<std::pair<int32_t, double>>& d) {
  double s = 0;
  for (const auto& e : d) s += e.second;
  return s;
}

TEST(Sampler, TemperatureScalesTheLogits) {
  for (double t : {0.5, 1.0, 2.0}) {
    const auto d = sampling_distribution(kLogits, opts(t));
    ASSERT_EQ(d.size(), kLogits.size());
    double z = 0;
    for (float l : kLogits) z += std::exp(l / t);
    for (const auto& [id, p] : d) EXPECT_NEAR(p, std::exp(kLogits[id] / t) / z, 1e-12) << "t=" << t << " id " << id;
    // Descending probability, the tie (ids 1 and 5) broken by the lower id.
    EXPECT_EQ(d[0].first, 1);
    EXPECT_EQ(d[1].first, 5);
    EXPECT_EQ(d[2].first, 3);
  }
  // A lower temperature sharpens: the top token's probability grows.
  EXPECT_GT(sampling_distribution(kLogits, opts(0.5))[0].second, sampling_distribution(kLogits, opts(2.0))[0].second);
}

TEST(Sampler, TopKKeepsExactlyK) {
  for (int64_t k = 1; k <= 6; ++k) {
    const auto d = sampling_distribution(kLogits, opts(1.0, k));
    ASSERT_EQ(static_cast<int64_t>(d.size()), k);
    EXPECT_NEAR(total(d), 1.0, 1e-12);
  }
  const auto d3 = sampling_distribution(kLogits, opts(1.0, 3));
  EXPECT_EQ(d3[0].first, 1);
  EXPECT_EQ(d3[1].first, 5);
  EXPECT_EQ(d3[2].first, 3);
  const double z = std::exp(3.0) * 2 + std::exp(2.0);
  EXPECT_NEAR(d3[2].second, std::exp(2.0) / z, 1e-12);
  EXPECT_EQ(sampling_distribution(kLogits, opts(1.0, 100)).size(), kLogits.size());  // k > V: all
}

TEST(Sampler, TopPKeepsTheSmallestPrefixWithEnoughMass) {
  const auto full = sampling_distribution(kLogits, opts(1.0));
  for (double p : {0.05, 0.3, 0.5, 0.75, 0.9, 0.99, 1.0}) {
    const auto d = sampling_distribution(kLogits, opts(1.0, 0, p));
    // Expected size: the first prefix of `full` whose mass reaches p.
    size_t n = 0;
    double mass = 0;
    while (n < full.size() && mass < p) mass += full[n++].second;
    ASSERT_EQ(d.size(), n) << "p=" << p;
    double kept = 0;
    for (size_t i = 0; i < n; ++i) kept += full[i].second;
    EXPECT_GE(kept, p - 1e-12);
    if (n > 1) {
      EXPECT_LT(kept - full[n - 1].second, p) << "one fewer token would have been enough, p=" << p;
    }
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(d[i].second, full[i].second / kept, 1e-12);
  }
  // Top-k first, then top-p over the renormalised k.
  const auto kp = sampling_distribution(kLogits, opts(1.0, 2, 0.6));
  ASSERT_EQ(kp.size(), 2u);  // ids 1 and 5 at 0.5 each: one is not enough for 0.6
}

TEST(Sampler, SeededDrawsAreDeterministicAndFollowTheDistribution) {
  const SamplingOptions o = opts(1.0, 0, 1.0, 99);
  std::vector<int32_t> first, second;
  for (uint64_t i = 0; i < 200; ++i) first.push_back(sample_token(kLogits, o, i));
  for (uint64_t i = 0; i < 200; ++i) second.push_back(sample_token(kLogits, o, i));
  EXPECT_EQ(first, second);
  std::vector<int32_t> other;
  for (uint64_t i = 0; i < 200; ++i) other.push_back(sample_token(kLogits, opts(1.0, 0, 1.0, 100), i));
  EXPECT_NE(first, other);
  // The draw is a pure function of (seed, index): a fixed value, whatever ran before.
  EXPECT_EQ(sampling_uniform(99, 5), sampling_uniform(99, 5));
  EXPECT_NE(sampling_uniform(99, 5), sampling_uniform(99, 6));
  // 20000 draws: each token's frequency within 0.015 of its probability.
  std::map<int32_t, int> count;
  const int n = 20000;
  for (uint64_t i = 0; i < n; ++i) ++count[sample_token(kLogits, o, i)];
  for (const auto& [id, p] : sampling_distribution(kLogits, o))
    EXPECT_NEAR(static_cast<double>(count[id]) / n, p, 0.015) << "token " << id;
  // Tokens cut by top-k are never drawn.
  for (uint64_t i = 0; i < 2000; ++i) {
    const int32_t t = sample_token(kLogits, opts(1.0, 2, 1.0, 7), i);
    EXPECT_TRUE(t == 1 || t == 5) << t;
  }
}

TEST(Sampler, TemperatureZeroIsArgmax) {
  EXPECT_EQ(argmax_token(kLogits), 1);  // the first of the two maxima
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(sample_token(kLogits, opts(0.0, 3, 0.5, i), i), 1);
  EXPECT_EQ(argmax_token({-5.0f, -2.0f, -7.0f}), 1);
}

TEST(Sampler, OutOfRangeOptionsAreInputErrors) {
  EXPECT_NO_THROW(validate_sampling_options(opts(0.0, 0, 1.0), "sample"));
  EXPECT_THROW(validate_sampling_options(opts(-0.1), "sample"), InputError);
  EXPECT_THROW(validate_sampling_options(opts(NAN), "sample"), InputError);
  EXPECT_THROW(validate_sampling_options(opts(1.0, -1), "sample"), InputError);
  EXPECT_THROW(validate_sampling_options(opts(1.0, 0, 1.5), "sample"), InputError);
  EXPECT_THROW(validate_sampling_options(opts(1.0, 0, 0.0), "sample"), InputError);
  try {
    validate_sampling_options(opts(1.0, 0, 1.5), "sample");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--top-p"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt
