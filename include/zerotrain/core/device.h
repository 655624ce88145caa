// device.h — the device interface: allocation, copies, streams and events.
//
// Semantics are CUDA's on both backends, so the engine is written once:
//  * a Stream runs its work in issue order, asynchronously to the host;
//  * Event::record(stream) marks "all work issued on stream so far"; Stream::wait(event) makes
//    later work on that stream wait for it; waiting on a never-recorded event is a no-op;
//  * Event::synchronize() blocks the host until the recorded work is done.
// CPU backend: each Stream is an ordered work queue served by its own thread; an Event is a
// completion counter + condition variable. CUDA backend: cudaStream_t / cudaEvent_t.
#pragma once
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/core/allocator.h"
#include "zerotrain/core/tensor.h"

namespace zt {

class Stream;
class MemoryPool;

// Device memory held outside the tracker (allocated by libraries or the driver, not by
// Device::alloc), as measured by the backend. CUDA: "cuda_context", "cublas_workspace",
// "stream_scratch", "nccl_internal" (outside_memory.h); the CPU backend has none.
struct OutsideTrackerMemory {
  std::string category;
  int64_t bytes = 0;
  std::string measured_by;  // how the bytes were obtained (an API, or a cudaMemGetInfo delta)
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& s) = 0;
  virtual void synchronize() = 0;   // host waits for the work captured by the last record()
  virtual bool query() = 0;         // true when that work is done (or nothing was recorded)
  // Milliseconds between two recorded events (both must be complete).
  virtual float elapsed_ms_since(Event& start) = 0;
  // Where the backend stamps completions on the host (CPU: the stream worker, on the process's
  // steady clock, shared by every stream): the completion time of the last recorded work, once
  // complete. false where it does not (CUDA: relate events with elapsed_ms_since instead).
  virtual bool completion_time(std::chrono::steady_clock::time_point* t) { return false; }
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual DeviceKind kind() const = 0;
  virtual const std::string& name() const = 0;
  // Later work on this stream waits until the event's recorded work is complete.
  virtual void wait(Event& e) = 0;
  // Host blocks until all work issued so far has run.
  virtual void synchronize() = 0;
  // Run fn on the stream, in order. CPU: on the stream's thread. CUDA: as a host callback
  // (fn must not call CUDA); used for host-side bookkeeping, not for compute.
  virtual void enqueue_host(std::function<void()> fn) = 0;
  // Native handle: cudaStream_t for CUDA, nullptr for CPU.
  virtual void* native_handle() const = 0;
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost };

// A captured, instantiated stream graph (CUDA: cudaGraph_t + cudaGraphExec_t, both owned and
// destroyed with it). launch(s) replays the captured work on `s`, in order with s's other work.
// Capture rules (Device::begin_capture): while a stream is capturing, its work is recorded, not
// run; Event::record on it records a capture-time dependency only; Stream::wait on an event
// recorded outside this capture is skipped — the caller orders that work before the launch
// (zero/step_graph.h's joins) — and after the capture, waits on events recorded inside it are
// skipped too, because the launch is ordered after them by the same joins.
class StreamGraph {
 public:
  virtual ~StreamGraph() = default;
  virtual void launch(Stream& s) = 0;
  virtual int64_t nodes() const = 0;  // graph nodes captured (kernels, copies, memsets, NCCL, ...)
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  virtual int ordinal() const = 0;
  virtual std::string description() const = 0;   // "cpu" / "cuda:0 (NVIDIA H200, 139.8 GiB)"

  // Tracked allocations. Device memory (zero-filled on request) and page-locked host memory.
  DeviceBuffer alloc(size_t bytes, MemCategory c, bool zero = false);
  DeviceBuffer alloc_pinned_host(size_t bytes);
  // Host memory in category c: page-locked (cudaHostAlloc on CUDA) or pageable (aligned_alloc).
  // On the CPU backend both are plain host memory, tracked apart from "device" categories.
  DeviceBuffer alloc_host(size_t bytes, MemCategory c, bool pinned, bool zero = true);
  MemoryTracker& tracker() { return tracker_; }
  const MemoryTracker& tracker() const { return tracker_; }
  // The caching pool every per-step / transient device allocation comes from (memory_pool.h).
  // Owned by the device; blocks reach the device's memory only through it.
  virtual MemoryPool& pool() = 0;

  // What the memory report shows beside the tracker: bytes outside it, and the whole device's
  // bytes in use now (CUDA: cudaMemGetInfo total - free; -1 where there is no such figure: CPU).
  virtual std::vector<OutsideTrackerMemory> outside_tracker_memory() const { return {}; }
  virtual int64_t device_used_bytes() const { return -1; }

  virtual std::unique_ptr<Stream> create_stream(const std::string& name) = 0;
  virtual std::unique_ptr<Event> create_event(bool timing = false) = 0;

  // Asynchronous on `s` (CPU: runs on the stream's thread, in order).
  virtual void memcpy_async(void* dst, const void* src, size_t bytes, CopyKind k, Stream& s) = 0;
  virtual void memset_async(void* dst, int value, size_t bytes, Stream& s) = 0;
  virtual void synchronize() = 0;  // whole device; never in a hot path

  // Stream capture (CUDA only; the CPU backend has no graphs: false / InputError). Capture is
  // thread-local: only this thread's calls are recorded and checked. end_capture ends the
  // capture begun on `s` (also after a failure inside it) and instantiates the graph; a capture
  // that CUDA invalidated (an allocation, a host sync, a cross-capture dependency) fails here
  // with CUDA's reason.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture(Stream& s);
  virtual std::unique_ptr<StreamGraph> end_capture(Stream& s);
  // Ends a capture begun on `s` and discards it (error paths; never throws).
  virtual void abort_capture(Stream& s) noexcept {}

 protected:
  friend class DeviceBuffer;
  friend class MemoryPool;
  virtual void* raw_alloc(size_t bytes, MemCategory c) = 0;  // c: for the out-of-memory message
  virtual void* raw_try_alloc(size_t bytes) = 0;             // nullptr when the device is out of memory
  virtual void raw_free(void* p) = 0;
  virtual void* raw_alloc_pinned(size_t bytes) = 0;
  virtual void raw_free_pinned(void* p) = 0;
  virtual void raw_memset_sync(void* p, int v, size_t bytes) = 0;
  MemoryTracker tracker_;
};

std::unique_ptr<Device> make_cpu_device();
// CUDA device `ordinal`. Fails with InputError if the CUDA backend is not built or no GPU exists.
std::unique_ptr<Device> make_cuda_device(int ordinal);
bool cuda_backend_built();
int cuda_device_count();  // 0 when there is no driver, no GPU, or no CUDA backend (never fails)

// Layers above core that cache resources per CUDA stream (csrc/kernels/cuda/stream_resources.cu: a cuBLAS
// handle, its workspace, scratch) register one hook; every CUDA stream calls it from its
// destructor, after draining and before cudaStreamDestroy, so those resources die with the
// stream. The hook must not throw. Registering again replaces the hook.
using CudaStreamReleaseHook = void (*)(void* native_stream);
void set_cuda_stream_release_hook(CudaStreamReleaseHook hook);

}  // namespace zt
