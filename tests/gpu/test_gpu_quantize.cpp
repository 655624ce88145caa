// Block-wise quantisation on CUDA (csrc/kernels/cuda/quantize.cu) against the CPU backend
// (csrc/zero/quantize_ops.cpp): the same per-element math (quantize_math.h), so scales, codes and
// dequantised values are equal (NaN where the CPU has NaN), including NaN / inf / all-zero blocks and int4 packing
// across odd block sizes.
#include <cstring>
#include <limits>

#include "gpu_test_util.h"
#include "zerotrain/kernels/quantize_math.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt::gputest {
namespace {

class GpuQuantize : public GpuTest {};

// Equal values, NaN where the other is NaN (the backends may produce different NaN payloads).
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) ASSERT_TRUE(std::isnan(got[i])) << "element " << i << what;
    else ASSERT_EQ(got[i], want[i]) << "element " << i << what;
  }
}

TEST_F(GpuQuantize, CodesScalesAndValuesMatchCpuBitwise) {
  for (int64_t n : {int64_t{1}, int64_t{4097}, int64_t{100003}})
    for (int64_t block : {int64_t{7}, int64_t{256}, int64_t{2048}})
      for (int bits : {8, 4})
        for (DType t : {DType::F32, DType::BF16, DType::F16}) {
          std::vector<float> x0 = uniform(n, -4.0f, 4.0f);
          for (int64_t i = 0; i < std::min<int64_t>(n, block); ++i) x0[i] = 0.0f;  // an all-zero first block
          if (n > 3 * block) x0[2 * block + 1] = std::numeric_limits<float>::quiet_NaN();
          if (n > 4 * block) x0[3 * block] = std::numeric_limits<float>::infinity();
          const int64_t bytes = quant::payload_bytes(n, bits), nb = quant::num_blocks(n, block);
          const std::string what = " n=" + std::to_string(n) + " block=" + std::to_string(block) + " bits=" +
                                   std::to_string(bits) + tag(t);
          Dual x(*this, *gpu_, t, {n}, x0), q(*this, *gpu_, DType::F32, {bytes / 4 + 1}, {});
          Dual sc(*this, *gpu_, DType::F32, {nb}, {});
          auto* qc = static_cast<uint8_t*>(q.cpu().data);
          auto* qg = static_cast<uint8_t*>(q.gpu().data);
          zero_ops::quantize_blockwise(cs(), qc, static_cast<float*>(sc.cpu().data), x.cpu(), block, bits);
          zero_ops::quantize_blockwise(gs(), qg, static_cast<float*>(sc.gpu().data), x.gpu(), block, bits);
          sync();
          const std::vector<uint8_t> gq = q.gpu_raw();
          ASSERT_EQ(0, std::memcmp(gq.data(), qc, static_cast<size_t>(bytes))) << "codes" << what;
          expect_same_values(sc.gpu_values(), sc.cpu_values(), " scales" + what);
          // Dequantise (overwrite, then accumulate) from identical payloads on both backends.
          q.upload();
          sc.upload();
          for (bool acc : {false, true}) {
            Dual y(*this, *gpu_, t, {n}, uniform(n));
            zero_ops::dequantize_blockwise(cs(), y.cpu(), qc, static_cast<float*>(sc.cpu().data), block, bits, acc);
            zero_ops::dequantize_blockwise(gs(), y.gpu(), qg, static_cast<float*>(sc.gpu().data), block, bits, acc);
            sync();
            expect_same_values(y.gpu_values(), y.cpu_values(), std::string(" dequantised") + (acc ? " +=" : "") + what);
          }
        }
}

}  // namespace
}  // namespace zt::gputest
