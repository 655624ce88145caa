// cpu_isa.cpp — run-time ISA detection (CPUID + XGETBV) and the ZT_CPU_ISA override.
#include "zerotrain/core/cpu_isa.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "zerotrain/core/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace zt::cpu {

namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

Isa detect() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::Scalar;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!(osxsave && avx && fma && f16c)) return Isa::Scalar;
  const uint64_t xcr0 = xgetbv0();
  if ((xcr0 & 0x6) != 0x6) return Isa::Scalar;  // XMM and YMM state enabled by the OS
  if (__get_cpuid_max(0, nullptr) < 7) return Isa::Scalar;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16);
  if (!avx2) return Isa::Scalar;
  if (avx512f && (xcr0 & 0xe0) == 0xe0) return Isa::Avx512;  // opmask, ZMM_Hi256, Hi16_ZMM state
  return Isa::Avx2;
}
#else
Isa detect() { return Isa::Scalar; }
#endif

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

bool isa_supported(Isa isa) { return static_cast<uint8_t>(isa) <= static_cast<uint8_t>(detected_isa()); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa active_isa() {
  const char* env = std::getenv("ZT_CPU_ISA");
  if (env == nullptr || env[0] == '\0') return detected_isa();
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (std::strcmp(env, isa_name(isa)) != 0) continue;
    if (!isa_supported(isa)) {
      throw InputError(std::string("ZT_CPU_ISA=") + env + ": this CPU does not support " + isa_name(isa) +
                       " (best available: " + isa_name(detected_isa()) + ")");
    }
    return isa;
  }
  throw InputError(std::string("ZT_CPU_ISA=") + env + ": expected scalar, avx2 or avx512");
}

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool detect_avx512_bf16() {
  if (detected_isa() != Isa::Avx512 || __get_cpuid_max(0, nullptr) < 7) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid_count(7, 0, a, b, c, d);
  if (a < 1) return false;  // no sub-leaf 1
  __cpuid_count(7, 1, a, b, c, d);
  return (a & (1u << 5)) != 0;
}

bool detect_amd() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  return b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
}
#else
bool detect_avx512_bf16() { return false; }
bool detect_amd() { return false; }
#endif

}  // namespace

bool avx512_bf16_supported() {
  static const bool yes = detect_avx512_bf16();
  return yes;
}

bool amd_cpu() {
  static const bool yes = detect_amd();
  return yes;
}

const char* bf16_gemm_name(Bf16Gemm g) {
  switch (g) {
    case Bf16Gemm::Widen: return "widened to fp32 + OpenBLAS sgemm";
    case Bf16Gemm::Native:
      return active_isa() == Isa::Avx512 ? "native (fp32 panels, AVX-512 FMA tile)"
                                         : "native (fp32 panels, AVX2 FMA tile)";
    case Bf16Gemm::Dot: return "dpbf16 (bf16 pairs, AVX512_BF16 dot-product tile)";
  }
  return "?";
}

Bf16Gemm active_bf16_gemm() { return active_bf16_gemm(active_isa()); }

Bf16Gemm active_bf16_gemm(Isa isa) {
  const char* env = std::getenv("ZT_CPU_BF16_GEMM");
  if (env == nullptr || env[0] == '\0') {
    if (isa == Isa::Avx512 && avx512_bf16_supported() && amd_cpu()) return Bf16Gemm::Dot;
    return isa == Isa::Avx2 && amd_cpu() ? Bf16Gemm::Native : Bf16Gemm::Widen;
  }
  if (std::strcmp(env, "widen") == 0) return Bf16Gemm::Widen;
  const bool dot = std::strcmp(env, "dpbf16") == 0;
  if (!dot && std::strcmp(env, "native") != 0)
    throw InputError(std::string("ZT_CPU_BF16_GEMM=") + env + ": expected widen, native or dpbf16");
  if (dot && (isa != Isa::Avx512 || !avx512_bf16_supported())) {
    const char* why = !isa_supported(Isa::Avx512) ? "this CPU lacks AVX-512F"
                      : isa != Isa::Avx512        ? "ZT_CPU_ISA is below avx512"
                                                  : "this CPU lacks AVX512_BF16";
    throw InputError(std::string("ZT_CPU_BF16_GEMM=") + env + ": needs AVX-512F and AVX512_BF16 (" + why +
                     "); use widen or leave it unset");
  }
  if (!dot && isa == Isa::Scalar) {
    const char* why = isa_supported(Isa::Avx2) ? "ZT_CPU_ISA is scalar" : "this CPU lacks AVX2";
    throw InputError(std::string("ZT_CPU_BF16_GEMM=") + env + ": needs AVX2 or AVX-512F (" + why +
                     "); use widen or leave it unset");
  }
  return dot ? Bf16Gemm::Dot : Bf16Gemm::Native;
}

}  // namespace zt::cpu
