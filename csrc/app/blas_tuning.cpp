// blas_tuning.cpp — OpenBLAS kernel selection for CPUs it does not recognise.
//
// Debian's OpenBLAS picks its kernels at load time from the CPU model. On CPUs newer than the
// library (e.g. some cloud/KVM Xeons) it falls back to the SSE3 "Prescott" kernels, which halves
// training throughput (docs/benchmarks.md). The only switch is OPENBLAS_CORETYPE, read when the
// library loads, so when the fallback is detected the process re-executes itself once with the
// best core type the CPU supports. A user's OPENBLAS_CORETYPE is never overridden.
#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "commands.h"

namespace zt {

void tune_openblas_or_reexec(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("ZT_NO_BLAS_TUNING")) return;
  const char* core = openblas_get_corename();
  if (!core || (strcasecmp(core, "prescott") != 0 && strcasecmp(core, "core2") != 0 && strcasecmp(core, "nehalem") != 0))
    return;
  const char* better = nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (!better) return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);  // on failure keep running with the slow kernels
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace zt
