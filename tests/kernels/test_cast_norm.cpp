// cast (round to nearest even between every dtype pair) and squared_norm (double, fixed order).
#include <limits>

#include "kernel_test_util.h"

namespace zt::test {
namespace {

class CastNormTest : public KernelTest {};

float f32(uint32_t bits) { return f32_from_bits(bits); }

TEST_F(CastNormTest, CastRoundsToNearestEvenAtTies) {
  // fp32 -> bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even mantissa);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6; just above a tie rounds up.
  // fp32 -> fp16: same with 2^-11; 65520 overflows to inf, 65519 -> 65504; 2^-25 ties to 0.
  struct Case { float in; DType to; double want; };
  const double inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      {1.0f + 0x1p-8f, DType::BF16, 1.0},
      {1.0f + 3 * 0x1p-8f, DType::BF16, 1.0 + 0x1p-6},
      {f32(0x3f808001u), DType::BF16, 1.0 + 0x1p-7},
      {-(1.0f + 3 * 0x1p-8f), DType::BF16, -(1.0 + 0x1p-6)},
      {1.0f + 0x1p-11f, DType::F16, 1.0},
      {1.0f + 3 * 0x1p-11f, DType::F16, 1.0 + 0x1p-9},
      {65520.0f, DType::F16, inf},
      {65519.0f, DType::F16, 65504.0},
      {0x1p-25f, DType::F16, 0.0},
      {3 * 0x1p-25f, DType::F16, 0x1p-23},  // subnormal tie -> even (2 * 2^-24)
      {3.4e38f, DType::BF16, inf},  // above the bf16 max (2 - 2^-7) 2^127 plus half an ulp
  };
  for (const Case& c : cases) {
    HostTensor src(DType::F32, {1}), dst(c.to, {1});
    src.set(0, c.in);
    ops::cast(s(), dst.view(), src.view());
    sync();
    EXPECT_EQ(dst.get(0), c.want) << "cast " << c.in << " to " << dtype_name(c.to);
  }
}

TEST_F(CastNormTest, CastEveryPairMatchesScalarConversion) {
  const int64_t n = 4099;
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      HostTensor src = random_tensor(rng_, from, {n}, -70000.0, 70000.0), dst(to, {n});
      for (int64_t i = 0; i < 64; ++i) src.set(i, std::ldexp(static_cast<double>(i) - 32.0, -20));  // tiny values
      src.set(64, std::numeric_limits<double>::quiet_NaN());
      src.set(65, -std::numeric_limits<double>::infinity());
      ops::cast(s(), dst.view(), src.view());
      sync();
      for (int64_t i = 0; i < n; ++i) {
        HostTensor one(to, {1});
        one.set(0, src.get(i));  // HostTensor::set rounds fp32 -> storage with dtype.h's RNE
        double got = dst.get(i), want = one.get(0);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got));
        } else {
          ASSERT_EQ(got, want) << dtype_name(from) << " -> " << dtype_name(to) << " at " << i << " of " << src.get(i);
        }
      }
    }
  }
}

TEST_F(CastNormTest, CastSameDtypeInPlaceIsIdentity) {
  HostTensor x = random_tensor(rng_, DType::BF16, {100});
  auto before = x.raw();
  ops::cast(s(), x.view(), x.view());
  sync();
  EXPECT_EQ(x.raw(), before);
}

TEST_F(CastNormTest, SquaredNormMatchesDoubleSum) {
  for (DType dt : kAllDtypes) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{100003}}) {
      HostTensor x = random_tensor(rng_, dt, {n}, -3.0, 3.0);
      double want = 0;
      for (double v : x.values()) want += v * v;
      double got = -1;
      ops::squared_norm(s(), &got, x.view());
      sync();
      EXPECT_NEAR(got, want, 1e-12 * std::max(want, 1.0)) << dtype_name(dt) << " n=" << n;
    }
  }
}

TEST_F(CastNormTest, SquaredNormPropagatesNonFinite) {
  const int64_t n = 70000;
  for (DType dt : kAllDtypes) {
    HostTensor x = random_tensor(rng_, dt, {n});
    double got = 0;
    x.set(50000, -std::numeric_limits<double>::infinity());
    ops::squared_norm(s(), &got, x.view());
    sync();
    EXPECT_TRUE(std::isinf(got) && got > 0) << dtype_name(dt) << ": " << got;
    x.set(123, std::numeric_limits<double>::quiet_NaN());
    ops::squared_norm(s(), &got, x.view());
    sync();
    EXPECT_TRUE(std::isnan(got)) << dtype_name(dt) << ": " << got;
  }
  // fp32 values whose squares overflow fp32 must not overflow the double accumulation.
  HostTensor big(DType::F32, {2});
  big.set(0, 3e38);
  big.set(1, -3e38);
  double got = 0;
  ops::squared_norm(s(), &got, big.view());
  sync();
  EXPECT_NEAR(got, 2 * static_cast<double>(3e38f) * static_cast<double>(3e38f), 1e66);
}

TEST_F(CastNormTest, SquaredNormIndependentOfThreadCount) {
  HostTensor x = random_tensor(rng_, DType::F32, {300001});
  double one = 0, four = 0;
  ops::squared_norm(s(), &one, x.view());
  set_stream_omp_threads(s(), 4);
  ops::squared_norm(s(), &four, x.view());
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(std::memcmp(&one, &four, sizeof(double)), 0) << one << " vs " << four;
}

}  // namespace
}  // namespace zt::test
