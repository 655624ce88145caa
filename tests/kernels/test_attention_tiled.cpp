// Tiled (memory-efficient) causal attention against the materialised kernel and a double
// reference: forward and every input gradient, many T (around the tile edges), heads 1-4, tile
// sizes that do and do not divide T; finite differences in double; 16-bit tolerances; the same
// bits under every ZT_CPU_ISA.
#include <cstdio>
#include <cstdlib>

#include "attention_ref.h"
#include "kernel_test_util.h"
#include "zerotrain/kernels/attention_tile.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt::test {
namespace {

struct Case { int64_t B, T, C, H, tile_q, tile_k; };

std::string tag_of(DType dt, const Case& c) {
  return dt_tag(dt) + " B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " C" + std::to_string(c.C) + " H" +
         std::to_string(c.H) + " tiles " + std::to_string(c.tile_q) + "x" + std::to_string(c.tile_k);
}

// Runs both kernels on the same inputs: forward outputs and dqkv of each. The materialised kernel
// adds into a zeroed dqkv; the tiled one overwrites a dqkv of random values.
struct Both {
  std::vector<double> out_mat, out_tiled, dqkv_mat, dqkv_tiled, stats;
};

Both run_both(KernelTest& t, Stream& s, std::mt19937_64& rng, DType dt, const Case& c) {
  HostTensor qkv = random_tensor(rng, dt, {c.B, c.T, 3 * c.C}, -1.5, 1.5), dout = random_tensor(rng, dt, {c.B, c.T, c.C});
  HostTensor d0 = random_tensor(rng, dt, {c.B, c.T, 3 * c.C});
  HostTensor om(dt, {c.B, c.T, c.C}), ot(dt, {c.B, c.T, c.C}), dm(dt, {c.B, c.T, 3 * c.C}), dtl(dt, {c.B, c.T, 3 * c.C});
  dm.fill(std::vector<double>(d0.values().size(), 0.0));
  dtl.fill(d0.values());
  HostTensor att(DType::F32, {c.B, c.H, c.T, c.T}), datt(DType::F32, {c.B, c.H, c.T, c.T});
  HostTensor stats(DType::F32, {c.B, c.H, c.T, attn_tile::kStatsPerRow});
  ops::attention_forward(s, om.view(), att.view(), qkv.view(), c.B, c.T, c.C, c.H);
  ops::attention_backward(s, dm.view(), datt.view(), dout.view(), qkv.view(), att.view(), c.B, c.T, c.C, c.H);
  ops::attention_tiled_forward(s, ot.view(), stats.view(), qkv.view(), c.B, c.T, c.C, c.H, c.tile_q, c.tile_k);
  ops::attention_tiled_backward(s, dtl.view(), dout.view(), qkv.view(), ot.view(), stats.view(), c.B, c.T, c.C, c.H,
                                c.tile_q, c.tile_k);
  s.synchronize();
  (void)t;
  return {om.values(), ot.values(), dm.values(), dtl.values(), stats.values()};
}

class TiledAttentionTest : public KernelTest {};

// fp32: forward and all input gradients agree with the materialised kernel within 1e-5.
TEST_F(TiledAttentionTest, MatchesMaterialisedFp32) {
  std::vector<Case> cases;
  for (int64_t T : {1, 2, 7, 63, 64, 65, 128})
    for (int64_t H : {1, 2, 3, 4}) {
      cases.push_back({2, T, 8 * H, H, 0, 0});  // default tiles
      cases.push_back({1, T, 8 * H, H, 16, 16});  // divides 64 and 128
      cases.push_back({1, T, 8 * H, H, 5, 7});    // divides none of the T
    }
  cases.push_back({1, 1000, 32, 2, 0, 0});
  cases.push_back({1, 1000, 16, 1, 48, 24});
  for (const Case& c : cases) {
    Both r = run_both(*this, s(), rng_, DType::F32, c);
    const std::string tag = tag_of(DType::F32, c);
    expect_close(r.out_tiled, r.out_mat, 1e-5, 1e-5, "out " + tag);
    expect_close(r.dqkv_tiled, r.dqkv_mat, 1e-5, 1e-5, "dqkv " + tag);
  }
}

std::vector<double> attention_ref(const std::vector<double>& qkv, const Case& d) {
  return causal_attention_ref(qkv, d.B, d.T, d.C, d.H);
}

// Every dtype: forward against the double reference, dqkv against double finite differences,
// statistics: l >= 1 (the max term contributes exp(0)) and m is a finite row max.
TEST_F(TiledAttentionTest, FiniteDifferencesAllDtypes) {
  for (DType dt : kAllDtypes)
    for (Case c : {Case{1, 7, 8, 2, 3, 2}, Case{2, 9, 12, 3, 4, 4}, Case{1, 20, 8, 1, 0, 0}}) {
      const std::string tag = tag_of(dt, c);
      HostTensor qkv = random_tensor(rng_, dt, {c.B, c.T, 3 * c.C}, -1.5, 1.5), out(dt, {c.B, c.T, c.C});
      HostTensor dout = random_tensor(rng_, dt, {c.B, c.T, c.C}), dqkv = random_tensor(rng_, dt, {c.B, c.T, 3 * c.C});
      HostTensor stats(DType::F32, {c.B, c.H, c.T, attn_tile::kStatsPerRow});
      auto x = qkv.values(), dy = dout.values();  // dqkv holds random values: the op overwrites them
      ops::attention_tiled_forward(s(), out.view(), stats.view(), qkv.view(), c.B, c.T, c.C, c.H, c.tile_q, c.tile_k);
      ops::attention_tiled_backward(s(), dqkv.view(), dout.view(), qkv.view(), out.view(), stats.view(), c.B, c.T,
                                    c.C, c.H, c.tile_q, c.tile_k);
      sync();
      expect_close(out.values(), attention_ref(x, c), dtype_eps(dt) * 4, dtype_eps(dt) * 2, "out " + tag);
      auto loss = [&](const std::vector<double>& xx) { return dot(dy, attention_ref(xx, c)); };
      expect_overwritten(dqkv.values(), numeric_grad(loss, x), grad_rel(dt), "dqkv " + tag);
      const auto st = stats.values();
      for (size_t i = 0; i < st.size(); i += 2) {
        EXPECT_TRUE(std::isfinite(st[i])) << tag;
        EXPECT_GE(st[i + 1], 1.0) << tag;
      }
    }
}

// Stated 16-bit tolerance against the materialised kernel at a longer T: bf16 within 2e-2
// relative of the output magnitude (one bf16 rounding of P·V is 4e-3), fp16 within 4e-3.
TEST_F(TiledAttentionTest, SixteenBitAgreesWithMaterialised) {
  for (DType dt : {DType::BF16, DType::F16}) {
    const Case c{1, 130, 32, 2, 0, 0};
    Both r = run_both(*this, s(), rng_, dt, c);
    const double rel = dt == DType::BF16 ? 2e-2 : 4e-3;
    expect_close(r.out_tiled, r.out_mat, rel, rel, "out " + tag_of(dt, c));
    expect_close(r.dqkv_tiled, r.dqkv_mat, rel, rel, "dqkv " + tag_of(dt, c));
  }
}

// bf16 on the vdpbf16ps products (heads read in place, P and dS rounded to bf16 as they enter a
// product) against the widened sgemm products, forward and dqkv, at the 16-bit tolerance above.
TEST_F(TiledAttentionTest, Bf16ProductsAgreeWithWidenedProducts) {
  if (!cpu::avx512_bf16_supported() || cpu::active_isa() != cpu::Isa::Avx512) {
    std::printf("no AVX512_BF16 here (CPU or ZT_CPU_ISA): bf16 attention runs only the widened products\n");
    return;
  }
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  for (const Case& c : {Case{1, 130, 32, 2, 0, 0}, Case{2, 77, 64, 4, 16, 24}}) {
    HostTensor qkv = random_tensor(rng_, DType::BF16, {c.B, c.T, 3 * c.C}, -1.5, 1.5);
    HostTensor dout = random_tensor(rng_, DType::BF16, {c.B, c.T, c.C});
    std::vector<std::vector<double>> outs, grads;
    for (const char* path : {"widen", "dpbf16"}) {
      setenv("ZT_CPU_BF16_GEMM", path, 1);
      HostTensor out(DType::BF16, {c.B, c.T, c.C}), stats(DType::F32, {c.B, c.H, c.T, attn_tile::kStatsPerRow});
      HostTensor d(DType::BF16, {c.B, c.T, 3 * c.C});
      ops::attention_tiled_forward(s(), out.view(), stats.view(), qkv.view(), c.B, c.T, c.C, c.H, c.tile_q, c.tile_k);
      ops::attention_tiled_backward(s(), d.view(), dout.view(), qkv.view(), out.view(), stats.view(), c.B, c.T, c.C,
                                    c.H, c.tile_q, c.tile_k);
      sync();
      outs.push_back(out.values());
      grads.push_back(d.values());
    }
    expect_close(outs[1], outs[0], 2e-2, 2e-2, "out dpbf16 vs widen " + tag_of(DType::BF16, c));
    expect_close(grads[1], grads[0], 2e-2, 2e-2, "dqkv dpbf16 vs widen " + tag_of(DType::BF16, c));
    EXPECT_NE(grads[1], grads[0]) << "the two paths ran the same products";
  }
}

TEST_F(TiledAttentionTest, DeterministicAcrossThreadCounts) {
  const Case c{2, 70, 32, 4, 0, 0};
  HostTensor qkv = random_tensor(rng_, DType::F32, {c.B, c.T, 3 * c.C}), dout = random_tensor(rng_, DType::F32, {c.B, c.T, c.C});
  HostTensor out(DType::F32, {c.B, c.T, c.C}), stats(DType::F32, {c.B, c.H, c.T, 2});
  HostTensor d1(DType::F32, {c.B, c.T, 3 * c.C}), d3(DType::F32, {c.B, c.T, 3 * c.C});
  ops::attention_tiled_forward(s(), out.view(), stats.view(), qkv.view(), c.B, c.T, c.C, c.H, 0, 0);
  ops::attention_tiled_backward(s(), d1.view(), dout.view(), qkv.view(), out.view(), stats.view(), c.B, c.T, c.C, c.H, 0, 0);
  set_stream_omp_threads(s(), 3);
  ops::attention_tiled_backward(s(), d3.view(), dout.view(), qkv.view(), out.view(), stats.view(), c.B, c.T, c.C, c.H, 0, 0);
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(d1.raw(), d3.raw());
}

// The per-row SIMD paths (ZT_CPU_ISA) leave out, stats and dqkv bitwise as the scalar path does.
TEST_F(TiledAttentionTest, SameBitsUnderEveryForcedIsa) {
  const char* before = std::getenv("ZT_CPU_ISA");
  const std::string saved = before ? before : "";
  const Case c{2, 77, 32, 2, 16, 24};  // rows of 24 keys: one 16-lane block plus a tail
  HostTensor qkv = random_tensor(rng_, DType::F32, {c.B, c.T, 3 * c.C}), dout = random_tensor(rng_, DType::F32, {c.B, c.T, c.C});
  std::vector<std::vector<unsigned char>> ref;
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (!cpu::isa_supported(isa)) continue;
    setenv("ZT_CPU_ISA", cpu::isa_name(isa), 1);
    HostTensor out(DType::F32, {c.B, c.T, c.C}), stats(DType::F32, {c.B, c.H, c.T, 2}), d(DType::F32, {c.B, c.T, 3 * c.C});
    ops::attention_tiled_forward(s(), out.view(), stats.view(), qkv.view(), c.B, c.T, c.C, c.H, c.tile_q, c.tile_k);
    ops::attention_tiled_backward(s(), d.view(), dout.view(), qkv.view(), out.view(), stats.view(), c.B, c.T, c.C, c.H,
                                  c.tile_q, c.tile_k);
    sync();
    const std::vector<std::vector<unsigned char>> got{out.raw(), stats.raw(), d.raw()};
    if (ref.empty()) ref = got;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == ref[i]) << cpu::isa_name(isa) << " output " << i;
  }
  before ? setenv("ZT_CPU_ISA", saved.c_str(), 1) : unsetenv("ZT_CPU_ISA");
}

}  // namespace
}  // namespace zt::test
