// CUDA vs CPU backend: grouped-query attention (attention_gqa_forward / _backward). Forward (out
// and the (max, sum) statistics) and backward (dq, dk, dv overwriting random values) against
// the CPU kernel run with the CUDA tiles, for H/Hkv = 1, 2, 3, 4 and the head sizes the kernels
// branch on; with Hkv == H and q|k|v the thirds of a packed qkv the GQA kernels give the packed
// tiled kernels' bits; the backward (a key/value head summing its group) is bitwise repeatable.
#include "gpu_test_util.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::gputest {
namespace {

struct GqaCase {
  int64_t B, T, H, Hkv, hs;
  int64_t q_el() const { return B * T * H * hs; }
  int64_t kv_el() const { return B * T * Hkv * hs; }
};

std::string describe(const GqaCase& c, DType dt) {
  std::ostringstream s;
  s << " B=" << c.B << " T=" << c.T << " H=" << c.H << " Hkv=" << c.Hkv << " hs=" << c.hs << tag(dt);
  return s.str();
}

// As the packed tiled attention's GPU test: 16-bit rounds the probabilities / score gradients
// before the tile GEMMs; a key/value head's gradient sums H/Hkv heads of such terms.
double gqa_tol(DType t) { return t == DType::F32 ? 2e-5 : 8.0 * unit(t); }

class GpuGqa : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuGqa, GqaAttentionMatchesCpu) {
  const DType dt = GetParam();
  // T = 1, around and across the 64-row tiles; hs 32 / 64 / 128 (the backward's 32-row inner
  // tiles) / 20 (not a multiple of 8: the scalar loads); groups of 1 to 4 query heads.
  for (const GqaCase& c : {GqaCase{1, 1, 4, 2, 32}, GqaCase{2, 65, 4, 1, 64}, GqaCase{2, 100, 8, 2, 64},
                           GqaCase{1, 130, 6, 2, 128}, GqaCase{1, 77, 4, 2, 20}, GqaCase{2, 33, 3, 3, 24},
                           GqaCase{1, 200, 12, 4, 64}}) {
    Dual q(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, uniform(c.q_el(), -2.0f, 2.0f));
    Dual k(*this, *gpu_, dt, {c.B, c.T, c.Hkv * c.hs}, uniform(c.kv_el(), -2.0f, 2.0f));
    Dual v(*this, *gpu_, dt, {c.B, c.T, c.Hkv * c.hs}, uniform(c.kv_el()));
    Dual out(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, {});
    Dual stats(*this, *gpu_, DType::F32, {c.B, c.H, c.T, attn_tile::kStatsPerRow}, {});
    ops::attention_gqa_forward(cs(), out.cpu(), stats.cpu(), q.cpu(), k.cpu(), v.cpu(), c.B, c.T, c.H, c.Hkv, c.hs,
                               attn_tile::kTileQ, attn_tile::kTileK);
    ops::attention_gqa_forward(gs(), out.gpu(), stats.gpu(), q.gpu(), k.gpu(), v.gpu(), c.B, c.T, c.H, c.Hkv, c.hs, 0,
                               0);
    sync();
    const std::string sz = describe(c, dt);
    expect_close(out.gpu_values(), out.cpu_values(), gqa_tol(dt), gqa_tol(dt), "gqa out" + sz);
    expect_close(stats.gpu_values(), stats.cpu_values(), 1e-4, 1e-4, "gqa stats" + sz);
    // Backward from the CPU's out and statistics on both sides; both overwrite dq, dk, dv of random values.
    out.upload();
    stats.upload();
    Dual dout(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, uniform(c.q_el()));
    Dual dq(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, uniform(c.q_el(), -0.1f, 0.1f));
    Dual dk(*this, *gpu_, dt, {c.B, c.T, c.Hkv * c.hs}, uniform(c.kv_el(), -0.1f, 0.1f));
    Dual dv(*this, *gpu_, dt, {c.B, c.T, c.Hkv * c.hs}, uniform(c.kv_el(), -0.1f, 0.1f));
    ops::attention_gqa_backward(cs(), dq.cpu(), dk.cpu(), dv.cpu(), dout.cpu(), q.cpu(), k.cpu(), v.cpu(), out.cpu(),
                                stats.cpu(), c.B, c.T, c.H, c.Hkv, c.hs, attn_tile::kTileQ, attn_tile::kTileK);
    ops::attention_gqa_backward(gs(), dq.gpu(), dk.gpu(), dv.gpu(), dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out.gpu(),
                                stats.gpu(), c.B, c.T, c.H, c.Hkv, c.hs, 0, 0);
    sync();
    expect_close(dq.gpu_values(), dq.cpu_values(), gqa_tol(dt), gqa_tol(dt), "gqa dq" + sz);
    expect_close(dk.gpu_values(), dk.cpu_values(), gqa_tol(dt), gqa_tol(dt), "gqa dk" + sz);
    expect_close(dv.gpu_values(), dv.cpu_values(), gqa_tol(dt), gqa_tol(dt), "gqa dv" + sz);
  }
}

// The thirds of each row of a [rows, 3C] host vector.
std::vector<std::vector<float>> thirds(const std::vector<float>& x, int64_t rows, int64_t C) {
  std::vector<std::vector<float>> parts(3, std::vector<float>(static_cast<size_t>(rows * C)));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t part = 0; part < 3; ++part)
      std::copy_n(x.begin() + (r * 3 + part) * C, C, parts[part].begin() + r * C);
  return parts;
}

TEST_P(GpuGqa, GqaWithAllHeadsEqualsPackedTiledBitwise) {
  const DType dt = GetParam();
  const int64_t B = 2, T = 90, H = 4, hs = 64, C = H * hs, rows = B * T;
  Dual qkv(*this, *gpu_, dt, {B, T, 3 * C}, uniform(rows * 3 * C, -2.0f, 2.0f));
  const auto x = thirds(qkv.cpu_values(), rows, C);  // the dtype's values: exact in fp32
  Dual q(*this, *gpu_, dt, {B, T, C}, x[0]), k(*this, *gpu_, dt, {B, T, C}, x[1]), v(*this, *gpu_, dt, {B, T, C}, x[2]);
  Dual dout(*this, *gpu_, dt, {B, T, C}, uniform(rows * C));
  Dual out_p(*this, *gpu_, dt, {B, T, C}, {}), out_g(*this, *gpu_, dt, {B, T, C}, {});
  Dual st_p(*this, *gpu_, DType::F32, {B, H, T, 2}, {}), st_g(*this, *gpu_, DType::F32, {B, H, T, 2}, {});
  Dual dqkv(*this, *gpu_, dt, {B, T, 3 * C}, uniform(rows * 3 * C, -0.1f, 0.1f));
  const auto d0 = thirds(dqkv.cpu_values(), rows, C);
  Dual dq(*this, *gpu_, dt, {B, T, C}, d0[0]), dk(*this, *gpu_, dt, {B, T, C}, d0[1]),
      dv(*this, *gpu_, dt, {B, T, C}, d0[2]);
  ops::attention_tiled_forward(gs(), out_p.gpu(), st_p.gpu(), qkv.gpu(), B, T, C, H, 0, 0);
  ops::attention_tiled_backward(gs(), dqkv.gpu(), dout.gpu(), qkv.gpu(), out_p.gpu(), st_p.gpu(), B, T, C, H, 0, 0);
  ops::attention_gqa_forward(gs(), out_g.gpu(), st_g.gpu(), q.gpu(), k.gpu(), v.gpu(), B, T, H, H, hs, 0, 0);
  ops::attention_gqa_backward(gs(), dq.gpu(), dk.gpu(), dv.gpu(), dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out_g.gpu(),
                              st_g.gpu(), B, T, H, H, hs, 0, 0);
  sync();
  EXPECT_EQ(out_g.gpu_raw(), out_p.gpu_raw()) << tag(dt);
  EXPECT_EQ(st_g.gpu_raw(), st_p.gpu_raw()) << tag(dt);
  const auto d = thirds(dqkv.gpu_values(), rows, C);
  EXPECT_EQ(dq.gpu_values(), d[0]) << tag(dt);  // widened values: equal iff equal bits (no NaN)
  EXPECT_EQ(dk.gpu_values(), d[1]) << tag(dt);
  EXPECT_EQ(dv.gpu_values(), d[2]) << tag(dt);
}

TEST_P(GpuGqa, GqaBackwardIsDeterministic) {
  const DType dt = GetParam();
  const GqaCase c{2, 150, 8, 2, 64};
  Dual q(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, uniform(c.q_el()));
  Dual k(*this, *gpu_, dt, {c.B, c.T, c.Hkv * c.hs}, uniform(c.kv_el()));
  Dual v(*this, *gpu_, dt, {c.B, c.T, c.Hkv * c.hs}, uniform(c.kv_el()));
  Dual dout(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, uniform(c.q_el()));
  Dual out(*this, *gpu_, dt, {c.B, c.T, c.H * c.hs}, {}), stats(*this, *gpu_, DType::F32, {c.B, c.H, c.T, 2}, {});
  const auto q0 = uniform(c.q_el()), kv0 = uniform(c.kv_el());
  Dual dq1(*this, *gpu_, dt, {c.q_el()}, q0), dq2(*this, *gpu_, dt, {c.q_el()}, q0);
  Dual dk1(*this, *gpu_, dt, {c.kv_el()}, kv0), dk2(*this, *gpu_, dt, {c.kv_el()}, kv0);
  Dual dv1(*this, *gpu_, dt, {c.kv_el()}, kv0), dv2(*this, *gpu_, dt, {c.kv_el()}, kv0);
  ops::attention_gqa_forward(gs(), out.gpu(), stats.gpu(), q.gpu(), k.gpu(), v.gpu(), c.B, c.T, c.H, c.Hkv, c.hs, 0, 0);
  ops::attention_gqa_backward(gs(), dq1.gpu(), dk1.gpu(), dv1.gpu(), dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out.gpu(),
                              stats.gpu(), c.B, c.T, c.H, c.Hkv, c.hs, 0, 0);
  ops::attention_gqa_backward(gs(), dq2.gpu(), dk2.gpu(), dv2.gpu(), dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out.gpu(),
                              stats.gpu(), c.B, c.T, c.H, c.Hkv, c.hs, 0, 0);
  sync();
  EXPECT_EQ(dq1.gpu_raw(), dq2.gpu_raw());
  EXPECT_EQ(dk1.gpu_raw(), dk2.gpu_raw());
  EXPECT_EQ(dv1.gpu_raw(), dv2.gpu_raw());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuGqa, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::gputest
