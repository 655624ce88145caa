// CUDA vs CPU backend: GEMM, bias add/grad, LayerNorm, GELU/ReLU, residual add, scale, cast,
// squared norm, Adam. Same inputs on both backends through zt::ops; elementwise ops whose fp32
// math is a single IEEE operation must agree bitwise, the rest within a rounding tolerance.
#include "gpu_test_util.h"
#include "zerotrain/kernels/cuda_ops.h"

namespace zt::gputest {
namespace {

class GpuDense : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuDense, GemmAllTransposes) {
  const DType dt = GetParam();
  struct Case { int64_t M, N, K; };
  for (Case c : {Case{1, 1, 1}, Case{37, 53, 29}, Case{64, 128, 512}, Case{5, 300, 3}, Case{4, 3, 0}}) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        Dual A(*this, *gpu_, dt, {c.M * c.K}, uniform(c.M * c.K));
        Dual B(*this, *gpu_, dt, {c.K * c.N}, uniform(c.K * c.N));
        Dual C(*this, *gpu_, dt, {c.M * c.N}, uniform(c.M * c.N));
        const float alpha = 0.75f, beta = 0.5f;
        ops::gemm(cs(), ta, tb, c.M, c.N, c.K, alpha, A.cpu(), B.cpu(), beta, C.cpu());
        ops::gemm(gs(), ta, tb, c.M, c.N, c.K, alpha, A.gpu(), B.gpu(), beta, C.gpu());
        sync();
        std::ostringstream what;
        what << "gemm M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << ta << " tb=" << tb << tag(dt);
        // Sum order differs (cuBLAS tiles vs OpenBLAS): allow K-proportional fp32 round-off.
        expect_close(C.gpu_values(), C.cpu_values(), tol(dt), tol(dt, 1e-6 * std::sqrt(double(c.K)) + 1e-6),
                     what.str());
      }
    }
  }
}

TEST_P(GpuDense, BiasAddBitwiseAndBiasGrad) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {33, 65}, {1000, 768}, {70000, 3}}) {
    Dual out(*this, *gpu_, dt, {N, C}, uniform(N * C));
    Dual bias(*this, *gpu_, dt, {C}, uniform(C));
    ops::bias_add(cs(), out.cpu(), bias.cpu());
    ops::bias_add(gs(), out.gpu(), bias.gpu());
    Dual dbias(*this, *gpu_, dt, {C}, uniform(C));
    ops::bias_grad(cs(), dbias.cpu(), out.cpu());
    ops::bias_grad(gs(), dbias.gpu(), out.gpu());
    sync();
    EXPECT_EQ(out.gpu_raw(), out.cpu_raw()) << "bias_add N=" << N << " C=" << C << tag(dt);
    // Column sums of N terms in a different order: round-off grows like sqrt(N) fp32 units.
    expect_close(dbias.gpu_values(), dbias.cpu_values(), tol(dt), tol(dt, 1e-6 * std::sqrt(double(N))),
                 "bias_grad N=" + std::to_string(N) + tag(dt));
  }
}

TEST_P(GpuDense, LayerNormForwardBackward) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 7}, {67, 100}, {256, 768}, {3, 4099}}) {
    Dual inp(*this, *gpu_, dt, {N, C}, uniform(N * C, -2.0f, 3.0f));
    Dual w(*this, *gpu_, dt, {C}, uniform(C, 0.5f, 1.5f));
    Dual b(*this, *gpu_, dt, {C}, uniform(C));
    Dual out(*this, *gpu_, dt, {N, C}, {});
    Dual mean(*this, *gpu_, DType::F32, {N}, {}), rstd(*this, *gpu_, DType::F32, {N}, {});
    ops::layernorm_forward(cs(), out.cpu(), mean.cpu(), rstd.cpu(), inp.cpu(), w.cpu(), b.cpu(), 1e-5f);
    ops::layernorm_forward(gs(), out.gpu(), mean.gpu(), rstd.gpu(), inp.gpu(), w.gpu(), b.gpu(), 1e-5f);
    sync();
    const std::string sz = " N=" + std::to_string(N) + " C=" + std::to_string(C) + tag(dt);
    expect_close(out.gpu_values(), out.cpu_values(), tol(dt), tol(dt), "layernorm out" + sz);
    expect_close(mean.gpu_values(), mean.cpu_values(), 1e-5, 1e-5, "layernorm mean" + sz);
    expect_close(rstd.gpu_values(), rstd.cpu_values(), 1e-5, 1e-5, "layernorm rstd" + sz);

    // Backward from the CPU's saved statistics on both sides (bitwise-identical inputs).
    mean.upload();
    rstd.upload();
    Dual dout(*this, *gpu_, dt, {N, C}, uniform(N * C));
    Dual dinp(*this, *gpu_, dt, {N, C}, uniform(N * C));
    Dual dw(*this, *gpu_, dt, {C}, uniform(C)), db(*this, *gpu_, dt, {C}, uniform(C));
    ops::layernorm_backward(cs(), dinp.cpu(), dw.cpu(), db.cpu(), dout.cpu(), inp.cpu(), w.cpu(), mean.cpu(), rstd.cpu());
    ops::layernorm_backward(gs(), dinp.gpu(), dw.gpu(), db.gpu(), dout.gpu(), inp.gpu(), w.gpu(), mean.gpu(), rstd.gpu());
    sync();
    expect_close(dinp.gpu_values(), dinp.cpu_values(), tol(dt), tol(dt, 1e-5), "layernorm dinp" + sz);
    expect_close(dw.gpu_values(), dw.cpu_values(), tol(dt), tol(dt, 1e-5), "layernorm dweight" + sz);
    expect_close(db.gpu_values(), db.cpu_values(), tol(dt), tol(dt, 1e-5), "layernorm dbias" + sz);
  }
}

TEST_P(GpuDense, GeluReluForwardBackward) {
  const DType dt = GetParam();
  for (int64_t offset : {0, 1}) {  // 1: misaligned views take the scalar path
    const int64_t n = 100003;
    Dual x(*this, *gpu_, dt, {n}, uniform(n, -5.0f, 5.0f), offset);
    Dual dout(*this, *gpu_, dt, {n}, uniform(n), offset);
    Dual g(*this, *gpu_, dt, {n}, {}, offset), r(*this, *gpu_, dt, {n}, {}, offset);
    Dual dg(*this, *gpu_, dt, {n}, uniform(n), offset), dr(*this, *gpu_, dt, {n}, uniform(n), offset);
    for (Stream* st : {&cs(), &gs()}) {
      bool cpu = st == &cs();
      ops::gelu_forward(*st, cpu ? g.cpu() : g.gpu(), cpu ? x.cpu() : x.gpu());
      ops::relu_forward(*st, cpu ? r.cpu() : r.gpu(), cpu ? x.cpu() : x.gpu());
      ops::gelu_backward(*st, cpu ? dg.cpu() : dg.gpu(), cpu ? x.cpu() : x.gpu(), cpu ? dout.cpu() : dout.gpu());
      ops::relu_backward(*st, cpu ? dr.cpu() : dr.gpu(), cpu ? x.cpu() : x.gpu(), cpu ? dout.cpu() : dout.gpu());
    }
    sync();
    const std::string sz = " offset=" + std::to_string(offset) + tag(dt);
    expect_close(g.gpu_values(), g.cpu_values(), tol(dt), tol(dt), "gelu_forward" + sz);
    EXPECT_EQ(r.gpu_raw(), r.cpu_raw()) << "relu_forward" << sz;
    expect_close(dg.gpu_values(), dg.cpu_values(), tol(dt), tol(dt), "gelu_backward" + sz);
    expect_close(dr.gpu_values(), dr.cpu_values(), tol(dt), tol(dt), "relu_backward" + sz);
  }
}

TEST_P(GpuDense, ResidualScaleBitwise) {
  const DType dt = GetParam();
  for (int64_t offset : {0, 3}) {
    const int64_t n = 4099;
    Dual a(*this, *gpu_, dt, {n}, uniform(n), offset), b(*this, *gpu_, dt, {n}, uniform(n), offset);
    Dual out(*this, *gpu_, dt, {n}, {}, offset);
    ops::residual_add(cs(), out.cpu(), a.cpu(), b.cpu());
    ops::residual_add(gs(), out.gpu(), a.gpu(), b.gpu());
    ops::residual_add(cs(), a.cpu(), a.cpu(), b.cpu());  // aliased out == a
    ops::residual_add(gs(), a.gpu(), a.gpu(), b.gpu());
    ops::scale(cs(), b.cpu(), -0.37f);
    ops::scale(gs(), b.gpu(), -0.37f);
    sync();
    EXPECT_EQ(out.gpu_raw(), out.cpu_raw()) << "residual_add" << tag(dt);
    EXPECT_EQ(a.gpu_raw(), a.cpu_raw()) << "residual_add aliased" << tag(dt);
    EXPECT_EQ(b.gpu_raw(), b.cpu_raw()) << "scale" << tag(dt);
  }
}

TEST_P(GpuDense, CastEveryPairBitwise) {
  const DType src_t = GetParam();
  for (DType dst_t : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t offset : {0, 1}) {
      const int64_t n = 10007;
      auto v = uniform(n, -70000.0f, 70000.0f);  // fp16 overflow to inf included
      for (int64_t i = 0; i < n; i += 7) v[i] *= 1e-6f;  // subnormals in fp16
      Dual src(*this, *gpu_, src_t, {n}, v, offset);
      Dual dst(*this, *gpu_, dst_t, {n}, {}, offset);
      ops::cast(cs(), dst.cpu(), src.cpu());
      ops::cast(gs(), dst.gpu(), src.gpu());
      sync();
      EXPECT_EQ(dst.gpu_raw(), dst.cpu_raw()) << "cast " << dtype_name(src_t) << "->" << dtype_name(dst_t)
                                              << " offset " << offset;
    }
  }
}

TEST_P(GpuDense, CastSameDtypeOverlappingIsMemmove) {
  const DType dt = GetParam();
  const int64_t n = 1000;
  for (int64_t shift : {3, -3}) {
    Dual buf(*this, *gpu_, dt, {n + 3}, uniform(n + 3));
    const int64_t src_at = shift > 0 ? 0 : 3, dst_at = shift > 0 ? 3 : 0;
    ops::cast(cs(), buf.cpu().slice1d(dst_at, n), buf.cpu().slice1d(src_at, n));
    ops::cast(gs(), buf.gpu().slice1d(dst_at, n), buf.gpu().slice1d(src_at, n));
    sync();
    EXPECT_EQ(buf.gpu_raw(), buf.cpu_raw()) << "overlapping copy, shift " << shift << tag(dt);
  }
}

TEST_P(GpuDense, SquaredNormMatchesAndIsDeterministic) {
  const DType dt = GetParam();
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{8191}, int64_t{1000003}}) {
    Dual x(*this, *gpu_, dt, {n}, uniform(n, -3.0f, 3.0f));
    DeviceBuffer out_d = gpu_->alloc(2 * sizeof(double), MemCategory::Workspace, true);
    double out_c = -1, out_g[2] = {-1, -1};
    ops::squared_norm(cs(), &out_c, x.cpu());
    ops::squared_norm(gs(), out_d.as<double>(), x.gpu());
    ops::squared_norm(gs(), out_d.as<double>() + 1, x.gpu());
    gpu_->memcpy_async(out_g, out_d.data(), sizeof(out_g), CopyKind::DeviceToHost, gs());
    sync();
    EXPECT_NEAR(out_g[0], out_c, 1e-12 * std::max(1.0, std::fabs(out_c))) << "squared_norm n=" << n << tag(dt);
    EXPECT_EQ(std::memcmp(&out_g[0], &out_g[1], sizeof(double)), 0) << "squared_norm not deterministic";
  }
  // Non-finite input propagates.
  std::vector<float> v(5000, 1.0f);
  v[4321] = INFINITY;
  Dual x(*this, *gpu_, dt, {5000}, v);
  DeviceBuffer out_d = gpu_->alloc(sizeof(double), MemCategory::Workspace, true);
  double got = 0;
  ops::squared_norm(gs(), out_d.as<double>(), x.gpu());
  gpu_->memcpy_async(&got, out_d.data(), sizeof(got), CopyKind::DeviceToHost, gs());
  sync();
  EXPECT_TRUE(std::isinf(got)) << got;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuDense, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Adam: master (fp32 | bf16) x moments (fp32 | bf16) x grad (fp32 | bf16 | fp16) x param_out.
TEST_F(GpuTest, AdamAllDtypeCombinations) {
  const int64_t n = 50001;
  for (DType pt : {DType::F32, DType::BF16}) {
    for (DType mt : {DType::F32, DType::BF16}) {
      for (DType gt : {DType::F32, DType::BF16, DType::F16}) {
        for (int with_out = 0; with_out < 2; ++with_out) {
          for (bool adamw : {true, false}) {
            Dual p(*this, *gpu_, pt, {n}, uniform(n)), g(*this, *gpu_, gt, {n}, uniform(n, -0.1f, 0.1f));
            Dual m(*this, *gpu_, mt, {n}, uniform(n, -0.01f, 0.01f)), v(*this, *gpu_, mt, {n}, uniform(n, 0.0f, 1e-4f));
            Dual out(*this, *gpu_, DType::BF16, {n}, {});
            math::AdamParams a{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f - 0.9f * 0.9f, 1.0f - 0.999f * 0.999f, adamw};
            TensorView none;
            for (int step = 0; step < 3; ++step) {
              ops::adam_step(cs(), p.cpu(), m.cpu(), v.cpu(), g.cpu(), 0.5f, a, with_out ? out.cpu() : none);
              ops::adam_step(gs(), p.gpu(), m.gpu(), v.gpu(), g.gpu(), 0.5f, a, with_out ? out.gpu() : none);
            }
            sync();
            std::string what = std::string("adam p=") + dtype_name(pt) + " m=" + dtype_name(mt) + " g=" +
                               dtype_name(gt) + (with_out ? " +out" : "") + (adamw ? " adamw" : " l2");
            // FMA contraction on the GPU moves fp32 results by an ulp; storage rounding dominates.
            expect_close(p.gpu_values(), p.cpu_values(), tol(pt, 1e-6), tol(pt, 1e-6), what + " p");
            expect_close(m.gpu_values(), m.cpu_values(), tol(mt, 1e-5), tol(mt, 1e-6), what + " m");
            expect_close(v.gpu_values(), v.cpu_values(), tol(mt, 1e-5), tol(mt, 1e-6), what + " v");
            if (with_out) expect_close(out.gpu_values(), out.cpu_values(), tol(DType::BF16), 0, what + " out");
          }
        }
      }
    }
  }
}

// The per-stream cuBLAS handle and scratch are cached, counted and releasable.
TEST_F(GpuTest, StreamResourcesDieWithTheirStream) {
  Dual A(*this, *gpu_, DType::F32, {64}, uniform(64)), C(*this, *gpu_, DType::F32, {64}, {});
  const size_t before = cuda_ops::workspace_bytes();
  {
    auto side = gpu_->create_stream("short-lived");
    ops::gemm(*side, false, false, 8, 8, 8, 1.0f, A.gpu(), A.gpu(), 0.0f, C.gpu());
    side->synchronize();
    EXPECT_GE(cuda_ops::workspace_bytes(), before + (size_t(32) << 20));
  }
  EXPECT_EQ(cuda_ops::workspace_bytes(), before);
}

TEST_F(GpuTest, WorkspacesAreCountedAndReleasable) {
  Dual A(*this, *gpu_, DType::F32, {64}, uniform(64)), C(*this, *gpu_, DType::F32, {64}, {});
  ops::gemm(gs(), false, false, 8, 8, 8, 1.0f, A.gpu(), A.gpu(), 0.0f, C.gpu());
  sync();
  EXPECT_GE(cuda_ops::workspace_bytes(), size_t(32) << 20);
  cuda_ops::release_workspaces();
  EXPECT_EQ(cuda_ops::workspace_bytes(), 0u);
  ops::gemm(gs(), false, false, 8, 8, 8, 1.0f, A.gpu(), A.gpu(), 0.0f, C.gpu());  // recreated on demand
  ops::gemm(cs(), false, false, 8, 8, 8, 1.0f, A.cpu(), A.cpu(), 0.0f, C.cpu());
  sync();
  expect_close(C.gpu_values(), C.cpu_values(), 1e-5, 1e-6, "gemm after release");
}

}  // namespace
}  // namespace zt::gputest
