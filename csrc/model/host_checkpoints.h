// host_checkpoints.h — activation_checkpointing.cpu_checkpointing for the GPT (private to csrc/model).
//
// Under recompute, block l needs only its input residual[l] from its forward (block recompute
// refills the rest; selective keeps the rest per block). With cpu_checkpointing these kept block
// inputs live in host memory between the forward and the backward, and the device holds two
// residual slots: residual[l] lives in slot(l) = l % 2. In the forward block l reads slot(l) and
// writes residual[l+1] into the other slot, so each input is copied out before the slot is
// written again two blocks later; in the backward each input is copied back one block ahead.
// Inputs 0..L-2 go to host[l]; residual[L-1] and residual[L] (the head's input) are never
// overwritten between the forward and the backward and stay on the device.
//
// Streams: compute runs on the model's compute stream; every copy runs on this class's own
// "activation copy" stream, in issue order.
//   forward,  residual[l] written (l <= L-2):   compute records ready[s]; copy waits on it,
//                                                copies slot s -> host[l], records copied[s]
//   forward,  before residual[l] is written (l >= 2): compute waits copied[s] (the copy-out of
//                                                residual[l-2], the slot's previous occupant)
//   backward, at the start of block l+1's backward (l <= L-2): compute records ready[s] (its
//                                                last read of residual[l+2], the slot's occupant,
//                                                is enqueued); copy waits on it, copies
//                                                host[l] -> slot s, records copied[s]
//   backward, before block l reads residual[l] (l <= L-2): compute waits copied[s]
// Events (s = slot(l)): ready[s], recorded on the compute stream, guards slot s against the copy
// stream (the copy-out reads it only after compute wrote it; the copy-in writes it only after
// compute's last read of the previous occupant). copied[s], recorded on the copy stream, guards
// slot s against the compute stream (compute overwrites it only after the copy-out read it, and
// reads it only after the copy-in wrote it). host[l] is touched by the copy stream only — the
// copy-out in the forward, the copy-in in the backward — so stream order alone guards it, across
// micro-steps too. Copies move bytes unchanged: results are bitwise those of recompute without it.
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "zerotrain/core/device.h"

namespace zt::model_detail {

class HostCheckpoints {
 public:
  // residual: the L+1 block inputs' device buffers (residual[l] aliases slot(l), two buffers in
  // all); host: L-1 host buffers (host[l] for residual[l], l <= L-2), each at least a slot's size.
  HostCheckpoints(Device& dev, Stream& compute, std::vector<const DeviceBuffer*> residual,
                  std::vector<const DeviceBuffer*> host);
  ~HostCheckpoints();  // drains the copy stream; the compute stream must already be drained
  HostCheckpoints(const HostCheckpoints&) = delete;
  HostCheckpoints& operator=(const HostCheckpoints&) = delete;

  // Forward: before compute writes residual[l] / after it enqueued that write (bytes: this batch's).
  void before_write(int l);
  void after_write(int l, size_t bytes);
  // Backward: at the start of block l's backward (prefetches residual[l-1]); then before block l
  // reads residual[l].
  void prefetch(int l, size_t bytes);
  void before_read(int l);

 private:
  bool on_host(int l) const { return l >= 0 && l < static_cast<int>(host_.size()); }
  Device& dev_;
  Stream& compute_;
  std::vector<const DeviceBuffer*> residual_, host_;
  std::unique_ptr<Stream> copy_;
  std::array<std::unique_ptr<Event>, 2> ready_, copied_;
};

}  // namespace zt::model_detail
