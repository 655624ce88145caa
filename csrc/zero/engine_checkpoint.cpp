// engine_checkpoint.cpp — the engine's side of checkpoints: which elements each rank writes,
// streaming the optimizer states out and back in (one bounded staging buffer, never the whole
// model), the step counters, and the bucket-by-bucket parameter export.
//
// Pieces are plan-independent coordinates (parameter, element range), so a checkpoint written
// under one plan (stage, world size, bucket size) loads under any other: the loader asks for
// the elements its own plan's optimizer updates, and the file layer finds them in whichever
// shards hold them.
#include <algorithm>
#include <map>

#include "engine_impl.h"
#include "zerotrain/kernels/cpu_ops.h"
#include "zerotrain/kernels/ops.h"

namespace zt {

namespace {

// The per-element states in checkpoint order, with the buffers that hold them.
std::vector<const FlatBuffer*> state_buffers(const ModelStates& st) {
  std::vector<const FlatBuffer*> out{&st.master};
  if (st.exp_avg) out.push_back(&st.exp_avg);
  if (st.exp_avg_sq) out.push_back(&st.exp_avg_sq);
  return out;
}

void drain(EngineContext& cx) {
  cx.compute.synchronize();
  cx.comm.synchronize();
}

}  // namespace

std::vector<ZeroEngine::CheckpointState> ZeroEngine::checkpoint_states() const {
  std::vector<CheckpointState> out{{"master", opt_.master_dtype}};
  for (const std::string& name : opt_.optimizer.moment_names()) out.push_back({name, opt_.moments_dtype});
  return out;
}

std::vector<ZeroEngine::ParamPiece> ZeroEngine::checkpoint_pieces(int rank) const {
  std::vector<ParamPiece> out;
  for (const PlanPiece& pc : plan_.pieces(rank)) out.push_back({pc.param, pc.begin, pc.count});
  return out;
}

void ZeroEngine::read_checkpoint_state(int s, int64_t chunk_elems, const StateSink& sink) {
  Impl& e = *impl_;
  EngineContext& cx = e.cx;
  ZT_CHECK(e.micro == 0, "checkpoints are taken at an accumulation boundary (after step())");
  const std::vector<const FlatBuffer*> bufs = state_buffers(e.states);
  ZT_CHECK(s >= 0 && s < static_cast<int>(bufs.size()), "read_checkpoint_state: bad state");
  const FlatBuffer& buf = *bufs[s];
  drain(cx);
  // Host-resident (offloaded, or the CPU backend's memory) states are read in place.
  const bool in_place = e.host_optimizer != nullptr || cx.dev.kind() == DeviceKind::CPU;
  const int64_t chunk = std::max<int64_t>(1, chunk_elems);
  FlatBuffer staging;
  // Piece i of checkpoint_pieces(rank), where it sits in the state buffer's layout.
  const std::vector<PlanPiece> pieces = plan_.pieces(cx.rank);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ElemRange at = pieces[i].at(plan_.flow.optimizer);
    for (int64_t off = 0; off < at.count; off += chunk) {
      const int64_t n = std::min(chunk, at.count - off);
      const TensorView v = buf.view(at.sub(off, n));
      if (in_place) {
        sink(i, off, n, v.data);
        continue;
      }
      if (!staging) staging = FlatBuffer::host(cx.dev, buf.dtype(), std::min(chunk, buf.numel()), MemCategory::Workspace, true);
      const TensorView h = staging.view({0, n});
      copy_view(cx.dev, h, v, cx.compute, CopyKind::DeviceToHost);
      cx.compute.synchronize();
      sink(i, off, n, h.data);
    }
  }
}

int64_t ZeroEngine::load_checkpoint_state(const StateSource& src, int64_t chunk_elems) {
  Impl& e = *impl_;
  EngineContext& cx = e.cx;
  ZT_CHECK(e.micro == 0, "checkpoints are loaded at an accumulation boundary (before micro_step())");
  drain(cx);
  const std::vector<const FlatBuffer*> bufs = state_buffers(e.states);
  const Layout opt_layout = plan_.flow.optimizer;
  int64_t widest = 0;
  for (const PlanBucket& b : plan_.buckets) widest = std::max(widest, plan_.updated(b.id, cx.rank, Layout::Full).count);
  const int64_t chunk = std::max<int64_t>(1, std::min(chunk_elems, widest));
  FlatBuffer host = FlatBuffer::host(cx.dev, DType::F32, chunk, MemCategory::Workspace, true);
  FlatBuffer device;  // fp32 staging on the device for states that live there
  if (!e.host_optimizer) device = FlatBuffer(cx.dev, DType::F32, chunk, MemCategory::Workspace, false);
  float* h = static_cast<float*>(host.view().data);
  std::vector<std::vector<PlanPiece>> bucket_pieces(plan_.buckets.size());  // the updated pieces of each bucket
  for (const PlanPiece& pc : plan_.pieces(cx.rank, PieceScope::Updated)) bucket_pieces[static_cast<size_t>(pc.bucket)].push_back(pc);
  for (size_t s = 0; s < bufs.size(); ++s) {
    const FlatBuffer& dst = *bufs[s];
    for (const PlanBucket& b : plan_.buckets) {
      const ElemRange region = plan_.updated(b.id, cx.rank, Layout::Full);
      const int64_t dst_at = plan_.updated(b.id, cx.rank, opt_layout).begin;
      for (int64_t off = 0; off < region.count; off += chunk) {
        const int64_t n = std::min(chunk, region.count - off);
        const ElemRange r = region.sub(off, n);
        std::fill(h, h + n, 0.0f);  // padding stays zero
        for (const PlanPiece& pc : bucket_pieces[static_cast<size_t>(b.id)]) {  // the pieces within r
          const int64_t lo = std::max(pc.flat, r.begin), hi = std::min(pc.flat + pc.count, r.end());
          if (hi > lo) src(static_cast<int>(s), pc.param, pc.begin + (lo - pc.flat), hi - lo, h + (lo - r.begin));
        }
        const TensorView out = dst.view({dst_at + off, n});
        if (e.host_optimizer) {
          cpu_ops::cast(out, host.view({0, n}));
        } else {
          copy_view(cx.dev, device.view({0, n}), host.view({0, n}), cx.compute, CopyKind::HostToDevice);
          ops::cast(cx.compute, out, device.view({0, n}));
          cx.compute.synchronize();  // the host staging is refilled next
        }
      }
    }
  }
  e.write_params_from_master();
  return static_cast<int64_t>(host.bytes() + (device ? device.bytes() : 0));
}

ZeroEngine::Counters ZeroEngine::counters() const {
  const Impl& e = *impl_;
  Counters c;
  c.global_steps = e.global_steps;
  c.successful_steps = e.successful_steps;
  c.lr_last_batch_iteration = e.sched->last_batch_iteration();
  c.loss_scaler = e.scaler.state();
  return c;
}

void ZeroEngine::restore_counters(const Counters& c) {
  Impl& e = *impl_;
  ZT_CHECK(e.micro == 0, "restore_counters at an accumulation boundary");
  ZT_CHECK(c.global_steps >= c.successful_steps && c.successful_steps >= 0, "restore_counters: bad step counts");
  e.global_steps = c.global_steps;
  e.successful_steps = c.successful_steps;
  // t = -1 keeps the construction values (OneCycle's differ from f(-1)).
  if (c.lr_last_batch_iteration >= 0) e.sched->step_to(c.lr_last_batch_iteration);
  e.scaler.set_state(c.loss_scaler);
}

void ZeroEngine::stream_parameters(int root, const std::function<void(int param, const float* values)>& sink) {
  Impl& e = *impl_;
  EngineContext& cx = e.cx;
  const FlatBuffer& master = e.states.master;
  const bool root_rank = cx.rank == root;
  drain(cx);
  // fp32 host copy of a bucket-sized view of master values (root only).
  auto to_host = [&](const TensorView& v, std::vector<float>& out) {
    out.assign(v.numel(), 0.0f);
    if (v.numel() == 0) return;
    if (v.device == DeviceKind::CPU) {
      cpu_ops::cast(TensorView(out.data(), DType::F32, {v.numel()}, DeviceKind::CPU), v);
      return;
    }
    FlatBuffer f32(cx.dev, DType::F32, v.numel(), MemCategory::Workspace, false);
    ops::cast(cx.compute, f32.view(), v);
    cx.dev.memcpy_async(out.data(), f32.view().data, f32.bytes(), CopyKind::DeviceToHost, cx.compute);
    cx.compute.synchronize();
  };
  std::map<int, std::vector<float>> live;  // bucket -> fp32 values (root)
  std::vector<int> remaining(plan_.buckets.size(), 0);
  for (const PlanParam& p : plan_.params) ++remaining[p.bucket];
  for (const PlanParam& p : plan_.params) {
    const int b = p.bucket;
    if (!live.count(b)) {
      std::vector<float>& host = live[b];
      if (plan_.flow.optimizer == Layout::Full) {
        if (root_rank) to_host(master.view(plan_.bucket_range(b)), host);
      } else {
        // All-gather the bucket's slices of master (host-resident master: via a device copy).
        const TensorView mine = master.view(plan_.slice(b, cx.rank, Layout::Shard));
        FlatBuffer slice_dev;
        TensorView send = mine;
        if (e.host_optimizer) {
          slice_dev = FlatBuffer(cx.dev, master.dtype(), mine.numel(), MemCategory::Workspace, false);
          copy_view(cx.dev, slice_dev.view(), mine, cx.compute, CopyKind::HostToDevice);
          send = slice_dev.view();
        }
        FlatBuffer gathered(cx.dev, master.dtype(), plan_.bucket(b).padded, MemCategory::Workspace, false);
        cx.comm_waits_for_compute();
        all_gather_view(cx.comm, send, gathered.view(), "export b" + std::to_string(b), nullptr);
        cx.comm.synchronize();
        if (root_rank) to_host(gathered.view(), host);
        cx.compute.synchronize();
      }
    }
    if (root_rank) sink(p.index, live[b].data() + plan_.param_in_bucket(p.index).begin);
    if (--remaining[b] == 0) live.erase(b);
  }
}

}  // namespace zt
