// flat_buffer.h — the engine's view helpers: a typed flat allocation addressed by the plan's
// element ranges, and the collectives, copies and fills expressed on tensor views. Byte
// arithmetic lives here and in TensorView, nowhere else in the engine.
#pragma once
#include <string>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/memory_pool.h"
#include "zerotrain/zero/plan.h"

namespace zt {

// One tracked, zero-filled allocation of `numel` elements of one dtype (a model state, a ring
// or wire slot), or a lease from the device's memory pool (a gathered bucket: pooled()). Ranges
// index elements in the buffer's own layout.
class FlatBuffer {
 public:
  FlatBuffer() = default;
  FlatBuffer(Device& dev, DType dtype, int64_t numel, MemCategory category, bool zero = true)
      : buf_(dev.alloc(static_cast<size_t>(numel) * dtype_size(dtype), category, zero)),
        dtype_(dtype), numel_(numel), kind_(dev.kind()) {}

  // Host memory (pinned or pageable), viewed as CPU tensors.
  static FlatBuffer host(Device& dev, DType dtype, int64_t numel, MemCategory category, bool pinned) {
    FlatBuffer f;
    f.buf_ = dev.alloc_host(static_cast<size_t>(numel) * dtype_size(dtype), category, pinned);
    f.dtype_ = dtype;
    f.numel_ = numel;
    f.kind_ = DeviceKind::CPU;
    return f;
  }

  // A per-step buffer from dev.pool(), ordered on stream `s` (not zero-filled): the pool's rules
  // (memory_pool.h) say when its block may be reused; release_on() hands it back.
  static FlatBuffer pooled(Device& dev, Stream& s, DType dtype, int64_t numel, MemCategory category) {
    FlatBuffer f;
    f.pooled_ = dev.pool().allocate(static_cast<size_t>(numel) * dtype_size(dtype), category, s);
    f.dtype_ = dtype;
    f.numel_ = numel;
    f.kind_ = dev.kind();
    return f;
  }
  // Pooled: the buffer's last use is ordered on `s`; back to the pool, guarded by an event on `s`.
  void release_on(Stream& s) {
    pooled_.release_on(s);
    *this = FlatBuffer();
  }
  bool reused() const { return pooled_.reused(); }  // pooled: served from the pool's cache

  TensorView view(ElemRange r) const {
    return TensorView(static_cast<char*>(data()) + r.begin * static_cast<int64_t>(dtype_size(dtype_)), dtype_,
                      {r.count}, kind_);
  }
  TensorView view() const { return view({0, numel_}); }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return pooled_ ? pooled_.bytes() : buf_.bytes(); }
  explicit operator bool() const { return static_cast<bool>(buf_) || static_cast<bool>(pooled_); }

 private:
  void* data() const { return pooled_ ? pooled_.data() : buf_.data(); }
  DeviceBuffer buf_;    // direct allocation, or
  PoolBuffer pooled_;   // a pool lease (at most one of the two is set)
  DType dtype_ = DType::F32;
  int64_t numel_ = 0;
  DeviceKind kind_ = DeviceKind::CPU;
};

// ---- collectives on views (element counts from the views; in place where the views overlap
//      as the communicator's in-place rules say) ----
inline void all_reduce_view(Communicator& c, const TensorView& buf, const std::string& label) {
  c.all_reduce(buf.data, buf.data, static_cast<size_t>(buf.numel()), buf.dtype, ReduceOp::Sum, label, nullptr);
}
// `mine` is this rank's slice of `full` (in place) or a separate buffer of full.numel()/N.
inline void reduce_scatter_view(Communicator& c, const TensorView& full, const TensorView& mine,
                                const std::string& label) {
  c.reduce_scatter(full.data, mine.data, static_cast<size_t>(mine.numel()), full.dtype, ReduceOp::Sum, label, nullptr);
}
inline void all_gather_view(Communicator& c, const TensorView& mine, const TensorView& full, const std::string& label,
                            Event* done) {
  c.all_gather(mine.data, full.data, static_cast<size_t>(mine.numel()), mine.dtype, label, done);
}

// ---- fills and copies on a stream ----
inline void zero_view(Device& dev, const TensorView& v, Stream& s) { dev.memset_async(v.data, 0, v.nbytes(), s); }
inline void copy_view(Device& dev, const TensorView& dst, const TensorView& src, Stream& s,
                      CopyKind kind = CopyKind::DeviceToDevice) {
  dev.memcpy_async(dst.data, src.data, src.nbytes(), kind, s);
}
// This rank's slice of a whole-bucket view (N equal slices).
inline TensorView rank_slice(const TensorView& bucket, int rank, int world) {
  const int64_t n = bucket.numel() / world;
  return bucket.slice1d(rank * n, n);
}

}  // namespace zt
