// cublas_api.h — cuBLAS and cuBLASLt, loaded with dlopen on first use. A process that never runs
// a CUDA GEMM never maps them: initialising libcublasLt alone makes ~140 MiB of the process
// resident, which a CPU-backend run would otherwise carry. Every cuBLAS call goes through
// cublas_api(): `cublas_api().cublasGemmEx(...)` (the field names are the library's; cublas_v2.h's
// macros such as cublasCreate -> cublasCreate_v2 rename fields and calls alike).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace zt {

#define ZT_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate)              \
  X(cublasDestroy)             \
  X(cublasSetStream)           \
  X(cublasSetWorkspace)        \
  X(cublasSetPointerMode)      \
  X(cublasGetStatusString)

#define ZT_CUBLASLT_FUNCTIONS(X)        \
  X(cublasLtCreate)                     \
  X(cublasLtMatmul)                     \
  X(cublasLtMatmulAlgoGetHeuristic)     \
  X(cublasLtMatmulDescCreate)           \
  X(cublasLtMatmulDescDestroy)          \
  X(cublasLtMatmulDescSetAttribute)     \
  X(cublasLtMatrixLayoutCreate)         \
  X(cublasLtMatrixLayoutDestroy)        \
  X(cublasLtMatmulPreferenceCreate)     \
  X(cublasLtMatmulPreferenceDestroy)    \
  X(cublasLtMatmulPreferenceSetAttribute)

struct CublasApi {
#define ZT_CUBLAS_FIELD(f) decltype(&::f) f = nullptr;
  ZT_CUBLAS_FUNCTIONS(ZT_CUBLAS_FIELD)
  ZT_CUBLASLT_FUNCTIONS(ZT_CUBLAS_FIELD)
#undef ZT_CUBLAS_FIELD
  // Overloaded in C++ (cublas_api.h adds 64-bit-index inline overloads): the 32-bit C entry points.
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                 const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                 cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*cublasGemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void*, const void*, cudaDataType, int, long long int, const void*,
                                               cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                               long long int, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// Loads both libraries on the first call (thread-safe); a library that cannot be loaded or lacks a
// function is fatal (zt::fatal: the call, the library and dlerror()).
const CublasApi& cublas_api();

}  // namespace zt
