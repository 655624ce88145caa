// Host optimizer (ZeRO-Offload): every ISA path this CPU supports, and the scalar path, against
// the CPU backend's kernels (cpu_ops::adam_step / cpu_ops::sgd_step, run synchronously here) —
// BITWISE equal p, m, v and param_out for all dtype combinations, tail sizes, AdamW/L2, bias
// correction, thread counts 1-3, special values (NaN, inf, subnormals, rounding ties) and every
// bf16/fp16 bit pattern; the reference is the scalar loop (ZT_CPU_ISA=scalar), and the CPU
// backend's own step is checked on every ISA and OpenMP thread count. Also the thread pool's
// partition, ZT_CPU_ISA and OMP_NUM_THREADS. Lion and Adagrad: every ISA path against zero_ops'
// CPU kernels.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/host_optim.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt::host_optim {
namespace {

using namespace zt::cpu;

// Raw host storage of one dtype; empty() views are the "no param_out" case.
struct Buf {
  DType t = DType::F32;
  std::vector<uint8_t> bytes;
  int64_t n = 0;
  Buf() = default;
  Buf(DType dt, int64_t count) : t(dt), bytes(static_cast<size_t>(count) * dtype_size(dt) + 1), n(count) {}
  TensorView view() { return TensorView(bytes.data(), t, {n}); }
  void set(int64_t i, float f) {
    if (t == DType::F32) std::memcpy(&bytes[4 * i], &f, 4);
    const uint16_t h = t == DType::BF16 ? f32_to_bf16_bits(f) : f32_to_f16_bits(f);
    if (t != DType::F32) std::memcpy(&bytes[2 * i], &h, 2);
  }
  void set_bits(int64_t i, uint32_t b) { std::memcpy(&bytes[i * dtype_size(t)], &b, dtype_size(t)); }
  uint16_t bits16(int64_t i) const { uint16_t h; std::memcpy(&h, &bytes[2 * i], 2); return h; }
};

Buf random_buf(std::mt19937& rng, DType t, int64_t n, float lo, float hi) {
  Buf b(t, n);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < n; ++i) b.set(i, d(rng));
  return b;
}

std::vector<Isa> isas_to_test() {
  std::vector<Isa> out{Isa::Scalar};
  for (Isa i : {Isa::Avx2, Isa::Avx512}) if (isa_supported(i)) out.push_back(i);
  return out;
}

HostThreadPool& pool_of(int threads) {
  static std::unique_ptr<HostThreadPool> pools[4];
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  if (!pools[threads]) pools[threads] = std::make_unique<HostThreadPool>(threads);
  return *pools[threads];
}

math::AdamParams adam_params(bool adamw, int bc_step) {
  math::AdamParams a{};
  a.lr = 1e-2f, a.beta1 = 0.9f, a.beta2 = 0.999f, a.eps = 1e-8f, a.weight_decay = 0.1f, a.adam_w_mode = adamw;
  a.bias_correction1 = bc_step > 0 ? 1.0f - std::pow(a.beta1, static_cast<float>(bc_step)) : 1.0f;
  a.bias_correction2 = bc_step > 0 ? 1.0f - std::pow(a.beta2, static_cast<float>(bc_step)) : 1.0f;
  return a;
}

// Restores an environment variable when the test ends.
class EnvGuard {
 public:
  explicit EnvGuard(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    had_ = v != nullptr;
    if (had_) old_ = v;
  }
  ~EnvGuard() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

struct AdamState { Buf p, m, v, g, out; };

// The reference: cpu_ops::adam_step's scalar loop (ZT_CPU_ISA=scalar), in place on r.
void scalar_reference(AdamState& r, bool has_out, float grad_scale, const math::AdamParams& a) {
  EnvGuard guard("ZT_CPU_ISA");
  setenv("ZT_CPU_ISA", "scalar", 1);
  cpu_ops::adam_step(r.p.view(), r.m.view(), r.v.view(), r.g.view(), grad_scale, a, has_out ? r.out.view() : TensorView());
}

// Runs the reference and host_optim::adam_step on copies of `s` and expects identical bytes.
void expect_adam_bitwise(const AdamState& s, bool has_out, float grad_scale, const math::AdamParams& a, Isa isa,
                         int threads, const std::string& tag) {
  AdamState ref = s, got = s;
  scalar_reference(ref, has_out, grad_scale, a);
  adam_step(pool_of(threads), isa, got.p.view(), got.m.view(), got.v.view(), got.g.view(), grad_scale, a,
            has_out ? got.out.view() : TensorView());
  const std::string where = tag + " isa=" + isa_name(isa) + " threads=" + std::to_string(threads);
  EXPECT_EQ(got.p.bytes, ref.p.bytes) << "p differs:" << where;
  EXPECT_EQ(got.m.bytes, ref.m.bytes) << "m differs:" << where;
  EXPECT_EQ(got.v.bytes, ref.v.bytes) << "v differs:" << where;
  if (has_out) {
    EXPECT_EQ(got.out.bytes, ref.out.bytes) << "out differs:" << where;
  }
}

constexpr DType kMaster[] = {DType::F32, DType::BF16};
constexpr DType kAny[] = {DType::F32, DType::BF16, DType::F16};

TEST(HostAdam, BitwiseAllPathsDtypesSizesThreads) {
  std::mt19937 rng(1234);
  for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 33, 1000, 4099, 100003}) {
    for (DType pt : kMaster) for (DType st : kMaster) for (DType gt : kAny) for (int oi = 0; oi < 4; ++oi) {
      const bool has_out = oi < 3;
      AdamState s{random_buf(rng, pt, n, -1.0f, 1.0f), random_buf(rng, st, n, -0.1f, 0.1f),
                  random_buf(rng, st, n, 0.0f, 0.01f), random_buf(rng, gt, n, -2.0f, 2.0f),
                  Buf(has_out ? kAny[oi] : DType::F32, n)};
      for (bool adamw : {true, false}) for (int bc_step : {0, 1, 10}) {
        if (n > 4099 && (bc_step == 0 || !adamw)) continue;  // the large size checks the thread split
        const std::string tag = " n=" + std::to_string(n) + " p=" + dtype_name(pt) + " state=" + dtype_name(st) +
                                " g=" + dtype_name(gt) + " out=" + (has_out ? dtype_name(kAny[oi]) : "none") +
                                (adamw ? " adamw" : " l2") + " bc_step=" + std::to_string(bc_step);
        for (Isa isa : isas_to_test()) for (int threads : {1, 2, 3})
          expect_adam_bitwise(s, has_out, 0.37f, adam_params(adamw, bc_step), isa, threads, tag);
        if (HasFailure()) return;
      }
    }
  }
}

// The CPU backend's own step (cpu_ops::adam_step, which runs host_optim's SIMD AdamW over an
// OpenMP team unless ZT_CPU_ISA=scalar): every ISA and 1-3 OpenMP threads, sizes below and above
// the serial threshold, bitwise equal to the scalar loop.
TEST(HostAdam, CpuBackendStepBitwiseEveryIsaAndOmpThreads) {
  std::mt19937 rng(99);
  EnvGuard guard("ZT_CPU_ISA");
  const int omp_threads = omp_get_max_threads();
  for (int64_t n : {5, 1000, 40000, 100003}) {
    for (DType pt : kMaster) for (DType gt : kAny) for (DType ot : kAny) {
      AdamState s{random_buf(rng, pt, n, -1.0f, 1.0f), random_buf(rng, pt, n, -0.1f, 0.1f),
                  random_buf(rng, pt, n, 0.0f, 0.01f), random_buf(rng, gt, n, -2.0f, 2.0f), Buf(ot, n)};
      const math::AdamParams a = adam_params(true, 5);
      AdamState ref = s;
      scalar_reference(ref, true, 0.37f, a);
      for (Isa isa : isas_to_test()) for (int threads : {1, 2, 3}) {
        AdamState got = s;
        setenv("ZT_CPU_ISA", isa_name(isa), 1);
        omp_set_num_threads(threads);
        cpu_ops::adam_step(got.p.view(), got.m.view(), got.v.view(), got.g.view(), 0.37f, a, got.out.view());
        const std::string where = " n=" + std::to_string(n) + " p=" + dtype_name(pt) + " g=" + dtype_name(gt) +
                                  " out=" + dtype_name(ot) + " isa=" + isa_name(isa) + " omp=" + std::to_string(threads);
        EXPECT_EQ(got.p.bytes, ref.p.bytes) << "p differs:" << where;
        EXPECT_EQ(got.m.bytes, ref.m.bytes) << "m differs:" << where;
        EXPECT_EQ(got.v.bytes, ref.v.bytes) << "v differs:" << where;
        EXPECT_EQ(got.out.bytes, ref.out.bytes) << "out differs:" << where;
      }
      omp_set_num_threads(omp_threads);
      if (HasFailure()) return;
    }
  }
}

// NaN / inf / huge / subnormal gradients and parameters flow through every op identically.
TEST(HostAdam, BitwiseOnSpecialValues) {
  const float inf = INFINITY, nan = std::nanf("");
  const std::vector<float> specials{0.0f, -0.0f, inf, -inf, nan, -nan, 1e-40f, -1e-45f, 3e38f, -3e38f, 1e20f, 65520.0f};
  const int64_t n = 4 * static_cast<int64_t>(specials.size()) + 5;
  std::mt19937 rng(7);
  for (DType pt : kMaster) for (DType gt : kAny) for (DType ot : kAny) {
    AdamState s{random_buf(rng, pt, n, -1, 1), random_buf(rng, DType::F32, n, -0.1f, 0.1f),
                random_buf(rng, DType::F32, n, 0.0f, 0.01f), random_buf(rng, gt, n, -2, 2), Buf(ot, n)};
    for (size_t k = 0; k < specials.size(); ++k) {
      s.g.set(static_cast<int64_t>(k), specials[k]);                          // special gradient
      s.p.set(static_cast<int64_t>(k + specials.size()), specials[k]);       // special weight
      s.m.set(static_cast<int64_t>(k + 2 * specials.size()), specials[k]);   // special moment
      s.v.set(static_cast<int64_t>(k + 3 * specials.size()), std::fabs(specials[k]));
    }
    for (bool adamw : {true, false})
      for (Isa isa : isas_to_test())
        expect_adam_bitwise(s, true, 1.0f, adam_params(adamw, 3), isa, 1,
                            std::string(" specials p=") + dtype_name(pt) + " g=" + dtype_name(gt) + " out=" + dtype_name(ot));
  }
}

// With g = m = v = 0, weight decay 0 and lr 1, p is left as it was (p - 1·0), so param_out is the
// conversion of arbitrary fp32 bit patterns: bf16/fp16 rounding ties, overflow, subnormals, NaN.
TEST(HostAdam, ConversionsMatchScalarOnBitPatterns) {
  std::mt19937 rng(99);
  std::vector<uint32_t> pats;
  for (uint32_t hi : {0x0000u, 0x3380u, 0x3f80u, 0x3f81u, 0x477fu, 0x7f7fu, 0x7f80u, 0x7fc0u, 0x8000u, 0xc77fu, 0xff80u})
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xe000u, 0xefffu, 0xf000u, 0xf001u, 0xffffu})
      pats.push_back(hi << 16 | lo);
  for (uint32_t b = 0x33000000u; b <= 0x38800000u; b += 0x1001u) pats.push_back(b);  // fp16 subnormal range
  for (int k = 0; k < 20000; ++k) pats.push_back(static_cast<uint32_t>(rng()));
  const int64_t n = static_cast<int64_t>(pats.size());
  math::AdamParams a = adam_params(true, 0);
  a.lr = 1.0f, a.weight_decay = 0.0f;
  for (DType ot : {DType::BF16, DType::F16}) {
    AdamState s{Buf(DType::F32, n), Buf(DType::F32, n), Buf(DType::F32, n), Buf(DType::F32, n), Buf(ot, n)};
    for (int64_t i = 0; i < n; ++i) s.p.set_bits(i, pats[static_cast<size_t>(i)]);
    for (Isa isa : isas_to_test()) expect_adam_bitwise(s, true, 1.0f, a, isa, 2, std::string(" patterns out=") + dtype_name(ot));
  }
}

// Every bf16 / fp16 bit pattern as the gradient, and every bf16 pattern as p and as m.
TEST(HostAdam, EveryHalfPatternAsInput) {
  const int64_t n = 65536;
  std::mt19937 rng(3);
  for (DType gt : {DType::BF16, DType::F16}) {
    AdamState s{random_buf(rng, DType::BF16, n, -1, 1), random_buf(rng, DType::BF16, n, -0.1f, 0.1f),
                random_buf(rng, DType::BF16, n, 0, 0.01f), Buf(gt, n), Buf(DType::F16, n)};
    for (int64_t i = 0; i < n; ++i) s.g.set_bits(i, static_cast<uint32_t>(i));
    for (Isa isa : isas_to_test()) expect_adam_bitwise(s, true, 1.0f, adam_params(false, 2), isa, 2, " all g patterns");
    for (int64_t i = 0; i < n; ++i) s.p.set_bits(i, static_cast<uint32_t>(i)), s.m.set_bits(i, static_cast<uint32_t>(n - 1 - i));
    for (Isa isa : isas_to_test()) expect_adam_bitwise(s, true, 1.0f, adam_params(true, 2), isa, 1, " all p/m patterns");
  }
}

// bf16 storage is round-to-nearest-even with quiet NaNs, on every path (explicit expected bits).
TEST(HostAdam, Bf16RoundsToNearestEven) {
  const std::vector<std::pair<uint32_t, uint16_t>> cases{
      {0x3f808000u, 0x3f80u},  // 1 + 2^-8: tie, rounds to even (down)
      {0x3f818000u, 0x3f82u},  // tie above an odd mantissa: rounds up
      {0x3f808001u, 0x3f81u},  // just above the tie: up
      {0x7f7fffffu, 0x7f80u},  // max float overflows to inf
      {0x7f800001u, 0x7fc0u},  // signalling NaN comes out quiet
      {0xffc12345u, 0xffc1u},  // NaN keeps sign and top payload
      {0x80000001u, 0x8000u},  // negative subnormal rounds to -0
  };
  const int64_t n = 37;  // a full vector plus a scalar tail on every path
  math::AdamParams a = adam_params(true, 0);
  a.lr = 1.0f, a.weight_decay = 0.0f;
  for (Isa isa : isas_to_test()) {
    for (size_t c = 0; c < cases.size(); ++c) {
      AdamState s{Buf(DType::F32, n), Buf(DType::F32, n), Buf(DType::F32, n), Buf(DType::F32, n), Buf(DType::BF16, n)};
      for (int64_t i = 0; i < n; ++i) s.p.set_bits(i, cases[c].first);
      adam_step(pool_of(1), isa, s.p.view(), s.m.view(), s.v.view(), s.g.view(), 1.0f, a, s.out.view());
      for (int64_t i : {int64_t{0}, int64_t{17}, n - 1})
        EXPECT_EQ(s.out.bits16(i), cases[c].second) << "case " << c << " element " << i << " isa " << isa_name(isa);
    }
  }
}

TEST(HostSgd, BitwiseAgainstSgdStep) {
  std::mt19937 rng(5);
  const optim::SgdParams cfgs[] = {{0.1f, 0.0f, 0.0f, 0.0f, false}, {0.05f, 0.9f, 0.1f, 0.01f, false},
                                   {0.05f, 0.9f, 0.0f, 0.0f, true}};
  for (int64_t n : {0, 1, 17, 4099, 100003}) for (DType pt : kMaster) for (DType gt : kAny) for (int oi = 0; oi < 4; ++oi) {
    const bool has_out = oi < 3;
    Buf p = random_buf(rng, pt, n, -1, 1), buf = random_buf(rng, pt, n, -0.1f, 0.1f), g = random_buf(rng, gt, n, -2, 2);
    Buf out(has_out ? kAny[oi] : DType::F32, n);
    for (const auto& cfg : cfgs) for (bool first : {true, false}) for (int threads : {1, 2, 3}) {
      Buf rp = p, rb = buf, ro = out, hp = p, hb = buf, ho = out;
      cpu_ops::sgd_step(rp.view(), rb.view(), g.view(), 0.37f, cfg, first, has_out ? ro.view() : TensorView());
      sgd_step(pool_of(threads), hp.view(), hb.view(), g.view(), 0.37f, cfg, first, has_out ? ho.view() : TensorView());
      const std::string tag = " n=" + std::to_string(n) + " p=" + dtype_name(pt) + " g=" + dtype_name(gt) +
                              " momentum=" + std::to_string(cfg.momentum) + " threads=" + std::to_string(threads);
      EXPECT_EQ(hp.bytes, rp.bytes) << "p" << tag;
      EXPECT_EQ(hb.bytes, rb.bytes) << "momentum" << tag;
      if (has_out) {
        EXPECT_EQ(ho.bytes, ro.bytes) << "out" << tag;
      }
      if (HasFailure()) return;
    }
  }
}

// Lion and Adagrad: every ISA path (and the scalar one) against zero_ops' CPU kernels
// (cpu_ops::lion_step / adagrad_step), bitwise, for every dtype combination, tail sizes, thread
// counts, exact zeros (Lion's sign(0) = 0 keeps them in place) and special values.
enum class StateOpt { Lion, Adagrad };

void expect_state_step_bitwise(StateOpt which, const Buf& p, const Buf& s, Buf g, const Buf& out, bool has_out,
                               Isa isa, int threads, const std::string& tag) {
  const optim::LionParams lion{3e-2f, 0.9f, 0.99f, 1.0f - 3e-2f * 0.1f};
  const optim::AdagradParams adagrad_cfgs[] = {{2e-2f, 1e-10f, 0.0f}, {1e-2f, 1e-3f, 0.1f}};
  for (const optim::AdagradParams& ag : adagrad_cfgs) {
    Buf rp = p, rs = s, ro = out, hp = p, hs = s, ho = out;
    const TensorView rout = has_out ? ro.view() : TensorView(), hout = has_out ? ho.view() : TensorView();
    if (which == StateOpt::Lion) {
      cpu_ops::lion_step(rp.view(), rs.view(), g.view(), 0.37f, lion, rout);
      lion_step(pool_of(threads), isa, hp.view(), hs.view(), g.view(), 0.37f, lion, hout);
    } else {
      cpu_ops::adagrad_step(rp.view(), rs.view(), g.view(), 0.37f, ag, rout);
      adagrad_step(pool_of(threads), isa, hp.view(), hs.view(), g.view(), 0.37f, ag, hout);
    }
    const std::string where = std::string(which == StateOpt::Lion ? "lion" : "adagrad") + tag + " isa=" +
                              isa_name(isa) + " threads=" + std::to_string(threads);
    EXPECT_EQ(hp.bytes, rp.bytes) << "p differs: " << where;
    EXPECT_EQ(hs.bytes, rs.bytes) << "state differs: " << where;
    if (has_out) {
      EXPECT_EQ(ho.bytes, ro.bytes) << "out differs: " << where;
    }
    if (which == StateOpt::Lion) return;  // one Lion configuration
  }
}

TEST(HostLionAdagrad, BitwiseAllPathsDtypesSizesThreads) {
  std::mt19937 rng(77);
  for (int64_t n : {0, 1, 7, 16, 17, 33, 4099, 100003}) {
    for (DType pt : kMaster) for (DType st : kMaster) for (DType gt : kAny) for (int oi = 0; oi < 4; ++oi) {
      const bool has_out = oi < 3;
      Buf p = random_buf(rng, pt, n, -1, 1), m = random_buf(rng, st, n, -0.1f, 0.1f);
      Buf sum = random_buf(rng, st, n, 0.0f, 0.01f), g = random_buf(rng, gt, n, -2, 2);
      for (int64_t i = 0; i < n; i += 5) g.set(i, 0.0f), m.set(i, 0.0f), sum.set(i, 0.0f);  // c = 0, sum = 0
      const Buf out(has_out ? kAny[oi] : DType::F32, n);
      const std::string tag = " n=" + std::to_string(n) + " p=" + dtype_name(pt) + " state=" + dtype_name(st) +
                              " g=" + dtype_name(gt) + " out=" + (has_out ? dtype_name(kAny[oi]) : "none");
      for (Isa isa : isas_to_test()) for (int threads : {1, 3}) {
        if (n > 4099 && threads == 1) continue;  // the large size checks the thread split
        expect_state_step_bitwise(StateOpt::Lion, p, m, g, out, has_out, isa, threads, tag);
        expect_state_step_bitwise(StateOpt::Adagrad, p, sum, g, out, has_out, isa, threads, tag);
      }
      if (HasFailure()) return;
    }
  }
}

TEST(HostLionAdagrad, BitwiseOnSpecialValues) {
  const float inf = INFINITY, nan = std::nanf("");
  const std::vector<float> specials{0.0f, -0.0f, inf, -inf, nan, -nan, 1e-40f, -1e-45f, 3e38f, -3e38f, 1e20f, 65520.0f};
  const int64_t k = static_cast<int64_t>(specials.size()), n = 3 * k + 5;
  std::mt19937 rng(8);
  for (DType pt : kMaster) for (DType gt : kAny) {
    Buf p = random_buf(rng, pt, n, -1, 1), s = random_buf(rng, DType::F32, n, 0.0f, 0.01f);
    Buf g = random_buf(rng, gt, n, -2, 2);
    for (int64_t i = 0; i < k; ++i) {
      g.set(i, specials[i]);
      p.set(i + k, specials[i]);
      s.set(i + 2 * k, std::fabs(specials[i]));
    }
    const Buf out(DType::BF16, n);
    for (Isa isa : isas_to_test()) {
      const std::string tag = std::string(" specials p=") + dtype_name(pt) + " g=" + dtype_name(gt);
      expect_state_step_bitwise(StateOpt::Lion, p, s, g, out, true, isa, 1, tag);
      expect_state_step_bitwise(StateOpt::Adagrad, p, s, g, out, true, isa, 1, tag);
    }
  }
}

// The per-element formulas themselves, against the published ones evaluated in double.
TEST(HostLionAdagrad, ScalarMatchesPublishedFormulas) {
  const optim::LionParams lion{1e-2f, 0.9f, 0.99f, 1.0f - 1e-2f * 0.5f};
  for (float g : {0.3f, -0.2f, 0.0f}) for (float m : {0.1f, -0.4f, 0.0f}) {
    float p = 0.7f, mm = m;
    optim::lion_update(p, mm, g, lion);
    const double c = 0.9 * m + 0.1 * g, sign = c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0;
    EXPECT_NEAR(p, 0.7 * (1 - 1e-2 * 0.5) - 1e-2 * sign, 1e-6) << "g " << g << " m " << m;
    EXPECT_NEAR(mm, 0.99 * m + 0.01 * g, 1e-7);
  }
  float p = 0.0f, m = 0.0f;  // zero gradient, zero moment, zero weight: stays exactly zero
  optim::lion_update(p, m, 0.0f, lion);
  EXPECT_EQ(p, 0.0f);
  const optim::AdagradParams ag{1e-2f, 1e-10f, 0.1f};
  float q = 0.5f, sum = 0.04f;
  optim::adagrad_update(q, sum, 0.3f, ag);
  const double gd = 0.3 + 0.1 * 0.5, sd = 0.04 + gd * gd;
  EXPECT_NEAR(sum, sd, 1e-7);
  EXPECT_NEAR(q, 0.5 - 1e-2 * gd / (std::sqrt(sd) + 1e-10), 1e-7);
}

TEST(HostThreadPool, StaticContiguousPartition) {
  for (int threads : {1, 2, 3}) {
    HostThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {1, 5, 10, 1001}) for (int64_t grain : {1, 4, 2000}) {
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lk(mu);
        ranges.emplace_back(b, e);
      });
      std::sort(ranges.begin(), ranges.end());
      const int64_t want = (n + grain - 1) / grain;
      const int64_t parts = want < threads ? want : threads;
      ASSERT_EQ(static_cast<int64_t>(ranges.size()), parts) << "n=" << n << " grain=" << grain;
      for (int64_t k = 0; k < parts; ++k) {
        EXPECT_EQ(ranges[k].first, n * k / parts);
        EXPECT_EQ(ranges[k].second, n * (k + 1) / parts);
      }
    }
    pool.parallel_for(0, 1, [](int64_t, int64_t) { ADD_FAILURE() << "called for n = 0"; });
  }
}

TEST(HostThreadPool, RethrowsAndRunsNestedInline) {
  HostThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(30, 1, [](int64_t b, int64_t) { if (b > 0) throw InputError("boom"); }), InputError);
  std::atomic<int64_t> total{0};
  pool.parallel_for(30, 1, [&](int64_t b, int64_t e) {
    pool.parallel_for(e - b, 1, [&](int64_t ib, int64_t ie) { total += ie - ib; });
  });
  EXPECT_EQ(total.load(), 30);
}

TEST(HostIsa, ForcingAndErrors) {
  EnvGuard guard("ZT_CPU_ISA");
  unsetenv("ZT_CPU_ISA");
  EXPECT_EQ(active_isa(), detected_isa());
  setenv("ZT_CPU_ISA", "", 1);
  EXPECT_EQ(active_isa(), detected_isa());
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    setenv("ZT_CPU_ISA", isa_name(isa), 1);
    if (isa_supported(isa)) {
      EXPECT_EQ(active_isa(), isa);
    } else {
      try {
        active_isa();
        ADD_FAILURE() << "no error for an unsupported " << isa_name(isa);
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("ZT_CPU_ISA"), std::string::npos) << e.what();
      }
    }
  }
  setenv("ZT_CPU_ISA", "sse9", 1);
  try {
    active_isa();
    ADD_FAILURE() << "no error for ZT_CPU_ISA=sse9";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ZT_CPU_ISA=sse9"), std::string::npos) << e.what();
  }
  std::printf("detected ISA: %s\n", isa_name(detected_isa()));
}

TEST(HostThreads, DefaultFromOmpNumThreadsOrAffinity) {
  EnvGuard guard("OMP_NUM_THREADS");
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(default_host_threads(), 3);
  setenv("OMP_NUM_THREADS", "4,2", 1);
  EXPECT_EQ(default_host_threads(), 4);
  unsetenv("OMP_NUM_THREADS");
  const int affinity = default_host_threads();
  EXPECT_GE(affinity, 1);
  for (const char* bad : {"0", "-2", "abc", "3x"}) {
    setenv("OMP_NUM_THREADS", bad, 1);
    EXPECT_EQ(default_host_threads(), affinity) << bad;
  }
}

// Gradient accumulation into the host shard (ZeRO-Offload) and the CPU backend's own accumulate
// (its SIMD paths): every ISA path, bitwise against zero_ops' scalar CPU accumulate with alpha 1, for dst fp32/bf16 x src fp32/bf16/fp16, overwrite or add,
// tail sizes, thread counts, and special values in both operands.
TEST(HostAccumulate, BitwiseEveryIsaDtypeAndThreads) {
  std::mt19937 rng(11);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> specials{0.0f, -0.0f, inf, -inf, nan, -nan, 1e-40f, -1e-45f, 3e38f, -3e38f, 65520.0f};
  const int64_t k = static_cast<int64_t>(specials.size());
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(31), 2 * k + 3, int64_t(40001)})
    for (DType dt : kMaster) for (DType st : kAny) {
      Buf dst = random_buf(rng, dt, n, -2, 2), src = random_buf(rng, st, n, -1, 1);
      for (int64_t i = 0; i < k && i + k < n; ++i) {  // specials in src, then in dst
        src.set(i, specials[i]);
        dst.set(i + k, specials[i]);
      }
      for (bool overwrite : {false, true}) {
        EnvGuard guard("ZT_CPU_ISA");
        setenv("ZT_CPU_ISA", "scalar", 1);
        Buf ref = dst;
        cpu_ops::accumulate(ref.view(), src.view(), 1.0f, overwrite);
        for (Isa isa : isas_to_test()) {
          for (int threads : {1, 3}) {
            Buf got = dst;
            accumulate(pool_of(threads), isa, got.view(), src.view(), overwrite);
            EXPECT_EQ(got.bytes, ref.bytes) << "n=" << n << " dst=" << dtype_name(dt) << " src=" << dtype_name(st)
                                            << " overwrite=" << overwrite << " isa=" << isa_name(isa)
                                            << " threads=" << threads;
          }
          setenv("ZT_CPU_ISA", isa_name(isa), 1);  // the CPU backend's own op on this ISA (its OpenMP split)
          Buf own = dst;
          cpu_ops::accumulate(own.view(), src.view(), 1.0f, overwrite);
          EXPECT_EQ(own.bytes, ref.bytes) << "cpu_ops::accumulate n=" << n << " dst=" << dtype_name(dt)
                                          << " src=" << dtype_name(st) << " overwrite=" << overwrite
                                          << " isa=" << isa_name(isa);
          if (HasFailure()) return;
        }
      }
    }
}

}  // namespace
}  // namespace zt::host_optim
