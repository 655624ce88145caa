// The bf16 GEMM paths (cpu::Bf16Gemm): the choice and its ZT_CPU_BF16_GEMM override, and the
// native GEMM (fp32 panels, AVX-512 FMA tile) against the widened fp32 + sgemm path on the same
// bf16 inputs, every transpose combination, odd shapes (k odd and not a multiple of 16 or 32,
// partial tiles), row strides, alpha/beta. Without AVX-512F the widened path is still checked
// against a double reference and only the native comparison is skipped, with the reason printed.
#include <cstdlib>
#include <limits>

#include "kernel_test_util.h"
#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/kernels/cpu_ops.h"

namespace zt::test {
namespace {

using cpu::Bf16Gemm;

// An environment variable as it was before the test, put back when the test ends.
struct RestoreEnv {
  explicit RestoreEnv(const char* name) : name(name), before(std::getenv(name)), saved(before ? before : "") {}
  ~RestoreEnv() { before ? setenv(name, saved.c_str(), 1) : unsetenv(name); }
  const char* name;
  const char* before;
  std::string saved;
};

struct Case {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;  // extra elements per stored row of A, B and C (gemm_ld), 0: packed
};

std::string describe(const Case& c) {
  return "M" + std::to_string(c.M) + " N" + std::to_string(c.N) + " K" + std::to_string(c.K) + " ta" +
         std::to_string(c.ta) + " tb" + std::to_string(c.tb) + " alpha" + std::to_string(c.alpha) + " beta" +
         std::to_string(c.beta) + " pad" + std::to_string(c.pad);
}

struct Operands {
  HostTensor A, B, C;
  int64_t lda, ldb, ldc;
};

// bf16 operands of c's shapes; integer values in [-3, 3] when `integers` (every sum exact in fp32).
Operands make_operands(std::mt19937_64& rng, const Case& c, bool integers) {
  const int64_t ar = c.ta ? c.K : c.M, ac = c.ta ? c.M : c.K, br = c.tb ? c.N : c.K, bc = c.tb ? c.K : c.N;
  Operands o{HostTensor(DType::BF16, {ar, ac + c.pad}), HostTensor(DType::BF16, {br, bc + c.pad}),
             HostTensor(DType::BF16, {c.M, c.N + c.pad}), ac + c.pad, bc + c.pad, c.N + c.pad};
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  for (HostTensor* t : {&o.A, &o.B, &o.C})
    for (int64_t i = 0; i < t->numel(); ++i) t->set(i, integers ? small(rng) : real(rng));
  return o;
}

// C of `o` after gemm_ld under ZT_CPU_BF16_GEMM=path.
HostTensor run_path(const char* path, const Case& c, Operands& o) {
  setenv("ZT_CPU_BF16_GEMM", path, 1);
  HostTensor C = o.C;
  cpu_ops::gemm_ld(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.view(), o.lda, o.B.view(), o.ldb, c.beta, C.view(), o.ldc);
  return C;
}

// For each element of C: the double-precision result and Σ|alpha·a·b| + |beta·c| (its magnitude).
void reference(const Case& c, const Operands& o, std::vector<double>* want, std::vector<double>* mag) {
  const std::vector<double> a = o.A.values(), b = o.B.values(), c0 = o.C.values();
  want->assign(c0.begin(), c0.end());
  mag->assign(c0.size(), 0.0);
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double acc = 0, am = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double x = c.ta ? a[k * o.lda + i] : a[i * o.lda + k], y = c.tb ? b[j * o.ldb + k] : b[k * o.ldb + j];
        acc += x * y;
        am += std::fabs(x * y);
      }
      const int64_t at = i * o.ldc + j;
      (*want)[at] = c.alpha * acc + c.beta * c0[at];
      (*mag)[at] = std::fabs(c.alpha) * am + std::fabs(c.beta * c0[at]);
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  struct Shape { int64_t M, N, K; };
  // 1-element, k = 1 and 2 (one pair, half a pair), tiles of exactly kMR × kNR = 12 × 32, partial
  // tiles both ways, k odd / 17 / 33 / 255 (not multiples of 2, 16, 32), a long k.
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 37, 2}, Shape{13, 31, 1}, Shape{12, 32, 16}, Shape{25, 65, 33},
                  Shape{37, 100, 17}, Shape{64, 96, 128}, Shape{130, 257, 255}, Shape{7, 3, 301}, Shape{3, 40, 1024}}) {
    for (int t = 0; t < 4; ++t) {
      out.push_back({s.M, s.N, s.K, (t & 1) != 0, (t & 2) != 0, 1.0f, 0.0f, 0});
      out.push_back({s.M, s.N, s.K, (t & 1) != 0, (t & 2) != 0, 1.0f, 1.0f, 3});    // accumulate (dW, bias rows)
      out.push_back({s.M, s.N, s.K, (t & 1) != 0, (t & 2) != 0, -0.5f, 0.75f, 5});  // general alpha / beta
    }
  }
  return out;
}

// Both paths' outputs and the double reference: |got − want| <= 2^-8 (|got| + |want|) · 1.01
// (one bf16 rounding each side, at most one bf16 ulp apart) + 2 K 2^-24 mag (fp32 accumulation in
// two different orders) + 2^-120 (subnormal sums). Returns the failures.
int compare(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>& mag,
            const Case& c, const std::string& what) {
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = std::ldexp(std::fabs(got[i]) + std::fabs(want[i]), -8) * 1.01 +
                       2.0 * static_cast<double>(c.K + 1) * std::ldexp(mag[i], -24) + std::ldexp(1.0, -120);
    if (!(std::fabs(got[i] - want[i]) <= tol) && ++failures <= 3)
      ADD_FAILURE() << what << " " << describe(c) << " [" << i << "]: got " << got[i] << ", want " << want[i]
                    << " (tolerance " << tol << ")";
  }
  return failures;
}

TEST(Bf16Gemm, PathChoiceAndOverride) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM"), isa_env("ZT_CPU_ISA");
  unsetenv("ZT_CPU_BF16_GEMM");
  unsetenv("ZT_CPU_ISA");
  const bool native = cpu::isa_supported(cpu::Isa::Avx512);
  EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Widen);  // the default everywhere; native is opt-in
  setenv("ZT_CPU_BF16_GEMM", "", 1);
  EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Widen);
  setenv("ZT_CPU_BF16_GEMM", "widen", 1);
  EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Widen);
  setenv("ZT_CPU_BF16_GEMM", "fast", 1);
  EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
  setenv("ZT_CPU_BF16_GEMM", "native", 1);
  if (native) {
    EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Native);
    setenv("ZT_CPU_ISA", "avx2", 1);  // an AVX2 run never takes the AVX-512 tile
    EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
  } else {
    EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
    std::printf("no AVX-512F on this CPU: ZT_CPU_BF16_GEMM=native is refused, bf16 GEMMs widen\n");
  }
}

// Random bf16 inputs in [-1, 1): both paths within the stated bound of the double reference,
// and the native path within it of the widened one.
TEST(Bf16Gemm, NativeMatchesWidenedReference) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  const bool native = cpu::isa_supported(cpu::Isa::Avx512);
  if (!native) std::printf("no AVX-512F on this CPU: checking the widened path only, native comparison skipped\n");
  std::mt19937_64 rng(11);
  for (const Case& c : cases()) {
    Operands o = make_operands(rng, c, false);
    std::vector<double> want, mag;
    reference(c, o, &want, &mag);
    const std::vector<double> widened = run_path("widen", c, o).values();
    ASSERT_EQ(compare(widened, want, mag, c, "widen vs double"), 0);
    if (!native) continue;
    const std::vector<double> got = run_path("native", c, o).values();
    ASSERT_EQ(compare(got, want, mag, c, "native vs double"), 0);
    ASSERT_EQ(compare(got, widened, mag, c, "native vs widen"), 0);
  }
}

// Small integers: every partial sum is exact in fp32 whatever the order, so the two paths must
// agree bit for bit — any transposed operand, dropped k tail or misplaced tile shows.
TEST(Bf16Gemm, NativeBitwiseOnExactSums) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  if (!cpu::isa_supported(cpu::Isa::Avx512)) {
    std::printf("no AVX-512F on this CPU: native comparison skipped\n");
    return;
  }
  std::mt19937_64 rng(12);
  for (const Case& c : cases()) {
    Operands o = make_operands(rng, c, true);
    const HostTensor widened = run_path("widen", c, o), got = run_path("native", c, o);
    ASSERT_TRUE(got.raw() == widened.raw()) << describe(c);  // padding columns untouched on both too
  }
}

// The widened path's widening and rounding passes run AVX-512 code under ZT_CPU_ISA=avx512 and
// per-element loops below it: bitwise the same C, NaN and infinities included.
TEST(Bf16Gemm, WidenedPassesBitwiseAcrossIsa) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM"), isa_env("ZT_CPU_ISA");
  std::mt19937_64 rng(13);
  for (const Case& c : cases()) {
    Operands o = make_operands(rng, c, false);
    o.A.set(0, c.alpha > 0 ? 3e38 : -3e38);  // overflowing products round to ±inf
    if (c.beta != 0.0f) o.C.set(0, std::numeric_limits<double>::quiet_NaN());
    std::vector<std::vector<unsigned char>> got;
    for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      setenv("ZT_CPU_ISA", cpu::isa_name(isa), 1);
      got.push_back(run_path("widen", c, o).raw());
      ASSERT_TRUE(got.back() == got.front()) << describe(c) << " under ZT_CPU_ISA=" << cpu::isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace zt::test
