// thread_layout.cpp — per-rank thread counts from the affinity mask and the node-local ranks.
#include "zerotrain/app/thread_layout.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "zerotrain/core/cpu_isa.h"
#include "zerotrain/core/cpu_stream.h"

namespace zt {

namespace {

int positive_int(const char* s) {
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return (end != s && (*end == '\0' || *end == ',') && v > 0 && v < 100000) ? static_cast<int>(v) : 0;
}

// A cgroup v2 quota (cpu.max "quota period"), rounded up; 0 when unlimited or unknown.
int cgroup_cpus() {
  std::ifstream f("/sys/fs/cgroup/cpu.max");
  std::string quota;
  long long period = 0;
  if (!(f >> quota >> period) || quota == "max" || period <= 0) return 0;
  const long long q = std::atoll(quota.c_str());
  return q > 0 ? static_cast<int>((q + period - 1) / period) : 0;
}

int affinity_cpu_count() {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const int quota = cgroup_cpus();
  return std::max(1, quota > 0 ? std::min(n, quota) : n);
}

}  // namespace

ThreadLayout plan_thread_layout(int affinity_cpus, int online_cpus, int local_ranks, const char* omp_env,
                                const char* blas_env) {
  ThreadLayout t;
  t.affinity_cpus = std::max(1, affinity_cpus);
  t.online_cpus = std::max(1, online_cpus);
  t.local_ranks = std::max(1, local_ranks);
  const int user = positive_int(omp_env) ? positive_int(omp_env) : positive_int(blas_env);
  if (user > 0) {
    t.threads = user;
    t.from_env = true;
  } else if (t.affinity_cpus < t.online_cpus) {
    t.threads = t.affinity_cpus;  // bound: the launcher already gave this rank its own CPUs
  } else {
    t.threads = std::max(1, t.affinity_cpus / t.local_ranks);
  }
  return t;
}

ThreadLayout apply_thread_layout(int local_ranks, bool cpu_device) {
  const int online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  ThreadLayout t = plan_thread_layout(affinity_cpu_count(), online, local_ranks, std::getenv("OMP_NUM_THREADS"),
                                      std::getenv("OPENBLAS_NUM_THREADS"));
  // One pool: the OpenMP threads run the kernels and split each GEMM; OpenBLAS itself runs
  // single-threaded in its caller (cpu_gemm.cpp), whatever OPENBLAS_NUM_THREADS says.
  omp_set_num_threads(t.threads);         // this thread
  set_cpu_stream_omp_threads(t.threads);  // every stream worker started from now on
  openblas_set_num_threads(1);
  const char* core = openblas_get_corename();
  t.blas_core = core ? core : "unknown";
  if (cpu_device) t.cpu_kernels = cpu_kernel_paths();
  return t;
}

std::string describe(const ThreadLayout& t) {
  std::string s = std::to_string(t.threads) + (t.threads == 1 ? " thread" : " threads") +
                  " per rank (one OpenMP pool, GEMMs included; ";
  if (t.from_env) s += "from OMP_NUM_THREADS / OPENBLAS_NUM_THREADS";
  else
    s += std::to_string(t.affinity_cpus) + " of " + std::to_string(t.online_cpus) + " CPUs in the affinity mask, " +
         std::to_string(t.local_ranks) + " local rank" + (t.local_ranks == 1 ? "" : "s");
  s += "); OpenBLAS core " + t.blas_core;
  return t.cpu_kernels.empty() ? s : s + "; " + t.cpu_kernels;
}

std::string cpu_kernel_paths() {
  return std::string("CPU kernels ") + cpu::isa_name(cpu::active_isa()) + ", bf16 GEMM " +
         cpu::bf16_gemm_name(cpu::active_bf16_gemm());
}

std::string bf16_cpu_note(bool bf16_compute, bool cpu_device) {
  if (!bf16_compute || !cpu_device || cpu::active_bf16_gemm() == cpu::Bf16Gemm::Dot) return {};
  return "note: bf16 on this CPU halves activation memory but does not speed steps up: its bf16 GEMMs multiply in "
         "fp32 (no bf16 dot-product tile here) and the conversions cost time (docs/benchmarks.md, bf16 vs fp32); "
         "\"bf16\": {\"enabled\": false} trains in fp32\n";
}

}  // namespace zt
