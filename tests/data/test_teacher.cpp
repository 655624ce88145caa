// teacher: data — targets are the teacher plus N(0, σ²) noise; inputs N(0, 1).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zerotrain/data/teacher.h"

TEST(Teacher, NoiseStatistics) {
  const double sigma = 0.3;
  const int64_t B = 500;
  zt::TeacherDataset d({8, 16, 4}, false, sigma, 11, B);
  EXPECT_DOUBLE_EQ(d.best_loss(), sigma * sigma);
  double rs = 0, rss = 0, xs = 0, xss = 0, ys = 0;
  int64_t nr = 0, nx = 0;
  std::vector<double> y(4);
  zt::Batch b;
  for (int64_t k = 0; k < 4; ++k) {
    d.fill(k, 0, B, b);
    ASSERT_EQ(b.features.size(), size_t(B * 8));
    ASSERT_EQ(b.targets_f.size(), size_t(B * 4));
    for (int64_t s = 0; s < B; ++s) {
      d.teacher_forward(&b.features[s * 8], y.data());
      for (int o = 0; o < 4; ++o) {
        double r = b.targets_f[s * 4 + o] - y[o];
        rs += r; rss += r * r; ys += y[o] * y[o]; ++nr;
      }
      for (int j = 0; j < 8; ++j) { xs += b.features[s * 8 + j]; xss += b.features[s * 8 + j] * b.features[s * 8 + j]; ++nx; }
    }
  }
  double rmean = rs / nr, rvar = rss / nr - rmean * rmean;
  EXPECT_NEAR(rmean, 0.0, 4 * sigma / std::sqrt(double(nr)));
  EXPECT_NEAR(rvar, sigma * sigma, 0.06 * sigma * sigma);  // 8000 residuals: SE ~1.6%
  EXPECT_NEAR(xs / nx, 0.0, 0.03);
  EXPECT_NEAR(xss / nx, 1.0, 0.05);
  EXPECT_GT(ys / nr, 0.05) << "the teacher's signal is not negligible";
}

TEST(Teacher, ZeroNoiseIsTheTeacherAndReluDiffers) {
  zt::TeacherDataset g({3, 5, 5, 2}, false, 0.0, 4, 8), r({3, 5, 5, 2}, true, 0.0, 4, 8);
  zt::Batch bg, br;
  g.fill(1, 0, 8, bg);
  r.fill(1, 0, 8, br);
  EXPECT_EQ(bg.features, br.features);  // same inputs, different teacher activation
  EXPECT_NE(bg.targets_f, br.targets_f);
  std::vector<double> y(2);
  for (int s = 0; s < 8; ++s) {
    g.teacher_forward(&bg.features[s * 3], y.data());
    for (int o = 0; o < 2; ++o) EXPECT_EQ(bg.targets_f[s * 2 + o], static_cast<float>(y[o]));
  }
  EXPECT_EQ(g.best_loss(), 0.0);
}
