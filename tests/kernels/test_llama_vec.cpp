// The SIMD paths of the Llama block's CPU ops: SwiGLU's table entries (cpu_vec_kernels.h) on
// every ISA this CPU supports, bitwise against the scalar entry (which is math::silu /
// silu_grad itself) on tails, odd sizes and special values; and RMSNorm / SwiGLU through the
// ops under each forced ZT_CPU_ISA, bitwise the scalar path's results (fp32 and bf16).
#include <limits>

#include "kernel_test_util.h"
#include "vec_test_util.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/math_llama.h"

namespace zt::test {
namespace {

using cpu::Isa;
using cpu_ops::vec::Kernels;

TEST(LlamaVecKernels, SwigluEveryPathBitwiseEqualsScalar) {
  std::mt19937_64 rng(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float special[] = {0.0f, -0.0f, 20.0f, -20.0f, 88.0f, -88.0f, -100.0f, 100.0f, nan, 1e-30f};
  for (int64_t n : {0, 1, 7, 15, 16, 17, 33, 100, 1000, 4099}) {
    std::vector<float> g = random_floats(rng, n, -12.0f, 12.0f), u = random_floats(rng, n, -1.0f, 1.0f);
    const std::vector<float> dy = random_floats(rng, n, -1.0f, 1.0f);
    for (size_t i = 0; i < g.size() && i < 10; ++i) g[i * 3 % g.size()] = special[i];
    std::vector<float> o_ref(g.size()), dg_ref(g.size()), du_ref(g.size());
    cpu_ops::vec::swiglu_forward(cpu_ops::vec::kScalar, o_ref.data(), g.data(), u.data(), n);
    cpu_ops::vec::swiglu_backward(cpu_ops::vec::kScalar, dg_ref.data(), du_ref.data(), dy.data(), g.data(), u.data(),
                                  n);
    for (int64_t i = 0; i < n; ++i) {  // the scalar entry is the math_llama.h formula itself
      if (std::isnan(g[i])) {
        EXPECT_TRUE(std::isnan(o_ref[i]) && std::isnan(dg_ref[i]) && std::isnan(du_ref[i])) << "NaN in, NaN out";
        continue;
      }
      ASSERT_EQ(o_ref[i], math::silu(g[i]) * u[i]) << "g " << g[i];
      ASSERT_EQ(dg_ref[i], dy[i] * u[i] * math::silu_grad(g[i])) << "g " << g[i];
      ASSERT_EQ(du_ref[i], dy[i] * math::silu(g[i])) << "g " << g[i];
    }
    for (const Kernels* k : vec_tables()) {
      const std::string what = std::string(k->name) + " n=" + std::to_string(n);
      std::vector<float> o(g.size()), dg(g.size()), du(g.size()), g_in(g), u_in(u);
      cpu_ops::vec::swiglu_forward(*k, o.data(), g.data(), u.data(), n);
      cpu_ops::vec::swiglu_backward(*k, dg.data(), du.data(), dy.data(), g.data(), u.data(), n);
      cpu_ops::vec::swiglu_backward(*k, g_in.data(), u_in.data(), dy.data(), g_in.data(), u_in.data(), n);
      expect_same(o, o_ref, "swiglu_forward " + what);
      expect_same(dg, dg_ref, "swiglu dgate " + what);
      expect_same(du, du_ref, "swiglu dup " + what);
      expect_same(g_in, dg_ref, "swiglu dgate in place " + what);
      expect_same(u_in, du_ref, "swiglu dup in place " + what);
    }
  }
}

TEST(LlamaVecKernels, OpsUnderForcedIsaMatchScalar) {
  RestoreIsaEnv restore;
  std::mt19937_64 rng(13);
  const int64_t N = 37, C = 259, n = 70001;  // rows of 16 blocks + a tail; SwiGLU over several chunks
  for (DType dt : {DType::F32, DType::BF16}) {
    HostTensor x = random_tensor(rng, dt, {N, C}, -2, 2), w = random_tensor(rng, dt, {C}, 0.5, 1.5);
    HostTensor dout = random_tensor(rng, dt, {N, C}), g = random_tensor(rng, dt, {n}, -8, 8);
    HostTensor u = random_tensor(rng, dt, {n}), sdy = random_tensor(rng, dt, {n});
    HostTensor dx0 = random_tensor(rng, dt, {N, C}), dw0 = random_tensor(rng, dt, {C});
    std::vector<std::vector<unsigned char>> ref;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      setenv("ZT_CPU_ISA", cpu::isa_name(isa), 1);
      HostTensor out(dt, {N, C}), rstd(DType::F32, {N}), dx = dx0, dw = dw0;
      cpu_ops::rmsnorm_forward(out.view(), rstd.view(), x.view(), w.view(), 1e-5f);
      cpu_ops::rmsnorm_backward(dx.view(), dw.view(), dout.view(), x.view(), w.view(), rstd.view());
      HostTensor so(dt, {n}), dg(dt, {n}), du(dt, {n});
      cpu_ops::swiglu_forward(so.view(), g.view(), u.view());
      cpu_ops::swiglu_backward(dg.view(), du.view(), sdy.view(), g.view(), u.view());
      const std::vector<std::vector<unsigned char>> got{out.raw(), rstd.raw(), dx.raw(), dw.raw(),
                                                        so.raw(),  dg.raw(),   du.raw()};
      if (ref.empty()) ref = got;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(got[i] == ref[i]) << cpu::isa_name(isa) << " output " << i << " dtype " << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace zt::test
