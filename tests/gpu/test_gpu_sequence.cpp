// CUDA vs CPU backend: causal attention, token + position embedding, softmax cross-entropy,
// MSE — and bitwise repeatability of every deterministic GPU reduction.
#include "gpu_test_util.h"
#include "zerotrain/kernels/attention_tile.h"

namespace zt::gputest {
namespace {

struct TiledCase { int64_t B, T, C, H; };

class GpuSequence : public GpuTest, public ::testing::WithParamInterface<DType> {
 protected:
  // Tiled attention, CUDA vs the CPU reference kernel, forward and backward, for each case.
  void check_tiled_against_cpu(DType dt, const std::vector<TiledCase>& cases);
};

// 16-bit attention rounds the probabilities / score gradients to the compute dtype before the
// GEMMs that consume them (cuBLAS and mma.sync take 16-bit operands): a few units of error. The
// tiled tensor-core kernels' ex2.approx adds ~2^-21 relative per probability, far below that.
double att_tol(DType t) { return t == DType::F32 ? 2e-5 : 8.0 * unit(t); }

TEST_P(GpuSequence, AttentionForwardBackward) {
  const DType dt = GetParam();
  struct Case { int64_t B, T, C, H; };
  for (Case c : {Case{1, 1, 8, 2}, Case{2, 17, 32, 4}, Case{2, 64, 96, 3}, Case{1, 200, 64, 1}}) {
    const int64_t BHTT = c.B * c.H * c.T * c.T;
    Dual qkv(*this, *gpu_, dt, {c.B, c.T, 3 * c.C}, uniform(c.B * c.T * 3 * c.C, -2.0f, 2.0f));
    Dual out(*this, *gpu_, dt, {c.B, c.T, c.C}, {});
    Dual att(*this, *gpu_, DType::F32, {c.B, c.H, c.T, c.T}, uniform(BHTT));  // garbage in: must be overwritten
    ops::attention_forward(cs(), out.cpu(), att.cpu(), qkv.cpu(), c.B, c.T, c.C, c.H);
    ops::attention_forward(gs(), out.gpu(), att.gpu(), qkv.gpu(), c.B, c.T, c.C, c.H);
    sync();
    std::ostringstream sz;
    sz << " B=" << c.B << " T=" << c.T << " C=" << c.C << " H=" << c.H << tag(dt);
    expect_close(out.gpu_values(), out.cpu_values(), att_tol(dt), att_tol(dt), "attention out" + sz.str());
    expect_close(att.gpu_values(), att.cpu_values(), 1e-5, 1e-6, "attention att" + sz.str());

    // Backward from the CPU's probabilities on both sides; dqkv accumulates onto random values.
    att.upload();
    Dual dout(*this, *gpu_, dt, {c.B, c.T, c.C}, uniform(c.B * c.T * c.C));
    Dual dqkv(*this, *gpu_, dt, {c.B, c.T, 3 * c.C}, uniform(c.B * c.T * 3 * c.C, -0.1f, 0.1f));
    Dual datt(*this, *gpu_, DType::F32, {c.B, c.H, c.T, c.T}, {});
    ops::attention_backward(cs(), dqkv.cpu(), datt.cpu(), dout.cpu(), qkv.cpu(), att.cpu(), c.B, c.T, c.C, c.H);
    ops::attention_backward(gs(), dqkv.gpu(), datt.gpu(), dout.gpu(), qkv.gpu(), att.gpu(), c.B, c.T, c.C, c.H);
    sync();
    expect_close(dqkv.gpu_values(), dqkv.cpu_values(), att_tol(dt), att_tol(dt), "attention dqkv" + sz.str());
  }
}

TEST_P(GpuSequence, AttentionBackwardIsDeterministic) {
  const DType dt = GetParam();
  const int64_t B = 2, T = 48, C = 64, H = 4;
  Dual qkv(*this, *gpu_, dt, {B, T, 3 * C}, uniform(B * T * 3 * C));
  Dual out(*this, *gpu_, dt, {B, T, C}, {});
  Dual att(*this, *gpu_, DType::F32, {B, H, T, T}, {}), datt(*this, *gpu_, DType::F32, {B, H, T, T}, {});
  Dual dout(*this, *gpu_, dt, {B, T, C}, uniform(B * T * C));
  auto start = uniform(B * T * 3 * C);
  Dual d1(*this, *gpu_, dt, {B, T, 3 * C}, start), d2(*this, *gpu_, dt, {B, T, 3 * C}, start);
  ops::attention_forward(gs(), out.gpu(), att.gpu(), qkv.gpu(), B, T, C, H);
  ops::attention_backward(gs(), d1.gpu(), datt.gpu(), dout.gpu(), qkv.gpu(), att.gpu(), B, T, C, H);
  ops::attention_backward(gs(), d2.gpu(), datt.gpu(), dout.gpu(), qkv.gpu(), att.gpu(), B, T, C, H);
  sync();
  EXPECT_EQ(d1.gpu_raw(), d2.gpu_raw());
}

// Tiled attention: the CUDA kernel (tensor-core tile GEMMs for 16-bit) against the CPU reference
// kernel, forward (out and the (max, sum) statistics) and backward; T around the 64 / 32 tiles,
// head sizes that are not a multiple of 16 (zero padding), and T = 4096. Then determinism.

void GpuSequence::check_tiled_against_cpu(DType dt, const std::vector<TiledCase>& cases) {
  for (const TiledCase& c : cases) {
    Dual qkv(*this, *gpu_, dt, {c.B, c.T, 3 * c.C}, uniform(c.B * c.T * 3 * c.C, -2.0f, 2.0f));
    Dual out(*this, *gpu_, dt, {c.B, c.T, c.C}, {});
    Dual stats(*this, *gpu_, DType::F32, {c.B, c.H, c.T, 2}, {});
    // The CPU reference runs the CUDA kernels' tiles (its own defaults differ).
    ops::attention_tiled_forward(cs(), out.cpu(), stats.cpu(), qkv.cpu(), c.B, c.T, c.C, c.H, attn_tile::kTileQ,
                                 attn_tile::kTileK);
    ops::attention_tiled_forward(gs(), out.gpu(), stats.gpu(), qkv.gpu(), c.B, c.T, c.C, c.H, 0, 0);
    sync();
    std::ostringstream sz;
    sz << " B=" << c.B << " T=" << c.T << " C=" << c.C << " H=" << c.H << tag(dt);
    expect_close(out.gpu_values(), out.cpu_values(), att_tol(dt), att_tol(dt), "tiled out" + sz.str());
    expect_close(stats.gpu_values(), stats.cpu_values(), 1e-4, 1e-4, "tiled stats" + sz.str());
    // Backward from the CPU's out and statistics on both sides; both overwrite a dqkv of random values.
    out.upload();
    stats.upload();
    Dual dout(*this, *gpu_, dt, {c.B, c.T, c.C}, uniform(c.B * c.T * c.C));
    Dual dqkv(*this, *gpu_, dt, {c.B, c.T, 3 * c.C}, uniform(c.B * c.T * 3 * c.C, -0.1f, 0.1f));
    ops::attention_tiled_backward(cs(), dqkv.cpu(), dout.cpu(), qkv.cpu(), out.cpu(), stats.cpu(), c.B, c.T, c.C, c.H,
                                  attn_tile::kTileQ, attn_tile::kTileK);
    ops::attention_tiled_backward(gs(), dqkv.gpu(), dout.gpu(), qkv.gpu(), out.gpu(), stats.gpu(), c.B, c.T, c.C, c.H, 0, 0);
    sync();
    expect_close(dqkv.gpu_values(), dqkv.cpu_values(), att_tol(dt), att_tol(dt), "tiled dqkv" + sz.str());
  }
}

TEST_P(GpuSequence, TiledAttentionMatchesCpu) {
  check_tiled_against_cpu(GetParam(), {{1, 1, 8, 2}, {2, 33, 24, 3}, {2, 65, 128, 2}, {1, 130, 64, 1}});
}

// The tensor-core (16-bit) and SIMT (fp32) kernels on the shapes their code paths branch on:
// T = 1, T a multiple of the 64 x 64 tiles and not, head sizes 32 / 64 / 80 (padded to 96) / 128
// (the backward's 32-row inner tiles), hs = 20 (not a multiple of 8: the scalar, non-cp.async
// loads), and B·H = 96 blocks per query tile at the GPT-2 head shape.
TEST_P(GpuSequence, TiledAttentionTensorCoreShapes) {
  check_tiled_against_cpu(GetParam(), {{1, 1, 64, 1},
                                       {2, 100, 64, 2},
                                       {1, 257, 128, 2},
                                       {1, 64, 64, 1},
                                       {1, 200, 160, 2},
                                       {1, 130, 256, 2},
                                       {1, 77, 60, 3},
                                       {8, 128, 768, 12}});
}

// Not in the sanitizer subset (device-check.sh): T = 4096 is long under memcheck.
TEST_P(GpuSequence, TiledAttentionLongSequence) { check_tiled_against_cpu(GetParam(), {{1, 4096, 64, 1}}); }

TEST_P(GpuSequence, TiledAttentionIsDeterministic) {
  const DType dt = GetParam();
  const int64_t B = 2, T = 100, C = 64, H = 4;
  Dual qkv(*this, *gpu_, dt, {B, T, 3 * C}, uniform(B * T * 3 * C));
  Dual out(*this, *gpu_, dt, {B, T, C}, {}), stats(*this, *gpu_, DType::F32, {B, H, T, 2}, {});
  Dual dout(*this, *gpu_, dt, {B, T, C}, uniform(B * T * C));
  auto start = uniform(B * T * 3 * C);
  Dual d1(*this, *gpu_, dt, {B, T, 3 * C}, start), d2(*this, *gpu_, dt, {B, T, 3 * C}, start);
  ops::attention_tiled_forward(gs(), out.gpu(), stats.gpu(), qkv.gpu(), B, T, C, H, 0, 0);
  ops::attention_tiled_backward(gs(), d1.gpu(), dout.gpu(), qkv.gpu(), out.gpu(), stats.gpu(), B, T, C, H, 0, 0);
  ops::attention_tiled_backward(gs(), d2.gpu(), dout.gpu(), qkv.gpu(), out.gpu(), stats.gpu(), B, T, C, H, 0, 0);
  sync();
  EXPECT_EQ(d1.gpu_raw(), d2.gpu_raw());
}

TEST_P(GpuSequence, EmbeddingForwardBitwiseBackwardDeterministic) {
  const DType dt = GetParam();
  struct Case { int64_t B, T, C, V; };
  for (Case c : {Case{1, 1, 1, 1}, Case{3, 9, 5, 11}, Case{4, 64, 768, 50}, Case{2, 300, 33, 50257}}) {
    const int64_t N = c.B * c.T;
    std::vector<int32_t> toks(static_cast<size_t>(N));
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c.V - 1));
    for (auto& t : toks) t = pick(rng_);
    if (N > 4) toks[1] = toks[3] = toks[N - 1] = toks[0];  // repeated tokens
    DualInts tokens(*this, *gpu_, toks);
    Dual wte(*this, *gpu_, dt, {c.V, c.C}, uniform(c.V * c.C));
    Dual wpe(*this, *gpu_, dt, {c.T + 2, c.C}, uniform((c.T + 2) * c.C));
    Dual out(*this, *gpu_, dt, {c.B, c.T, c.C}, {});
    ops::embedding_forward(cs(), out.cpu(), tokens.cpu(), wte.cpu(), wpe.cpu(), c.B, c.T, c.C);
    ops::embedding_forward(gs(), out.gpu(), tokens.gpu(), wte.gpu(), wpe.gpu(), c.B, c.T, c.C);
    sync();
    std::ostringstream sz;
    sz << " B=" << c.B << " T=" << c.T << " C=" << c.C << " V=" << c.V << tag(dt);
    EXPECT_EQ(out.gpu_raw(), out.cpu_raw()) << "embedding_forward" << sz.str();

    Dual dout(*this, *gpu_, dt, {c.B, c.T, c.C}, uniform(N * c.C));
    auto dwte0 = uniform(c.V * c.C), dwpe0 = uniform((c.T + 2) * c.C);
    Dual dwte(*this, *gpu_, dt, {c.V, c.C}, dwte0), dwpe(*this, *gpu_, dt, {c.T + 2, c.C}, dwpe0);
    ops::embedding_backward(cs(), dwte.cpu(), dwpe.cpu(), dout.cpu(), tokens.cpu(), c.B, c.T, c.C);
    ops::embedding_backward(gs(), dwte.gpu(), dwpe.gpu(), dout.gpu(), tokens.gpu(), c.B, c.T, c.C);
    sync();
    // Same grouping and order as the CPU backend (stable sort by token, positions ascending):
    // the fp32 sums are the same operations, so the results agree bitwise.
    EXPECT_EQ(dwte.gpu_raw(), dwte.cpu_raw()) << "embedding dwte" << sz.str();
    EXPECT_EQ(dwpe.gpu_raw(), dwpe.cpu_raw()) << "embedding dwpe" << sz.str();
    // Repeat from the same start on the GPU: bitwise equal.
    auto first = dwte.gpu_raw();
    Dual again(*this, *gpu_, dt, {c.V, c.C}, dwte0);
    ops::embedding_backward(gs(), again.gpu(), dwpe.gpu(), dout.gpu(), tokens.gpu(), c.B, c.T, c.C);
    sync();
    EXPECT_EQ(again.gpu_raw(), first) << "embedding dwte repeat" << sz.str();
  }
}

TEST_P(GpuSequence, SoftmaxCrossEntropyWithIgnoredTargetsAndAliasing) {
  const DType dt = GetParam();
  for (auto [N, V] : {std::pair<int64_t, int64_t>{1, 1}, {7, 5003}, {16, 50257}, {33, 64}}) {
    std::vector<int32_t> tg(static_cast<size_t>(N));
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
    for (auto& t : tg) t = pick(rng_);
    if (N > 2) tg[1] = -1;  // ignored
    DualInts targets(*this, *gpu_, tg);
    auto lv = uniform(N * V, -8.0f, 8.0f);
    for (bool alias : {false, true}) {
      Dual logits(*this, *gpu_, dt, {N, V}, lv);
      Dual dl(*this, *gpu_, dt, {N, V}, {});
      Dual losses(*this, *gpu_, DType::F32, {N}, {});
      const float dloss = 1.0f / static_cast<float>(N);
      ops::softmax_cross_entropy(cs(), losses.cpu(), alias ? logits.cpu() : dl.cpu(), logits.cpu(), targets.cpu(), dloss);
      ops::softmax_cross_entropy(gs(), losses.gpu(), alias ? logits.gpu() : dl.gpu(), logits.gpu(), targets.gpu(), dloss);
      sync();
      std::string sz = " N=" + std::to_string(N) + " V=" + std::to_string(V) + (alias ? " aliased" : "") + tag(dt);
      expect_close(losses.gpu_values(), losses.cpu_values(), 1e-5, 1e-6, "cross-entropy loss" + sz);
      Dual& d = alias ? logits : dl;
      expect_close(d.gpu_values(), d.cpu_values(), tol(dt), tol(dt), "cross-entropy dlogits" + sz);
    }
  }
}

TEST_P(GpuSequence, MseLoss) {
  const DType dt = GetParam();
  for (auto [N, K] : {std::pair<int64_t, int64_t>{1, 1}, {100, 16}, {9, 1000}}) {
    Dual pred(*this, *gpu_, dt, {N, K}, uniform(N * K)), target(*this, *gpu_, dt, {N, K}, uniform(N * K));
    Dual dpred(*this, *gpu_, dt, {N, K}, {}), losses(*this, *gpu_, DType::F32, {N}, {});
    ops::mse_loss(cs(), losses.cpu(), dpred.cpu(), pred.cpu(), target.cpu(), 0.25f);
    ops::mse_loss(gs(), losses.gpu(), dpred.gpu(), pred.gpu(), target.gpu(), 0.25f);
    sync();
    std::string sz = " N=" + std::to_string(N) + " K=" + std::to_string(K) + tag(dt);
    expect_close(losses.gpu_values(), losses.cpu_values(), 1e-5, 1e-6, "mse loss" + sz);
    EXPECT_EQ(dpred.gpu_raw(), dpred.cpu_raw()) << "mse dpred" << sz;
  }
}

TEST_P(GpuSequence, ColumnReductionsAreDeterministic) {
  const DType dt = GetParam();
  const int64_t N = 5000, C = 300;
  Dual dout(*this, *gpu_, dt, {N, C}, uniform(N * C)), inp(*this, *gpu_, dt, {N, C}, uniform(N * C));
  Dual w(*this, *gpu_, dt, {C}, uniform(C)), b(*this, *gpu_, dt, {C}, uniform(C));
  Dual out(*this, *gpu_, dt, {N, C}, {}), mean(*this, *gpu_, DType::F32, {N}, {}), rstd(*this, *gpu_, DType::F32, {N}, {});
  ops::layernorm_forward(gs(), out.gpu(), mean.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), b.gpu(), 1e-5f);
  std::vector<std::vector<uint8_t>> runs;
  for (int rep = 0; rep < 2; ++rep) {
    Dual dinp(*this, *gpu_, dt, {N, C}, {}), dw(*this, *gpu_, dt, {C}, {}), db(*this, *gpu_, dt, {C}, {});
    Dual dbias(*this, *gpu_, dt, {C}, {});
    ops::layernorm_backward(gs(), dinp.gpu(), dw.gpu(), db.gpu(), dout.gpu(), inp.gpu(), w.gpu(), mean.gpu(), rstd.gpu());
    ops::bias_grad(gs(), dbias.gpu(), dout.gpu());
    sync();
    auto r = dw.gpu_raw();
    for (auto* x : {&db, &dbias, &dinp}) {
      auto raw = x->gpu_raw();
      r.insert(r.end(), raw.begin(), raw.end());
    }
    runs.push_back(r);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuSequence, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::gputest
