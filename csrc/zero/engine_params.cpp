// engine_params.cpp — parameters in and out of the engine: initialisation and loading fill
// only the ranges this rank's optimizer owns; saving all-gathers the master weights to one rank.
#include <algorithm>

#include "engine_impl.h"
#include "zerotrain/zero/memory_predict.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/ops.h"

namespace zt {

// src(param, begin, count, out) writes count fp32 values of parameter `param` from element
// `begin`. Each bucket's updated range (whole bucket at stage 0, the owned slice otherwise)
// is read in the flat layout and stored at its place in the master buffer's layout.
void ZeroEngine::Impl::fill_master(const ZeroEngine::ParamSliceSource& src) {
  const Layout opt_layout = cx.plan.flow.optimizer;
  std::vector<float> host(states.master.numel(), 0.0f);
  for (const PlanPiece& pc : cx.plan.pieces(cx.rank, PieceScope::Updated))
    src(pc.param, pc.begin, pc.count, host.data() + pc.at(opt_layout).begin);
  const TensorView from_host(host.data(), DType::F32, {states.master.numel()}, DeviceKind::CPU);
  if (host_optimizer) {
    if (from_host.numel() > 0) cpu_ops::cast(states.master.view(), from_host);  // master lives on the host
  } else {
    // Staged through at most kInitStagingElems fp32 elements (not a model-sized buffer); the
    // cast is element-wise, so chunking gives the same bits. Each chunk waits for the previous.
    const int64_t n = states.master.numel(), chunk = std::min(n, kInitStagingElems);
    FlatBuffer staging(cx.dev, DType::F32, chunk, MemCategory::Workspace, false);
    for (int64_t at = 0; at < n; at += chunk) {
      const int64_t len = std::min(chunk, n - at);
      copy_view(cx.dev, staging.view({0, len}), from_host.slice1d(at, len), cx.compute, CopyKind::HostToDevice);
      ops::cast(cx.compute, states.master.view({at, len}), staging.view({0, len}));
      cx.compute.synchronize();  // the staging chunk is reused next; `host` dies after the loop
    }
  }
  write_params_from_master();
}

void ZeroEngine::Impl::write_params_from_master() {
  const ZeroPlan& plan = cx.plan;
  if (host_optimizer) {
    host_optimizer->upload_params_from_master();
    return param_sync->start();
  }
  for (const PlanBucket& b : plan.buckets) {
    const ElemRange m = plan.updated(b.id, cx.rank, plan.flow.optimizer);
    if (m.count == 0) continue;
    ops::cast(cx.compute, states.params.view(plan.updated(b.id, cx.rank, plan.flow.params)), states.master.view(m));
  }
  param_sync->start();
}

void ZeroEngine::init_parameters(uint64_t seed) {
  const auto& specs = impl_->cx.model.params();
  impl_->fill_master([&](int p, int64_t begin, int64_t count, float* out) {
    init_param_slice(seed, specs[p], begin, count, out);
  });
}

void ZeroEngine::load_parameters(const ParamSliceSource& src) { impl_->fill_master(src); }

std::vector<std::vector<float>> ZeroEngine::gather_parameters(int root) {
  EngineContext& cx = impl_->cx;
  FlatBuffer on_device;  // offloaded master: its shard copied to the device for the all-gather
  if (impl_->host_optimizer) {
    on_device = FlatBuffer(cx.dev, impl_->states.master.dtype(), impl_->states.master.numel(), MemCategory::Workspace);
    copy_view(cx.dev, on_device.view(), impl_->states.master.view(), cx.compute, CopyKind::HostToDevice);
  }
  const FlatBuffer& master = impl_->host_optimizer ? on_device : impl_->states.master;
  FlatBuffer full(cx.dev, master.dtype(), plan_.padded_numel, MemCategory::Workspace);
  if (plan_.flow.optimizer == Layout::Full) {
    if (full.numel() > 0) ops::cast(cx.compute, full.view(), master.view());
  } else {
    cx.comm_waits_for_compute();  // the optimizer's writes to master are done
    for (const PlanBucket& b : plan_.buckets)
      all_gather_view(cx.comm, master.view(plan_.slice(b.id, cx.rank, Layout::Shard)), full.view(plan_.bucket_range(b.id)),
                      "save b" + std::to_string(b.id), nullptr);
    cx.comm.synchronize();
  }
  std::vector<std::vector<float>> out;
  if (cx.rank != root) {
    cx.compute.synchronize();
    return out;
  }
  FlatBuffer f32(cx.dev, DType::F32, plan_.padded_numel, MemCategory::Workspace, false);
  std::vector<float> host(plan_.padded_numel);
  if (f32.numel() > 0) {
    ops::cast(cx.compute, f32.view(), full.view());
    cx.dev.memcpy_async(host.data(), f32.view().data, f32.bytes(), CopyKind::DeviceToHost, cx.compute);
  }
  cx.compute.synchronize();
  for (const PlanParam& p : plan_.params)
    out.emplace_back(host.begin() + p.flat_begin, host.begin() + p.flat_begin + p.numel);
  return out;
}

}  // namespace zt
