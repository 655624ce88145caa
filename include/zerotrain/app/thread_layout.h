// thread_layout.h — who owns the cores. Each rank's OpenMP team (the compute stream's kernels,
// GEMMs included: OpenBLAS runs single-threaded inside it) gets the CPUs of its affinity mask, shared among the node-local ranks when
// they all see the same mask (mpirun --bind-to none), whatever launched the job — unless the
// user set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, which win. Without this, plain mpirun -np 2
// gives every rank a pool as large as the machine and the ranks spin against each other.
#pragma once
#include <string>

namespace zt {

struct ThreadLayout {
  int affinity_cpus = 1;    // CPUs this process may run on (affinity mask, capped by a cgroup quota)
  int online_cpus = 1;      // CPUs of the machine
  int local_ranks = 1;      // ranks on this node
  int threads = 1;          // OpenMP threads per rank (kernels and GEMM slices)
  bool from_env = false;    // the user's OMP_NUM_THREADS / OPENBLAS_NUM_THREADS decided
  std::string blas_core;    // OpenBLAS's kernel family ("Haswell", "Zen", "SkylakeX", ...)
  std::string cpu_kernels;  // the CPU kernels' paths (cpu_kernel_paths()); empty: not shown
};

// Pure rule: the user's OMP_NUM_THREADS (else OPENBLAS_NUM_THREADS) when it is a positive
// integer; else a bound rank (mask smaller than the machine) uses its mask, and unbound ranks
// split the mask evenly (at least 1 thread each).
ThreadLayout plan_thread_layout(int affinity_cpus, int online_cpus, int local_ranks, const char* omp_env,
                                const char* blas_env);
// Reads the mask and the environment, sets the OpenMP thread count (OpenBLAS: 1 thread, always),
// and returns what it did (for the run header); with cpu_device, also the CPU kernels'
// paths.
ThreadLayout apply_thread_layout(int local_ranks, bool cpu_device = false);
// "2 threads per rank (one OpenMP pool, GEMMs included; 2 CPUs in the affinity mask / 1 local rank); OpenBLAS core Zen"
// then "; CPU kernels ..." when t.cpu_kernels is set.
std::string describe(const ThreadLayout& t);
// The SIMD level of the CPU kernels (cpu::active_isa()) and the bf16 GEMM path
// (cpu::active_bf16_gemm()): "CPU kernels avx512, bf16 GEMM native (fp32 panels, AVX-512 FMA
// tile)". Throws zt::InputError for a bad ZT_CPU_ISA or ZT_CPU_BF16_GEMM.
std::string cpu_kernel_paths();
// For bf16 compute on the CPU device where the bf16 GEMMs multiply fp32 (the widened and the native
// paths: no bf16 dot-product tile), the run header's line saying that bf16 halves activation
// memory there but does not speed steps up; empty otherwise. Throws as cpu_kernel_paths().
std::string bf16_cpu_note(bool bf16_compute, bool cpu_device);

}  // namespace zt
