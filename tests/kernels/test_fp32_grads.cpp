// Parameter gradients in fp32 from 16-bit ops (stages 0-1 with bf16 compute accumulate straight
// into the fp32 gradient buffer): every op that writes a parameter gradient — gemm and gemm_ld
// (weight gradients, the LM head), linear_backward (dweight, dbias), bias_grad,
// layernorm_backward, rmsnorm_backward, embedding_backward — run three ways on the same bf16 /
// fp16 inputs:
//   (a) gradients in fp32 starting from random values: they accumulate (after = before + sum);
//   (b) gradients in fp32 starting from zero: the sum, within fp32 accumulation error of the same
//       op run in fp32 on the widened inputs (no 16-bit rounding of the gradient anywhere);
//   (c) gradients in the 16-bit dtype starting from zero: bitwise (b) rounded once — the 16-bit
//       path is the fp32 path plus one rounding, so only the gradient's storage changed.
// bf16 GEMMs run on every path this CPU has (widen, native, dpbf16).
#include <cstdlib>
#include <string>

#include "kernel_test_util.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt::test {
namespace {

// A set of op inputs as exact values (representable in the 16-bit dtype), built as tensors of
// any dtype on demand.
struct Inputs {
  std::vector<std::vector<double>> values;
  std::vector<std::vector<int64_t>> dims;
  std::vector<HostTensor> as(DType t) const {
    std::vector<HostTensor> out;
    for (size_t i = 0; i < values.size(); ++i) {
      out.emplace_back(t, dims[i]);
      out.back().fill(values[i]);
    }
    return out;
  }
};

// run(inputs, grads): one op call, inputs in one dtype, grads as given. A run that enqueues work
// on temporaries of its own synchronizes before it returns.
using RunOp = std::function<void(std::vector<HostTensor>& in, std::vector<HostTensor>& grads)>;

class Fp32GradsTest : public KernelTest, public ::testing::WithParamInterface<DType> {
 protected:
  Inputs random_inputs(DType dt, const std::vector<std::vector<int64_t>>& dims, double lo = -1.0, double hi = 1.0) {
    Inputs in;
    for (const auto& d : dims) {
      int64_t n = 1;
      for (int64_t x : d) n *= x;
      in.values.push_back(random_values(rng_, n, dt, lo, hi));
      in.dims.push_back(d);
    }
    return in;
  }

  // grad_sizes: elements of each gradient the op writes. mag_scale: a bound on |term| · terms per
  // gradient element, relative to which fp32 accumulation error is measured.
  void check(const std::string& what, DType dt, const Inputs& inputs, const std::vector<int64_t>& grad_sizes,
             double mag_scale, const RunOp& run) {
    const size_t ng = grad_sizes.size();
    auto grads = [&](DType t, bool random_start) {
      std::vector<HostTensor> g;
      for (int64_t n : grad_sizes) {
        g.emplace_back(t, std::vector<int64_t>{n});
        if (random_start) g.back().fill(random_values(rng_, n, t));
      }
      return g;
    };
    // The reference: the op in fp32 on the same (widened) inputs.
    std::vector<HostTensor> in32 = inputs.as(DType::F32), ref = grads(DType::F32, false);
    run(in32, ref);
    std::vector<HostTensor> in16 = inputs.as(dt);
    std::vector<HostTensor> acc = grads(DType::F32, true);
    std::vector<std::vector<double>> before;
    for (const HostTensor& g : acc) before.push_back(g.values());
    std::vector<HostTensor> zero32 = grads(DType::F32, false), zero16 = grads(dt, false);
    run(in16, acc);
    run(in16, zero32);
    run(in16, zero16);
    sync();
    for (size_t k = 0; k < ng; ++k) {
      const std::string tag = what + " grad " + std::to_string(k) + dt_tag(dt);
      const std::vector<double> want = ref[k].values(), got = zero32[k].values();
      // (b) fp32 accumulation of exact products: a few fp32 ulps of the magnitude, far below a
      // 16-bit rounding (2^-8 for bf16).
      expect_close(got, want, 1e-5 * mag_scale, 1e-5, "fp32 sum " + tag);
      // (a) accumulates onto what was there.
      const std::vector<double> after = acc[k].values();
      std::vector<double> sum(after.size());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = before[k][i] + got[i];
      expect_close(after, sum, 1e-6 * mag_scale, 1e-6, "accumulated " + tag);
      // (c) the 16-bit gradient is the fp32 one rounded once.
      HostTensor rounded(dt, {grad_sizes[k]});
      rounded.fill(got);
      EXPECT_TRUE(rounded.raw() == zero16[k].raw()) << "16-bit gradient is not the fp32 one rounded once: " << tag;
    }
  }
};

// The bf16 GEMM paths this CPU can run (the env override restored afterwards).
std::vector<const char*> gemm_paths(DType dt) {
  std::vector<const char*> paths{"widen"};
  if (dt != DType::BF16) return paths;
  const cpu::Isa isa = cpu::active_isa();  // ZT_CPU_ISA may hold it below the CPU's
  if (isa != cpu::Isa::Scalar) paths.push_back("native");
  if (isa == cpu::Isa::Avx512 && cpu::avx512_bf16_supported()) paths.push_back("dpbf16");
  return paths;
}

struct GemmPathEnv {
  GemmPathEnv() : before(std::getenv("ZT_CPU_BF16_GEMM")), saved(before ? before : "") {}
  ~GemmPathEnv() { before ? setenv("ZT_CPU_BF16_GEMM", saved.c_str(), 1) : unsetenv("ZT_CPU_BF16_GEMM"); }
  const char* before;
  std::string saved;
};

TEST_P(Fp32GradsTest, WeightGradientGemms) {
  const DType dt = GetParam();
  GemmPathEnv restore;
  struct Shape { int64_t N, IC, OC; };
  for (const char* path : gemm_paths(dt)) {
    setenv("ZT_CPU_BF16_GEMM", path, 1);
    for (Shape sh : {Shape{1, 1, 1}, Shape{17, 13, 35}, Shape{64, 48, 80}, Shape{33, 130, 7}}) {
      const int64_t N = sh.N, IC = sh.IC, OC = sh.OC;
      const std::string tag = std::string("[") + path + "] N=" + std::to_string(N) + " IC=" + std::to_string(IC) +
                              " OC=" + std::to_string(OC);
      const Inputs in = random_inputs(dt, {{N, IC}, {N, OC}, {IC * OC}});
      check("gemm dW = xᵀ dy " + tag, dt, in, {IC * OC}, N, [&](auto& t, auto& g) {
        ops::gemm(s(), true, false, IC, OC, N, 1.0f, t[0].view(), t[1].view(), 1.0f, g[0].view());
      });
      for (bool trans_w : {false, true}) {
        check("linear_backward " + tag + (trans_w ? " trans_w" : ""), dt, in, {IC * OC, OC}, N, [&](auto& t, auto& g) {
          HostTensor dx(t[0].dtype(), {N, IC});
          ops::linear_backward(s(), dx.view(), g[0].view(), g[1].view(), t[1].view(), t[0].view(), t[2].view(),
                               TensorView{}, N, IC, OC, trans_w);
          sync();  // dx is freed on return; the stream runs the op asynchronously
        });
      }
      // The padded LM head's weight gradient: dW[V,C] += dlogitsᵀ[V,N]·x[N,C], dlogits rows Vp apart.
      const int64_t V = OC, Vp = OC + 5, C = IC;
      const Inputs head = random_inputs(dt, {{N, Vp}, {N, C}});
      check("gemm_ld head dW " + tag, dt, head, {V * C}, N, [&](auto& t, auto& g) {
        ops::gemm_ld(s(), true, false, V, C, N, 0.5f, t[0].view(), Vp, t[1].view(), C, 1.0f, g[0].view(), C);
      });
    }
  }
}

TEST_P(Fp32GradsTest, ColumnSumsAndNorms) {
  const DType dt = GetParam();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 3}, {37, 96}, {130, 200}}) {
    const std::string tag = "N=" + std::to_string(N) + " C=" + std::to_string(C);
    const Inputs dy = random_inputs(dt, {{N, C}});
    check("bias_grad " + tag, dt, dy, {C}, N, [&](auto& t, auto& g) { ops::bias_grad(s(), g[0].view(), t[0].view()); });
    // LayerNorm / RMSNorm backward: the forward's statistics come from the same inputs in the
    // op's dtype (x, weight, bias, dy).
    const Inputs ln = random_inputs(dt, {{N, C}, {C}, {C}, {N, C}}, -2.0, 2.0);
    check("layernorm_backward " + tag, dt, ln, {C, C}, 4.0 * N, [&](auto& t, auto& g) {
      const DType idt = t[0].dtype();
      HostTensor out(idt, {N, C}), mean(DType::F32, {N}), rstd(DType::F32, {N}), dx(idt, {N, C});
      ops::layernorm_forward(s(), out.view(), mean.view(), rstd.view(), t[0].view(), t[1].view(), t[2].view(), 1e-5f);
      ops::layernorm_backward(s(), dx.view(), g[0].view(), g[1].view(), t[3].view(), t[0].view(), t[1].view(),
                              mean.view(), rstd.view());
      sync();  // the temporaries are freed on return
    });
    check("rmsnorm_backward " + tag, dt, ln, {C}, 4.0 * N, [&](auto& t, auto& g) {
      const DType idt = t[0].dtype();
      HostTensor out(idt, {N, C}), rstd(DType::F32, {N}), dx(idt, {N, C});
      ops::rmsnorm_forward(s(), out.view(), rstd.view(), t[0].view(), t[1].view(), 1e-5f);
      ops::rmsnorm_backward(s(), dx.view(), g[0].view(), t[3].view(), t[0].view(), t[1].view(), rstd.view());
      sync();  // the temporaries are freed on return
    });
  }
}

TEST_P(Fp32GradsTest, EmbeddingGradients) {
  const DType dt = GetParam();
  const int64_t B = 3, T = 9, C = 40, V = 11;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + i / 5) % V);  // repeats
  const Inputs dy = random_inputs(dt, {{B * T, C}});
  for (bool positions : {true, false}) {
    check(std::string("embedding_backward") + (positions ? " with wpe" : " without wpe"), dt, dy,
          positions ? std::vector<int64_t>{V * C, T * C} : std::vector<int64_t>{V * C}, B * T,
          [&](auto& t, auto& g) {
            ops::embedding_backward(s(), g[0].view(), positions ? g[1].view() : TensorView{}, t[0].view(),
                                    tokens.data(), B, T, C);
          });
  }
}

class Fp32GradsDeathTest : public KernelTest {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    KernelTest::SetUp();
  }
};

// A gradient in a dtype that is neither the op's nor fp32 is a programming error, named.
TEST_F(Fp32GradsDeathTest, OtherGradientDtypesAreRejected) {
  HostTensor dy(DType::BF16, {4, 8}), db(DType::F16, {8}), x(DType::BF16, {4, 3}), w(DType::BF16, {24});
  EXPECT_DEATH(ops::bias_grad(s(), db.view(), dy.view()), "dbias is fp16, expected the op's dtype bf16 or fp32");
  HostTensor dw(DType::F16, {24});
  EXPECT_DEATH(ops::linear_backward(s(), TensorView{}, dw.view(), TensorView{}, dy.view(), x.view(), w.view(),
                                    TensorView{}, 4, 3, 8, false),
               "dweight is fp16, expected the op's dtype bf16 or fp32");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Fp32GradsTest, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
