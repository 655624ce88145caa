// Gradient clipping formulas (docs/config.md §6).
#include <gtest/gtest.h>

#include <cmath>

#include "zerotrain/optim/clipping.h"

TEST(Clipping, ZeroFormulaClips) {
  // scaled norm 1024 at scale 256 -> unscaled 4; clipping 1 -> clip = 4 + 1e-6.
  zt::ZeroClip c = zt::zero_clip(1024.0, 256.0, 1.0);
  EXPECT_DOUBLE_EQ(c.unscaled_norm, 4.0);
  EXPECT_DOUBLE_EQ(c.clip, (4.0 + 1e-6) / 1.0);
  EXPECT_DOUBLE_EQ(c.coefficient, 1.0 / (4.0 + 1e-6));
  EXPECT_DOUBLE_EQ(c.grad_multiplier, 1.0 / ((4.0 + 1e-6) * 256.0));
  // The clipped unscaled norm is gradient_clipping (up to the 1e-6).
  EXPECT_NEAR(1024.0 * c.grad_multiplier, 1.0, 1e-6);
}

TEST(Clipping, ZeroFormulaNoClipBelowThreshold) {
  zt::ZeroClip c = zt::zero_clip(0.5 * 8.0, 8.0, 1.0);
  EXPECT_EQ(c.clip, 1.0);
  EXPECT_EQ(c.coefficient, 1.0);
  EXPECT_DOUBLE_EQ(c.grad_multiplier, 1.0 / 8.0);
  // Exactly at the threshold the 1e-6 keeps clip at 1 only when norm + 1e-6 <= gc.
  EXPECT_GT(zt::zero_clip(2.0, 1.0, 2.0).clip, 1.0);
  EXPECT_EQ(zt::zero_clip(2.0 - 2e-6, 1.0, 2.0).clip, 1.0);
}

TEST(Clipping, ZeroFormulaDisabled) {
  for (double gc : {0.0, -1.0}) {
    zt::ZeroClip c = zt::zero_clip(1e6, 4.0, gc);
    EXPECT_EQ(c.clip, 1.0);
    EXPECT_DOUBLE_EQ(c.unscaled_norm, 2.5e5);
    EXPECT_DOUBLE_EQ(c.grad_multiplier, 0.25);
  }
}

TEST(Clipping, NonFiniteNormStaysVisible) {
  EXPECT_TRUE(std::isnan(zt::zero_clip(NAN, 1.0, 1.0).grad_multiplier));
  EXPECT_EQ(zt::zero_clip(INFINITY, 1.0, 1.0).grad_multiplier, 0.0);
  EXPECT_TRUE(std::isnan(zt::fp32_clip_coefficient(NAN, 1.0)));
}

TEST(Clipping, Fp32Formula) {
  EXPECT_DOUBLE_EQ(zt::fp32_clip_coefficient(4.0, 1.0), 1.0 / (4.0 + 1e-6));
  EXPECT_EQ(zt::fp32_clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(zt::fp32_clip_coefficient(100.0, 0.0), 1.0);
  // With loss scale 1 the two formulas agree.
  for (double n : {0.1, 0.999, 1.0, 3.0, 1e4}) {
    EXPECT_NEAR(zt::zero_clip(n, 1.0, 1.0).coefficient, zt::fp32_clip_coefficient(n, 1.0), 1e-15);
  }
}
