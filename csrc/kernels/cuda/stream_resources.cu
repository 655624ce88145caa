// stream_resources.cu — the per-stream cache behind cuda_detail::cublas_handle()
// and cuda_detail::scratch(): one cuBLAS handle with a private workspace, and one growable
// scratch buffer, per stream that runs kernels.
//
// Ownership: the cache owns every entry; an entry owns its handle and both buffers (RAII) and
// lives as long as its stream: the first entry registers a stream-release hook with core
// (set_cuda_stream_release_hook), and every CudaStream's destructor calls it before
// cudaStreamDestroy. Invariant: every cached entry's stream is alive. The cache itself
// is a process-lifetime object that is never destroyed at exit (the CUDA runtime may already be
// unloading then); release_workspaces() frees everything explicitly. What an entry holds is
// device memory outside the tracker: recorded in outside_memory.h when created or grown, taken
// back when freed.
#include <cublas_v2.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "cuda_common.cuh"
#include "zerotrain/core/outside_memory.h"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/core/cublas_api.h"

namespace zt::cuda_detail {

namespace {
// cuBLAS's recommended workspace on Hopper; with a fixed private workspace its algorithm
// choice, and so its bits, do not depend on what other streams are doing.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// Free bytes on the current device; -1 if cudaMemGetInfo fails.
int64_t free_device_bytes() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<int64_t>(free_b);
}

// Makes `dev` current for the scope, restoring the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev) {
    ZT_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != dev) ZT_CUDA_CHECK(cudaSetDevice(dev));
    dev_ = dev;
  }
  ~DeviceGuard() {
    if (prev_ != dev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0, dev_ = 0;
};
}  // namespace

struct StreamResources {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;  // bound to `stream`, created lazily
  void* cublas_workspace = nullptr;  // kCublasWorkspaceBytes, owned
  void* scratch = nullptr;           // scratch_bytes, owned
  size_t scratch_bytes = 0;
  // Recorded as outside-tracker memory (outside_memory.h) and taken back in the destructor:
  int64_t cublas_outside = 0;        // cublasCreate's cudaMemGetInfo delta + the workspace

  StreamResources(int dev, cudaStream_t s) : device(dev), stream(s) {}
  ~StreamResources() {
    // Work on `stream` may still use the buffers: drain it. The stream is alive here — entries
    // leave the cache before their stream is destroyed (the release hook) — so this waits for
    // this stream only, never for other streams' work (e.g. a collective waiting on a peer).
    // Errors are ignored (destruction must not throw).
    int prev = -1;
    cudaGetDevice(&prev);
    if (prev != device) cudaSetDevice(device);
    cudaStreamSynchronize(stream);
    if (handle) {
      cublas_api().cublasSetStream(handle, nullptr);
      cublas_api().cublasDestroy(handle);
    }
    if (cublas_workspace) cudaFree(cublas_workspace);
    if (scratch) cudaFree(scratch);
    add_outside_bytes(device, OutsideCategory::CublasWorkspace, -cublas_outside);
    add_outside_bytes(device, OutsideCategory::StreamScratch, -static_cast<int64_t>(scratch_bytes));
    if (prev >= 0 && prev != device) cudaSetDevice(prev);
  }
  StreamResources(const StreamResources&) = delete;
  StreamResources& operator=(const StreamResources&) = delete;

  size_t bytes_held() const { return (cublas_workspace ? kCublasWorkspaceBytes : 0) + scratch_bytes; }
};

namespace {
struct Cache {
  std::mutex mu;  // guards `entries` (the map), not the entries' use (see cuda_common.cuh)
  std::map<cudaStream_t, std::unique_ptr<StreamResources>> entries;  // streams are unique across devices
};
Cache& cache() {
  static Cache* c = new Cache();  // intentionally never destroyed: see the file comment
  return *c;
}
}  // namespace

namespace {
// Removes the entry of native stream `st` from the cache; it is freed by the caller.
std::unique_ptr<StreamResources> take_entry(cudaStream_t st) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.entries.find(st);
  if (it == c.entries.end()) return nullptr;
  std::unique_ptr<StreamResources> victim = std::move(it->second);
  c.entries.erase(it);
  return victim;
}

// The hook every CudaStream's destructor calls (core/device.h); must not throw.
void release_on_stream_destroy(void* native_stream) noexcept {
  try {
    take_entry(static_cast<cudaStream_t>(native_stream)).reset();  // drains the stream, frees
  } catch (...) {
  }
}
}  // namespace

StreamResources& stream_resources(Stream& s) {
  ZT_CHECK(s.kind() == DeviceKind::CUDA, "CUDA op issued on a non-CUDA stream");
  cudaStream_t st = native(s);
  static const bool hooked = (set_cuda_stream_release_hook(&release_on_stream_destroy), true);
  (void)hooked;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto& slot = c.entries[st];
  if (!slot) {  // first op on this stream: the only time its device is queried
    int dev = 0;
    ZT_CUDA_CHECK(cudaStreamGetDevice(st, &dev));
    slot = std::make_unique<StreamResources>(dev, st);
  }
  return *slot;
}

void* cublas_handle(Stream& s) {
  StreamResources& r = stream_resources(s);
  if (!r.handle) {
    DeviceGuard g(r.device);
    const int64_t free_before = free_device_bytes();
    ZT_CUBLAS_CHECK(cublas_api().cublasCreate(&r.handle));
    const int64_t free_after = free_device_bytes();
    // What cublasCreate took (0 when either figure is unknown).
    const int64_t created = free_before < 0 || free_after < 0 ? 0 : std::max<int64_t>(0, free_before - free_after);
    ZT_CUBLAS_CHECK(cublas_api().cublasSetStream(r.handle, r.stream));
    ZT_CUDA_CHECK(cudaMalloc(&r.cublas_workspace, kCublasWorkspaceBytes));
    r.cublas_outside = created + static_cast<int64_t>(kCublasWorkspaceBytes);
    add_outside_bytes(r.device, OutsideCategory::CublasWorkspace, r.cublas_outside);
    ZT_CUBLAS_CHECK(cublas_api().cublasSetWorkspace(r.handle, r.cublas_workspace, kCublasWorkspaceBytes));
    ZT_CUBLAS_CHECK(cublas_api().cublasSetPointerMode(r.handle, CUBLAS_POINTER_MODE_HOST));
  }
  return r.handle;
}

void* cublas_workspace(Stream& s, size_t* bytes) {
  cublas_handle(s);  // creates the handle and its workspace on first use
  *bytes = kCublasWorkspaceBytes;
  return stream_resources(s).cublas_workspace;
}

void* scratch(Stream& s, size_t bytes) {
  StreamResources& r = stream_resources(s);
  if (bytes > r.scratch_bytes) {
    DeviceGuard g(r.device);
    // Earlier work on this stream may still read the old buffer.
    ZT_CUDA_CHECK(cudaStreamSynchronize(r.stream));
    size_t grow = r.scratch_bytes + r.scratch_bytes / 2;
    if (r.scratch) ZT_CUDA_CHECK(cudaFree(r.scratch));
    add_outside_bytes(r.device, OutsideCategory::StreamScratch, -static_cast<int64_t>(r.scratch_bytes));
    r.scratch = nullptr;
    r.scratch_bytes = 0;
    size_t want = bytes > grow ? bytes : grow;
    want = (want + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);  // whole MiB
    ZT_CUDA_CHECK(cudaMalloc(&r.scratch, want));
    r.scratch_bytes = want;
    add_outside_bytes(r.device, OutsideCategory::StreamScratch, static_cast<int64_t>(want));
  }
  return r.scratch;
}

}  // namespace zt::cuda_detail

namespace zt::cuda_ops {

size_t workspace_bytes() {
  auto& c = cuda_detail::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  size_t total = 0;
  for (auto& kv : c.entries) total += kv.second->bytes_held();
  return total;
}

void release_stream_resources(Stream& s) {
  if (s.kind() != DeviceKind::CUDA) return;
  cuda_detail::take_entry(cuda_detail::native(s)).reset();  // destroyed outside the cache lock
}

void release_workspaces() {
  auto& c = cuda_detail::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.entries.clear();
}

}  // namespace zt::cuda_ops

namespace zt::cuda_ops {

void sync_check_after(Stream& s, const char* op) {
  cudaStream_t st = static_cast<cudaStream_t>(s.native_handle());
  cudaError_t rc = cudaStreamSynchronize(st);
  if (rc == cudaSuccess) rc = cudaGetLastError();
  if (rc != cudaSuccess)
    ::zt::fatal(__FILE__, __LINE__, std::string("ZT_CUDA_SYNC_CHECK after op `") + op + "` on stream `" + s.name() + "`",
                cudaGetErrorString(rc));
}

}  // namespace zt::cuda_ops
