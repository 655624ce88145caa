#include "zerotrain/core/allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "zerotrain/core/device.h"

namespace zt {

const char* device_kind_name(DeviceKind k) { return k == DeviceKind::CPU ? "cpu" : "cuda"; }

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

const char* mem_category_name(MemCategory c) {
  static const char* kNames[kNumMemCategories] = {"params", "grads", "master", "optimizer_moments",
                                                   "buckets", "gather", "activations", "workspace",
                                                   "pinned_host", "communicator",
                                                   "host_master", "host_moments", "host_grads", "host_params", "host_staging",
                                                   "host_activations"};
  int i = static_cast<int>(c);
  return i >= 0 && i < kNumMemCategories ? kNames[i] : "?";
}

namespace {
void raise_peak(std::atomic<size_t>& peak, size_t value) {
  size_t prev = peak.load();
  while (value > prev && !peak.compare_exchange_weak(prev, value)) {
  }
}
}  // namespace

void MemoryTracker::on_alloc(MemCategory c, size_t bytes) {
  raise_peak(peak_[idx(c)], current_[idx(c)].fetch_add(bytes) + bytes);
  raise_peak(peak_total_, total_.fetch_add(bytes) + bytes);
}

void MemoryTracker::on_free(MemCategory c, size_t bytes) {
  current_[idx(c)].fetch_sub(bytes);
  total_.fetch_sub(bytes);
}

void MemoryTracker::on_reserve(MemCategory c, size_t bytes) {
  reserved_[idx(c)].fetch_add(bytes);
  raise_peak(peak_reserved_total_, reserved_total_.fetch_add(bytes) + bytes);
}

void MemoryTracker::on_unreserve(MemCategory c, size_t bytes) {
  reserved_[idx(c)].fetch_sub(bytes);
  reserved_total_.fetch_sub(bytes);
}

void MemoryTracker::reset_peaks() {
  for (int i = 0; i < kNumMemCategories; ++i) peak_[i].store(current_[i].load());
  peak_total_.store(total_.load());
  peak_reserved_total_.store(reserved_total_.load());
}

std::string MemoryTracker::report(const char* title) const {
  std::string out = std::string(title) + "\n";
  char line[160];
  std::snprintf(line, sizeof(line), "  %-18s %16s %12s %16s %12s %16s\n", "category", "current (B)", "(MiB)",
                "peak (B)", "(MiB)", "reserved (B)");
  out += line;
  for (int i = 0; i < kNumMemCategories; ++i) {
    size_t cur = current_[i].load(), pk = peak_[i].load();
    std::snprintf(line, sizeof(line), "  %-18s %16zu %12.2f %16zu %12.2f %16zu\n",
                  mem_category_name(static_cast<MemCategory>(i)), cur, cur / 1048576.0, pk, pk / 1048576.0,
                  reserved_[i].load());
    out += line;
  }
  std::snprintf(line, sizeof(line), "  %-18s %16zu %12.2f %16zu %12.2f %16zu\n", "total", total_.load(),
                total_.load() / 1048576.0, peak_total_.load(), peak_total_.load() / 1048576.0, reserved_total_.load());
  return out + line;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    dev_ = o.dev_; ptr_ = o.ptr_; bytes_ = o.bytes_; cat_ = o.cat_; where_ = o.where_;
    o.dev_ = nullptr; o.ptr_ = nullptr; o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_ && dev_) {
    switch (where_) {
      case Where::Device: dev_->raw_free(ptr_); break;
      case Where::PinnedHost: dev_->raw_free_pinned(ptr_); break;
      case Where::PageableHost: std::free(ptr_); break;
    }
    dev_->tracker().on_free(cat_, bytes_);
    dev_->tracker().on_unreserve(cat_, bytes_);
  }
  ptr_ = nullptr; bytes_ = 0; dev_ = nullptr;
}

TensorView DeviceBuffer::view(DType t, std::initializer_list<int64_t> dims) const {
  TensorView v(ptr_, t, dims, on_host() || !dev_ ? DeviceKind::CPU : dev_->kind());
  ZT_CHECK(v.nbytes() <= bytes_, "view " + v.shape_string() + " is larger than its buffer (" +
                                     std::to_string(bytes_) + " B)");
  return v;
}

DeviceBuffer Device::alloc(size_t bytes, MemCategory c, bool zero) {
  if (bytes == 0) return DeviceBuffer(this, nullptr, 0, c, false);
  void* p = raw_alloc(bytes, c);
  if (zero) raw_memset_sync(p, 0, bytes);
  tracker_.on_alloc(c, bytes);
  tracker_.on_reserve(c, bytes);
  return DeviceBuffer(this, p, bytes, c, false);
}

DeviceBuffer Device::alloc_pinned_host(size_t bytes) {
  if (bytes == 0) return DeviceBuffer(this, nullptr, 0, MemCategory::PinnedHost, true);
  void* p = raw_alloc_pinned(bytes);
  tracker_.on_alloc(MemCategory::PinnedHost, bytes);
  tracker_.on_reserve(MemCategory::PinnedHost, bytes);
  return DeviceBuffer(this, p, bytes, MemCategory::PinnedHost, true);
}

DeviceBuffer Device::alloc_host(size_t bytes, MemCategory c, bool pinned, bool zero) {
  const DeviceBuffer::Where where = pinned ? DeviceBuffer::Where::PinnedHost : DeviceBuffer::Where::PageableHost;
  if (bytes == 0) return DeviceBuffer(this, nullptr, 0, c, where);
  void* p = pinned ? raw_alloc_pinned(bytes) : std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  ZT_CHECK(p != nullptr, std::string(pinned ? "pinned" : "pageable") + " host allocation of " + std::to_string(bytes) +
                             " bytes (" + mem_category_name(c) + ")");
  if (zero) std::memset(p, 0, bytes);
  tracker_.on_alloc(c, bytes);
  tracker_.on_reserve(c, bytes);
  return DeviceBuffer(this, p, bytes, c, where);
}

}  // namespace zt
