// engine.h — the ZeRO engine: stages 0–3 as different data flows over the same buffers.
//
// Buffers (per rank; Ψ = parameter elements, P = padded flat size, S = P/N shard size):
//   stage | params (compute dtype)  | grads                                | master + moments
//   0     | full [P]                | full [P], accumulated locally (*)    | full [P]
//   1     | full [P]                | full [P], accumulated locally (*)    | shard [S]
//   2     | full [P]                | shard accumulator [S] + bucket ring  | shard [S]
//   3     | shard [S] + gathered    | shard accumulator [S] + bucket ring  | shard [S]
// (*) in grad_accum_dtype; when that is not the compute dtype (or contiguous_gradients is off)
//     backward writes per-parameter compute-dtype buffers that are added in at each bucket close.
// plan.h's StageFlow is this table as data; the ZeroPlan holds the whole static schedule.
//
// One step, as phases (csrc/zero/, Megatron's names):
//   micro_step:  for each unit forward:  finish_param_sync(unit) -> forward
//                for each unit backward: finish_param_sync(unit) -> open its buckets -> backward
//                                        -> start_grad_sync(bucket) for the buckets it completes
//   step:        finish_grad_sync -> agree on norm / loss / overflow -> update_owned_shard
//                -> start_param_sync
// Collectives (all on the communicator's stream, one per bucket, in place):
//   start_grad_sync  stage 0: all-reduce at the accumulation boundary;
//                    stage 1: reduce-scatter at the boundary (result stays in the owned slice);
//                    stages 2-3: reduce-scatter every micro-step from a ring slot, the owned
//                    slice accumulated into the shard accumulator on the comm stream.
//   start_param_sync stages 1-2: all-gather per group (allgather_bucket_size) after the step;
//                    stage 3: persistent buckets re-gathered; the rest gathered per unit by
//                    finish_param_sync (prefetched within the stage-3 budgets), released after use.
// Wire dtype: when communication_data_type differs from the buffer being reduced, the bucket is
// cast into a double-buffered wire slot, reduced there in place, and cast back / accumulated.
// Events, not luck: a ring or wire slot is reused only after the comm-stream event recorded once
// its reduction was consumed; a gathered buffer (a memory-pool lease, core/memory_pool.h) is
// leased again only after the compute-stream event recorded at its release, after its last
// reader and after compute waited on its all-gather; the optimizer reads grads only after
// finish_grad_sync made the compute stream wait for the last reduction (the comm stream
// completes in issue order).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/core/process_memory.h"
#include "zerotrain/model/model.h"
#include "zerotrain/optim/loss_scaler.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/optim/optimizer_hparams.h"
#include "zerotrain/zero/plan.h"
#include "zerotrain/zero/step_graph.h"
#include "zerotrain/zero/step_timing.h"

namespace zt {

// ZeRO-Offload (stages 1-3): the owned master weights and optimizer moments live in host memory
// and a CPU optimizer updates them; per step the owned gradient slices go device -> host and the
// updated compute-dtype slices host -> device, chunk by chunk (sub_group_size) on a copy stream,
// pipelined against the CPU update.
struct OffloadOptions {
  bool optimizer = false;       // offload_optimizer.device == "cpu"
  bool pin_memory = false;      // offload_optimizer.pin_memory: page-locked host buffers
  int buffer_count = 4;         // offload_optimizer.buffer_count: host staging slots (>= 2)
  int host_threads = 0;         // CPU optimizer threads; 0: OMP_NUM_THREADS or the affinity mask
  bool params = false;          // offload_param.device == "cpu" (stage 3, with optimizer offload):
                                // the compute-dtype shard lives on the host, staged per gather
  bool param_pin_memory = false;  // offload_param.pin_memory
};

// Defaults are DeepSpeed 0.19.5's; options built from an empty config equal them
// (tests/config/test_defaults_agree.cpp).
// zero_quantized_weights' block: DeepSpeed's quantiser aims at groups of about this many
// elements (its target group size); zerotrain uses fixed blocks of it.
constexpr int64_t kQuantizedWeightsBlock = 8000;
// zero_quantized_gradients' block: int4 codes with one fp32 scale per this many elements.
constexpr int64_t kQuantizedGradientsBlock = 2048;

struct EngineOptions {
  int stage = 0;
  bool overlap_comm = false;
  // Stage 3 zero_quantized_weights (ZeRO++ qwZ): parameter all-gathers send block-wise int8 with
  // one fp32 scale per this many elements (0: off; master weights are never quantised).
  int64_t quantized_weights_block = 0;
  // Stage 3 zero_hpz_partition_size (ZeRO++ hpZ): a secondary copy of the parameters sharded over
  // blocks of this many consecutive ranks (usually the GPUs per node), which the gathers after a
  // bucket's first of a step read over the block instead of the world (1: off; must divide the world).
  int hpz_partition_size = 1;
  // Stage 3 zero_quantized_gradients (ZeRO++ qgZ): each bucket's gradient reduce-scatter is two
  // all_to_all hops (inside each node, then across nodes) of int4 blocks of this many elements
  // with one fp32 scale each, summed in fp32 (0: off).
  int64_t quantized_grads_block = 0;
  bool contiguous_gradients = true;
  int64_t reduce_bucket_size = 500000000;          // elements, >= 1 (config clamps)
  int64_t allgather_bucket_size = 500000000;       // elements (stages 1-2 post-step all-gather groups)
  int64_t sub_group_size = 1000000000;             // elements per optimizer call, >= 1
  int64_t prefetch_bucket_size = 50000000;         // stage 3
  int64_t max_live_parameters = 1000000000;        // stage 3
  int64_t max_reuse_distance = 1000000000;         // stage 3
  int64_t param_persistence_threshold = 100000;    // stage 3
  int gradient_accumulation_steps = 1;
  double gradient_clipping = 1.0;                  // <= 0: off
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  DType compute_dtype = DType::F32;
  DType master_dtype = DType::F32;             // BF16 with bf16_master_weights_and_grads
  DType moments_dtype = DType::F32;            // BF16 with bf16_optimizer_states
  DType grad_accum_dtype = DType::F32;         // accumulated gradients (stage 0/1 full, 2/3 shard)
  DType wire_dtype = DType::F32;               // communication_data_type: dtype of gradient collectives
  bool check_overflow = false;                 // skip steps whose gradient norm is NaN/Inf (train: fp16 and
                                               // fp32 always, bf16 unless check_grad_overflow is false)
  LossScalerConfig loss_scaler;                // Static 1.0 unless fp16
  OptimizerHparams optimizer;
  OffloadOptions offload;
};

// Offload copies and chunks so far (asserted by tests; sub_group_size changes the counts only).
struct OffloadStats {
  int64_t chunks = 0;                   // CPU optimizer calls
  int64_t d2h_copies = 0, h2d_copies = 0;  // d2h: reduced gradient slices; h2d: parameter chunks
  int64_t d2h_bytes = 0, h2d_bytes = 0;
  int64_t accumulations = 0;            // reduced slices added into the host gradient shard
  int64_t param_stagings = 0;           // offload_param: host shard slices staged before an all-gather
};

struct StepStats {
  int64_t step = 0;            // optimizer-step attempts so far (DeepSpeed global_steps)
  double loss = 0;             // mean over the global batch
  double grad_norm = 0;        // pre-clip, unscaled global L2 norm
  double clip_coefficient = 1; // factor applied to the gradient (<= 1)
  double loss_scale = 1;       // scale used for this step
  double lr = 0;               // learning rate used for this step
  bool skipped = false;        // non-finite gradient norm (overflow) with check_overflow: no update
  bool non_finite = false;     // the loss or the gradient norm is NaN/Inf (skipped or not)
  int64_t skipped_steps = 0;   // steps skipped so far, this one included (global - successful)
  std::optional<StepBreakdown> breakdown;  // set_timing(Breakdown or Trace): this rank's stream times
};

// Logical stage-3 gather counters (asserted by tests beside the comm log).
struct GatherStats {
  int64_t gathers = 0;              // all-gathers of parameter buckets issued
  int64_t prefetched = 0;           // of which issued ahead of need
  int64_t secondary = 0;            // of which from the hpZ secondary partition (over the rank's hpZ block)
  int64_t peak_live_elems = 0;      // peak gathered (non-persistent) elements, including the current unit
  int64_t peak_live_beyond_current = 0;  // peak gathered elements not needed by the running unit
  int64_t reused = 0;               // gathers into a released buffer (no allocation)
};

struct MemoryLine {
  MemCategory category;
  int64_t predicted = -1;  // bytes, -1 = not covered by the ZeRO formula (activations, workspace)
  int64_t measured = 0;    // current bytes after set-up / peak for transient categories
  int64_t peak = 0;
  int64_t reserved = 0;    // bytes held for the category: measured + its memory-pool rounding and cache
};

// The device beside the tracker's categories (ZeroEngine::device_memory): the memory pool's
// reserved vs in-use bytes, the memory outside the tracker (CUDA context, cuBLAS workspaces,
// per-stream scratch, NCCL's buffers; none on the CPU backend) and the device's own in-use
// figure (cudaMemGetInfo; -1 where there is none).
struct DeviceMemory {
  int64_t pool_reserved = 0, pool_in_use = 0, pool_cached = 0;
  int64_t pool_device_allocations = 0, pool_reuses = 0, pool_cross_stream_waits = 0;
  int64_t tracked_reserved = 0;  // reserved bytes of the device (non-host) categories
  std::vector<OutsideTrackerMemory> outside;
  int64_t outside_total = 0;
  int64_t device_used = -1;
  ProcessMemory process;  // this rank's resident host memory by kind (every backend)
};
std::string device_memory_text(const DeviceMemory& d);  // the memory report's last lines

struct EngineTestHooks;

class ZeroEngine {
 public:
  ZeroEngine(Model& model, Device& dev, Stream& compute, Communicator& comm, const EngineOptions& opt,
             std::unique_ptr<LrSchedule> schedule);
  ~ZeroEngine();
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  // Parameter initialisation from the counter-based RNG (each rank initialises only what it keeps).
  void init_parameters(uint64_t seed);
  // Parameters from a source of fp32 slices: src(param, begin, count, out) writes elements
  // [begin, begin+count) of parameter `param`. Each rank asks only for what it keeps.
  using ParamSliceSource = std::function<void(int param, int64_t begin, int64_t count, float* out)>;
  void load_parameters(const ParamSliceSource& src);
  // Full fp32 master weights by parameter index; collective; only rank `root` gets data.
  std::vector<std::vector<float>> gather_parameters(int root);

  // One micro-batch: forward and backward (reductions as the stage dictates). Non-blocking:
  // stage 3 recycles its gathered buffers through the memory pool with stream waits, not host waits.
  void micro_step(const Batch& batch);
  // At the accumulation boundary (after gradient_accumulation_steps micro-steps): norm, clip,
  // overflow check, optimizer, parameter all-gather. Blocks once, for the norm and loss.
  StepStats step();
  // Forward only, at an accumulation boundary (after step(), or before the first micro_step()):
  // the micro-batch's mean loss under the current parameters, as this rank computed it (the
  // caller averages across ranks). It runs eval_program (step_program.h) in the training
  // activation buffers: no gradient, optimizer or step-statistics buffer is touched and nothing
  // stays gathered, so training continues bitwise as without it. Collective at stage 3 (the
  // parameter gathers); blocks until the loss is on the host.
  double eval_loss(const Batch& batch);

  // Stream timing (step_timing.h) from the next step on: Off records nothing and costs nothing;
  // otherwise step() waits for the step's compute work and fills StepStats::breakdown.
  void set_timing(TimingLevel level);
  // Traced steps' timelines (TimingLevel::Trace), collectives included; waits for the comm stream.
  std::vector<StepTimeline> take_timelines();

  // train --cuda-graph (zero/step_graph.h): after `warmup_steps` eager step() calls, each
  // micro-step's device work is captured once per micro-step kind and replayed while its
  // signature holds; `note` gets the one-line capture / re-capture messages. InputError with the
  // reason when this engine's schedule is not static (graph_refusal: CPU backend, stage 3,
  // offload). A step timed by set_timing runs eagerly; train refuses timing and comm logging
  // with --cuda-graph outright (it owns those switches). Call at an accumulation boundary.
  void enable_cuda_graphs(int warmup_steps, std::function<void(const std::string&)> note);
  GraphStats graph_stats() const;

  const ZeroPlan& plan() const { return plan_; }
  const EngineOptions& options() const { return opt_; }
  const GatherStats& gather_stats() const;
  OffloadStats offload_stats() const;
  double current_lr() const;
  // Predicted vs measured bytes per category for this rank.
  std::vector<MemoryLine> memory_lines() const;
  DeviceMemory device_memory() const;
  std::string memory_report() const;
  // ZeRO paper figure for these settings (bytes per rank): 16Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N (mixed precision).
  double zero_paper_model_state_bytes() const;

  // ---- Checkpoints (csrc/zero/engine_checkpoint.cpp; files and meta.json: csrc/ckpt/) ----
  // The training state lives in the per-element optimizer states below plus four counters; the
  // compute-dtype params are always cast(master) and are rebuilt from it on load. Only at an
  // accumulation boundary (after step(), before the next micro_step()).
  struct CheckpointState {
    std::string name;  // "master", then "exp_avg" + "exp_avg_sq" (Adam) or "momentum" (SGD with momentum)
    DType dtype;       // as stored in the engine (master_dtype / moments_dtype)
  };
  std::vector<CheckpointState> checkpoint_states() const;
  // Elements [begin, begin + count) of parameter `param`.
  struct ParamPiece {
    int param = 0;
    int64_t begin = 0, count = 0;
  };
  // What `rank` writes under this plan: the real elements of its slice of every bucket, cut per
  // parameter, in flat order. The ranks' pieces cover every parameter exactly once at every
  // stage (at stage 0 too, where each rank holds everything: each writes only its slice).
  std::vector<ParamPiece> checkpoint_pieces(int rank) const;
  // This rank's pieces of state `s`, in order, in the state's dtype: sink(piece, offset within
  // the piece, count, bytes), at most chunk_elems elements per call (one staging buffer).
  using StateSink = std::function<void(size_t piece, int64_t offset, int64_t count, const void* bytes)>;
  void read_checkpoint_state(int s, int64_t chunk_elems, const StateSink& sink);
  // Overwrites every state this rank keeps under its own plan (what its optimizer updates):
  // src(state, param, begin, count, out) writes fp32 values, chunk_elems elements at a time
  // through one staging buffer; then params = cast(master) and the parameter sync starts.
  // Returns the staging buffer's bytes (tracked as Workspace while it lives).
  using StateSource = std::function<void(int s, int param, int64_t begin, int64_t count, float* out)>;
  int64_t load_checkpoint_state(const StateSource& src, int64_t chunk_elems);
  struct Counters {
    int64_t global_steps = 0;          // optimizer-step attempts (the data cursor: next global batch)
    int64_t successful_steps = 0;      // Adam's step count; global - successful = skipped (overflow)
    int64_t lr_last_batch_iteration = -1;
    LossScaler::State loss_scaler;
  };
  Counters counters() const;
  void restore_counters(const Counters& c);
  // Collective. Every parameter, in index order, as fp32 master values to sink(param, values)
  // on `root`: buckets are all-gathered one at a time (stage 0: read locally on root), so no
  // rank ever holds more than a bucket or two of the model.
  void stream_parameters(int root, const std::function<void(int param, const float* values)>& sink);

  struct Impl;

 private:
  friend void set_engine_test_hooks(ZeroEngine& engine, EngineTestHooks hooks);  // engine_testing.h
  EngineOptions opt_;
  ZeroPlan plan_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
