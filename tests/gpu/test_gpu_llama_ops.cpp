// CUDA vs CPU backend: the Llama block's ops — RMSNorm, rotary embedding, SwiGLU, embedding
// without positions. Same inputs on both backends through zt::ops; results within a rounding
// tolerance (FMA contraction and sum order differ), the embedding bitwise (same operations),
// and the GPU's deterministic reductions bitwise repeatable.
#include "gpu_test_util.h"
#include "zerotrain/model/rope.h"

namespace zt::gputest {
namespace {

class GpuLlamaOps : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuLlamaOps, RmsNormForwardBackward) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 7}, {67, 100}, {256, 288}, {3, 4099}, {1000, 512}}) {
    Dual inp(*this, *gpu_, dt, {N, C}, uniform(N * C, -2.0f, 3.0f));
    Dual w(*this, *gpu_, dt, {C}, uniform(C, 0.5f, 1.5f));
    Dual out(*this, *gpu_, dt, {N, C}, {});
    Dual rstd(*this, *gpu_, DType::F32, {N}, uniform(N));  // garbage in: must be overwritten
    ops::rmsnorm_forward(cs(), out.cpu(), rstd.cpu(), inp.cpu(), w.cpu(), 1e-5f);
    ops::rmsnorm_forward(gs(), out.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), 1e-5f);
    sync();
    const std::string sz = " N=" + std::to_string(N) + " C=" + std::to_string(C) + tag(dt);
    expect_close(out.gpu_values(), out.cpu_values(), tol(dt), tol(dt), "rmsnorm out" + sz);
    expect_close(rstd.gpu_values(), rstd.cpu_values(), 1e-5, 1e-6, "rmsnorm rstd" + sz);

    // Backward from the CPU's saved rstd on both sides (bitwise-identical inputs).
    rstd.upload();
    Dual dout(*this, *gpu_, dt, {N, C}, uniform(N * C));
    auto dinp0 = uniform(N * C), dw0 = uniform(C);
    Dual dinp(*this, *gpu_, dt, {N, C}, dinp0), dw(*this, *gpu_, dt, {C}, dw0);
    ops::rmsnorm_backward(cs(), dinp.cpu(), dw.cpu(), dout.cpu(), inp.cpu(), w.cpu(), rstd.cpu());
    ops::rmsnorm_backward(gs(), dinp.gpu(), dw.gpu(), dout.gpu(), inp.gpu(), w.gpu(), rstd.gpu());
    sync();
    expect_close(dinp.gpu_values(), dinp.cpu_values(), tol(dt), tol(dt, 1e-5), "rmsnorm dinp" + sz);
    // Column sums of N terms in a different order: round-off grows like sqrt(N) fp32 units.
    expect_close(dw.gpu_values(), dw.cpu_values(), tol(dt), tol(dt, 1e-6 * std::sqrt(double(N)) + 1e-5),
                 "rmsnorm dweight" + sz);

    // The GPU backward again from the same start: bitwise equal (no atomics).
    Dual dinp2(*this, *gpu_, dt, {N, C}, dinp0), dw2(*this, *gpu_, dt, {C}, dw0);
    ops::rmsnorm_backward(gs(), dinp2.gpu(), dw2.gpu(), dout.gpu(), inp.gpu(), w.gpu(), rstd.gpu());
    sync();
    EXPECT_EQ(dinp2.gpu_raw(), dinp.gpu_raw()) << "rmsnorm dinp repeat" << sz;
    EXPECT_EQ(dw2.gpu_raw(), dw.gpu_raw()) << "rmsnorm dweight repeat" << sz;
  }
}

TEST_P(GpuLlamaOps, RopeForwardBackward) {
  const DType dt = GetParam();
  struct Case { int64_t B, T, nh, hs, pos, Tmax; };
  for (Case c : {Case{1, 1, 1, 2, 0, 1}, Case{2, 17, 3, 64, 5, 30}, Case{3, 9, 2, 6, 0, 9},
                 Case{4, 128, 8, 128, 0, 128}, Case{1, 5, 4, 32, 1000, 2048}}) {
    const auto table = rope_table(10000.0, c.hs, c.Tmax);
    Dual tab(*this, *gpu_, DType::F32, {c.Tmax, c.hs}, table);
    const int64_t n = c.B * c.T * c.nh * c.hs;
    Dual x(*this, *gpu_, dt, {n}, uniform(n, -2.0f, 2.0f)), dx(*this, *gpu_, dt, {n}, uniform(n));
    for (Stream* st : {&cs(), &gs()}) {
      const bool cpu = st == &cs();
      ops::rope_forward(*st, cpu ? x.cpu() : x.gpu(), cpu ? tab.cpu() : tab.gpu(), c.B, c.T, c.nh, c.hs, c.pos);
      ops::rope_backward(*st, cpu ? dx.cpu() : dx.gpu(), cpu ? tab.cpu() : tab.gpu(), c.B, c.T, c.nh, c.hs, c.pos);
    }
    sync();
    std::ostringstream sz;
    sz << " B=" << c.B << " T=" << c.T << " nh=" << c.nh << " hs=" << c.hs << " pos=" << c.pos << tag(dt);
    expect_close(x.gpu_values(), x.cpu_values(), tol(dt), tol(dt), "rope_forward" + sz.str());
    expect_close(dx.gpu_values(), dx.cpu_values(), tol(dt), tol(dt), "rope_backward" + sz.str());
  }
}

TEST_P(GpuLlamaOps, SwigluForwardBackward) {
  const DType dt = GetParam();
  for (int64_t offset : {0, 1}) {  // 1: misaligned views take the map kernel's scalar path
    const int64_t n = 100003;
    Dual g(*this, *gpu_, dt, {n}, uniform(n, -10.0f, 10.0f), offset);
    Dual u(*this, *gpu_, dt, {n}, uniform(n), offset), dout(*this, *gpu_, dt, {n}, uniform(n), offset);
    Dual out(*this, *gpu_, dt, {n}, {}, offset), dg(*this, *gpu_, dt, {n}, {}, offset);
    Dual du(*this, *gpu_, dt, {n}, {}, offset);
    for (Stream* st : {&cs(), &gs()}) {
      const bool cpu = st == &cs();
      ops::swiglu_forward(*st, cpu ? out.cpu() : out.gpu(), cpu ? g.cpu() : g.gpu(), cpu ? u.cpu() : u.gpu());
      ops::swiglu_backward(*st, cpu ? dg.cpu() : dg.gpu(), cpu ? du.cpu() : du.gpu(), cpu ? dout.cpu() : dout.gpu(),
                           cpu ? g.cpu() : g.gpu(), cpu ? u.cpu() : u.gpu());
    }
    sync();
    const std::string sz = " offset=" + std::to_string(offset) + tag(dt);
    expect_close(out.gpu_values(), out.cpu_values(), tol(dt), tol(dt), "swiglu out" + sz);
    expect_close(dg.gpu_values(), dg.cpu_values(), tol(dt), tol(dt), "swiglu dgate" + sz);
    expect_close(du.gpu_values(), du.cpu_values(), tol(dt), tol(dt), "swiglu dup" + sz);

    // In place (dgate = gate, dup = up) on the GPU: bitwise its out-of-place result.
    ops::swiglu_backward(gs(), g.gpu(), u.gpu(), dout.gpu(), g.gpu(), u.gpu());
    sync();
    EXPECT_EQ(g.gpu_raw(), dg.gpu_raw()) << "swiglu dgate in place" << sz;
    EXPECT_EQ(u.gpu_raw(), du.gpu_raw()) << "swiglu dup in place" << sz;
  }
}

TEST_P(GpuLlamaOps, EmbeddingWithoutPositionsBitwise) {
  const DType dt = GetParam();
  const int64_t B = 3, T = 40, C = 96, V = 500, N = B * T;
  std::vector<int32_t> toks(static_cast<size_t>(N));
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  for (auto& t : toks) t = pick(rng_);
  toks[1] = toks[3] = toks[N - 1] = toks[0];  // repeated tokens
  DualInts tokens(*this, *gpu_, toks);
  Dual wte(*this, *gpu_, dt, {V, C}, uniform(V * C)), out(*this, *gpu_, dt, {B, T, C}, {});
  ops::embedding_forward(cs(), out.cpu(), tokens.cpu(), wte.cpu(), TensorView{}, B, T, C);
  ops::embedding_forward(gs(), out.gpu(), tokens.gpu(), wte.gpu(), TensorView{}, B, T, C);
  Dual dout(*this, *gpu_, dt, {B, T, C}, uniform(N * C)), dwte(*this, *gpu_, dt, {V, C}, uniform(V * C));
  ops::embedding_backward(cs(), dwte.cpu(), TensorView{}, dout.cpu(), tokens.cpu(), B, T, C);
  ops::embedding_backward(gs(), dwte.gpu(), TensorView{}, dout.gpu(), tokens.gpu(), B, T, C);
  sync();
  EXPECT_EQ(out.gpu_raw(), out.cpu_raw()) << "embedding_forward without wpe" << tag(dt);
  EXPECT_EQ(dwte.gpu_raw(), dwte.cpu_raw()) << "embedding dwte without dwpe" << tag(dt);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuLlamaOps, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::gputest
