// cpu_stream.h — the CPU backend's stream and event (exposed so the MPI comm layer can
// run collectives on a dedicated CpuStream, and so kernels can enqueue work).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "zerotrain/core/device.h"

namespace zt {

// Completion state shared between an Event and the stream tasks that signal it.
// Invariant: completed <= recorded; record() bumps `recorded` and enqueues a task that
// raises `completed` to that value once all earlier work on the stream has run.
struct CpuEventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;
  uint64_t completed = 0;
  std::chrono::steady_clock::time_point completed_at{};
  void wait_for(uint64_t target);
};

// OpenMP threads of every CpuStream worker started from now on (0: the OpenMP default). A
// worker is a plain thread, so it does not inherit omp_set_num_threads from the main thread;
// it applies this value when it starts (app/thread_layout.cpp sets it before creating streams).
void set_cpu_stream_omp_threads(int n);
int cpu_stream_omp_threads();

class CpuStream final : public Stream {
 public:
  // omp_threads: the OpenMP threads an op on this stream may use; 0 takes cpu_stream_omp_threads()
  // (the rank's pool, for the compute stream). The comm stream passes 1: its ops (casts back
  // from the wire dtype, quantisation) run beside the compute team, and a second team on the
  // same cores makes libgomp count more threads than CPUs and stop spinning, so the compute
  // team's threads sleep and wake through the kernel at every parallel region.
  explicit CpuStream(std::string name, int omp_threads = 0);
  ~CpuStream() override;  // drains the queue, then joins the worker thread
  DeviceKind kind() const override { return DeviceKind::CPU; }
  const std::string& name() const override { return name_; }
  void wait(Event& e) override;
  void synchronize() override;
  void enqueue_host(std::function<void()> fn) override { enqueue(std::move(fn)); }
  void* native_handle() const override { return nullptr; }

  void enqueue(std::function<void()> fn);
  bool on_stream_thread() const { return std::this_thread::get_id() == worker_.get_id(); }

 private:
  void run();
  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;       // signalled on push and on task completion
  std::deque<std::function<void()>> queue_;
  uint64_t issued_ = 0, done_ = 0;   // tasks pushed / finished; guarded by mu_
  bool stop_ = false;
  std::thread worker_;
};

class CpuEvent final : public Event {
 public:
  CpuEvent() : state_(std::make_shared<CpuEventState>()) {}
  void record(Stream& s) override;
  void synchronize() override;
  bool query() override;
  float elapsed_ms_since(Event& start) override;
  bool completion_time(std::chrono::steady_clock::time_point* t) override;
  const std::shared_ptr<CpuEventState>& state() const { return state_; }

 private:
  std::shared_ptr<CpuEventState> state_;
};

// Runs fn on `s` when `s` is a CpuStream; used by CPU kernel launchers.
void cpu_enqueue(Stream& s, std::function<void()> fn);

}  // namespace zt
