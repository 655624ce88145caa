// The key/value cache ops of incremental decoding (kv_cache_write, attention_decode): the cache
// layout [H, Tmax, hs], and each position's decode against the double-precision causal
// attention reference over the whole sequence; argument checks.
#include "attention_ref.h"
#include "kernel_test_util.h"

namespace zt::test {
namespace {

class DecodeOpsTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(DecodeOpsTest, CacheLayoutAndEveryPositionMatchTheReference) {
  const DType dt = GetParam();
  struct Dims { int64_t T, C, H, Tmax; };
  for (Dims d : {Dims{1, 4, 1, 1}, Dims{5, 8, 2, 9}, Dims{23, 12, 3, 30}, Dims{70, 16, 4, 70}}) {
    const int64_t hs = d.C / d.H;
    const std::string tag = dt_tag(dt) + " T" + std::to_string(d.T) + " C" + std::to_string(d.C) + " H" + std::to_string(d.H);
    HostTensor qkv = random_tensor(rng_, dt, {d.T, 3 * d.C}, -1.5, 1.5);
    HostTensor kc(dt, {d.H, d.Tmax, hs}), vc(dt, {d.H, d.Tmax, hs});
    // Rows 0..T-2 in one call, the last row alone.
    const size_t row_bytes = static_cast<size_t>(3 * d.C) * dtype_size(dt);
    TensorView head = qkv.view(), last = qkv.view();
    head.shape[0] = d.T - 1;
    last.shape[0] = 1;
    last.data = static_cast<char*>(last.data) + row_bytes * static_cast<size_t>(d.T - 1);
    if (d.T > 1) ops::kv_cache_write(s(), kc.view(), vc.view(), head, d.T - 1, d.C, d.H, 0);
    ops::kv_cache_write(s(), kc.view(), vc.view(), last, 1, d.C, d.H, d.T - 1);
    sync();
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t i = 0; i < hs; ++i) {
          ASSERT_EQ(kc.get((h * d.Tmax + t) * hs + i), qkv.get(t * 3 * d.C + d.C + h * hs + i)) << "k" << tag;
          ASSERT_EQ(vc.get((h * d.Tmax + t) * hs + i), qkv.get(t * 3 * d.C + 2 * d.C + h * hs + i)) << "v" << tag;
        }
    const std::vector<double> want = causal_attention_ref(qkv.values(), 1, d.T, d.C, d.H);
    for (int64_t t = 0; t < d.T; ++t) {
      TensorView q = qkv.view();
      q.shape[0] = 1;
      q.data = static_cast<char*>(q.data) + row_bytes * static_cast<size_t>(t);
      HostTensor out(dt, {1, d.C});
      ops::attention_decode(s(), out.view(), q, kc.view(), vc.view(), d.C, d.H, t);
      sync();
      expect_close(out.values(), std::vector<double>(want.begin() + t * d.C, want.begin() + (t + 1) * d.C),
                   dtype_eps(dt) * 4, dtype_eps(dt) * 2, "attention_decode pos " + std::to_string(t) + tag);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DecodeOpsTest, ::testing::Values(DType::F32, DType::BF16, DType::F16));

TEST_F(KernelTest, DecodeOpsCheckTheirArguments) {
  HostTensor qkv(DType::F32, {2, 24}), kc(DType::F32, {2, 4, 4}), vc(DType::F32, {2, 4, 4}), out(DType::F32, {1, 8});
  HostTensor small(DType::F32, {2, 3, 4}), wrong(DType::BF16, {2, 4, 4});
  EXPECT_DEATH(ops::kv_cache_write(s(), kc.view(), vc.view(), qkv.view(), 2, 8, 2, 3), "outside the cache");
  EXPECT_DEATH(ops::kv_cache_write(s(), kc.view(), small.view(), qkv.view(), 2, 8, 2, 0), "v_cache");
  EXPECT_DEATH(ops::kv_cache_write(s(), wrong.view(), vc.view(), qkv.view(), 2, 8, 2, 0), "k_cache");
  EXPECT_DEATH(ops::kv_cache_write(s(), kc.view(), vc.view(), qkv.view(), 2, 8, 3, 0), "divisible");
  EXPECT_DEATH(ops::attention_decode(s(), out.view(), qkv.view(), kc.view(), vc.view(), 8, 2, 0), "qkv");
}

}  // namespace
}  // namespace zt::test
