// device_cpu.cpp — CPU backend of the device interface: aligned host memory, streams served by
// one worker thread each, events as completion counters.
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "zerotrain/core/cpu_stream.h"
#include "zerotrain/core/memory_pool.h"

namespace zt {

void CpuEventState::wait_for(uint64_t target) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return completed >= target; });
}

namespace {
std::atomic<int> g_stream_omp_threads{0};
}  // namespace

void set_cpu_stream_omp_threads(int n) { g_stream_omp_threads = n; }
int cpu_stream_omp_threads() { return g_stream_omp_threads; }

CpuStream::CpuStream(std::string name, int omp_threads) : name_(std::move(name)) {
  if (omp_threads <= 0) omp_threads = cpu_stream_omp_threads();
  worker_ = std::thread([this, omp_threads] {
    if (omp_threads > 0) omp_set_num_threads(omp_threads);
    run();
  });
}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void CpuStream::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    ++issued_;
  }
  cv_.notify_all();
}

void CpuStream::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and fully drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
    }
    cv_.notify_all();
  }
}

void CpuStream::wait(Event& e) {
  auto* ce = dynamic_cast<CpuEvent*>(&e);
  ZT_CHECK(ce != nullptr, "CpuStream::wait needs a CPU event");
  std::shared_ptr<CpuEventState> st = ce->state();
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    target = st->recorded;  // work recorded so far; later records do not extend this wait
  }
  if (target == 0) return;
  enqueue([st, target] { st->wait_for(target); });
}

void CpuStream::synchronize() {
  ZT_CHECK(!on_stream_thread(), "a stream cannot synchronize itself from its own thread");
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t target = issued_;
  cv_.wait(lock, [&] { return done_ >= target; });
}

void CpuEvent::record(Stream& s) {
  auto* cs = dynamic_cast<CpuStream*>(&s);
  ZT_CHECK(cs != nullptr, "CpuEvent::record needs a CPU stream");
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    target = ++state_->recorded;
  }
  std::shared_ptr<CpuEventState> st = state_;
  cs->enqueue([st, target] {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->completed < target) {
        st->completed = target;
        st->completed_at = std::chrono::steady_clock::now();
      }
    }
    st->cv.notify_all();
  });
}

void CpuEvent::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    target = state_->recorded;
  }
  state_->wait_for(target);
}

bool CpuEvent::query() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->completed >= state_->recorded;
}

float CpuEvent::elapsed_ms_since(Event& start) {
  auto* s = dynamic_cast<CpuEvent*>(&start);
  ZT_CHECK(s != nullptr, "elapsed_ms_since needs two CPU events");
  synchronize();
  s->synchronize();
  std::chrono::steady_clock::time_point a, b;
  {
    std::lock_guard<std::mutex> lock(s->state_->mu);
    a = s->state_->completed_at;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    b = state_->completed_at;
  }
  return std::chrono::duration<float, std::milli>(b - a).count();
}

bool CpuEvent::completion_time(std::chrono::steady_clock::time_point* t) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->recorded == 0 || state_->completed < state_->recorded) return false;
  *t = state_->completed_at;
  return true;
}

void cpu_enqueue(Stream& s, std::function<void()> fn) {
  auto* cs = dynamic_cast<CpuStream*>(&s);
  ZT_CHECK(cs != nullptr, "a CPU kernel was launched on stream '" + s.name() + "', which is not a CPU stream");
  cs->enqueue(std::move(fn));
}

namespace {

class CpuDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::CPU; }
  int ordinal() const override { return 0; }
  std::string description() const override { return "cpu"; }
  std::unique_ptr<Stream> create_stream(const std::string& name) override {
    return std::make_unique<CpuStream>(name);
  }
  std::unique_ptr<Event> create_event(bool) override { return std::make_unique<CpuEvent>(); }
  void memcpy_async(void* dst, const void* src, size_t bytes, CopyKind, Stream& s) override {
    if (bytes == 0) return;
    cpu_enqueue(s, [=] { std::memcpy(dst, src, bytes); });
  }
  void memset_async(void* dst, int value, size_t bytes, Stream& s) override {
    if (bytes == 0) return;
    cpu_enqueue(s, [=] { std::memset(dst, value, bytes); });
  }
  void synchronize() override {}  // streams are synchronised individually on the CPU backend
  MemoryPool& pool() override { return pool_; }
  // outside_tracker_memory(), device_used_bytes(): the defaults (none, -1): no CUDA context,
  // cuBLAS or NCCL here, and host memory has no per-device "used" figure.

 protected:
  void* raw_alloc(size_t bytes, MemCategory c) override {
    void* p = raw_try_alloc(bytes);
    ZT_CHECK(p != nullptr, "host allocation of " + std::to_string(bytes) + " bytes for " + mem_category_name(c));
    return p;
  }
  void* raw_try_alloc(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void raw_free(void* p) override { std::free(p); }
  void* raw_alloc_pinned(size_t bytes) override { return raw_alloc(bytes, MemCategory::PinnedHost); }
  void raw_free_pinned(void* p) override { std::free(p); }
  void raw_memset_sync(void* p, int v, size_t bytes) override { std::memset(p, v, bytes); }

 private:
  MemoryPool pool_{*this};  // last member: destroyed first, while raw_free still reaches this device
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

#if !defined(ZT_WITH_CUDA)
bool cuda_backend_built() { return false; }
int cuda_device_count() { return 0; }
void set_cuda_stream_release_hook(CudaStreamReleaseHook) {}  // no CUDA streams to release
std::unique_ptr<Device> make_cuda_device(int) {
  throw InputError("this zerotrain was built without the CUDA backend (configure with the CUDA toolkit present)");
}
#endif

}  // namespace zt
