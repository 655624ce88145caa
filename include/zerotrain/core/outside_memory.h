// outside_memory.h — device memory that no Device::alloc accounts for, measured where it is
// created and summed per CUDA device for the memory report (Device::outside_tracker_memory).
//
// Who records what (CUDA builds only; on the CPU backend every figure stays 0):
//   cuda_context      core/device_cuda.cpp, once per process and GPU: cudaMemGetInfo's
//                     total - free right after the first zerotrain device on that GPU made its
//                     context current (the context, plus whatever other processes held then)
//   cublas_workspace  csrc/kernels/cuda/stream_resources.cu, per stream: the cudaMemGetInfo delta of
//                     cublasCreate plus the handle's fixed workspace (exact); subtracted when the
//                     stream's resources are released
//   stream_scratch    csrc/kernels/cuda/stream_resources.cu: the per-stream kernel scratch (exact)
//   nccl_internal     comm/communicator_nccl.cpp: the cudaMemGetInfo delta of ncclCommInitRank,
//                     subtracted at ncclCommDestroy
// A delta counts whatever else the process allocated on that GPU in between; zerotrain creates
// these objects at set-up, from one thread, so nothing else runs then.
#pragma once
#include <cstdint>

namespace zt {

enum class OutsideCategory : uint8_t { CudaContext = 0, CublasWorkspace, StreamScratch, NcclInternal, kCount };
constexpr int kNumOutsideCategories = static_cast<int>(OutsideCategory::kCount);
const char* outside_category_name(OutsideCategory c);  // "cuda_context", "cublas_workspace", ...

// Process-wide, thread-safe. Ordinals outside [0, kMaxOutsideOrdinals) are ignored (add) / read 0.
constexpr int kMaxOutsideOrdinals = 64;
void add_outside_bytes(int ordinal, OutsideCategory c, int64_t delta);
int64_t outside_bytes(int ordinal, OutsideCategory c);
// True exactly once per ordinal: the caller measures and records the context for that GPU.
bool claim_context_measurement(int ordinal);

}  // namespace zt
