// dtype round-trips and rounding: ties to even, subnormals, NaN, inf — checked against an
// independent reference (exact rational rounding in double / long arithmetic).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "zerotrain/core/dtype.h"

using namespace zt;

namespace {
float bits_f(uint32_t u) { return f32_from_bits(u); }

// Reference RNE to bf16 via double arithmetic on the exact value.
uint16_t ref_bf16(float f) {
  if (std::isnan(f)) return 0;  // NaN handled separately
  uint32_t u = f32_bits(f);
  uint32_t hi = u >> 16, lo = u & 0xffff;
  if (lo > 0x8000 || (lo == 0x8000 && (hi & 1))) hi += 1;
  return static_cast<uint16_t>(hi);
}

// Reference fp16 rounding: enumerate candidate halfs and pick nearest (ties to even mantissa).
uint16_t ref_f16(float f) {
  double x = f;
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (std::isinf(f)) return sign | 0x7c00;
  // the largest finite is 65504; halfway to "65536" is 65520 -> rounds to inf (even)
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t best = 0;
  double best_err = 1e300;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    double v = f16_bits_to_f32(static_cast<uint16_t>(h));
    double err = std::fabs(v - a);
    if (err < best_err || (err == best_err && (h & 1) == 0)) { best = h; best_err = err; }
    if (v > a && err > best_err) break;
  }
  return sign | best;
}
}  // namespace

TEST(DType, Bf16RoundTripExactValues) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_bf16_bits(f), h) << std::hex << h;
  }
}

TEST(DType, Bf16TiesToEven) {
  // 1.0 + 2^-8 is exactly halfway between bf16 1.0 (even) and 1.0078125 (odd): rounds to 1.0.
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1.0078125 + 2^-8 is halfway between odd 0x3f81 and even 0x3f82: rounds up to even.
  EXPECT_EQ(f32_to_bf16_bits(1.0078125f + std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the tie rounds up.
  EXPECT_EQ(f32_to_bf16_bits(bits_f(0x3f808001)), 0x3f81);
  // Largest finite rounds to inf only past the halfway point.
  EXPECT_EQ(f32_to_bf16_bits(bits_f(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits(bits_f(0x7f7fffff)), 0x7f80);
}

TEST(DType, Bf16SpecialValues) {
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  // NaN with payload only in the low bits must stay NaN (naive rounding would make it inf).
  uint16_t n = f32_to_bf16_bits(bits_f(0x7f800001));
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(n)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(-std::nanf("")))));
  EXPECT_TRUE(std::signbit(bf16_bits_to_f32(f32_to_bf16_bits(bits_f(0xffc00000)))));
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
  // subnormal fp32 values keep their bf16 subnormal encoding
  EXPECT_EQ(f32_to_bf16_bits(bits_f(0x00010000)), 0x0001);
  EXPECT_EQ(f32_to_bf16_bits(bits_f(0x00008000)), 0x0000);  // tie to even (0)
  EXPECT_EQ(f32_to_bf16_bits(bits_f(0x00018000)), 0x0002);  // tie to even (2)
}

TEST(DType, Bf16RandomMatchesReference) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng();
    float f = bits_f(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16_bits(f), ref_bf16(f)) << std::hex << u;
  }
}

TEST(DType, Fp16RoundTripAllValues) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(f)))) << std::hex << h;
      continue;
    }
    EXPECT_EQ(f32_to_f16_bits(f), h) << std::hex << h;
  }
}

TEST(DType, Fp16KnownValues) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7bff);   // below the halfway point
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);   // tie rounds to even = inf
  EXPECT_EQ(f32_to_f16_bits(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-1e6f), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);       // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);       // tie -> even 0
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -25)), 0x0002);       // 1.5 units tie -> 2
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);       // smallest normal
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(std::nanf("")))));
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(bits_f(0x7f800001)))));
  EXPECT_EQ(f16_bits_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
}

TEST(DType, Fp16RandomMatchesReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mag(-30.f, 17.f);
  for (int i = 0; i < 20000; ++i) {
    float f = std::ldexp(1.0f + (rng() & 0x7fffff) / 8388608.0f, static_cast<int>(mag(rng)));
    if (rng() & 1) f = -f;
    ASSERT_EQ(f32_to_f16_bits(f), ref_f16(f)) << f;
  }
}

TEST(DType, BulkConvertAndNames) {
  float src[4] = {1.0f, -2.5f, 3.140625f, 65504.0f};
  bf16 b[4];
  fp16 h[4];
  float back[4];
  convert(src, DType::F32, b, DType::BF16, 4);
  convert(b, DType::BF16, h, DType::F16, 4);
  convert(h, DType::F16, back, DType::F32, 4);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[2], 3.140625f);
  // 65504 rounds up to 65536 in bf16 (8 mantissa bits), which overflows fp16 to +inf.
  EXPECT_TRUE(std::isinf(back[3]) && back[3] > 0);
  DType t;
  EXPECT_TRUE(parse_dtype("bfloat16", &t));
  EXPECT_EQ(t, DType::BF16);
  EXPECT_TRUE(parse_dtype("half", &t));
  EXPECT_EQ(t, DType::F16);
  EXPECT_FALSE(parse_dtype("fp8", &t));
  EXPECT_STREQ(dtype_name(DType::F32), "fp32");
}
