// Counter-based initialisation: slice independence, determinism, GPT-2 init statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/init_rng.h"
#include "zerotrain/model/mlp.h"

namespace zt {
namespace {

ParamSpec normal_spec(const std::string& name, int64_t numel, float std) {
  ParamSpec p;
  p.name = name;
  p.shape = {numel};
  p.numel = numel;
  p.init = InitKind::Normal;
  p.init_std = std;
  return p;
}

TEST(InitRng, SliceEqualsFullInitSlice) {
  ParamSpec p = normal_spec("h.3.mlp.c_fc.weight", 1001, 0.02f);
  std::vector<float> full(p.numel);
  init_param_slice(1234, p, 0, p.numel, full.data());
  // odd and even starts, single elements, the tail, empty
  for (auto [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1, 1}, {1, 2}, {7, 100}, {500, 501}, {999, 2}, {1000, 1}, {333, 0}, {2, 998}}) {
    std::vector<float> part(count + 1, -99.0f);
    init_param_slice(1234, p, begin, count, part.data());
    for (int64_t j = 0; j < count; ++j) ASSERT_EQ(part[j], full[begin + j]) << "begin " << begin << " j " << j;
    EXPECT_EQ(part[count], -99.0f) << "wrote past the slice";
  }
  // shards of any world size concatenate to the full init
  for (int world : {2, 3, 4, 7}) {
    std::vector<float> cat(p.numel);
    int64_t per = (p.numel + world - 1) / world;
    for (int r = 0; r < world; ++r) {
      int64_t b = r * per, n = std::min(per, p.numel - b);
      if (n > 0) init_param_slice(1234, p, b, n, cat.data() + b);
    }
    EXPECT_EQ(cat, full) << "world " << world;
  }
}

TEST(InitRng, DependsOnSeedNameAndIndexOnly) {
  ParamSpec a = normal_spec("wte.weight", 256, 1.0f), b = normal_spec("wpe.weight", 256, 1.0f);
  std::vector<float> a1(256), a2(256), b1(256), s2(256);
  init_param_slice(7, a, 0, 256, a1.data());
  init_param_slice(7, a, 0, 256, a2.data());
  init_param_slice(7, b, 0, 256, b1.data());
  init_param_slice(8, a, 0, 256, s2.data());
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, b1);
  EXPECT_NE(a1, s2);
  // the shape does not matter, only (seed, name, index)
  ParamSpec a_big = normal_spec("wte.weight", 4096, 1.0f);
  std::vector<float> big(256);
  init_param_slice(7, a_big, 0, 256, big.data());
  EXPECT_EQ(a1, big);
  // a fixed value pins the stream: changing the generator changes every run's weights
  EXPECT_EQ(init_normal(0, "x", 0), init_normal(0, "x", 0));
  EXPECT_NE(init_normal(0, "x", 0), init_normal(0, "x", 1));
}

TEST(InitRng, StandardNormalMoments) {
  const int64_t n = 200000;
  ParamSpec p = normal_spec("t", n, 1.0f);
  std::vector<float> v(n);
  init_param_slice(42, p, 0, n, v.data());
  double s = 0, s2 = 0, s4 = 0;
  int64_t beyond3 = 0;
  for (float x : v) {
    s += x;
    s2 += double(x) * x;
    s4 += double(x) * x * x * x;
    beyond3 += std::fabs(x) > 3.0f;
  }
  double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.015);
  EXPECT_NEAR(s4 / n, 3.0, 0.1);                     // kurtosis of a normal
  EXPECT_NEAR(double(beyond3) / n, 0.0027, 0.0006);  // tails
  // neighbouring elements (the two halves of a Box-Muller pair) are uncorrelated
  double c = 0;
  for (int64_t i = 0; i + 1 < n; i += 2) c += double(v[i]) * v[i + 1];
  EXPECT_NEAR(c / (n / 2), 0.0, 0.01);
}

TEST(InitRng, Gpt2InitStatistics) {
  auto dev = make_cpu_device();
  auto stream = dev->create_stream("compute");
  GptConfig cfg;
  cfg.vocab_size = 100;
  cfg.n_ctx = 16;
  cfg.n_layer = 4;
  cfg.n_head = 4;
  cfg.n_embd = 64;
  ModelOptions opt;
  opt.device = dev.get();
  opt.stream = stream.get();
  auto m = make_gpt(cfg, opt);
  const double proj_std = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  int checked_proj = 0, checked_ln = 0;
  for (const ParamSpec& p : m->params()) {
    std::vector<float> v(p.numel);
    init_param_slice(1, p, 0, p.numel, v.data());
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += double(x) * x;
    double mean = s / p.numel, sd = std::sqrt(s2 / p.numel - mean * mean);
    auto ends = [&](const char* suf) { return p.name.size() >= strlen(suf) && p.name.compare(p.name.size() - strlen(suf), strlen(suf), suf) == 0; };
    if (ends("c_proj.weight")) {
      EXPECT_NEAR(sd, proj_std, 0.05 * proj_std) << p.name;
      ++checked_proj;
    } else if (ends(".weight") && (p.name.find("ln_") != std::string::npos)) {
      for (float x : v) ASSERT_EQ(x, 1.0f) << p.name;
      ++checked_ln;
    } else if (ends(".bias")) {
      for (float x : v) ASSERT_EQ(x, 0.0f) << p.name;
    } else {
      EXPECT_NEAR(sd, 0.02, 0.1 * 0.02) << p.name;
      EXPECT_NEAR(mean, 0.0, 0.01) << p.name;
    }
  }
  EXPECT_EQ(checked_proj, 2 * cfg.n_layer);
  EXPECT_EQ(checked_ln, 2 * cfg.n_layer + 1);
}

TEST(InitRng, MlpFanInDefault) {
  auto dev = make_cpu_device();
  auto stream = dev->create_stream("compute");
  MlpConfig cfg;
  cfg.dims = {100, 50, 3};
  ModelOptions opt;
  opt.device = dev.get();
  opt.stream = stream.get();
  auto m = make_mlp(cfg, opt);
  ASSERT_EQ(m->params().size(), 4u);
  EXPECT_EQ(m->params()[0].name, "fc.0.weight");
  EXPECT_EQ(m->params()[0].shape, (std::vector<int64_t>{50, 100}));
  EXPECT_FLOAT_EQ(m->params()[0].init_std, 0.1f);
  EXPECT_FLOAT_EQ(m->params()[2].init_std, 1.0f / std::sqrt(50.0f));
  EXPECT_EQ(m->params()[1].init, InitKind::Zeros);
  cfg.init_std = 0.3f;
  auto m2 = make_mlp(cfg, opt);
  EXPECT_FLOAT_EQ(m2->params()[2].init_std, 0.3f);
}

}  // namespace
}  // namespace zt
