// cpu_isa.h — the x86 SIMD level the CPU kernels may use, chosen at run time (binaries are
// built for baseline x86-64, never -march=native; each SIMD file carries its own ISA flags and
// runs only when this says the CPU and OS support it).
#pragma once
#include <cstdint>

namespace zt::cpu {

// Scalar: portable C++. Avx2: AVX2 + FMA + F16C with OS-enabled YMM state (FMA is used only by
// the Native bf16 GEMM's tile, whose contract is fp32 multiply-adds fused). Avx512: the Avx2
// level plus AVX-512F with OS-enabled opmask/ZMM state (no AVX-512BW needed).
enum class Isa : uint8_t { Scalar, Avx2, Avx512 };

Isa detected_isa();            // best level this CPU and OS support (CPUID + XGETBV), cached
bool isa_supported(Isa isa);   // isa <= detected_isa()
// detected_isa(), or the level forced by env ZT_CPU_ISA=scalar|avx2|avx512 (unset or empty:
// detected). An unknown value or a level this CPU lacks throws zt::InputError naming
// ZT_CPU_ISA. Read on every call.
Isa active_isa();
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"

// Whether the CPU has AVX512_BF16 (vdpbf16ps; CPUID.(7,1):EAX[5]) on top of detected_isa() ==
// Avx512. Cached.
bool avx512_bf16_supported();
// Whether the CPU is AMD's (CPUID vendor "AuthenticAMD"). Cached.
bool amd_cpu();

// How the CPU backend multiplies bf16 matrices; every path accumulates in fp32 and rounds the
// result to bf16 once. Widen: both operands widened to fp32 scratch (exact), then OpenBLAS sgemm.
// Native: our own GEMM, which widens the operands to fp32 while packing them into its panels and
// runs an FMA register tile (AVX-512F, or AVX2 when that is the active ISA; the same bits).
// Dot: our own GEMM on bf16 pairs packed along k, with an AVX512_BF16 vdpbf16ps register tile
// (two multiply-adds per lane and instruction; products of subnormals flush to zero). Native
// and Dot: csrc/kernels/cpu/cpu_gemm_bf16*.cpp.
enum class Bf16Gemm : uint8_t { Widen, Native, Dot };

// The path for this process: env ZT_CPU_BF16_GEMM=widen|native|dpbf16 forces one; unset or empty
// picks Dot where vdpbf16ps runs at full rate (AVX512_BF16 on an AMD CPU: Zen 4 and later) and
// ZT_CPU_ISA allows AVX-512; Native where the active ISA is AVX2 on an AMD CPU (on Zen 3 the AVX2
// tile's GEMMs take ~0.99× sgemm's time where widen's take 1.05×, and its step is at or under
// widen's in most cases measured); else Widen: on the Intel machines measured OpenBLAS's sgemm
// kernel outruns our AVX-512 FMA tile (and vdpbf16ps retired at a quarter of vfmadd's rate)
// (docs/design.md, "GEMM paths on the CPU"). An unknown value, or a path that cannot
// run here (dpbf16 without AVX-512F + AVX512_BF16 or with ZT_CPU_ISA below avx512; native at the
// scalar ISA), throws zt::InputError naming ZT_CPU_BF16_GEMM. Read on every call.
Bf16Gemm active_bf16_gemm();
// The same for a caller that has already read active_isa() (passed as isa).
Bf16Gemm active_bf16_gemm(Isa isa);
// "widened to fp32 + OpenBLAS sgemm", "native (fp32 panels, AVX-512 FMA tile)" (or "AVX2 FMA
// tile" when the active ISA is AVX2), "dpbf16 (bf16 pairs, AVX512_BF16 dot-product tile)".
const char* bf16_gemm_name(Bf16Gemm g);

}  // namespace zt::cpu
