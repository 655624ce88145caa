// host_thread_pool.cpp — the host thread pool and the default host thread count.
#include "zerotrain/core/host_thread_pool.h"

#include <sched.h>

#include <cstdlib>
#include <string>

#include "zerotrain/core/check.h"

namespace zt::cpu {

namespace {

// Set for the duration of a part run by a pool's thread (caller or worker): nested calls on the
// same pool run inline instead of deadlocking.
thread_local const HostThreadPool* tls_running_pool = nullptr;

}  // namespace

int default_host_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && (*end == '\0' || *end == ',') && n > 0 && n <= 1 << 16) return static_cast<int>(n);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

HostThreadPool::HostThreadPool(int threads) {
  ZT_CHECK(threads >= 1, "HostThreadPool: threads must be >= 1, got " + std::to_string(threads));
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int k = 1; k < threads; ++k) workers_.emplace_back([this, k] { worker_loop(k); });
}

HostThreadPool::~HostThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

// Part k of the current job; records the first exception.
void HostThreadPool::run_part(int part) {
  const int64_t begin = n_ * part / parts_, end = n_ * (part + 1) / parts_;
  const HostThreadPool* outer = tls_running_pool;
  tls_running_pool = this;
  try {
    if (begin < end) (*fn_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!error_) error_ = std::current_exception();
  }
  tls_running_pool = outer;
}

void HostThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= parts_) continue;  // this job has fewer parts than threads
    }
    run_part(index);
    std::lock_guard<std::mutex> lk(mu_);
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

void HostThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (tls_running_pool == this) {  // nested call from inside fn
    fn(0, n);
    return;
  }
  grain = grain < 1 ? 1 : grain;
  const int64_t wanted = (n + grain - 1) / grain;
  const int parts = static_cast<int>(wanted < size() ? wanted : size());
  std::lock_guard<std::mutex> call(call_mu_);
  if (parts == 1) {
    tls_running_pool = this;
    try {
      fn(0, n);
    } catch (...) {
      tls_running_pool = nullptr;
      throw;
    }
    tls_running_pool = nullptr;
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    n_ = n;
    parts_ = parts;
    fn_ = &fn;
    pending_ = parts - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  run_part(0);
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    fn_ = nullptr;
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace zt::cpu
