// check_cuda.h — CUDA, cuBLAS and NCCL members of the check-macro family (see check.h).
// Include only from .cu files and *_cuda.cpp / *_nccl.cpp host files.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "zerotrain/core/check.h"

#include <cstddef>
#include <string>

#include "zerotrain/core/allocator.h"

namespace zt {
const char* cublas_status_text(cublasStatus_t s);

// "1.50 GiB (1610612736 B)" / "12.00 MiB (12582912 B)".
std::string bytes_text(size_t bytes);
// The out-of-memory line of the CUDA allocator: requested bytes, memory category, free/total
// device memory (cudaMemGetInfo; total 0 = unknown) and what zerotrain's tracker holds.
std::string cuda_oom_message(size_t requested, MemCategory c, size_t free_bytes, size_t total_bytes,
                             size_t tracked_bytes, const std::string& device);
}

#define ZT_CUDA_CHECK(call)                                                                  \
  do {                                                                                       \
    cudaError_t zt_cuda_rc_ = (call);                                                        \
    if (zt_cuda_rc_ != cudaSuccess)                                                          \
      ::zt::fatal(__FILE__, __LINE__, #call, cudaGetErrorString(zt_cuda_rc_));               \
  } while (0)

#define ZT_CUBLAS_CHECK(call)                                                                \
  do {                                                                                       \
    cublasStatus_t zt_cublas_rc_ = (call);                                                   \
    if (zt_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                              \
      ::zt::fatal(__FILE__, __LINE__, #call, ::zt::cublas_status_text(zt_cublas_rc_));       \
  } while (0)

#define ZT_NCCL_CHECK(call)                                                                  \
  do {                                                                                       \
    ncclResult_t zt_nccl_rc_ = (call);                                                       \
    if (zt_nccl_rc_ != ncclSuccess && zt_nccl_rc_ != ncclInProgress) {                       \
      const char* zt_last_ = ncclGetLastError(nullptr);                                      \
      ::zt::fatal(__FILE__, __LINE__, #call,                                                 \
                  std::string(ncclGetErrorString(zt_nccl_rc_)) + (zt_last_ && *zt_last_ ? std::string(" (") + zt_last_ + ")" : "")); \
    }                                                                                        \
  } while (0)
