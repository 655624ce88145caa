// cublas_api_cuda.cpp — cuBLAS / cuBLASLt loaded on first use (zerotrain/core/cublas_api.h).
#include "zerotrain/core/cublas_api.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <string>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

#define ZT_STR2(x) #x
#define ZT_STR(x) ZT_STR2(x)  // the macro-expanded name: cublasCreate -> "cublasCreate_v2"

// The directory libcudart was loaded from: the toolkit's library directory, where cuBLAS lives too.
std::string cudart_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&cudaGetErrorString), &info) || !info.dli_fname) return {};
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// Never closed: the handles live as long as the process (cuBLAS handles outlive any scope here).
void* open_library(const std::string& name) {
  if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const std::string first_error = dlerror();
  if (void* h = dlopen((cudart_dir() + name).c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  fatal(__FILE__, __LINE__, "dlopen(" + name + ")",
        "the CUDA backend's GEMMs need it: " + first_error + "; also tried beside libcudart in '" + cudart_dir() + "'");
}

template <typename F>
void bind(void* lib, const char* lib_name, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!fn) fatal(__FILE__, __LINE__, std::string("dlsym(") + symbol + ")", std::string(lib_name) + " has no such function");
}

CublasApi load() {
  const std::string major = std::to_string(CUBLAS_VER_MAJOR);
  const std::string blas_name = "libcublas.so." + major, lt_name = "libcublasLt.so." + major;
  void* blas = open_library(blas_name);
  void* lt = open_library(lt_name);
  CublasApi api;
#define ZT_BIND_BLAS(f) bind(blas, blas_name.c_str(), ZT_STR(f), api.f);
#define ZT_BIND_LT(f) bind(lt, lt_name.c_str(), ZT_STR(f), api.f);
  ZT_CUBLAS_FUNCTIONS(ZT_BIND_BLAS)
  ZT_CUBLASLT_FUNCTIONS(ZT_BIND_LT)
  bind(blas, blas_name.c_str(), "cublasGemmEx", api.cublasGemmEx);
  bind(blas, blas_name.c_str(), "cublasGemmStridedBatchedEx", api.cublasGemmStridedBatchedEx);
#undef ZT_BIND_BLAS
#undef ZT_BIND_LT
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();
  return api;
}

}  // namespace zt
