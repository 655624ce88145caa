// device_cuda.cpp — CUDA backend of the device interface: cudaMalloc (never managed memory),
// cudaHostAlloc for pinned staging, cudaStream_t / cudaEvent_t.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "zerotrain/core/check_cuda.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/memory_pool.h"
#include "zerotrain/core/outside_memory.h"
#include "zerotrain/core/cublas_api.h"

namespace zt {

const char* cublas_status_text(cublasStatus_t s) { return cublas_api().cublasGetStatusString(s); }

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

// Captures in progress (begun by CudaDevice::begin_capture, not yet ended), by capture id.
std::mutex g_captures_mu;
std::set<unsigned long long> g_active_captures;
bool capture_active(unsigned long long id) {
  std::lock_guard<std::mutex> lock(g_captures_mu);
  return g_active_captures.count(id) > 0;
}
void set_capture_active(unsigned long long id, bool active) {
  std::lock_guard<std::mutex> lock(g_captures_mu);
  if (active) g_active_captures.insert(id);
  else g_active_captures.erase(id);
}

// The capture sequence `s` is recording (0 when it is not capturing).
unsigned long long capture_id(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  ZT_CUDA_CHECK(cudaStreamGetCaptureInfo(s, &status, &id));
  return status == cudaStreamCaptureStatusActive ? id : 0;
}

// As capture_id, never throwing (an invalidated capture still reports its id).
unsigned long long capture_id_or_zero(cudaStream_t s) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(s, &status, &id) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return status == cudaStreamCaptureStatusNone ? 0 : id;
}

// A captured graph and its instantiation (device.h StreamGraph); owns both handles.
class CudaGraph final : public StreamGraph {
 public:
  explicit CudaGraph(cudaGraph_t g) : graph_(g) {
    ZT_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    size_t n = 0;
    ZT_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
    nodes_ = static_cast<int64_t>(n);
  }
  ~CudaGraph() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  void launch(Stream& s) override {
    ZT_CUDA_CHECK(cudaGraphLaunch(exec_, static_cast<cudaStream_t>(s.native_handle())));
  }
  int64_t nodes() const override { return nodes_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  int64_t nodes_ = 0;
};

// Owns a cudaGraph_t until CudaGraph takes it (so a failed instantiation still destroys it).
struct GraphHandle {
  cudaGraph_t g = nullptr;
  ~GraphHandle() {
    if (g) cudaGraphDestroy(g);
  }
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
    const auto stream = static_cast<cudaStream_t>(s.native_handle());
    ZT_CUDA_CHECK(cudaEventRecord(event_, stream));
    capture_ = capture_id(stream);
  }
  void synchronize() override {
    check_not_captured("synchronize");
    ZT_CUDA_CHECK(cudaEventSynchronize(event_));
  }
  bool query() override {
    check_not_captured("query");
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
  unsigned long long capture() const { return capture_; }

 private:
  // The host cannot wait for a capture-time record: it marks no work that will ever run.
  void check_not_captured(const char* what) const {
    ZT_CHECK(capture_ == 0, std::string("Event::") + what + " on an event last recorded inside a stream capture (CUDA "
                            "graph): the host cannot wait for it; record it outside the captured region");
  }
  cudaEvent_t event_ = nullptr;
  unsigned long long capture_ = 0;  // capture id of the stream at the last record (0: not capturing)
};

// Capture-aware (device.h, StreamGraph). A real wait when both sides are outside any capture,
// inside the same one, or when this stream is outside and the event's capture is still in
// progress (the fork: this stream joins that capture). Otherwise the wait would cross a
// capture's boundary and is skipped: inside a capture, an event recorded outside it is work the
// graph's launcher orders before the launch; outside, an event last recorded by an ended
// capture never fires by itself, and the launcher orders the launch before any later work.
void CudaStream::wait(Event& e) {
  auto* ce = dynamic_cast<CudaEvent*>(&e);
  ZT_CHECK(ce != nullptr, "CudaStream::wait needs a CUDA event");
  const unsigned long long mine = capture_id(stream_), theirs = ce->capture();
  const bool joins = mine == 0 && theirs != 0 && capture_active(theirs);
  if (theirs != mine && !joins) return;
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

  bool supports_graphs() const override { return true; }
  // Thread-local mode: an unsafe call (cudaMalloc, a sync) on this thread invalidates the capture;
  // other threads (the NCCL watchdog's event polls) are not affected.
  void begin_capture(Stream& s) override {
    CurrentDevice on(ordinal_);
    const auto stream = static_cast<cudaStream_t>(s.native_handle());
    ZT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    set_capture_active(capture_id(stream), true);
  }
  std::unique_ptr<StreamGraph> end_capture(Stream& s) override {
    CurrentDevice on(ordinal_);
    GraphHandle h;
    const auto stream = static_cast<cudaStream_t>(s.native_handle());
    set_capture_active(capture_id_or_zero(stream), false);
    const cudaError_t rc = cudaStreamEndCapture(stream, &h.g);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error(std::string("CUDA graph capture on stream '") + s.name() + "' failed: " +
                               cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) +
                               "): the captured region made an allocation, a host sync or a dependency outside the "
                               "capture");
    }
    ZT_CHECK(h.g != nullptr, "cudaStreamEndCapture returned no graph for stream '" + s.name() + "'");
    auto g = std::make_unique<CudaGraph>(h.g);
    h.g = nullptr;  // owned by g now
    return g;
  }
  void abort_capture(Stream& s) noexcept override {
    set_capture_active(capture_id_or_zero(static_cast<cudaStream_t>(s.native_handle())), false);
    cudaGraph_t g = nullptr;
    if (capture_status(s) != cudaStreamCaptureStatusNone &&
        cudaStreamEndCapture(static_cast<cudaStream_t>(s.native_handle()), &g) == cudaSuccess && g)
      cudaGraphDestroy(g);
    cudaGetLastError();
  }

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
  static cudaStreamCaptureStatus capture_status(Stream& s) noexcept {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(static_cast<cudaStream_t>(s.native_handle()), &st) != cudaSuccess) cudaGetLastError();
    return st;
  }
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
