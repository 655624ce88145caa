// memory_pool.cpp — the caching allocator of memory_pool.h: per-stream free lists, event-guarded
// cross-stream reuse, reserved vs in-use accounting.
#include "zerotrain/core/memory_pool.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "zerotrain/core/check.h"

namespace zt {

// One device allocation of `size` bytes. Owned by MemoryPool::blocks_; a PoolBuffer points at
// it while leased, one free list holds it while cached.
struct PoolBlock {
  void* ptr = nullptr;
  size_t size = 0;                               // its size class
  MemCategory category = MemCategory::Workspace; // the latest lease's: where its reserved bytes count
  size_t requested = 0;                          // the current lease's bytes; 0 while cached
  bool leased = false;
  std::unique_ptr<Event> freed;                  // recorded on the releasing stream at each release
};

namespace {
size_t& at(std::array<size_t, kNumMemCategories>& a, MemCategory c) { return a[static_cast<int>(c)]; }
}  // namespace

// ---- PoolBuffer ----

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = o.pool_; block_ = o.block_; ptr_ = o.ptr_; bytes_ = o.bytes_; cat_ = o.cat_;
    stream_ = o.stream_; kind_ = o.kind_; reused_ = o.reused_;
    o.pool_ = nullptr; o.block_ = nullptr; o.ptr_ = nullptr; o.bytes_ = 0; o.stream_ = nullptr; o.reused_ = false;
  }
  return *this;
}

size_t PoolBuffer::block_bytes() const { return block_ ? block_->size : 0; }

TensorView PoolBuffer::view(DType t, std::initializer_list<int64_t> dims) const {
  TensorView v(ptr_, t, dims, kind_);
  ZT_CHECK(v.nbytes() <= bytes_, "view " + v.shape_string() + " is larger than its pool buffer (" +
                                     std::to_string(bytes_) + " B)");
  return v;
}

void PoolBuffer::release_on(Stream& s) {
  if (block_) pool_->release(block_, s);
  pool_ = nullptr; block_ = nullptr; ptr_ = nullptr; bytes_ = 0; stream_ = nullptr; reused_ = false;
}

void PoolBuffer::reset() {
  if (block_) release_on(*stream_);
}

// ---- MemoryPool ----

size_t MemoryPool::size_class(size_t bytes) {
  ZT_CHECK(bytes <= (size_t(1) << 60), "memory pool request of " + std::to_string(bytes) + " bytes");
  if (bytes <= kMinBlock) return kMinBlock;
  const size_t pow2 = size_t(1) << (63 - __builtin_clzll(static_cast<unsigned long long>(bytes)));
  const size_t step = std::max(kMinBlock, pow2 / 8);
  return (bytes + step - 1) / step * step;
}

MemoryPool::MemoryPool(Device& dev) : dev_(dev) {}

MemoryPool::~MemoryPool() {
  std::lock_guard<std::mutex> lock(mu_);
  empty_cache_locked();
  if (blocks_.empty()) return;
  size_t bytes = 0;
  for (const auto& b : blocks_) bytes += b->size;
  std::fprintf(stderr, "zerotrain: memory pool destroyed with %zu block(s) (%zu B) still leased; left allocated\n",
               blocks_.size(), bytes);
  for (auto& b : blocks_) (void)b.release();  // a lease still points at it
}

PoolBuffer MemoryPool::allocate(size_t bytes, MemCategory c, Stream& s, bool zero, CrossStream cross) {
  PoolBuffer out;
  if (bytes == 0) return out;
  const size_t size = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    PoolBlock* b = take_cached(size, s, cross);
    out.reused_ = b != nullptr;
    if (!b) {
      void* p = device_alloc(size, c);
      blocks_.push_back(std::make_unique<PoolBlock>());
      b = blocks_.back().get();
      b->ptr = p;
      b->size = size;
      b->category = c;
      count_reserved(c, size);
      ++stats_.device_allocations;
    } else if (b->category != c) {  // reserved bytes follow the latest lease
      uncount_reserved(b->category, size);
      count_reserved(c, size);
      b->category = c;
    }
    b->leased = true;
    b->requested = bytes;
    dev_.tracker().on_alloc(c, bytes);
    stats_.in_use += bytes;
    at(stats_.in_use_by, c) += bytes;
    ++stats_.allocations;
    out.pool_ = this;
    out.block_ = b;
    out.ptr_ = b->ptr;
    out.bytes_ = bytes;
    out.cat_ = c;
    out.stream_ = &s;
    out.kind_ = dev_.kind();
  }
  if (zero) dev_.memset_async(out.ptr_, 0, bytes, s);  // ordered on s, like every use of the lease
  return out;
}

// A cached block of exactly `size` that stream s may use, taken out of its free list; nullptr if
// none. Preference: s's own list (stream order suffices), then another stream's block whose event
// completed, then (CrossStream::Wait) another stream's pending block, after s waits on its event.
PoolBlock* MemoryPool::take_cached(size_t size, Stream& s, CrossStream cross) {
  auto take = [&](std::multimap<size_t, PoolBlock*>& list, std::multimap<size_t, PoolBlock*>::iterator it) {
    PoolBlock* b = it->second;
    list.erase(it);
    stats_.cached -= b->size;
    return b;
  };
  auto own = free_.find(&s);
  if (own != free_.end()) {
    auto it = own->second.find(size);
    if (it != own->second.end()) {
      ++stats_.same_stream_reuses;
      return take(own->second, it);
    }
  }
  std::multimap<size_t, PoolBlock*>* pending_list = nullptr;
  std::multimap<size_t, PoolBlock*>::iterator pending;
  for (auto& [stream, list] : free_) {
    if (stream == &s) continue;
    auto range = list.equal_range(size);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second->freed->query()) {
        ++stats_.cross_stream_reuses;
        return take(list, it);
      }
      if (!pending_list) {  // the oldest release of this stream's list (equal keys keep insertion order)
        pending_list = &list;
        pending = it;
      }
    }
  }
  if (!pending_list || cross != CrossStream::Wait) return nullptr;
  s.wait(*pending->second->freed);  // s's later work runs after the releasing stream's last use
  ++stats_.cross_stream_waits;
  return take(*pending_list, pending);
}

// A new block from the device. If the device is out of memory, the cache is returned to it once
// and the allocation retried; a second failure ends with the backend's out-of-memory message.
void* MemoryPool::device_alloc(size_t size, MemCategory c) {
  void* p = dev_.raw_try_alloc(size);
  if (!p && stats_.cached > 0) {
    empty_cache_locked();
    p = dev_.raw_try_alloc(size);
  }
  return p ? p : dev_.raw_alloc(size, c);
}

void MemoryPool::release(PoolBlock* b, Stream& s) {
  std::lock_guard<std::mutex> lock(mu_);
  ZT_CHECK(b->leased, "memory pool: a block was released twice");
  dev_.tracker().on_free(b->category, b->requested);
  stats_.in_use -= b->requested;
  at(stats_.in_use_by, b->category) -= b->requested;
  b->requested = 0;
  b->leased = false;
  if (!b->freed) b->freed = dev_.create_event();
  b->freed->record(s);
  free_[&s].emplace(b->size, b);
  stats_.cached += b->size;
}

void MemoryPool::count_reserved(MemCategory c, size_t size) {
  dev_.tracker().on_reserve(c, size);
  stats_.reserved += size;
  at(stats_.reserved_by, c) += size;
}

void MemoryPool::uncount_reserved(MemCategory c, size_t size) {
  dev_.tracker().on_unreserve(c, size);
  stats_.reserved -= size;
  at(stats_.reserved_by, c) -= size;
}

size_t MemoryPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  return empty_cache_locked();
}

size_t MemoryPool::empty_cache_locked() {
  size_t freed = 0;
  for (auto& [stream, list] : free_) {
    for (auto& [size, b] : list) {
      b->freed->synchronize();  // the releasing stream's last use is done
      dev_.raw_free(b->ptr);
      b->ptr = nullptr;
      uncount_reserved(b->category, size);
      stats_.cached -= size;
      ++stats_.device_frees;
      freed += size;
    }
  }
  free_.clear();
  blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(), [](const auto& b) { return b->ptr == nullptr; }),
                blocks_.end());
  return freed;
}

PoolStats MemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace zt
