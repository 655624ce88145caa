// cuBLAS and cuBLASLt are loaded on first use (zerotrain/core/cublas_api.h): loading needs no GPU,
// so this runs everywhere the CUDA backend is built. Every function the backend calls resolves,
// and a call that needs no device answers.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "zerotrain/core/cublas_api.h"

namespace {

bool mapped(const char* library) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(library) != std::string::npos) return true;
  return false;
}

TEST(CublasApi, LoadsOnFirstUseOnly) {
  EXPECT_FALSE(mapped("libcublasLt")) << "linked or loaded before anything asked for a GEMM";
  const zt::CublasApi& api = zt::cublas_api();
  EXPECT_TRUE(mapped("libcublasLt"));
  EXPECT_TRUE(mapped("libcublas.so"));
#define ZT_EXPECT_BOUND(f) EXPECT_NE(api.f, nullptr) << #f;
  ZT_CUBLAS_FUNCTIONS(ZT_EXPECT_BOUND)
  ZT_CUBLASLT_FUNCTIONS(ZT_EXPECT_BOUND)
#undef ZT_EXPECT_BOUND
  EXPECT_NE(api.cublasGemmEx, nullptr);
  EXPECT_NE(api.cublasGemmStridedBatchedEx, nullptr);
  EXPECT_GT(std::strlen(api.cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)), 0u);
  EXPECT_STRNE(api.cublasGetStatusString(CUBLAS_STATUS_SUCCESS), api.cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED));
  EXPECT_EQ(&zt::cublas_api(), &api);  // loaded once
}

}  // namespace
