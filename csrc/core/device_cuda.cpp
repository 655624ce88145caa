// device_cuda.cpp — CUDA backend of the device interface: cudaMalloc (never managed memory),
// cudaHostAlloc for pinned staging, cudaStream_t / cudaEvent_t.
#include <atomic>
#include <cstdio>
#include <memory>

#include "zerotrain/core/check_cuda.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/memory_pool.h"
#include "zerotrain/core/outside_memory.h"

namespace zt {

const char* cublas_status_text(cublasStatus_t s) { return cublasGetStatusString(s); }

std::string bytes_text(size_t bytes) {
  char buf[64];
  if (bytes >= (size_t(1) << 30)) std::snprintf(buf, sizeof(buf), "%.2f GiB (%zu B)", bytes / 1073741824.0, bytes);
  else std::snprintf(buf, sizeof(buf), "%.2f MiB (%zu B)", bytes / 1048576.0, bytes);
  return buf;
}

std::string cuda_oom_message(size_t requested, MemCategory c, size_t free_bytes, size_t total_bytes,
                             size_t tracked_bytes, const std::string& device) {
  std::string msg = "out of device memory on " + device + ": requested " + bytes_text(requested) + " for " +
                    mem_category_name(c) + "; ";
  if (total_bytes > 0) msg += "device has " + bytes_text(free_bytes) + " free of " + bytes_text(total_bytes);
  else msg += "free/total device memory unknown (cudaMemGetInfo failed)";
  return msg + "; zerotrain holds " + bytes_text(tracked_bytes) +
         " in tracked device buffers (a higher ZeRO stage or a smaller micro-batch needs less)";
}

namespace {

std::atomic<CudaStreamReleaseHook> g_stream_release_hook{nullptr};

// Makes `ordinal` the calling thread's current device for a scope (allocation may run on any
// thread, and cudaMalloc / cudaMemsetAsync act on the current device).
class CurrentDevice {
 public:
  explicit CurrentDevice(int ordinal) {
    ZT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != ordinal) ZT_CUDA_CHECK(cudaSetDevice(ordinal));
    else previous_ = -1;
  }
  ~CurrentDevice() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = -1;  // -1: nothing to restore
};

class CudaStream final : public Stream {
 public:
  CudaStream(int ordinal, std::string name) : name_(std::move(name)), ordinal_(ordinal) {
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaStream() override {
    cudaStreamSynchronize(stream_);
    if (CudaStreamReleaseHook hook = g_stream_release_hook.load()) hook(stream_);
    cudaStreamDestroy(stream_);
  }
  DeviceKind kind() const override { return DeviceKind::CUDA; }
  const std::string& name() const override { return name_; }
  void wait(Event& e) override;
  void synchronize() override { ZT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void enqueue_host(std::function<void()> fn) override {
    auto* heap = new std::function<void()>(std::move(fn));
    ZT_CUDA_CHECK(cudaLaunchHostFunc(
        stream_,
        [](void* arg) {
          std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(arg));
          (*f)();
        },
        heap));
  }
  void* native_handle() const override { return stream_; }

 private:
  std::string name_;
  int ordinal_;
  cudaStream_t stream_ = nullptr;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(bool timing) {
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void record(Stream& s) override {
    ZT_CUDA_CHECK(cudaEventRecord(event_, static_cast<cudaStream_t>(s.native_handle())));
  }
  void synchronize() override { ZT_CUDA_CHECK(cudaEventSynchronize(event_)); }
  bool query() override {
    cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    ZT_CUDA_CHECK(rc);
    return true;
  }
  float elapsed_ms_since(Event& start) override {
    auto* s = dynamic_cast<CudaEvent*>(&start);
    ZT_CHECK(s != nullptr, "elapsed_ms_since needs two CUDA events");
    float ms = 0;
    ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, s->event_, event_));
    return ms;
  }
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

void CudaStream::wait(Event& e) {
  auto* ce = dynamic_cast<CudaEvent*>(&e);
  ZT_CHECK(ce != nullptr, "CudaStream::wait needs a CUDA event");
  ZT_CUDA_CHECK(cudaStreamWaitEvent(stream_, ce->handle(), 0));
}

cudaMemcpyKind to_cuda(CopyKind k) {
  switch (k) {
    case CopyKind::HostToDevice: return cudaMemcpyHostToDevice;
    case CopyKind::DeviceToHost: return cudaMemcpyDeviceToHost;
    case CopyKind::DeviceToDevice: return cudaMemcpyDeviceToDevice;
    case CopyKind::HostToHost: return cudaMemcpyHostToHost;
  }
  return cudaMemcpyDefault;
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    ZT_CUDA_CHECK(cudaSetDevice(ordinal_));
    ZT_CUDA_CHECK(cudaFree(nullptr));  // the primary context exists from here on
    if (claim_context_measurement(ordinal_)) {
      // Once per process and GPU: what is in use right after the context came up, before
      // zerotrain allocates anything on it (outside_memory.h).
      size_t free_b = 0, total_b = 0;
      ZT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      add_outside_bytes(ordinal_, OutsideCategory::CudaContext, static_cast<int64_t>(total_b - free_b));
    }
    ZT_CUDA_CHECK(cudaGetDeviceProperties(&props_, ordinal_));
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&zero_stream_, cudaStreamNonBlocking));
  }
  ~CudaDevice() override {
    cudaStreamSynchronize(zero_stream_);
    cudaStreamDestroy(zero_stream_);
  }
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  DeviceKind kind() const override { return DeviceKind::CUDA; }
  int ordinal() const override { return ordinal_; }
  std::string description() const override {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "cuda:%d (%s, %.1f GiB)", ordinal_, props_.name,
                  props_.totalGlobalMem / 1073741824.0);
    return buf;
  }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CudaStream>(ordinal_, name);
  }
  std::unique_ptr<Event> create_event(bool timing) override { return std::make_unique<CudaEvent>(timing); }
  void memcpy_async(void* dst, const void* src, size_t bytes, CopyKind k, Stream& s) override {
    if (bytes == 0) return;
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, to_cuda(k), static_cast<cudaStream_t>(s.native_handle())));
  }
  void memset_async(void* dst, int value, size_t bytes, Stream& s) override {
    if (bytes == 0) return;
    ZT_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(s.native_handle())));
  }
  void synchronize() override { ZT_CUDA_CHECK(cudaDeviceSynchronize()); }
  MemoryPool& pool() override { return pool_; }

  std::vector<OutsideTrackerMemory> outside_tracker_memory() const override {
    static const char* kHow[kNumOutsideCategories] = {
        "cudaMemGetInfo total - free when this process's first zerotrain device on the GPU came up "
        "(the CUDA context, plus any other process's memory then)",
        "cudaMemGetInfo delta of each cublasCreate + its fixed workspace (exact)",
        "per-stream kernel scratch (exact)",
        "cudaMemGetInfo delta of ncclCommInitRank"};
    std::vector<OutsideTrackerMemory> out;
    for (int i = 0; i < kNumOutsideCategories; ++i) {
      const OutsideCategory c = static_cast<OutsideCategory>(i);
      out.push_back({outside_category_name(c), outside_bytes(ordinal_, c), kHow[i]});
    }
    return out;
  }
  int64_t device_used_bytes() const override {
    CurrentDevice on(ordinal_);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<int64_t>(total_b - free_b);
  }

 protected:
  void* raw_try_alloc(size_t bytes) override {
    CurrentDevice on(ordinal_);
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky; cleared for the caller's retry
      return nullptr;
    }
    ZT_CUDA_CHECK(rc);
    return p;
  }
  void* raw_alloc(size_t bytes, MemCategory c) override {
    CurrentDevice on(ordinal_);
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, bytes);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky; cleared so cudaMemGetInfo reports cleanly
      size_t free_b = 0, total_b = 0;
      if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) free_b = total_b = 0;
      ::zt::fatal(__FILE__, __LINE__, "cudaMalloc(&p, bytes)",
                  cuda_oom_message(bytes, c, free_b, total_b, tracker_.current_total(), description()));
    }
    ZT_CUDA_CHECK(rc);
    return p;
  }
  void raw_free(void* p) override { cudaFree(p); }
  void* raw_alloc_pinned(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t rc = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ::zt::fatal(__FILE__, __LINE__, "cudaHostAlloc(&p, bytes, cudaHostAllocDefault)",
                  "out of page-locked host memory: requested " + bytes_text(bytes) + " for " +
                      mem_category_name(MemCategory::PinnedHost) + "; zerotrain holds " +
                      bytes_text(tracker_.current(MemCategory::PinnedHost)) + " pinned already");
    }
    ZT_CUDA_CHECK(rc);
    return p;
  }
  void raw_free_pinned(void* p) override { cudaFreeHost(p); }
  // Zero-fill at allocation. Plain cudaMemset would run on the legacy default stream and return
  // before it completes, and nothing orders the legacy stream before zerotrain's streams (all
  // non-blocking): work issued next on another stream could read the old contents, or have its
  // writes wiped. So: the device's own stream, then wait for it (set-up time, never a hot path).
  void raw_memset_sync(void* p, int v, size_t bytes) override {
    CurrentDevice on(ordinal_);
    ZT_CUDA_CHECK(cudaMemsetAsync(p, v, bytes, zero_stream_));
    ZT_CUDA_CHECK(cudaStreamSynchronize(zero_stream_));
  }

 private:
  int ordinal_;
  cudaDeviceProp props_{};
  cudaStream_t zero_stream_ = nullptr;  // non-blocking; zero-fills of new allocations only
  MemoryPool pool_{*this};  // last member: destroyed first, while cudaFree still reaches this device
};

}  // namespace

bool cuda_backend_built() { return true; }

void set_cuda_stream_release_hook(CudaStreamReleaseHook hook) { g_stream_release_hook.store(hook); }

int cuda_device_count() {
  int n = 0;
  // No driver reports an error here, not 0: any error means "no GPU".
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Device> make_cuda_device(int ordinal) {
  int n = cuda_device_count();
  if (n == 0) throw InputError("no CUDA GPU is available on " + process_info().host);
  if (ordinal < 0 || ordinal >= n)
    throw InputError("CUDA device " + std::to_string(ordinal) + " requested but only " + std::to_string(n) + " visible");
  return std::make_unique<CudaDevice>(ordinal);
}

}  // namespace zt
