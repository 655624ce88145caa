// mfu.h — model FLOP utilisation for `zerotrain train`: the devices' peak FLOP/s and one
// optimizer step's throughput.
#pragma once
#include <cstdint>

#include "zerotrain/core/device.h"
#include "zerotrain/core/dtype.h"

namespace zt {

// Dense peak FLOP/s of one device computing in `compute` (0 = unknown): NVIDIA datasheet
// numbers, tensor cores for bf16/fp16, plain fp32 otherwise (cuBLAS does not use TF32 unless
// asked). CPUs are unknown.
double device_peak_flops(const Device& dev, DType compute);

// One optimizer step over the global batch, all ranks together.
struct StepThroughput {
  double step_s = 0;          // wall time of the step, seconds
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double tflops = 0;          // model FLOP/s / 1e12 (forward + backward, PaLM's count)
  double peak_flops = 0;      // FLOP/s of all ranks' devices; 0 = unknown (no MFU)
  bool has_mfu() const { return peak_flops > 0; }
  double mfu() const { return tflops * 1e12 / peak_flops; }  // fraction of peak; needs has_mfu()
};

// samples: per step (train_batch_size); flops_per_sample: forward + backward model FLOPs;
// peak_flops: all ranks' devices, FLOP/s (0 = unknown).
StepThroughput step_throughput(double step_s, int64_t samples, double tokens_per_sample, double flops_per_sample,
                               double peak_flops);

}  // namespace zt
