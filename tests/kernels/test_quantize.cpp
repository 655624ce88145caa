// Block-wise quantisation (zero_ops::quantize_blockwise / dequantize_blockwise): the round-trip
// bound per block (|x − deq(q(x))| <= absmax / (2·qmax)), the int4 packing, non-finite and all-zero
// blocks, accumulation, and an independent double-precision reference of scales and codes.
#include <limits>

#include "kernel_test_util.h"
#include "zerotrain/kernels/quantize_math.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt::test {
namespace {

struct Quantized {
  std::vector<uint8_t> q;
  std::vector<float> scales;
};

class QuantizeTest : public KernelTest {
 protected:
  Quantized quantize(HostTensor& x, int64_t block, int bits) {
    Quantized r;
    r.q.assign(static_cast<size_t>(quant::payload_bytes(x.numel(), bits)) + 1, 0xAB);
    r.scales.assign(static_cast<size_t>(quant::num_blocks(x.numel(), block)) + 1, -1.0f);
    zero_ops::quantize_blockwise(s(), r.q.data(), r.scales.data(), x.view(), block, bits);
    sync();
    return r;
  }
  std::vector<double> dequantize(DType t, int64_t n, const Quantized& r, int64_t block, int bits) {
    HostTensor y(t, {n});
    zero_ops::dequantize_blockwise(s(), y.view(), r.q.data(), r.scales.data(), block, bits, /*accumulate=*/false);
    sync();
    return y.values();
  }
};

// The code of element i read back independently of quant::load.
int code_of(const Quantized& r, int64_t i, int bits) {
  if (bits == 8) return static_cast<int8_t>(r.q[static_cast<size_t>(i)]);
  int nib = (r.q[static_cast<size_t>(i / 2)] >> (i % 2 ? 4 : 0)) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}

TEST_F(QuantizeTest, RoundTripWithinHalfAStepPerBlock) {
  std::mt19937_64 rng(7);
  for (DType t : kAllDtypes)
    for (int bits : {8, 4})
      for (int64_t block : {1, 7, 64, 2048})
        for (int64_t n : {1, 63, 2048 + 5, 9000}) {
          HostTensor x = random_tensor(rng, t, {n}, -3.0, 3.0);
          const Quantized r = quantize(x, block, bits);
          const std::vector<double> xs = x.values(), y = dequantize(DType::F32, n, r, block, bits);
          const double qm = (1 << (bits - 1)) - 1;
          for (int64_t b = 0; b * block < n; ++b) {
            double absmax = 0;
            for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) absmax = std::max(absmax, std::fabs(xs[i]));
            // The scale is absmax / qmax in fp32; every code is round(x / scale) within ±qmax.
            ASSERT_FLOAT_EQ(r.scales[b], static_cast<float>(absmax) / static_cast<float>(qm)) << dt_tag(t);
            for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
              const int c = code_of(r, i, bits);
              ASSERT_LE(std::abs(c), qm);
              ASSERT_EQ(c, static_cast<int>(std::nearbyint(static_cast<float>(xs[i]) / r.scales[b])))
                  << "element " << i << " block " << block << " bits " << bits << dt_tag(t);
              ASSERT_LE(std::fabs(y[i] - xs[i]), absmax / (2 * qm) + 1e-6 * absmax)
                  << "element " << i << " block " << block << " bits " << bits << dt_tag(t);
            }
          }
        }
}

TEST_F(QuantizeTest, ExtremesMapToPlusMinusQmax) {
  HostTensor x(DType::F32, {4});
  x.fill({-2.0, 2.0, 1.0, 0.0});
  for (int bits : {8, 4}) {
    const Quantized r = quantize(x, 4, bits);
    const int qm = (1 << (bits - 1)) - 1;
    EXPECT_EQ(code_of(r, 0, bits), -qm);
    EXPECT_EQ(code_of(r, 1, bits), qm);
    EXPECT_EQ(code_of(r, 3, bits), 0);
    const std::vector<double> y = dequantize(DType::F32, 4, r, 4, bits);
    EXPECT_DOUBLE_EQ(y[0], -2.0);
    EXPECT_DOUBLE_EQ(y[1], 2.0);
  }
}

TEST_F(QuantizeTest, AllZeroBlockHasScaleZeroAndDequantisesToZero) {
  HostTensor x(DType::BF16, {10});
  x.fill({0, 0, 0, 0, 0, 1, -1, 0.5, 0, 0});
  for (int bits : {8, 4}) {
    const Quantized r = quantize(x, 5, bits);
    EXPECT_EQ(r.scales[0], 0.0f);
    EXPECT_GT(r.scales[1], 0.0f);
    const std::vector<double> y = dequantize(DType::BF16, 10, r, 5, bits);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], 0.0) << i;
    EXPECT_DOUBLE_EQ(y[5], 1.0);
  }
}

TEST_F(QuantizeTest, NonFiniteBlockDequantisesToNaNAndLeavesOthersExact) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (double bad : {nan, inf, -inf})
    for (int bits : {8, 4}) {
      HostTensor x(DType::F32, {9});
      x.fill({0.5, bad, 0.25, 1.0, -1.0, 0.5, 0, 0, 0});  // blocks of 3: [0.5 bad 0.25] [1 -1 .5] [0 0 0]
      const Quantized r = quantize(x, 3, bits);
      EXPECT_TRUE(std::isnan(r.scales[0])) << bad;
      const std::vector<double> y = dequantize(DType::F32, 9, r, 3, bits);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i])) << "element " << i << " of a block holding " << bad;
      EXPECT_DOUBLE_EQ(y[3], 1.0);
      EXPECT_DOUBLE_EQ(y[4], -1.0);
      for (int i = 6; i < 9; ++i) EXPECT_EQ(y[i], 0.0);
    }
}

TEST_F(QuantizeTest, Int4PacksTwoPerByteLowNibbleFirstAcrossOddBlocks) {
  HostTensor x(DType::F32, {5});
  x.fill({7, -7, 3, 1, -1});  // block 3: scales 1 and 1/7
  const Quantized r = quantize(x, 3, 4);
  ASSERT_EQ(quant::payload_bytes(5, 4), 3);
  EXPECT_EQ(r.q[0], 0x97);  // -7 -> 0x9 high, 7 low
  EXPECT_EQ(r.q[1] & 0xF, 3);
  EXPECT_EQ(code_of(r, 3, 4), 7);
  EXPECT_EQ(code_of(r, 4, 4), -7);
  EXPECT_EQ(r.q[3], 0xAB) << "wrote past the payload";
  EXPECT_EQ(r.scales[2], -1.0f) << "wrote past the scales";
}

TEST_F(QuantizeTest, DequantiseAccumulatesInFp32) {
  std::mt19937_64 rng(3);
  for (DType t : kAllDtypes) {
    HostTensor x = random_tensor(rng, DType::F32, {300}), acc = random_tensor(rng, t, {300});
    const Quantized r = quantize(x, 64, 8);
    const std::vector<double> before = acc.values(), plain = dequantize(DType::F32, 300, r, 64, 8);
    zero_ops::dequantize_blockwise(s(), acc.view(), r.q.data(), r.scales.data(), 64, 8, /*accumulate=*/true);
    sync();
    HostTensor want(t, {300});
    for (int i = 0; i < 300; ++i) want.set(i, static_cast<float>(before[i]) + static_cast<float>(plain[i]));
    EXPECT_EQ(acc.values(), want.values()) << dt_tag(t);
  }
}

TEST_F(QuantizeTest, BadArgumentsAreRejected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  HostTensor x(DType::F32, {8});
  std::vector<uint8_t> q(8);
  std::vector<float> sc(8);
  EXPECT_DEATH(zero_ops::quantize_blockwise(s(), q.data(), sc.data(), x.view(), 4, 2), "expected 4 or 8");
  EXPECT_DEATH(zero_ops::quantize_blockwise(s(), q.data(), sc.data(), x.view(), 0, 8), "expected >= 1");
  EXPECT_DEATH(zero_ops::dequantize_blockwise(s(), x.view(), nullptr, sc.data(), 4, 8, false), "need storage");
}

}  // namespace
}  // namespace zt::test
