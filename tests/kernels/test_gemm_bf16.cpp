// The bf16 GEMM paths (cpu::Bf16Gemm): the choice and its ZT_CPU_BF16_GEMM override, and our own
// GEMMs (native: fp32 panels, AVX-512 or AVX2 FMA tile; dpbf16: bf16 pairs, AVX512_BF16 tile) against the
// widened fp32 + sgemm path on the same bf16 inputs, every transpose combination, odd shapes (k odd
// and not a multiple of 16 or 32, partial tiles), row strides, alpha/beta. The widened path is
// always checked against a double reference; a path this CPU cannot run is skipped with the reason
// printed.
#include <cstdlib>
#include <limits>

#include "../../csrc/kernels/cpu/cpu_gemm_bf16_kernels.h"
#include "../../csrc/kernels/cpu/cpu_kernels.h"
#include "kernel_test_util.h"
#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/kernels/cpu_ops.h"

namespace zt::test {
namespace {

using cpu::Bf16Gemm;

// An environment variable as it was before the test, put back when the test ends.
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
  // 1-element, k = 1 and 2 (one pair, half a pair), tiles of exactly kMR × kNR = 12 × 32 (3 × 1 1/3
  // AVX2 tiles of 4 × 24), partial tiles both ways, k odd / 17 / 33 / 255 (not multiples of 2, 8,
  // 16, 32), a long k, more A blocks than one AVX2 chunk holds (M = 130: 33 blocks, 24 + 9), AVX2
  // pack runs that end inside a block (M = 101: runs of 16 A blocks, 16 + 10, the last block one
  // row; N = 50: runs of 2 B panels, 2 + 1, the last panel 2 columns).
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 37, 2}, Shape{13, 31, 1}, Shape{12, 32, 16}, Shape{25, 65, 33},
                  Shape{37, 100, 17}, Shape{64, 96, 128}, Shape{130, 257, 255}, Shape{7, 3, 301}, Shape{3, 40, 1024},
                  Shape{101, 50, 70}}) {
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

// Our own GEMM paths this CPU can run, and why the others are skipped.
std::vector<const char*> own_paths() {
  std::vector<const char*> paths;
  const cpu::Isa isa = cpu::active_isa();  // ZT_CPU_ISA may hold it below the CPU's
  if (isa != cpu::Isa::Scalar) paths.push_back("native");
  if (isa == cpu::Isa::Avx512 && cpu::avx512_bf16_supported()) paths.push_back("dpbf16");
  if (paths.size() < 2)
    std::printf("no %s here (CPU or ZT_CPU_ISA): checking %s\n", paths.empty() ? "AVX2" : "AVX-512F + AVX512_BF16",
                paths.empty() ? "the widened path only" : "widen and native only");
  return paths;
}

TEST(Bf16Gemm, PathChoiceAndOverride) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM"), isa_env("ZT_CPU_ISA");
  unsetenv("ZT_CPU_BF16_GEMM");
  unsetenv("ZT_CPU_ISA");
  const bool native = cpu::isa_supported(cpu::Isa::Avx2), dot = cpu::avx512_bf16_supported();
  // dpbf16 where it runs at full rate, native at AVX2 on AMD, else widen
  const Bf16Gemm by_default = cpu::active_bf16_gemm();
  const bool avx2_here = cpu::active_isa() == cpu::Isa::Avx2;
  EXPECT_TRUE(by_default == (avx2_here && cpu::amd_cpu() ? Bf16Gemm::Native : Bf16Gemm::Widen) ||
              (dot && cpu::amd_cpu() && by_default == Bf16Gemm::Dot));
  std::printf("default bf16 GEMM here: %s\n", cpu::bf16_gemm_name(by_default));
  setenv("ZT_CPU_BF16_GEMM", "", 1);
  EXPECT_EQ(cpu::active_bf16_gemm(), by_default);
  setenv("ZT_CPU_BF16_GEMM", "widen", 1);
  EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Widen);
  setenv("ZT_CPU_BF16_GEMM", "fast", 1);
  EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
  setenv("ZT_CPU_BF16_GEMM", "native", 1);
  if (native) {
    EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Native);
  } else {
    EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
  }
  setenv("ZT_CPU_BF16_GEMM", "dpbf16", 1);
  if (dot) {
    EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Dot);
  } else {
    EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
  }
  if (cpu::isa_supported(cpu::Isa::Avx2)) {  // an AVX2 run never takes an AVX-512 tile: native runs the AVX2 one
    setenv("ZT_CPU_ISA", "avx2", 1);
    setenv("ZT_CPU_BF16_GEMM", "native", 1);
    EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Native);
    EXPECT_STREQ(cpu::bf16_gemm_name(Bf16Gemm::Native), "native (fp32 panels, AVX2 FMA tile)");
    setenv("ZT_CPU_BF16_GEMM", "dpbf16", 1);
    EXPECT_THROW(cpu::active_bf16_gemm(), InputError);
    unsetenv("ZT_CPU_BF16_GEMM");
    EXPECT_EQ(cpu::active_bf16_gemm(), cpu::amd_cpu() ? Bf16Gemm::Native : Bf16Gemm::Widen);
  }
  setenv("ZT_CPU_ISA", "scalar", 1);  // no tile of ours at the scalar level
  for (const char* path : {"native", "dpbf16"}) {
    setenv("ZT_CPU_BF16_GEMM", path, 1);
    EXPECT_THROW(cpu::active_bf16_gemm(), InputError) << path;
  }
  unsetenv("ZT_CPU_BF16_GEMM");
  EXPECT_EQ(cpu::active_bf16_gemm(), Bf16Gemm::Widen);
}

// Random bf16 inputs in [-1, 1): every path within the stated bound of the double reference,
// and our own paths within it of the widened one.
TEST(Bf16Gemm, OwnPathsMatchWidenedReference) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  const std::vector<const char*> paths = own_paths();
  std::mt19937_64 rng(11);
  for (const Case& c : cases()) {
    Operands o = make_operands(rng, c, false);
    std::vector<double> want, mag;
    reference(c, o, &want, &mag);
    const std::vector<double> widened = run_path("widen", c, o).values();
    ASSERT_EQ(compare(widened, want, mag, c, "widen vs double"), 0);
    for (const char* path : paths) {
      const std::vector<double> got = run_path(path, c, o).values();
      ASSERT_EQ(compare(got, want, mag, c, std::string(path) + " vs double"), 0);
      ASSERT_EQ(compare(got, widened, mag, c, std::string(path) + " vs widen"), 0);
    }
  }
}

// Small integers: every partial sum is exact in fp32 whatever the order, so every path must agree
// bit for bit — any transposed operand, dropped k tail, misplaced pair or tile shows.
TEST(Bf16Gemm, OwnPathsBitwiseOnExactSums) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  const std::vector<const char*> paths = own_paths();
  std::mt19937_64 rng(12);
  for (const Case& c : cases()) {
    Operands o = make_operands(rng, c, true);
    const HostTensor widened = run_path("widen", c, o);
    for (const char* path : paths)  // padding columns untouched on every path too
      ASSERT_TRUE(run_path(path, c, o).raw() == widened.raw()) << path << " " << describe(c);
  }
}

// The native path's two tiles (AVX-512 12 × 32, AVX2 4 × 24) run the same fused multiply-adds per
// element in the same order: bit for bit the same C on real-valued inputs, where any other order
// or a dropped fusion would show.
TEST(Bf16Gemm, NativeTilesBitwiseAcrossIsa) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM"), isa_env("ZT_CPU_ISA");
  if (!cpu::isa_supported(cpu::Isa::Avx512)) {
    std::printf("no AVX-512F on this CPU: the AVX2 native tile is checked against widen only\n");
    return;
  }
  std::mt19937_64 rng(14);
  for (const Case& c : cases()) {
    Operands o = make_operands(rng, c, false);
    setenv("ZT_CPU_ISA", "avx512", 1);
    const HostTensor wide = run_path("native", c, o);
    setenv("ZT_CPU_ISA", "avx2", 1);
    ASSERT_TRUE(run_path("native", c, o).raw() == wide.raw()) << describe(c);
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

namespace zt::test {
namespace {

// The bf16 <-> fp32 row passes (AVX-512, AVX2) against dtype.h's per-element conversions, bit for
// bit: every one of the 65,536 bf16 patterns widened, and fp32 values that exercise the rounding
// (exact ties both ways, the largest finite values rounding to infinity, subnormals, ±0, ±inf,
// quiet and signalling NaNs with payloads) narrowed, at lengths that leave SIMD tails.
TEST(Bf16Gemm, RowConversionPassesBitwiseOnEveryIsa) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> want_wide(all.size());
  for (size_t i = 0; i < all.size(); ++i) want_wide[i] = bf16_bits_to_f32(all[i]);
  // The first 16 hold no subnormal (a block vcvtneps2bf16 rounds alone), the next two do.
  std::vector<uint32_t> special = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu,
                                   0xff7f8000u, 0x7f7f7fffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                                   0xffa00001u, 0x7fffffffu, 0x3fc00000u, 0xc0490fdbu, 0x00000001u, 0x807fffffu};
  std::mt19937 rng(7);
  for (int i = 0; i < 4000; ++i) special.push_back(static_cast<uint32_t>(rng()));
  std::vector<float> narrow_in(special.size());
  std::memcpy(narrow_in.data(), special.data(), special.size() * sizeof(float));
  std::vector<uint16_t> want_narrow(narrow_in.size());
  for (size_t i = 0; i < narrow_in.size(); ++i) want_narrow[i] = f32_to_bf16_bits(narrow_in[i]);
  struct Pass {
    const char* isa;
    bool supported;
    void (*widen)(const uint16_t*, float*, int64_t);
    void (*narrow)(const float*, uint16_t*, int64_t);
  };
  using namespace cpu_ops::bf16gemm;
  const bool avx512 = cpu::isa_supported(cpu::Isa::Avx512);
  for (const Pass& p : {Pass{"avx512", avx512, widen_avx512, narrow_avx512},
                        Pass{"avx512_bf16", avx512 && cpu::avx512_bf16_supported(), widen_avx512, narrow_avx512bf16},
                        Pass{"avx2", cpu::isa_supported(cpu::Isa::Avx2), widen_avx2, narrow_avx2}}) {
    if (!p.supported) {
      std::printf("no %s on this CPU: its conversion passes are not run\n", p.isa);
      continue;
    }
    for (int64_t len : {int64_t{65536}, int64_t{65535}, int64_t{7}}) {
      std::vector<float> wide(static_cast<size_t>(len));
      p.widen(all.data(), wide.data(), len);
      ASSERT_EQ(std::memcmp(wide.data(), want_wide.data(), wide.size() * sizeof(float)), 0) << p.isa << " widen " << len;
    }
    for (int64_t len : {static_cast<int64_t>(narrow_in.size()), int64_t{13}}) {
      std::vector<uint16_t> got(static_cast<size_t>(len));
      p.narrow(narrow_in.data(), got.data(), len);
      for (int64_t i = 0; i < len; ++i)
        ASSERT_EQ(got[i], want_narrow[i]) << p.isa << " narrow of bits 0x" << std::hex << special[i];
    }
  }
}

// The widened path's reuse of widened operands (cpu_ops::WidenReuse): a scope forgets what was
// widened before it opened (the source may have changed since), and inside one an operand reused
// in either slot gives the result a fresh widening gives.
TEST(Bf16Gemm, WidenReuseOnlyInsideItsScope) {
  RestoreEnv gemm_env("ZT_CPU_BF16_GEMM");
  setenv("ZT_CPU_BF16_GEMM", "widen", 1);
  std::mt19937_64 rng(11);
  const int64_t M = 19, N = 23, K = 37;
  auto random = [&](int64_t r, int64_t c) {
    HostTensor t(DType::BF16, {r, c});
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
    return t;
  };
  auto product = [&](const HostTensor& a, const HostTensor& b, bool tb) {  // a fresh widening of both
    HostTensor a2 = a, b2 = b, c(DType::BF16, {M, N});
    cpu_ops::gemm(false, tb, M, N, K, 1.0f, a2.view(), b2.view(), 0.0f, c.view());
    return c;
  };
  auto same = [](HostTensor& x, HostTensor& y) {
    return std::memcmp(x.view().data, y.view().data, x.view().nbytes()) == 0;
  };
  HostTensor a = random(M, K), b = random(K, N), c(DType::BF16, {M, N});
  cpu_ops::gemm(false, false, M, N, K, 1.0f, a.view(), b.view(), 0.0f, c.view());  // a widened, outside a scope
  const void* before = a.view().data;
  const HostTensor fresh = random(M, K);
  a.fill(fresh.values());  // same buffer, new values
  ASSERT_EQ(a.view().data, before);
  {
    const cpu_ops::WidenReuse scope;
    cpu_ops::gemm(false, false, M, N, K, 1.0f, a.view(), b.view(), 0.0f, c.view());
    HostTensor want = product(a, b, false);
    EXPECT_TRUE(same(c, want)) << "a stale widening of A was reused";
  }
  {
    // d as the first GEMM's B, then as the second's A (the fused linear backward's dout).
    const cpu_ops::WidenReuse scope;
    HostTensor x = random(K, M), d = random(K, N), w = random(N, N), dw(DType::BF16, {M, N}), dx(DType::BF16, {K, N});
    cpu_ops::gemm(true, false, M, N, K, 1.0f, x.view(), d.view(), 0.0f, dw.view());
    cpu_ops::gemm(false, false, K, N, N, 1.0f, d.view(), w.view(), 0.0f, dx.view());
    HostTensor x2 = x, d2 = d, w2 = w, dw2(DType::BF16, {M, N}), dx2(DType::BF16, {K, N});
    cpu_ops::gemm(true, false, M, N, K, 1.0f, x2.view(), d2.view(), 0.0f, dw2.view());
    cpu_ops::gemm(false, false, K, N, N, 1.0f, d2.view(), w2.view(), 0.0f, dx2.view());
    EXPECT_TRUE(same(dw, dw2));
    EXPECT_TRUE(same(dx, dx2)) << "B reused as A";
  }
}

// The GEMMs' per-thread scratch (packed panels, widened operands, fp32 C) is used from a cache line
// on: aligned for every element type and size, n elements inside the buffer, and the same start
// while the buffer does not grow (a widened operand reused from its slot is found where it was
// written).
template <typename T>
void expect_cache_aligned() {
  std::vector<T> buf;
  for (const int64_t n : {1, 7, 1000, 1 << 16, 1 << 20, 3}) {
    T* p = cpu_ops::cache_aligned(buf, n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % cpu_ops::kCacheLine, 0u) << n;
    EXPECT_LE(p + n, buf.data() + buf.size()) << n;
    EXPECT_EQ(cpu_ops::cache_aligned(buf, n), p) << n << ": moved without growing";
  }
}
TEST(Bf16Gemm, ScratchStartsOnACacheLine) {
  expect_cache_aligned<float>();
  expect_cache_aligned<uint32_t>();
  expect_cache_aligned<uint16_t>();
}

}  // namespace
}  // namespace zt::test
