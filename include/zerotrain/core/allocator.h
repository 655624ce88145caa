// allocator.h — memory categories, the tracking allocator's accounting, and the RAII buffer.
//
// Every byte zerotrain allocates goes through Device::alloc with a category, so the memory
// report can put measured bytes beside the ZeRO prediction, category by category.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "zerotrain/core/tensor.h"

namespace zt {

enum class MemCategory : uint8_t {
  Params = 0,     // compute-dtype parameters (full, shard, or gathered-unit storage)
  Grads,          // gradient storage (full, shard accumulator)
  Master,         // fp32 (or bf16) master weights
  OptimMoments,   // Adam m and v
  Buckets,        // reduce-scatter / all-reduce bucket buffers
  Gather,         // stage-3 all-gather buffers
  Activations,
  Workspace,
  PinnedHost,     // page-locked host staging
  Communicator,   // communicator-internal buffers
  HostMaster,     // offloaded master weights (host memory, pinned or pageable)
  HostMoments,    // offloaded optimizer moments (host)
  HostGrads,      // offloaded gradient shard: reduced slices accumulate here (host)
  HostParams,     // offloaded stage-3 parameter shard (host)
  HostStaging,    // host staging for offload copies
  HostActivations,  // kept block inputs in host memory (activation_checkpointing.cpu_checkpointing)
  kCount
};
constexpr int kNumMemCategories = static_cast<int>(MemCategory::kCount);
const char* mem_category_name(MemCategory c);  // "params", "grads", ..., "communicator"

// Per category: bytes in use (current, and its peak) and bytes reserved, plus the totals. Thread-safe.
// In use: what allocations asked for. Reserved: the memory held for them. A direct allocation
// (Device::alloc, alloc_host) reserves exactly what it uses; a memory-pool block (memory_pool.h)
// reserves its size class, and stays reserved, under the category of its latest user, while it
// sits in the pool's cache. So reserved(c) >= current(c) (up to the moment between two counter
// updates of one call).
class MemoryTracker {
 public:
  void on_alloc(MemCategory c, size_t bytes);    // in use
  void on_free(MemCategory c, size_t bytes);
  void on_reserve(MemCategory c, size_t bytes);  // reserved
  void on_unreserve(MemCategory c, size_t bytes);
  size_t current(MemCategory c) const { return current_[idx(c)].load(); }
  size_t peak(MemCategory c) const { return peak_[idx(c)].load(); }
  size_t reserved(MemCategory c) const { return reserved_[idx(c)].load(); }
  size_t current_total() const { return total_.load(); }
  size_t peak_total() const { return peak_total_.load(); }
  size_t reserved_total() const { return reserved_total_.load(); }
  size_t peak_reserved_total() const { return peak_reserved_total_.load(); }
  void reset_peaks();  // peaks := current
  std::string report(const char* title) const;  // table, bytes and MiB per category

 private:
  static int idx(MemCategory c) { return static_cast<int>(c); }
  std::array<std::atomic<size_t>, kNumMemCategories> current_{};
  std::array<std::atomic<size_t>, kNumMemCategories> peak_{};
  std::array<std::atomic<size_t>, kNumMemCategories> reserved_{};
  std::atomic<size_t> total_{0};
  std::atomic<size_t> peak_total_{0};
  std::atomic<size_t> reserved_total_{0};
  std::atomic<size_t> peak_reserved_total_{0};
};

class Device;

// Owns one allocation from a Device. Move-only; frees (and un-tracks) on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  enum class Where : uint8_t { Device, PinnedHost, PageableHost };
  DeviceBuffer(Device* dev, void* p, size_t bytes, MemCategory c, bool pinned_host)
      : DeviceBuffer(dev, p, bytes, c, pinned_host ? Where::PinnedHost : Where::Device) {}
  DeviceBuffer(Device* dev, void* p, size_t bytes, MemCategory c, Where where)
      : dev_(dev), ptr_(p), bytes_(bytes), cat_(c), where_(where) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset();
  void* data() const { return ptr_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return cat_; }
  bool pinned_host() const { return where_ == Where::PinnedHost; }
  bool on_host() const { return where_ != Where::Device; }
  explicit operator bool() const { return ptr_ != nullptr; }
  TensorView view(DType t, std::initializer_list<int64_t> dims) const;

 private:
  Device* dev_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemCategory cat_ = MemCategory::Workspace;
  Where where_ = Where::Device;
};

}  // namespace zt
