// The vectorised CUDA paths against the CPU backend (vector_path.h decides the path at run
// time): residual_add / GELU / cast through map_kernel.cuh, LayerNorm's warp-per-row register
// kernels, and the multi-tensor AdamW (adam_step_multi). Every case runs aligned views (the
// 128-bit path) and views offset by one element (a scalar head, or the scalar kernels), with
// sizes that leave a tail (numel not a multiple of 8), for fp32 / bf16 / fp16.
#include "gpu_test_util.h"
#include "zerotrain/kernels/vector_path.h"

namespace zt::gputest {
namespace {

class GpuVector : public GpuTest, public ::testing::WithParamInterface<DType> {};

const int64_t kSizes[] = {1, 7, 8, 9, 1000, 1003, 65537};

// Bitwise: one IEEE add per element on both backends. Offsets (out, a, b) in elements: all equal
// (vector path after a head) or different (scalar only); out aliasing a too.
TEST_P(GpuVector, ResidualAddAnyAlignmentBitwise) {
  const DType dt = GetParam();
  struct Off { int64_t out, a, b; };
  for (int64_t n : kSizes) {
    for (Off o : {Off{0, 0, 0}, Off{1, 1, 1}, Off{3, 3, 3}, Off{0, 1, 0}, Off{1, 0, 2}}) {
      Dual a(*this, *gpu_, dt, {n}, uniform(n), o.a), b(*this, *gpu_, dt, {n}, uniform(n), o.b);
      Dual out(*this, *gpu_, dt, {n}, uniform(n), o.out);
      ops::residual_add(cs(), out.cpu(), a.cpu(), b.cpu());
      ops::residual_add(gs(), out.gpu(), a.gpu(), b.gpu());
      ops::residual_add(cs(), a.cpu(), a.cpu(), b.cpu());  // aliased out == a
      ops::residual_add(gs(), a.gpu(), a.gpu(), b.gpu());
      sync();
      const std::string what = "residual_add n=" + std::to_string(n) + " offsets " + std::to_string(o.out) + "," +
                               std::to_string(o.a) + "," + std::to_string(o.b) + tag(dt);
      EXPECT_EQ(out.gpu_raw(), out.cpu_raw()) << what;
      EXPECT_EQ(a.gpu_raw(), a.cpu_raw()) << what << " aliased";
    }
  }
}

// GELU forward (overwrite) and backward (dinp +=): math::gelu / gelu_grad on both sides.
TEST_P(GpuVector, GeluForwardBackwardAnyAlignment) {
  const DType dt = GetParam();
  for (int64_t n : kSizes) {
    for (int64_t off : {0, 1}) {
      for (int64_t dout_off : {off, int64_t(2)}) {  // same misalignment, or a different one
        Dual x(*this, *gpu_, dt, {n}, uniform(n, -4.0f, 4.0f), off);
        Dual y(*this, *gpu_, dt, {n}, {}, off);
        Dual dout(*this, *gpu_, dt, {n}, uniform(n), dout_off), dx(*this, *gpu_, dt, {n}, uniform(n), off);
        ops::gelu_forward(cs(), y.cpu(), x.cpu());
        ops::gelu_forward(gs(), y.gpu(), x.gpu());
        ops::gelu_backward(cs(), dx.cpu(), x.cpu(), dout.cpu());
        ops::gelu_backward(gs(), dx.gpu(), x.gpu(), dout.gpu());
        sync();
        const std::string what = " n=" + std::to_string(n) + " offset " + std::to_string(off) + "/" +
                                 std::to_string(dout_off) + tag(dt);
        expect_close(y.gpu_values(), y.cpu_values(), tol(dt), tol(dt), "gelu_forward" + what);
        expect_close(dx.gpu_values(), dx.cpu_values(), tol(dt), tol(dt), "gelu_backward" + what);
      }
    }
  }
}

// Mixed element sizes: fp32 <-> 16-bit casts (one rounding, bitwise), aligned and offset.
TEST_P(GpuVector, CastAcrossElementSizesBitwise) {
  const DType dt = GetParam();
  for (int64_t n : {int64_t(9), int64_t(1003), int64_t(4096)}) {
    for (int64_t so : {0, 1, 3}) {
      for (int64_t d : {0, 1, 5}) {
        Dual src(*this, *gpu_, DType::F32, {n}, uniform(n, -100.0f, 100.0f), so);
        Dual dst(*this, *gpu_, dt, {n}, {}, d);
        ops::cast(cs(), dst.cpu(), src.cpu());
        ops::cast(gs(), dst.gpu(), src.gpu());
        sync();
        EXPECT_EQ(dst.gpu_raw(), dst.cpu_raw()) << "cast fp32->" << dtype_name(dt) << " n=" << n << " offsets " << so
                                                << "," << d;
      }
    }
  }
}

// LayerNorm: C = 1, 7 (scalar), 768 (vector, 3 groups a lane), 1600 (vector forward, scalar
// backward); inputs aligned or offset by one element (scalar kernels); backward twice from the
// same state must be bitwise equal (no atomics).
TEST_P(GpuVector, LayerNormPathsMatchCpuAndRepeat) {
  const DType dt = GetParam();
  for (int64_t C : {1, 7, 768, 1600}) {
    for (int64_t N : {1, 37, 70}) {
      for (int64_t off : {0, 1}) {
        const std::string sz = " N=" + std::to_string(N) + " C=" + std::to_string(C) + " offset " +
                               std::to_string(off) + tag(dt);
        Dual inp(*this, *gpu_, dt, {N, C}, uniform(N * C, -2.0f, 3.0f), off);
        Dual w(*this, *gpu_, dt, {C}, uniform(C, 0.5f, 1.5f)), b(*this, *gpu_, dt, {C}, uniform(C));
        Dual out(*this, *gpu_, dt, {N, C}, {}, off);
        Dual mean(*this, *gpu_, DType::F32, {N}, {}), rstd(*this, *gpu_, DType::F32, {N}, {});
        ops::layernorm_forward(cs(), out.cpu(), mean.cpu(), rstd.cpu(), inp.cpu(), w.cpu(), b.cpu(), 1e-5f);
        ops::layernorm_forward(gs(), out.gpu(), mean.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), b.gpu(), 1e-5f);
        sync();
        expect_close(out.gpu_values(), out.cpu_values(), tol(dt), tol(dt), "layernorm out" + sz);
        expect_close(mean.gpu_values(), mean.cpu_values(), 1e-5, 1e-5, "layernorm mean" + sz);
        expect_close(rstd.gpu_values(), rstd.cpu_values(), 1e-5, 1e-5, "layernorm rstd" + sz);

        mean.upload();  // backward from the CPU's statistics on both sides
        rstd.upload();
        Dual dout(*this, *gpu_, dt, {N, C}, uniform(N * C), off);
        const std::vector<float> dinp0 = uniform(N * C), dw0 = uniform(C), db0 = uniform(C);
        Dual dinp(*this, *gpu_, dt, {N, C}, dinp0, off);
        Dual dw(*this, *gpu_, dt, {C}, dw0), db(*this, *gpu_, dt, {C}, db0);
        ops::layernorm_backward(cs(), dinp.cpu(), dw.cpu(), db.cpu(), dout.cpu(), inp.cpu(), w.cpu(), mean.cpu(), rstd.cpu());
        ops::layernorm_backward(gs(), dinp.gpu(), dw.gpu(), db.gpu(), dout.gpu(), inp.gpu(), w.gpu(), mean.gpu(), rstd.gpu());
        sync();
        const double colsum = tol(dt, 1e-6 * std::sqrt(double(N)) + 1e-5);
        expect_close(dinp.gpu_values(), dinp.cpu_values(), tol(dt), tol(dt, 1e-5), "layernorm dinp" + sz);
        expect_close(dw.gpu_values(), dw.cpu_values(), tol(dt), colsum, "layernorm dweight" + sz);
        expect_close(db.gpu_values(), db.cpu_values(), tol(dt), colsum, "layernorm dbias" + sz);

        const std::vector<uint8_t> first_dinp = dinp.gpu_raw(), first_dw = dw.gpu_raw(), first_db = db.gpu_raw();
        Dual dinp2(*this, *gpu_, dt, {N, C}, dinp0, off);
        Dual dw2(*this, *gpu_, dt, {C}, dw0), db2(*this, *gpu_, dt, {C}, db0);
        ops::layernorm_backward(gs(), dinp2.gpu(), dw2.gpu(), db2.gpu(), dout.gpu(), inp.gpu(), w.gpu(), mean.gpu(), rstd.gpu());
        sync();
        EXPECT_EQ(dinp2.gpu_raw(), first_dinp) << "layernorm dinp repeat" << sz;
        EXPECT_EQ(dw2.gpu_raw(), first_dw) << "layernorm dweight repeat" << sz;
        EXPECT_EQ(db2.gpu_raw(), first_db) << "layernorm dbias repeat" << sz;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuVector, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A chunk list like the engine's at stage 1 (gaps between chunks in g/out), plus odd sizes,
// starts off the 8-element grid (scalar chunks), contiguous neighbours (coalesced) and more
// chunks than one launch's table (several launches).
std::vector<AdamChunk> adam_test_chunks(int64_t* p_len, int64_t* g_len) {
  std::vector<AdamChunk> c;
  int64_t p = 0, g = 0;
  const int64_t sizes[] = {7, 13, 1, 1000, 4099, 8, 64, 3};
  for (int i = 0; i < 70; ++i) {
    const int64_t n = sizes[i % 8];
    const int64_t p_skip = (i % 5 == 0) ? 3 : 0;          // a start off the 8-element grid
    const int64_t g_skip = (i % 3 == 0) ? 0 : 16 + i % 2;  // a gap (sometimes odd) or contiguous
    p += p_skip;
    g += g_skip;
    c.push_back({p, g, g, n});
    p += n;
    g += n;
  }
  *p_len = p + 5;
  *g_len = g + 5;
  return c;
}

// adam_step_multi: GPU vs CPU (which runs one adam_step per chunk), GPU multi vs GPU per-chunk
// adam_step bitwise (the same per-element math), and elements outside every chunk untouched.
TEST_F(GpuTest, AdamStepMultiMatchesPerChunkSteps) {
  int64_t P = 0, G = 0;
  const std::vector<AdamChunk> chunks = adam_test_chunks(&P, &G);
  ASSERT_GT(coalesce_adam_chunks(chunks).size(), 48u);  // more than one launch
  for (DType pt : {DType::F32, DType::BF16}) {
    for (DType mt : {DType::F32, DType::BF16}) {
      for (DType gt : {DType::F32, DType::BF16}) {
        for (bool with_out : {true, false}) {
          const std::string what = std::string("adam_step_multi p=") + dtype_name(pt) + " m=" + dtype_name(mt) +
                                   " g=" + dtype_name(gt) + (with_out ? " +out" : "");
          const std::vector<float> p0 = uniform(P), m0 = uniform(P, -0.01f, 0.01f), v0 = uniform(P, 0.0f, 1e-4f);
          const std::vector<float> g0 = uniform(G, -0.1f, 0.1f), o0 = uniform(G);
          Dual p(*this, *gpu_, pt, {P}, p0), m(*this, *gpu_, mt, {P}, m0), v(*this, *gpu_, mt, {P}, v0);
          Dual g(*this, *gpu_, gt, {G}, g0), out(*this, *gpu_, DType::BF16, {G}, o0);
          Dual p2(*this, *gpu_, pt, {P}, p0), m2(*this, *gpu_, mt, {P}, m0), v2(*this, *gpu_, mt, {P}, v0);
          Dual out2(*this, *gpu_, DType::BF16, {G}, o0);
          const std::vector<uint8_t> p_before = p.gpu_raw(), out_before = out.gpu_raw();
          math::AdamParams a{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f - 0.9f, 1.0f - 0.999f, true};
          TensorView none;
          ops::adam_step_multi(cs(), p.cpu(), m.cpu(), v.cpu(), g.cpu(), 0.5f, a, with_out ? out.cpu() : none, chunks);
          ops::adam_step_multi(gs(), p.gpu(), m.gpu(), v.gpu(), g.gpu(), 0.5f, a, with_out ? out.gpu() : none, chunks);
          for (const AdamChunk& c : chunks)
            ops::adam_step(gs(), p2.gpu().slice1d(c.p, c.n), m2.gpu().slice1d(c.p, c.n), v2.gpu().slice1d(c.p, c.n),
                           g.gpu().slice1d(c.g, c.n), 0.5f, a, with_out ? out2.gpu().slice1d(c.out, c.n) : none);
          sync();
          expect_close(p.gpu_values(), p.cpu_values(), tol(pt, 1e-6), tol(pt, 1e-6), what + " p");
          expect_close(m.gpu_values(), m.cpu_values(), tol(mt, 1e-5), tol(mt, 1e-6), what + " m");
          expect_close(v.gpu_values(), v.cpu_values(), tol(mt, 1e-5), tol(mt, 1e-6), what + " v");
          if (with_out) expect_close(out.gpu_values(), out.cpu_values(), tol(DType::BF16), 0, what + " out");
          EXPECT_EQ(p.gpu_raw(), p2.gpu_raw()) << what << ": multi vs per-chunk p";
          EXPECT_EQ(m.gpu_raw(), m2.gpu_raw()) << what << ": multi vs per-chunk m";
          EXPECT_EQ(v.gpu_raw(), v2.gpu_raw()) << what << ": multi vs per-chunk v";
          EXPECT_EQ(out.gpu_raw(), out2.gpu_raw()) << what << ": multi vs per-chunk out";
          // Elements in no chunk keep their bits.
          std::vector<char> covered(static_cast<size_t>(P), 0), covered_out(static_cast<size_t>(G), 0);
          for (const AdamChunk& c : chunks) {
            std::fill(covered.begin() + c.p, covered.begin() + c.p + c.n, 1);
            std::fill(covered_out.begin() + c.out, covered_out.begin() + c.out + c.n, 1);
          }
          const std::vector<uint8_t> p_after = p.gpu_raw(), out_after = out.gpu_raw();
          const size_t pe = dtype_size(pt);
          for (int64_t i = 0; i < P; ++i) {
            if (covered[static_cast<size_t>(i)]) continue;
            ASSERT_EQ(0, std::memcmp(&p_after[i * pe], &p_before[i * pe], pe)) << what << " p[" << i << "] changed";
          }
          for (int64_t i = 0; i < G; ++i) {
            if (with_out && covered_out[static_cast<size_t>(i)]) continue;
            ASSERT_EQ(0, std::memcmp(&out_after[i * 2], &out_before[i * 2], 2)) << what << " out[" << i << "] changed";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace zt::gputest
