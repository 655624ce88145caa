// Lion, Adagrad and LAMB engine ops (csrc/kernels/cuda/zero_optim.cu) against the CPU backend's kernels
// (csrc/zero/zero_ops.cpp): the same per-element math (optimizer_math.h), so the results agree
// to fp32 rounding (nvcc may contract a·b + c into an FMA); exact zeros stay exactly zero (Lion's
// sign(0) = 0), and LAMB's direction norm is deterministic (two runs bitwise equal) and close to
// the CPU's double sum. Every (p, state, g) dtype pair with and without param_out.
#include "gpu_test_util.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt::gputest {
namespace {

double tolerance(DType t) { return std::max(8 * unit(t), 1e-6); }

class GpuOptim : public GpuTest {
 protected:
  std::vector<float> with_zeros(std::vector<float> v) {
    for (size_t i = 0; i < v.size(); i += 7) v[i] = 0.0f;
    return v;
  }
};

TEST_F(GpuOptim, LionAndAdagradMatchCpu) {
  const int64_t n = 100003;
  for (DType pt : {DType::F32, DType::BF16}) for (DType st : {DType::F32, DType::BF16})
    for (DType gt : {DType::F32, DType::BF16, DType::F16}) for (bool with_out : {true, false}) {
      const std::string what = std::string(" p=") + dtype_name(pt) + " state=" + dtype_name(st) + " g=" +
                               dtype_name(gt) + (with_out ? " +out" : "");
      const std::vector<float> p0 = with_zeros(uniform(n)), s0 = with_zeros(uniform(n, 0.0f, 0.01f));
      const std::vector<float> m0 = with_zeros(uniform(n, -0.1f, 0.1f)), g0 = with_zeros(uniform(n, -0.5f, 0.5f));
      TensorView none;
      {
        Dual p(*this, *gpu_, pt, {n}, p0), m(*this, *gpu_, st, {n}, m0), g(*this, *gpu_, gt, {n}, g0);
        Dual out(*this, *gpu_, DType::BF16, {n}, p0);
        const optim::LionParams a{1e-3f, 0.9f, 0.99f, 1.0f - 1e-3f * 0.1f};
        zero_ops::lion_step(cs(), p.cpu(), m.cpu(), g.cpu(), 0.5f, a, with_out ? out.cpu() : none);
        zero_ops::lion_step(gs(), p.gpu(), m.gpu(), g.gpu(), 0.5f, a, with_out ? out.gpu() : none);
        sync();
        expect_close(p.gpu_values(), p.cpu_values(), tolerance(pt), tolerance(pt), "lion p" + what);
        expect_close(m.gpu_values(), m.cpu_values(), tolerance(st), tolerance(st), "lion m" + what);
        if (with_out) expect_close(out.gpu_values(), out.cpu_values(), tolerance(DType::BF16), 0, "lion out" + what);
        const std::vector<float> gp = p.gpu_values();
        for (int64_t i = 0; i < n; i += 7) ASSERT_EQ(gp[i], 0.0f) << "lion: a zero element moved" << what;
      }
      {
        Dual p(*this, *gpu_, pt, {n}, p0), s(*this, *gpu_, st, {n}, s0), g(*this, *gpu_, gt, {n}, g0);
        Dual out(*this, *gpu_, DType::F16, {n}, p0);
        const optim::AdagradParams a{1e-2f, 1e-10f, 0.01f};
        zero_ops::adagrad_step(cs(), p.cpu(), s.cpu(), g.cpu(), 0.5f, a, with_out ? out.cpu() : none);
        zero_ops::adagrad_step(gs(), p.gpu(), s.gpu(), g.gpu(), 0.5f, a, with_out ? out.gpu() : none);
        sync();
        expect_close(p.gpu_values(), p.cpu_values(), tolerance(pt), tolerance(pt), "adagrad p" + what);
        expect_close(s.gpu_values(), s.cpu_values(), tolerance(st), tolerance(st), "adagrad sum" + what);
        if (with_out) expect_close(out.gpu_values(), out.cpu_values(), tolerance(DType::F16), 0, "adagrad out" + what);
      }
    }
}

TEST_F(GpuOptim, LambPhasesMatchCpuAndNormIsDeterministic) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{8191}, int64_t{300007}})
    for (DType st : {DType::F32, DType::BF16}) {
      const std::string what = " n=" + std::to_string(n) + " state=" + dtype_name(st);
      const std::vector<float> p0 = uniform(n), g0 = uniform(n, -0.5f, 0.5f);
      Dual p(*this, *gpu_, DType::F32, {n}, p0), m(*this, *gpu_, st, {n}, uniform(n, -0.1f, 0.1f));
      Dual v(*this, *gpu_, st, {n}, uniform(n, 0.0f, 0.01f)), g(*this, *gpu_, DType::BF16, {n}, g0);
      Dual out(*this, *gpu_, DType::BF16, {n}, p0);
      optim::LambParams a;
      a.weight_decay = 0.01f, a.step_size = 1e-3f;
      zero_ops::lamb_moments(cs(), m.cpu(), v.cpu(), g.cpu(), 0.5f, a);
      zero_ops::lamb_moments(gs(), m.gpu(), v.gpu(), g.gpu(), 0.5f, a);
      DeviceBuffer norms = gpu_->alloc(2 * sizeof(double), MemCategory::Workspace, true);
      double cpu_norm = -1, gpu_norm[2] = {-1, -1};
      zero_ops::lamb_direction_sq_norm(cs(), &cpu_norm, p.cpu(), m.cpu(), v.cpu(), a);
      zero_ops::lamb_direction_sq_norm(gs(), norms.as<double>(), p.gpu(), m.gpu(), v.gpu(), a);
      zero_ops::lamb_direction_sq_norm(gs(), norms.as<double>() + 1, p.gpu(), m.gpu(), v.gpu(), a);
      gpu_->memcpy_async(gpu_norm, norms.data(), sizeof(gpu_norm), CopyKind::DeviceToHost, gs());
      sync();
      EXPECT_EQ(gpu_norm[0], gpu_norm[1]) << "direction norm not deterministic" << what;
      EXPECT_NEAR(gpu_norm[0], cpu_norm, 1e-5 * cpu_norm + 1e-12) << what;
      zero_ops::lamb_apply(cs(), p.cpu(), m.cpu(), v.cpu(), 0.37f, a, out.cpu());
      zero_ops::lamb_apply(gs(), p.gpu(), m.gpu(), v.gpu(), 0.37f, a, out.gpu());
      sync();
      expect_close(m.gpu_values(), m.cpu_values(), tolerance(st), tolerance(st), "lamb m" + what);
      expect_close(v.gpu_values(), v.cpu_values(), tolerance(st), tolerance(st), "lamb v" + what);
      expect_close(p.gpu_values(), p.cpu_values(), 1e-6, 1e-6, "lamb p" + what);
      expect_close(out.gpu_values(), out.cpu_values(), tolerance(DType::BF16), 0, "lamb out" + what);
    }
}

}  // namespace
}  // namespace zt::gputest
