// host_optim.h — the host-side (CPU) optimizer step for ZeRO-Offload
// (`offload_optimizer: {"device": "cpu"}`): master weights and moments live in host memory and
// are updated here, on host pointers, by a SIMD kernel picked at run time.
//
// Bitwise contract: for every ISA path and every thread count, adam_step leaves p, m, v and
// param_out bitwise equal to the CPU backend's AdamW (cpu_ops::adam_step: math::adam_update per
// element, then out = from_f32<O>(to_f32(p_stored))), and sgd_step equals cpu_ops::sgd_step
// (optim::sgd_update per element). The SIMD files are compiled with -ffp-contract=off and use
// separate mul/add, IEEE div/sqrt, and integer bf16 round-to-nearest-even identical to
// zt::f32_to_bf16_bits (NaN kept quiet with its sign). Assumes the default MXCSR (no FTZ/DAZ),
// like the rest of the CPU backend.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "zerotrain/core/tensor.h"
#include "zerotrain/kernels/math.h"
#include "zerotrain/kernels/optimizer_math.h"
#include "zerotrain/optim/sgd_math.h"

namespace zt::host_optim {

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

// A fixed set of worker threads. parallel_for splits [0, n) into
// parts = clamp(ceil(n / grain), 1, size()) contiguous ranges, part k = [k·n/parts, (k+1)·n/parts)
// (a function of n, grain and size() only), runs part 0 on the calling thread and part k on
// worker k, and returns when all are done. The first exception thrown by fn is rethrown in the
// caller. Calls from different threads are serialised; a call from inside fn on the same pool
// runs fn(0, n) inline. The destructor joins the workers.
class HostThreadPool {
 public:
  explicit HostThreadPool(int threads);  // threads >= 1 (the caller counts as one)
  ~HostThreadPool();
  HostThreadPool(const HostThreadPool&) = delete;
  HostThreadPool& operator=(const HostThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void worker_loop(int index);
  void run_part(int part);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;       // guards everything below
  std::condition_variable wake_, done_cv_;
  uint64_t generation_ = 0;  // bumped per job; workers run a job once
  int parts_ = 0;            // parts of the current job
  int pending_ = 0;          // worker parts of the current job not yet finished
  bool stop_ = false;
  int64_t n_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  std::exception_ptr error_;
};

// OMP_NUM_THREADS when set to a positive integer (a list "4,2" uses its first entry), else the
// number of CPUs in this process's affinity mask (at least 1).
int default_host_threads();

// Adam/AdamW over host pointers (DeviceKind::CPU views): p and m, v in F32 or BF16 (m and v of
// one dtype), g in F32/BF16/F16, param_out empty (data == nullptr) or F32/BF16/F16, all of one
// numel. Same semantics as ops::adam_step. `isa` must be supported (ZT_CHECK).
void adam_step(HostThreadPool& pool, Isa isa, const TensorView& p, const TensorView& m, const TensorView& v,
               const TensorView& g, float grad_scale, const math::AdamParams& a, const TensorView& param_out);

// The same step split over an OpenMP team instead of a pool (the CPU backend's
// cpu_ops::adam_step runs its SIMD paths through this): one contiguous 64-element-aligned part
// per team thread, serial below 32K elements. Same bitwise contract for every thread count.
void adam_step_omp(Isa isa, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
                   float grad_scale, const math::AdamParams& a, const TensorView& param_out);

// SGD with momentum over host pointers, same semantics as zero_ops::sgd_step: p in F32/BF16,
// momentum (any dtype; ignored when a.momentum == 0), g and param_out (optional) in any dtype.
void sgd_step(HostThreadPool& pool, const TensorView& p, const TensorView& momentum, const TensorView& g,
              float grad_scale, const optim::SgdParams& a, bool first_step, const TensorView& param_out);

// Lion (optim::lion_update) and Adagrad (optim::adagrad_update) over host pointers, bitwise
// equal to zero_ops' CPU lion_step / adagrad_step on every ISA path: p and the state (exp_avg /
// sum) in F32 or BF16, g in any dtype, param_out empty or any dtype (it receives the updated p
// before p is stored, as there). `isa` must be supported.
void lion_step(HostThreadPool& pool, Isa isa, const TensorView& p, const TensorView& m, const TensorView& g,
               float grad_scale, const optim::LionParams& a, const TensorView& param_out);
void adagrad_step(HostThreadPool& pool, Isa isa, const TensorView& p, const TensorView& sum, const TensorView& g,
                  float grad_scale, const optim::AdagradParams& a, const TensorView& param_out);

}  // namespace zt::host_optim
