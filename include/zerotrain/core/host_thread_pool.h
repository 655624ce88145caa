// host_thread_pool.h — a fixed set of host worker threads for data-parallel loops (the host
// optimizer of ZeRO-Offload runs on it), and the default thread count.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zt::cpu {

// parallel_for splits [0, n) into parts = clamp(ceil(n / grain), 1, size()) contiguous ranges,
// part k = [k·n/parts, (k+1)·n/parts) (a function of n, grain and size() only), runs part 0 on
// the calling thread and part k on worker k, and returns when all are done. The first exception
// thrown by fn is rethrown in the caller. Calls from different threads are serialised; a call
// from inside fn on the same pool runs fn(0, n) inline. The destructor joins the workers.
class HostThreadPool {
 public:
  explicit HostThreadPool(int threads);  // threads >= 1 (the caller counts as one)
  ~HostThreadPool();
  HostThreadPool(const HostThreadPool&) = delete;
  HostThreadPool& operator=(const HostThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

 private:
  void worker_loop(int index);
  void run_part(int part);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;       // guards everything below
  std::condition_variable wake_, done_cv_;
  uint64_t generation_ = 0;  // bumped per job; workers run a job once
  int parts_ = 0;            // parts of the current job
  int pending_ = 0;          // worker parts of the current job not yet finished
  bool stop_ = false;
  int64_t n_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  std::exception_ptr error_;
};

// OMP_NUM_THREADS when set to a positive integer (a list "4,2" uses its first entry), else the
// number of CPUs in this process's affinity mask (at least 1).
int default_host_threads();

}  // namespace zt::cpu
