// stage3_gather.cpp — stage 3's finish_param_sync: before each unit's forward and backward the
// buckets it reads are all-gathered from every rank's shard into a gathered buffer, prefetched
// ahead within stage3_prefetch_bucket_size / stage3_max_live_parameters, kept when reused within
// stage3_max_reuse_distance, released after use. Which bucket is gathered, prefetched and
// released at each position is the plan's (ZeroPlan::gather_steps), ordered into the step
// program's Gather / Wait / Prefetch / Release / Regather ops; this file executes them.
// Persistent buckets are gathered once after every update and never released.
//
// Gathered buffers are leases from the device's memory pool (core/memory_pool.h), never freed to
// the device during training. A lease is ordered on the comm stream (its first writer: the
// offload copy and the all-gather); the compute stream reads it after waiting on `done`. Release
// hands it back on the compute stream, after compute waited on `done`: the pool's guard event,
// recorded on compute then, covers the communicator's writes and every compute read. The next
// lease of that block on the comm stream makes the comm stream wait on that event (or finds it
// complete): no host synchronisation, no cudaFree.
//
// With zero_quantized_weights (plan.quantized_weights_block > 0) a gather quantises the rank's
// slice into `qsend` (int8 codes + block scales, ZeroPlan::quantized_gather_words), all-gathers the
// words into `qrecv` and dequantises every rank's part, its own included, into the gathered
// buffer: all ranks compute with the same weights. qsend / qrecv are sized once for the widest
// slice and used only on the comm stream, whose order serialises the gathers that share them.
//
// With zero_hpz_partition_size (plan.hpz > 1) every gather from the world copies the rank's part
// of the gathered bucket (part rank % hpz, ZeroPlan::secondary_slice) into the secondary buffer,
// and a `secondary` gather all-gathers the bucket from those parts over the rank's hpZ block
// instead of the world (after qwZ, the parts hold the dequantised weights every rank computes
// with). The secondary buffer is written and read only on the comm stream, whose order puts each
// refresh before the secondary gathers that read it.
#include <algorithm>

#include "engine_impl.h"
#include "zerotrain/kernels/quantize_math.h"
#include "zerotrain/zero/zero_ops.h"

namespace zt {

namespace {

class Stage3Gatherer final : public ParamSync {
 public:
  Stage3Gatherer(EngineContext& cx, ModelStates& st) : cx_(cx), st_(st), slots_(cx.plan.buckets.size()) {
    for (Slot& s : slots_) s.done = cx.comm.create_event();
    if (cx.plan.quantized_weights_block > 0) {
      const int64_t words = cx.plan.quantized_gather_words(cx.plan.max_slice());
      qsend_ = FlatBuffer(cx.dev, DType::F32, words, MemCategory::Gather);
      qrecv_ = FlatBuffer(cx.dev, DType::F32, words * cx.world, MemCategory::Gather);
    }
    if (cx.plan.hpz > 1) {  // collective: every rank builds its gatherer at the same point
      cx.comm.prepare_block(cx.plan.hpz);
      secondary_ = FlatBuffer(cx.dev, cx.plan.compute, cx.plan.secondary_numel, MemCategory::Gather);
    }
  }
  // Live buffers go back to the pool like any release: compute waits for their all-gather first.
  ~Stage3Gatherer() override {
    for (size_t b = 0; b < slots_.size(); ++b)
      if (slots_[b].buf) release(static_cast<int>(b));
  }

  // The shard changed (initialisation, a loaded checkpoint): re-gather the persistent buckets in
  // place, as the boundary's Regather ops do after a step. Every other bucket is already
  // released: each micro-step releases what it gathered.
  void start() override {
    hand_off();
    for (const PlanBucket& b : cx_.plan.buckets)
      if (b.persistent) gather({OpKind::Regather, -1, false, b.id});
  }

  void hand_off() override { cx_.comm_waits_for_compute(); }

  void gather(const StepOp& op) override {
    const int b = op.bucket;
    const PlanBucket& bk = cx_.plan.bucket(b);
    Slot& s = slots_[b];
    if (!s.buf) s.buf = take_buffer(bk.padded);
    const TensorView shard = st_.params.view(cx_.plan.slice(b, cx_.rank, Layout::Shard));
    // Without overlap_comm the gather runs in compute's order: the comm stream starts it when
    // compute reaches this point (not ahead, while earlier units still compute) and compute waits
    // for it at once, its stall anchored at the hand-off.
    const int since = cx_.opt.overlap_comm ? -1 : cx_.comm_waits_for_compute();
    cx_.comm_work([&] {
      if (op.secondary) return secondary_all_gather(b, s.buf.view());
      TensorView mine = shard;
      if (cx_.opt.offload.params) {  // offload_param: stage the host slice into place, on the comm stream
        mine = rank_slice(s.buf.view(), cx_.rank, cx_.world);
        copy_view(cx_.dev, mine, shard, cx_.comm.stream(), CopyKind::HostToDevice);
        ++staged_slices_;
      }
      if (cx_.plan.quantized_weights_block > 0) quantized_all_gather(b, mine, s.buf.view());
      else all_gather_view(cx_.comm, mine, s.buf.view(), CollectiveLabel{CollectiveLabel::Kind::Gather, b}.to_string(),
                           nullptr);
      if (cx_.plan.hpz > 1 && !bk.persistent)  // refresh this rank's secondary part
        copy_view(cx_.dev, secondary_part(b), block_part(b, s.buf.view()), cx_.comm.stream());
    });
    s.done->record(cx_.comm.stream());
    s.waited = false;
    ++stats_.gathers;
    if (op.kind == OpKind::Prefetch) ++stats_.prefetched;
    if (op.secondary) ++stats_.secondary;
    if (!cx_.opt.overlap_comm) wait_since(b, since);
  }

  void wait(int b) override { wait_since(b, -1); }

  // Position pos's compute reads its parameters from the gathered buffers.
  void bind(int pos) override {
    const GatherStep& step = cx_.plan.gather_steps[pos];
    stats_.peak_live_elems = std::max(stats_.peak_live_elems, step.live);
    stats_.peak_live_beyond_current = std::max(stats_.peak_live_beyond_current, step.live - step.current);
    bind_unit(cx_.plan.unit_of(pos));
  }

  void bind_unit(int unit) override {
    for (int p : cx_.plan.unit_params[unit]) {
      const int b = cx_.plan.param(p).bucket;
      cx_.model.bind_param(p, slots_[b].buf.view(cx_.plan.param_in_bucket(p)).data);
    }
  }

  // The compute stream waits for the all-gather too (a prefetch released unread), so the pool's
  // guard event, recorded on compute, covers the communicator's write and every compute read.
  void release(int b) override {
    wait(b);
    slots_[b].buf.release_on(cx_.compute);
  }

  const GatherStats& stats() const override { return stats_; }
  int64_t staged_slices() const override { return staged_slices_; }

 private:
  struct Slot {
    FlatBuffer buf;               // the gathered bucket while live: a pool lease on the comm stream
    std::unique_ptr<Event> done;  // recorded on the comm stream after its all-gather
    bool waited = false;          // the compute stream already waits on `done`
  };

  // qwZ on the comm stream: quantise `mine`, all-gather the words, dequantise rank r's words into
  // slice r of `full`.
  void quantized_all_gather(int b, const TensorView& mine, const TensorView& full) {
    const int64_t block = cx_.plan.quantized_weights_block, n = mine.numel();
    const int64_t words = cx_.plan.quantized_gather_words(n), code_words = (quant::payload_bytes(n, 8) + 3) / 4;
    Stream& s = cx_.comm.stream();
    auto codes = [&](const TensorView& w) { return static_cast<uint8_t*>(w.data); };
    auto scales = [&](const TensorView& w) { return static_cast<float*>(w.data) + code_words; };
    const TensorView send = qsend_.view({0, words}), recv = qrecv_.view({0, words * cx_.world});
    zero_ops::quantize_blockwise(s, codes(send), scales(send), mine, block, 8);
    all_gather_view(cx_.comm, send, recv, CollectiveLabel{CollectiveLabel::Kind::QuantizedGather, b}.to_string(),
                    nullptr);
    for (int r = 0; r < cx_.world; ++r) {
      const TensorView part = recv.slice1d(r * words, words);
      zero_ops::dequantize_blockwise(s, rank_slice(full, r, cx_.world), codes(part), scales(part), block, 8,
                                     /*accumulate=*/false);
    }
  }

  // hpZ: bucket b's part in the secondary buffer, and this rank's part of the gathered bucket.
  TensorView secondary_part(int b) const {
    return secondary_.view({cx_.plan.secondary_offset[static_cast<size_t>(b)], cx_.plan.secondary_slice(b)});
  }
  TensorView block_part(int b, const TensorView& full) const {
    return full.slice1d((cx_.rank % cx_.plan.hpz) * cx_.plan.secondary_slice(b), cx_.plan.secondary_slice(b));
  }
  // hpZ on the comm stream: the bucket from the secondary parts of the rank's hpZ block.
  void secondary_all_gather(int b, const TensorView& full) {
    const TensorView part = secondary_part(b);
    cx_.comm.all_gather_in_block(cx_.plan.hpz, part.data, full.data, static_cast<size_t>(part.numel()), part.dtype,
                                 CollectiveLabel{CollectiveLabel::Kind::SecondaryGather, b}.to_string());
  }

  // `since`: the stall anchor of a gather issued directly before this wait (-1: none).
  void wait_since(int b, int since) {
    Slot& s = slots_[b];
    if (s.waited) return;
    cx_.compute_waits(*s.done, Lane::Comm, since);
    s.waited = true;
  }

  // A lease ordered on the comm stream, which writes it first. In the steady state (the same
  // buckets every micro-step) the pool serves it from a released block: no device allocation.
  FlatBuffer take_buffer(int64_t elems) {
    FlatBuffer buf = FlatBuffer::pooled(cx_.dev, cx_.comm.stream(), cx_.plan.compute, elems, MemCategory::Gather);
    if (buf.reused()) ++stats_.reused;
    return buf;
  }

  EngineContext& cx_;
  ModelStates& st_;
  std::vector<Slot> slots_;        // per bucket
  FlatBuffer qsend_, qrecv_;       // qwZ staging (fp32 words), comm stream only
  FlatBuffer secondary_;           // hpZ: this rank's part of every non-persistent bucket, comm stream only
  GatherStats stats_;
  int64_t staged_slices_ = 0;      // offload_param: host slices copied in before their all-gather
};

}  // namespace

std::unique_ptr<ParamSync> make_stage3_gatherer(EngineContext& cx, ModelStates& st) {
  return std::make_unique<Stage3Gatherer>(cx, st);
}

}  // namespace zt
