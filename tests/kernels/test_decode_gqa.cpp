// Grouped-query decoding (kv_cache_write_gqa, attention_decode_gqa): the cache layout
// [Hkv, Tmax, hs]; each position's decode equals that row of attention_gqa_forward over the whole
// sequence (and the double reference) within rounding; with Hkv == H the ops are GPT's
// kv_cache_write / attention_decode on the packed qkv, bitwise; argument checks.
#include "attention_ref.h"
#include "kernel_test_util.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::test {
namespace {

// Rows [r0, r0+n) of a [rows, cols] host tensor as a view.
TensorView rows_of(HostTensor& t, int64_t cols, int64_t r0, int64_t n) {
  TensorView v = t.view();
  v.ndim = 2;
  v.shape[0] = n;
  v.shape[1] = cols;
  v.data = static_cast<char*>(v.data) + static_cast<size_t>(r0 * cols) * dtype_size(t.dtype());
  return v;
}

class DecodeGqaTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(DecodeGqaTest, CacheLayoutAndEveryPositionMatchTheTiledForward) {
  const DType dt = GetParam();
  struct Dims { int64_t T, H, Hkv, hs, Tmax; };
  for (Dims d : {Dims{1, 2, 1, 4, 1}, Dims{6, 4, 2, 8, 9}, Dims{23, 6, 2, 12, 30}, Dims{40, 8, 2, 16, 40}}) {
    const int64_t Cq = d.H * d.hs, Ckv = d.Hkv * d.hs;
    const std::string tag = dt_tag(dt) + " T" + std::to_string(d.T) + " H" + std::to_string(d.H) + " Hkv" +
                            std::to_string(d.Hkv) + " hs" + std::to_string(d.hs);
    HostTensor q = random_tensor(rng_, dt, {d.T, Cq}, -1.5, 1.5), k = random_tensor(rng_, dt, {d.T, Ckv}, -1.5, 1.5);
    HostTensor v = random_tensor(rng_, dt, {d.T, Ckv});
    HostTensor kc(dt, {d.Hkv, d.Tmax, d.hs}), vc(dt, {d.Hkv, d.Tmax, d.hs});
    // Rows 0..T-2 in one call, the last row alone.
    if (d.T > 1)
      ops::kv_cache_write_gqa(s(), kc.view(), vc.view(), rows_of(k, Ckv, 0, d.T - 1), rows_of(v, Ckv, 0, d.T - 1),
                              d.T - 1, d.Hkv, d.hs, 0);
    ops::kv_cache_write_gqa(s(), kc.view(), vc.view(), rows_of(k, Ckv, d.T - 1, 1), rows_of(v, Ckv, d.T - 1, 1), 1,
                            d.Hkv, d.hs, d.T - 1);
    sync();
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t g = 0; g < d.Hkv; ++g)
        for (int64_t i = 0; i < d.hs; ++i) {
          ASSERT_EQ(kc.get((g * d.Tmax + t) * d.hs + i), k.get(t * Ckv + g * d.hs + i)) << "k" << tag;
          ASSERT_EQ(vc.get((g * d.Tmax + t) * d.hs + i), v.get(t * Ckv + g * d.hs + i)) << "v" << tag;
        }
    HostTensor full(dt, {1, d.T, Cq}), stats(DType::F32, {1, d.H, d.T, attn_tile::kStatsPerRow});
    ops::attention_gqa_forward(s(), full.view(), stats.view(), q.view(), k.view(), v.view(), 1, d.T, d.H, d.Hkv, d.hs,
                               0, 0);
    sync();
    const auto tiled = full.values();
    const auto ref = gqa_attention_ref(q.values(), k.values(), v.values(), GqaDims{1, d.T, d.H, d.Hkv, d.hs});
    for (int64_t t = 0; t < d.T; ++t) {
      HostTensor out(dt, {1, Cq});
      ops::attention_decode_gqa(s(), out.view(), rows_of(q, Cq, t, 1), kc.view(), vc.view(), d.H, d.Hkv, d.hs, t);
      sync();
      const std::string at = " pos " + std::to_string(t) + tag;
      // Both are rounded once to the dtype from fp32 results that differ in the last fp32 bits.
      expect_close(out.values(), std::vector<double>(tiled.begin() + t * Cq, tiled.begin() + (t + 1) * Cq),
                   dtype_eps(dt) * 4, dtype_eps(dt) * 2, "decode vs tiled" + at);
      expect_close(out.values(), std::vector<double>(ref.begin() + t * Cq, ref.begin() + (t + 1) * Cq),
                   dtype_eps(dt) * 4, dtype_eps(dt) * 2, "decode vs reference" + at);
    }
  }
}

// Hkv == H with k, v, q the thirds of a packed qkv: the GPT ops' cache and outputs, bitwise.
TEST_P(DecodeGqaTest, AllHeadsEqualsPackedDecodeBitwise) {
  const DType dt = GetParam();
  const int64_t T = 11, H = 3, hs = 8, C = H * hs, Tmax = 12;
  HostTensor qkv = random_tensor(rng_, dt, {T, 3 * C}, -1.5, 1.5);
  HostTensor q(dt, {T, C}), k(dt, {T, C}), v(dt, {T, C});
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < C; ++i) {
      q.set(t * C + i, qkv.get(t * 3 * C + i));
      k.set(t * C + i, qkv.get(t * 3 * C + C + i));
      v.set(t * C + i, qkv.get(t * 3 * C + 2 * C + i));
    }
  HostTensor kc1(dt, {H, Tmax, hs}), vc1(dt, {H, Tmax, hs}), kc2(dt, {H, Tmax, hs}), vc2(dt, {H, Tmax, hs});
  ops::kv_cache_write(s(), kc1.view(), vc1.view(), qkv.view(), T, C, H, 0);
  ops::kv_cache_write_gqa(s(), kc2.view(), vc2.view(), k.view(), v.view(), T, H, hs, 0);
  sync();
  EXPECT_TRUE(kc1.raw() == kc2.raw() && vc1.raw() == vc2.raw()) << dt_tag(dt);
  for (int64_t t = 0; t < T; ++t) {
    HostTensor o1(dt, {1, C}), o2(dt, {1, C});
    ops::attention_decode(s(), o1.view(), rows_of(qkv, 3 * C, t, 1), kc1.view(), vc1.view(), C, H, t);
    ops::attention_decode_gqa(s(), o2.view(), rows_of(q, C, t, 1), kc2.view(), vc2.view(), H, H, hs, t);
    sync();
    EXPECT_TRUE(o1.raw() == o2.raw()) << "pos " << t << dt_tag(dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DecodeGqaTest, ::testing::Values(DType::F32, DType::BF16, DType::F16));

TEST_F(KernelTest, DecodeGqaOpsCheckTheirArguments) {
  // H=4, Hkv=2, hs=4, Tmax=3.
  HostTensor k(DType::F32, {2, 8}), v(DType::F32, {2, 8}), kc(DType::F32, {2, 3, 4}), vc(DType::F32, {2, 3, 4});
  HostTensor q(DType::F32, {1, 16}), out(DType::F32, {1, 16}), v16(DType::BF16, {2, 8}), small(DType::F32, {2, 2, 4});
  EXPECT_DEATH(ops::kv_cache_write_gqa(s(), kc.view(), vc.view(), k.view(), v.view(), 2, 2, 4, 2),
               "kv_cache_write_gqa: rows \\[2, 4\\) outside the cache's 3 positions");
  EXPECT_DEATH(ops::kv_cache_write_gqa(s(), kc.view(), vc.view(), k.view(), v16.view(), 2, 2, 4, 0),
               "kv_cache_write_gqa: v is bf16");
  EXPECT_DEATH(ops::kv_cache_write_gqa(s(), kc.view(), small.view(), k.view(), v.view(), 2, 2, 4, 0),
               "kv_cache_write_gqa: v_cache has shape");
  EXPECT_DEATH(ops::kv_cache_write_gqa(s(), kc.view(), vc.view(), k.view(), v.view(), 1, 2, 4, 0),
               "kv_cache_write_gqa: k has shape");
  EXPECT_DEATH(ops::attention_decode_gqa(s(), out.view(), q.view(), kc.view(), vc.view(), 4, 3, 4, 0),
               "attention_decode_gqa: need H, Hkv, hs > 0 with H a multiple of Hkv");
  EXPECT_DEATH(ops::attention_decode_gqa(s(), out.view(), q.view(), kc.view(), vc.view(), 4, 2, 4, 3),
               "attention_decode_gqa: position 3 outside the cache's 3 positions");
  EXPECT_DEATH(ops::attention_decode_gqa(s(), out.view(), kc.view(), kc.view(), vc.view(), 4, 2, 4, 0),
               "attention_decode_gqa: q has shape");
  EXPECT_DEATH(ops::attention_decode_gqa(s(), kc.view(), q.view(), kc.view(), vc.view(), 4, 2, 4, 0),
               "attention_decode_gqa: out has shape");
}

}  // namespace
}  // namespace zt::test
