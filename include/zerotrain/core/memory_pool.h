// memory_pool.h — the caching device allocator behind every per-step / transient allocation.
//
// Freeing device memory is expensive where it matters: cudaFree synchronises the whole device,
// which destroys compute/communication overlap. The pool never returns a block to the device
// during training: a released block goes into a free list of the stream it was released on and
// is handed out again. Written over the Device interface only (streams, events, raw_alloc), so
// it is the same code on the CPU backend (stream worker threads) and on CUDA.
//
// Invariants:
//  * Ownership: the pool owns every block (memory and guard event). A PoolBuffer is a lease on
//    one block; while it lives, the block is in use and nothing else hands it out.
//  * Size classes: a block's size is size_class(bytes) of the request that created it; a
//    request is served only by a cached block of exactly its class.
//  * Stream order: a lease is ordered on one stream (the one it was allocated for). Releasing it
//    on stream S (PoolBuffer::release_on(S), or reset(): the allocation stream) records the
//    block's `freed` event on S; the caller guarantees that every earlier use of the block, on
//    any stream, is ordered before S's work at that point (e.g. S waited on the other streams'
//    events). Then:
//      - the block is reusable by S at once (S runs its work in order);
//      - by another stream T only once `freed` has completed (Event::query), or after T waits on
//        it (Stream::wait) — CrossStream::Wait, the default, does that instead of allocating;
//        CrossStream::CompletedOnly allocates a new block instead.
//  * Accounting (MemoryTracker): in use = requested bytes of leased blocks, per category;
//    reserved = block sizes, leased or cached, under the category of the block's latest lease.
//  * Device memory is freed only by empty_cache() and the destructor, each after the block's
//    `freed` event completed; a failed device allocation empties the cache once and retries.
//  * Streams are identified by address. A destroyed stream's work has all run (both backends
//    drain a stream in its destructor), so blocks it released are safe for any stream, and a new
//    stream at the same address may reuse them at once.
//  * Releases happen on host threads, never inside a stream callback (CUDA forbids the
//    cudaEventRecord there).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "zerotrain/core/device.h"

namespace zt {

struct PoolBlock;
class MemoryPool;

// Counters and bytes of one pool (not of the device's direct allocations).
struct PoolStats {
  size_t reserved = 0;  // bytes of every block, leased or cached
  size_t in_use = 0;    // requested bytes of leased blocks
  size_t cached = 0;    // bytes of blocks in the free lists
  std::array<size_t, kNumMemCategories> reserved_by{}, in_use_by{};
  int64_t allocations = 0;          // leases handed out (non-empty requests)
  int64_t device_allocations = 0;   // blocks obtained from the device
  int64_t same_stream_reuses = 0;   // served from the requesting stream's own free list
  int64_t cross_stream_reuses = 0;  // from another stream's list, its event already complete
  int64_t cross_stream_waits = 0;   // from another stream's list, the requesting stream waits on the event
  int64_t device_frees = 0;         // blocks returned to the device (empty_cache, destructor)
};

enum class CrossStream : uint8_t {
  Wait,           // a pending block of another stream is reused after Stream::wait on its event
  CompletedOnly,  // only blocks whose guard event has completed; otherwise a new block
};

// A lease on one pool block (move-only). Destroying it releases the block on its stream.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  ~PoolBuffer() { reset(); }
  PoolBuffer(PoolBuffer&& o) noexcept { *this = std::move(o); }
  PoolBuffer& operator=(PoolBuffer&& o) noexcept;
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  void* data() const { return ptr_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }  // as requested
  size_t block_bytes() const;              // the block's size class
  MemCategory category() const { return cat_; }
  Stream* stream() const { return stream_; }  // the stream the lease is ordered on
  bool reused() const { return reused_; }     // served from the cache (no device allocation)
  explicit operator bool() const { return ptr_ != nullptr; }
  TensorView view(DType t, std::initializer_list<int64_t> dims) const;

  // The block's last use is ordered on `s` (see the file comment): back to the pool, guarded by
  // an event recorded on `s` now. The lease is empty afterwards.
  void release_on(Stream& s);
  void reset();  // release_on(stream()) when non-empty

 private:
  friend class MemoryPool;
  MemoryPool* pool_ = nullptr;
  PoolBlock* block_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemCategory cat_ = MemCategory::Workspace;
  Stream* stream_ = nullptr;
  DeviceKind kind_ = DeviceKind::CPU;
  bool reused_ = false;
};

class MemoryPool {
 public:
  explicit MemoryPool(Device& dev);
  // Frees every cached block (after its event). Blocks still leased are a bug in the caller:
  // reported on stderr and left allocated (a lease may still point at them).
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // `bytes` of device memory in category c, ordered on stream s (zero-filled on s on request).
  // 0 bytes: an empty lease.
  PoolBuffer allocate(size_t bytes, MemCategory c, Stream& s, bool zero = false,
                      CrossStream cross = CrossStream::Wait);
  // Returns every cached block to the device (the host waits for each block's event first);
  // leased blocks are untouched. Returns the bytes freed. Synchronises (cudaFree): never per step.
  size_t empty_cache();
  PoolStats stats() const;

  static constexpr size_t kMinBlock = 512;
  // kMinBlock for small requests; above that the request rounded up to a multiple of
  // max(kMinBlock, 2^floor(log2 bytes) / 8): 8 classes per power of two, < 12.5% rounding
  // above 4 KiB.
  static size_t size_class(size_t bytes);

 private:
  friend class PoolBuffer;
  void release(PoolBlock* b, Stream& s);
  PoolBlock* take_cached(size_t size, Stream& s, CrossStream cross);  // mu_ held
  void* device_alloc(size_t size, MemCategory c);                      // mu_ held
  // Reserved bytes of a block under category c, in the tracker and the pool's stats (mu_ held).
  void count_reserved(MemCategory c, size_t size);
  void uncount_reserved(MemCategory c, size_t size);
  size_t empty_cache_locked();

  Device& dev_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<PoolBlock>> blocks_;  // every block, leased or cached
  // Cached blocks per stream they were released on, by size class.
  std::map<const Stream*, std::multimap<size_t, PoolBlock*>> free_;
  PoolStats stats_;
};

}  // namespace zt
