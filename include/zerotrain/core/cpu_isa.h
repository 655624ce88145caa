// cpu_isa.h — the x86 SIMD level the CPU kernels may use, chosen at run time (binaries are
// built for baseline x86-64, never -march=native; each SIMD file carries its own ISA flags and
// runs only when this says the CPU and OS support it).
#pragma once
#include <cstdint>

namespace zt::cpu {

// Scalar: portable C++. Avx2: AVX2 + FMA + F16C with OS-enabled YMM state (FMA is required of
// the CPU, never used in the arithmetic). Avx512: the Avx2 level plus AVX-512F with OS-enabled
// opmask/ZMM state (no AVX-512BW needed).
enum class Isa : uint8_t { Scalar, Avx2, Avx512 };

Isa detected_isa();            // best level this CPU and OS support (CPUID + XGETBV), cached
bool isa_supported(Isa isa);   // isa <= detected_isa()
// detected_isa(), or the level forced by env ZT_CPU_ISA=scalar|avx2|avx512 (unset or empty:
// detected). An unknown value or a level this CPU lacks throws zt::InputError naming
// ZT_CPU_ISA. Read on every call.
Isa active_isa();
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"

// How the CPU backend multiplies bf16 matrices. Native: our own GEMM, which widens the bf16
// operands to fp32 while packing them into its panels and runs an AVX-512F FMA register tile
// (csrc/kernels/cpu/cpu_gemm_bf16*.cpp). Widen: both operands widened to fp32 scratch (exact),
// then OpenBLAS sgemm. Both accumulate in fp32 and round the result to bf16 once.
enum class Bf16Gemm : uint8_t { Widen, Native };

// Widen, unless env ZT_CPU_BF16_GEMM=native asks for the native GEMM (=widen or unset/empty:
// Widen). Widen is the default because OpenBLAS's sgemm kernel outruns the native tile on the
// AVX-512 machines measured (docs/benchmarks.md §7). An unknown value, or native where it cannot
// run (no AVX-512F, or ZT_CPU_ISA below avx512), throws zt::InputError naming ZT_CPU_BF16_GEMM.
// Read on every call.
Bf16Gemm active_bf16_gemm();
// "native (fp32 panels, AVX-512 FMA tile)" / "widened to fp32 + OpenBLAS sgemm".
const char* bf16_gemm_name(Bf16Gemm g);

}  // namespace zt::cpu
