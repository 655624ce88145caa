// engine_memory.cpp — the memory prediction (memory_predict.h: a pure function of plan, options and
// the model's buffer list) and the engine's report of it beside the tracker's measurements.
#include <algorithm>
#include <cstdio>

#include "engine_impl.h"
#include "zerotrain/core/memory_pool.h"
#include "zerotrain/zero/memory_predict.h"

namespace zt {

namespace {
int64_t bytes_of(int64_t numel, DType t) { return numel * static_cast<int64_t>(dtype_size(t)); }

}  // namespace

OffloadSlots offload_slots(const ZeroPlan& plan, const EngineOptions& o, int rank) {
  OffloadSlots s;
  s.count = std::max(2, o.offload.buffer_count);
  for (const OptimizerChunk& c : optimizer_chunks(plan, rank, o.sub_group_size)) s.elems = std::max(s.elems, c.master.count);
  if (plan.host_grads) {
    s.grad_count = s.count;
    s.grad_elems = plan.max_slice();
  }
  return s;
}

int64_t OffloadSlots::bytes(const ZeroPlan& plan) const {
  return count * bytes_of(elems, plan.compute) + grad_count * bytes_of(grad_elems, plan.reduced_dtype());
}

PlanOptions plan_options_of(const EngineOptions& o, int world, int nodes) {
  PlanOptions p;
  p.stage = o.stage;
  p.world = world;
  p.reduce_bucket_size = o.reduce_bucket_size;
  p.allgather_bucket_size = o.allgather_bucket_size;
  p.param_persistence_threshold = o.param_persistence_threshold;
  p.prefetch_bucket_size = o.prefetch_bucket_size;
  p.max_live_parameters = o.max_live_parameters;
  p.max_reuse_distance = o.max_reuse_distance;
  p.compute = o.compute_dtype;
  p.grad_accum = o.grad_accum_dtype;
  p.wire = o.wire_dtype;
  p.quantized_weights_block = o.quantized_weights_block;
  p.quantized_grads_block = o.stage == 3 ? o.quantized_grads_block : 0;
  p.nodes = nodes;
  if (o.stage == 3 && o.hpz_partition_size > 1) {
    if (world % o.hpz_partition_size != 0)
      throw InputError("zero_optimization.zero_hpz_partition_size is " + std::to_string(o.hpz_partition_size) +
                       ", which does not divide the world size " + std::to_string(world) +
                       ": hpZ keeps a secondary copy of the parameters sharded over blocks of that many consecutive "
                       "ranks (usually the GPUs per node)");
    p.hpz = o.hpz_partition_size;
  }
  p.contiguous_gradients = o.contiguous_gradients;
  p.param_norms = o.optimizer.needs_param_norms();
  p.host_grads = o.offload.optimizer;
  return p;
}

ZeroPlan plan_for_model(const Model& model, const EngineOptions& o, int world, int nodes) {
  std::vector<std::vector<int>> units;
  for (int u = 0; u < model.num_units(); ++u) units.push_back(model.unit_params(u));
  return make_engine_plan(model.params(), units, plan_options_of(o, world, nodes));
}

bool is_host_category(MemCategory c) {
  return c == MemCategory::PinnedHost || c == MemCategory::HostMaster || c == MemCategory::HostMoments ||
         c == MemCategory::HostGrads || c == MemCategory::HostParams || c == MemCategory::HostStaging || c == MemCategory::HostActivations;
}

double zero_paper_model_state_bytes(int stage, double psi, int world) {
  const double n = world;
  switch (stage) {
    case 0: return 16 * psi;
    case 1: return 4 * psi + 12 * psi / n;
    case 2: return 2 * psi + 14 * psi / n;
    default: return 16 * psi / n;
  }
}

int64_t model_state_bytes(const MemoryPrediction& p) {
  int64_t t = 0;
  for (MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Master, MemCategory::OptimMoments})
    t += std::max<int64_t>(0, p.at(c));
  return t;
}

int64_t MemoryPrediction::device_total() const {
  int64_t t = 0;
  for (int i = 0; i < kNumMemCategories; ++i)
    if (!is_host_category(static_cast<MemCategory>(i)) && bytes[i] > 0) t += bytes[i];
  return t;
}

int64_t MemoryPrediction::host_total() const {
  int64_t t = 0;
  for (int i = 0; i < kNumMemCategories; ++i)
    if (is_host_category(static_cast<MemCategory>(i)) && bytes[i] > 0) t += bytes[i];
  return t;
}

namespace {

// Fills one MemoryPrediction, category by category.
struct Prediction {
  MemoryPrediction p;
  int64_t& at(MemCategory c) { return p.bytes[static_cast<int>(c)]; }
  void item(const std::string& name, int64_t bytes, MemCategory c) {
    if (bytes > 0) p.items.push_back({name, bytes, c});
  }

  // The model states each stage keeps, on the device or (offload) in host memory.
  void model_states(const ZeroPlan& plan, const EngineOptions& o, int rank) {
    const int64_t opt_numel = plan.numel_in(plan.flow.optimizer);
    const int64_t params = bytes_of(plan.numel_in(plan.flow.params), plan.compute);
    at(MemCategory::Params) = o.offload.params ? 0 : params;
    // host_grads: the accumulated shard is host memory; stage 1 keeps its full backward buffer.
    const bool device_accumulator = !plan.host_grads || plan.flow.grads == Layout::Full;
    at(MemCategory::Grads) = (device_accumulator ? bytes_of(plan.numel_in(plan.flow.grads), plan.grad_dtype) : 0) +
                             (plan.staged_grads ? bytes_of(plan.numel, plan.compute) : 0);
    at(MemCategory::HostGrads) = plan.host_grads ? bytes_of(plan.shard_numel, plan.grad_dtype) : 0;
    const int64_t master = bytes_of(opt_numel, o.master_dtype);
    const int64_t moments = bytes_of(opt_numel, o.moments_dtype) * o.optimizer.moment_count();
    const bool host = o.offload.optimizer;
    at(MemCategory::Master) = host ? 0 : master;
    at(MemCategory::OptimMoments) = host ? 0 : moments;
    at(MemCategory::HostMaster) = host ? master : 0;
    at(MemCategory::HostMoments) = host ? moments : 0;
    at(MemCategory::HostParams) = o.offload.params ? params : 0;
    at(MemCategory::HostStaging) = host ? offload_slots(plan, o, rank).bytes(plan) : 0;
  }

  // The bucket ring and wire slots (gradients), stage 3's gathered buffers (parameters).
  void schedule_buffers(const ZeroPlan& plan) {
    const int64_t ring = bytes_of(plan.ring_elems, plan.compute), wire = plan.wire_slots * bytes_of(plan.wire_slot_elems, plan.wire);
    // qgZ (engine_grad_sync.cpp): the two hops' fp32 words and partial sums, widest slice.
    const int64_t qgz = plan.quantized_grads_block > 0
                            ? 4 * quantized_reduce_sizes({plan.qgz_local, plan.qgz_nodes(), plan.max_slice(),
                                                          plan.quantized_grads_block}).total()
                            : 0;
    at(MemCategory::Buckets) = ring + wire + qgz;
    item("bucket ring arena", ring, MemCategory::Buckets);
    item("wire slots", wire, MemCategory::Buckets);
    item("quantized gradient staging (int4 codes + scales, partial sums)", qgz, MemCategory::Buckets);
    int64_t persistent = 0;
    for (const PlanBucket& b : plan.buckets) persistent += b.persistent ? b.padded : 0;
    const bool gathers = plan.flow.gather_before_use;
    // qwZ (stage3_gather.cpp): one send and one receive staging buffer of fp32 words, widest slice.
    const int64_t qwz = plan.quantized_weights_block > 0 ? 4 * (1 + plan.world) * plan.quantized_gather_words(plan.max_slice()) : 0;
    // hpZ (stage3_gather.cpp): the secondary partition, 1/hpz of every non-persistent bucket.
    const int64_t hpz = bytes_of(plan.secondary_numel, plan.compute);
    at(MemCategory::Gather) = gathers ? bytes_of(persistent + plan.peak_live_elems, plan.compute) + qwz + hpz : 0;
    item("persistent buckets", gathers ? bytes_of(persistent, plan.compute) : 0, MemCategory::Gather);
    item("gather/prefetch peak", gathers ? bytes_of(plan.peak_live_elems, plan.compute) : 0, MemCategory::Gather);
    item("quantized gather staging (int8 codes + scales, send + receive)", gathers ? qwz : 0, MemCategory::Gather);
    item("hpZ secondary partition (1/" + std::to_string(plan.hpz) + " of the gathered buckets)", gathers ? hpz : 0,
         MemCategory::Gather);
  }

  // The model's buffers, the engine's step statistics and LAMB's norms.
  void workspace(const ZeroPlan& plan, const EngineOptions& o, const std::vector<BufferSpec>& model_buffers) {
    at(MemCategory::Activations) = 0;
    at(MemCategory::Workspace) = 0;
    at(MemCategory::HostActivations) = 0;
    for (const BufferSpec& b : model_buffers) {
      at(b.category) += b.bytes;
      p.items.push_back(b);
    }
    // StepExchange (engine_micro_step.cpp): step_stats() doubles, local and gathered from every rank.
    const int64_t stats = plan.step_stats().slots * 8;
    at(MemCategory::Workspace) += stats * (1 + plan.world);
    item("step statistics", stats * (1 + plan.world), MemCategory::Workspace);
    // LambNorms (engine_lamb.cpp): [2 x params] doubles, and at stages 1-3 the fp32 all-reduce vector.
    if (o.optimizer.needs_param_norms()) {
      const int64_t n = 2 * static_cast<int64_t>(plan.params.size());
      const int64_t lamb = n * 8 + (plan.param_norms_all_reduce ? n * 4 : 0);
      at(MemCategory::Workspace) += lamb;
      item("LAMB norms", lamb, MemCategory::Workspace);
    }
  }

  void communicator(const std::vector<CommBufferSpec>& comm_buffers) {
    at(MemCategory::Communicator) = 0;
    for (const CommBufferSpec& b : comm_buffers) {
      at(MemCategory::Communicator) += b.bytes;
      item(b.name, b.bytes, MemCategory::Communicator);
    }
  }
};

}  // namespace

// The ZeRO formulas (docs/design.md) over the actual plan — padding, ring arena, wire slots,
// stage-3 gather peak — plus the model's buffer list and the engine's step-statistics buffers.
MemoryPrediction predict_memory(const ZeroPlan& plan, const EngineOptions& o, int rank,
                                const std::vector<BufferSpec>& model_buffers,
                                const std::vector<CommBufferSpec>& comm_buffers) {
  Prediction pr;
  pr.model_states(plan, o, rank);
  pr.schedule_buffers(plan);
  pr.workspace(plan, o, model_buffers);
  pr.communicator(comm_buffers);
  return pr.p;
}

int64_t untracked_comm_bytes(const std::vector<CommBufferSpec>& comm_buffers) {
  int64_t t = 0;
  for (const CommBufferSpec& b : comm_buffers) t += b.estimate ? b.bytes : 0;
  return t;
}

// Predicted bytes per category (predict_memory) beside what the tracker measured.
std::vector<MemoryLine> ZeroEngine::memory_lines() const {
  const Impl& e = *impl_;
  const MemoryPrediction pred = predict_memory(plan_, opt_, e.cx.rank, e.cx.model.buffer_plan(), e.cx.comm.buffers());
  const MemoryTracker& t = e.cx.dev.tracker();
  std::vector<MemoryLine> lines;
  for (int i = 0; i < kNumMemCategories; ++i) {
    MemCategory c = static_cast<MemCategory>(i);
    MemoryLine l;
    l.category = c;
    l.predicted = pred.bytes[i];
    l.measured = static_cast<int64_t>(t.current(c));
    l.peak = static_cast<int64_t>(t.peak(c));
    l.reserved = static_cast<int64_t>(t.reserved(c));
    lines.push_back(l);
  }
  return lines;
}

double ZeroEngine::zero_paper_model_state_bytes() const {
  return zt::zero_paper_model_state_bytes(opt_.stage, static_cast<double>(plan_.numel), plan_.world);
}

std::string ZeroEngine::memory_report() const {
  char line[320];
  std::string out;
  std::snprintf(line, sizeof(line), "memory on rank %d (ZeRO stage %d, N=%d, %lld parameters, %lld padded):\n",
                impl_->cx.rank, opt_.stage, plan_.world, static_cast<long long>(plan_.numel),
                static_cast<long long>(plan_.padded_numel));
  out += line;
  std::snprintf(line, sizeof(line), "  %-18s %16s %16s %16s %16s\n", "category", "predicted (B)", "in use (B)",
                "peak (B)", "reserved (B)");
  out += line;
  int64_t pred_states = 0, meas_states = 0;
  for (const MemoryLine& l : memory_lines()) {
    char pred[32];
    if (l.predicted < 0) std::snprintf(pred, sizeof(pred), "%s", "-");
    else std::snprintf(pred, sizeof(pred), "%lld", static_cast<long long>(l.predicted));
    std::snprintf(line, sizeof(line), "  %-18s %16s %16lld %16lld %16lld\n", mem_category_name(l.category), pred,
                  static_cast<long long>(l.measured), static_cast<long long>(l.peak), static_cast<long long>(l.reserved));
    out += line;
    if (l.category == MemCategory::Params || l.category == MemCategory::Grads || l.category == MemCategory::Master ||
        l.category == MemCategory::OptimMoments) {
      pred_states += l.predicted;
      meas_states += l.measured;
    }
  }
  if (const int64_t nccl = untracked_comm_bytes(impl_->cx.comm.buffers()); nccl > 0) {
    std::snprintf(line, sizeof(line),
                  "  communicator: predicted includes %lld B (%.2f MiB) of NCCL's own buffers, an estimate from NCCL's "
                  "defaults (docs/design.md); NCCL allocates them itself, so they are not in the measured column\n",
                  static_cast<long long>(nccl), static_cast<double>(nccl) / (1 << 20));
    out += line;
  }
  const MemoryPrediction pred = predict_memory(plan_, opt_, impl_->cx.rank, impl_->cx.model.buffer_plan(),
                                              impl_->cx.comm.buffers());
  if (pred.at(MemCategory::HostActivations) > 0)
    out += "  host_activations: the kept block inputs (activation_checkpointing.cpu_checkpointing), pinned host memory\n";
  if (opt_.offload.optimizer) {
    out += std::string("  host_master, host_moments, host_grads, host_params, host_staging: ") + (opt_.offload.pin_memory ? "pinned (page-locked)" : "pageable") +
           " host memory (offload_optimizer.pin_memory)";
    if (opt_.offload.params)
      out += std::string("; host_params ") + (opt_.offload.param_pin_memory ? "pinned" : "pageable");
    out += "\n";
  }
  std::snprintf(line, sizeof(line),
                "  model states: predicted %lld B, measured %lld B; ZeRO paper (16-bit params, fp32 Adam): %.0f B\n",
                static_cast<long long>(pred_states), static_cast<long long>(meas_states), zero_paper_model_state_bytes());
  return out + line + device_memory_text(device_memory());
}

// Beside the tracker: the pool's reserved vs in-use bytes, the memory outside the tracker and
// the whole device's figure (memory_report's tail, the JSON report's "device" object).
DeviceMemory ZeroEngine::device_memory() const {
  Device& dev = impl_->cx.dev;
  DeviceMemory d;
  const PoolStats ps = dev.pool().stats();
  d.pool_reserved = static_cast<int64_t>(ps.reserved);
  d.pool_in_use = static_cast<int64_t>(ps.in_use);
  d.pool_cached = static_cast<int64_t>(ps.cached);
  d.pool_device_allocations = ps.device_allocations;
  d.pool_reuses = ps.same_stream_reuses + ps.cross_stream_reuses + ps.cross_stream_waits;
  d.pool_cross_stream_waits = ps.cross_stream_waits;
  for (int i = 0; i < kNumMemCategories; ++i)
    if (!is_host_category(static_cast<MemCategory>(i)))
      d.tracked_reserved += static_cast<int64_t>(dev.tracker().reserved(static_cast<MemCategory>(i)));
  d.outside = dev.outside_tracker_memory();
  for (const OutsideTrackerMemory& o : d.outside) d.outside_total += o.bytes;
  d.device_used = dev.device_used_bytes();
  d.process = read_process_memory();
  return d;
}

namespace {

std::string process_memory_text(const ProcessMemory& p) {
  if (!p.available) return "  this process: /proc/self/smaps not readable, resident memory unknown\n";
  auto mib = [](int64_t b) {
    char t[32];
    std::snprintf(t, sizeof(t), "%.2f MiB", static_cast<double>(b) / (1 << 20));
    return std::string(t);
  };
  std::string out = "  this process, resident (host, /proc/self/smaps; the tracked CPU-backend categories are inside "
                    "heap_anonymous):";
  for (const ProcessMemoryRow& r : p.rows) out += " " + r.name + " " + mib(r.bytes) + ",";
  out.back() = ';';
  return out + " total " + mib(p.resident) + " (VmRSS " + mib(p.vm_rss) + ", peak VmHWM " + mib(p.vm_hwm) + ")\n";
}

}  // namespace

std::string device_memory_text(const DeviceMemory& d) {
  char line[320];
  std::string out;
  std::snprintf(line, sizeof(line),
                "  memory pool (per-step buffers): reserved %lld B, in use %lld B, cached %lld B; %lld device "
                "allocations, %lld reuses (%lld after a cross-stream wait)\n",
                static_cast<long long>(d.pool_reserved), static_cast<long long>(d.pool_in_use),
                static_cast<long long>(d.pool_cached), static_cast<long long>(d.pool_device_allocations),
                static_cast<long long>(d.pool_reuses), static_cast<long long>(d.pool_cross_stream_waits));
  out += line;
  if (d.outside.empty()) {
    return out + "  outside the tracker: none on the device (CPU backend: no CUDA context, cuBLAS workspaces or NCCL "
                 "buffers)\n" + process_memory_text(d.process);
  }
  out += "  outside the tracker (measured, not predicted):\n";
  for (const OutsideTrackerMemory& o : d.outside) {
    std::snprintf(line, sizeof(line), "  %-18s %16lld  %s\n", o.category.c_str(), static_cast<long long>(o.bytes),
                  o.measured_by.c_str());
    out += line;
  }
  const int64_t explained = d.tracked_reserved + d.outside_total;
  std::snprintf(line, sizeof(line), "  device: reserved %lld B + outside %lld B = %lld B", static_cast<long long>(d.tracked_reserved),
                static_cast<long long>(d.outside_total), static_cast<long long>(explained));
  out += line;
  if (d.device_used > 0) {
    std::snprintf(line, sizeof(line), "; in use on the device (cudaMemGetInfo) %lld B, %.1f%% of it accounted for\n",
                  static_cast<long long>(d.device_used), 100.0 * static_cast<double>(explained) / d.device_used);
    out += line;
  } else {
    out += "; device total unknown (cudaMemGetInfo failed)\n";
  }
  return out + process_memory_text(d.process);
}

}  // namespace zt
