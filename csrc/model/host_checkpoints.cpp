// host_checkpoints.cpp — see host_checkpoints.h (the slot / event protocol is stated there).
#include "host_checkpoints.h"

#include "zerotrain/core/check.h"

namespace zt::model_detail {

HostCheckpoints::HostCheckpoints(Device& dev, Stream& compute, std::vector<const DeviceBuffer*> residual,
                                 std::vector<const DeviceBuffer*> host)
    : dev_(dev), compute_(compute), residual_(std::move(residual)), host_(std::move(host)),
      copy_(dev.create_stream("activation copy")) {
  ZT_CHECK(residual_.size() >= 2 && host_.size() + 2 == residual_.size(),
           "cpu_checkpointing: " + std::to_string(residual_.size()) + " block inputs need " +
               std::to_string(residual_.size() - 2) + " host buffers, got " + std::to_string(host_.size()));
  for (size_t l = 0; l < residual_.size(); ++l)
    ZT_CHECK(residual_[l] == residual_[l % 2], "cpu_checkpointing: residual " + std::to_string(l) + " is not slot " +
                                                   std::to_string(l % 2));
  for (const DeviceBuffer* h : host_)
    ZT_CHECK(h->on_host() && h->bytes() >= residual_[0]->bytes(), "cpu_checkpointing: a host buffer is too small");
  for (int s = 0; s < 2; ++s) {
    ready_[s] = dev.create_event();
    copied_[s] = dev.create_event();
  }
}

HostCheckpoints::~HostCheckpoints() { copy_->synchronize(); }

void HostCheckpoints::before_write(int l) {
  if (on_host(l - 2)) compute_.wait(*copied_[l % 2]);
}

void HostCheckpoints::after_write(int l, size_t bytes) {
  if (!on_host(l)) return;
  const int s = l % 2;
  ready_[s]->record(compute_);
  copy_->wait(*ready_[s]);
  dev_.memcpy_async(host_[l]->data(), residual_[l]->data(), bytes, CopyKind::DeviceToHost, *copy_);
  copied_[s]->record(*copy_);
}

void HostCheckpoints::prefetch(int l, size_t bytes) {
  if (!on_host(l - 1)) return;
  const int s = (l - 1) % 2;
  ready_[s]->record(compute_);
  copy_->wait(*ready_[s]);
  dev_.memcpy_async(residual_[l - 1]->data(), host_[l - 1]->data(), bytes, CopyKind::HostToDevice, *copy_);
  copied_[s]->record(*copy_);
}

void HostCheckpoints::before_read(int l) {
  if (on_host(l)) compute_.wait(*copied_[l % 2]);
}

}  // namespace zt::model_detail
