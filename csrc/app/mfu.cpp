// mfu.cpp — peak FLOP/s table and step throughput for MFU.
#include "mfu.h"

#include <string>

namespace zt {

namespace {

// Dense datasheet peaks, FLOP/s per GPU.
struct GpuPeak {
  const char* name;    // substring of the device description
  double half_flops;   // bf16 / fp16 tensor cores
  double fp32_flops;   // plain fp32 (no TF32)
};
constexpr GpuPeak kGpuPeaks[] = {
    {"H100", 989e12, 67e12},
    {"H200", 989e12, 67e12},
    {"A100", 312e12, 19.5e12},
};

}  // namespace

double device_peak_flops(const Device& dev, DType compute) {
  if (dev.kind() != DeviceKind::CUDA) return 0;
  const std::string description = dev.description();
  for (const GpuPeak& g : kGpuPeaks)
    if (description.find(g.name) != std::string::npos) return compute != DType::F32 ? g.half_flops : g.fp32_flops;
  return 0;
}

StepThroughput step_throughput(double step_s, int64_t samples, double tokens_per_sample, double flops_per_sample,
                               double peak_flops) {
  StepThroughput t;
  t.step_s = step_s;
  t.samples_per_s = samples / step_s;
  t.tokens_per_s = t.samples_per_s * tokens_per_sample;
  t.tflops = flops_per_sample * samples / step_s / 1e12;
  t.peak_flops = peak_flops;
  return t;
}

}  // namespace zt
