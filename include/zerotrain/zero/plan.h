// plan.h — the static ZeRO schedule, built once from (model units, options, world size) and
// identical on every rank (its hash is compared at start-up). The engine only executes it.
//
// Layout (Megatron's distributed-optimizer layout, docs/design.md):
//  * Parameters are laid out in forward (unit) order in one flat space.
//  * The flat space is cut into buckets. A bucket never spans two units and never splits a
//    parameter; within a unit a new bucket starts when adding the next parameter would exceed
//    `reduce_bucket_size` (so a bucket smaller than every parameter gives one bucket per parameter).
//    At stage 3, parameters with numel <= persistence_threshold are grouped into their unit's
//    own "persistent" bucket (gathered once after each step, never released).
//  * Alignment (kFlatAlignElems = A = 8 elements: 16 bytes of the narrowest dtype a flat buffer
//    holds, bf16/fp16; 32 bytes of fp32): every parameter's offset inside its bucket is a
//    multiple of A (the alignment gap after a parameter whose numel is not is padding), the
//    bucket's span (its last parameter's end) is padded up to a multiple of A·N, and N equal
//    slices of padded/N (a multiple of A) elements are cut. So every parameter's flat_begin,
//    every bucket's flat_begin / shard_begin / ring_offset, and every slice boundary in both
//    layouts is a multiple of A: a buffer whose base is 16-byte aligned gives 16-byte aligned
//    vector loads at every one of them. Bucket membership still counts real elements only
//    (a bucket is cut when Σ numel would exceed reduce_bucket_size), so alignment never splits or
//    merges buckets.
//  * Rank r owns slice r of every bucket. Rank r's shard is its slices of all buckets, in bucket
//    order, contiguous. One in-place reduce-scatter / all-gather per bucket, no staging copies.
//
// Two index spaces ("layouts"): Full addresses the padded flat buffer [P]; Shard addresses a
// rank's shard [S = P/N]. Every buffer of the engine lives in one of them (StageFlow says which),
// and every offset the engine uses comes from the named ranges below. Padding elements (the
// alignment gaps between parameters and the tail after the span) are zero in params, grads,
// master weights and moments; the tail is excluded from the norm, the gaps inside the span are
// normed as the zeros they are (they add exactly 0), and the optimizer maps 0 to 0 on them
// (zero grad, zero moments, zero weight: the AdamW / SGD update is exactly 0).
//
// Schedule (built by make_engine_plan): which unit's backward opens / closes each bucket, the
// bucket ring and wire slots (stages 2-3), the post-step all-gather groups (stages 1-2), and the
// stage-3 gather / prefetch / release lists per position (0..U-1 forwards, U..2U-1 backwards).
// step_program.h turns these into the ordered ops of a step, which the engine runs one by one.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/comm/comm_log.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/model/model.h"

namespace zt {

// Elements [begin, begin + count) of one index space.
struct ElemRange {
  int64_t begin = 0, count = 0;
  int64_t end() const { return begin + count; }
  ElemRange sub(int64_t offset, int64_t n) const { return {begin + offset, n}; }
};
// The elements two ranges share (count 0 when they are disjoint).
inline ElemRange intersect(const ElemRange& a, const ElemRange& b) {
  const int64_t lo = a.begin > b.begin ? a.begin : b.begin, hi = a.end() < b.end() ? a.end() : b.end();
  return {lo, hi > lo ? hi - lo : 0};
}

// Alignment unit of the flat space, in elements (see the layout notes above).
constexpr int64_t kFlatAlignElems = 8;
static_assert(kFlatAlignElems * 2 == 16, "A elements of a 2-byte dtype are 16 bytes");

enum class Layout : uint8_t { Full, Shard };  // padded flat space [P] / one rank's shard [S]

// What a ZeRO stage keeps and sends: the one place the stage number is interpreted.
struct StageFlow {
  int stage = 0;
  Layout params = Layout::Full;     // compute-dtype parameters (Shard: stage 3)
  Layout grads = Layout::Full;      // accumulated gradients (Shard: stages 2-3, via the bucket ring)
  Layout optimizer = Layout::Full;  // master weights and moments (Shard: stages 1-3)
  bool reduce_every_micro_step = false;  // stages 2-3: the ring is reduced as backward runs
  bool all_reduce_grads = true;          // stage 0; otherwise reduce-scatter into the owner
  bool gather_after_step = false;        // stages 1-2: all-gather updated slices after the step
  bool gather_before_use = false;        // stage 3: all-gather each bucket before each use
};
StageFlow stage_flow(int stage);
// The "reduce now" rule: a completed bucket is reduced in every micro-step (stages 2-3) or only in
// the last one of the accumulation window (stages 0-1; earlier ones keep accumulating in place).
inline bool reduces_now(const StageFlow& f, bool boundary) { return f.reduce_every_micro_step || boundary; }

// What one collective of a step moves. to_string() is the label the engine passes to the
// communicator (and the comm log shows): "b4" (a bucket's gradients), "gather b4" (stage 3),
// "gather b4 int8" (stage 3 with quantised weights: the int8 codes and block scales as fp32 words),
// "gather b4 hpz" (stage 3 with hpZ: from the secondary partition, over the rank's hpZ block),
// "b4 int4 intra" / "b4 int4 inter" (stage 3 with qgZ: the gradient reduce-scatter's all_to_all
// inside each node and across nodes, int4 codes and block scales as fp32 words),
// "ag0.b4" (post-step all-gather group 0), "step stats", "lamb norms".
struct CollectiveLabel {
  enum class Kind : uint8_t {
    Grads, Gather, QuantizedGather, SecondaryGather, QuantizedGradsIntra, QuantizedGradsInter, GroupGather, StepStats,
    LambNorms
  };
  bool grads() const { return kind == Kind::Grads || kind == Kind::QuantizedGradsIntra || kind == Kind::QuantizedGradsInter; }
  bool params() const {
    return kind == Kind::Gather || kind == Kind::QuantizedGather || kind == Kind::SecondaryGather || kind == Kind::GroupGather;
  }
  Kind kind = Kind::Grads;
  int bucket = -1;  // Grads, Gather, GroupGather
  int group = -1;   // GroupGather
  std::string to_string() const;
};

// Bytes one rank sends (and, as much, receives) for one collective over `world` ranks with the
// ring algorithms: reduce-scatter and all-gather of a B-byte buffer move (N-1)/N·B each way,
// all-reduce 2(N-1)/N·B (a reduce-scatter followed by an all-gather).
double ring_bytes_per_rank(CommOp op, size_t buffer_bytes, int world);

// The step statistics every rank contributes at the boundary: one double per bucket (its owned
// squared gradient norm), then the loss as a float in one more double slot; all-gathered as
// 2·slots fp32 words per rank so both backends move it as plain bytes.
struct StepStatsLayout {
  int64_t slots = 1;
  int64_t loss_slot() const { return slots - 1; }
  int64_t words() const { return 2 * slots; }
};

struct PlanBucket {
  int id = 0;
  int unit = 0;
  bool persistent = false;     // stage-3 small-parameter bucket
  int64_t flat_begin = 0;      // padded flat offset of the bucket's first element
  int64_t numel = 0;           // real elements: Σ numel of its parameters
  int64_t span = 0;            // [0, span) holds its parameters and the alignment gaps between
                               // them (span >= numel; == numel when every numel is a multiple of A)
  int64_t padded = 0;          // span rounded up to a multiple of A·N
  int64_t slice = 0;           // padded / N: elements each rank owns (a multiple of A)
  int64_t shard_begin = 0;     // offset of this bucket's slice inside every rank's shard
  std::vector<int> params;     // parameter indices, in layout order
  // Schedule (make_engine_plan): backward of `opens_at` (highest unit writing its grads) opens
  // it; backward of `closes_at` (lowest such unit) completes it. Tied parameters make these differ.
  int opens_at = -1, closes_at = -1;
  int ag_group = -1;           // stages 1-2: post-step all-gather group
};

struct PlanParam {
  int index = 0;               // index into Model::params()
  int bucket = 0;
  int64_t flat_begin = 0;      // padded flat offset (a multiple of kFlatAlignElems)
  int64_t numel = 0;
};

// Stage 3, one position (a unit's forward or backward): buckets to gather now (needed, not
// live), the wait set (every needed bucket), prefetches issued after, and releases after it.
struct GatherStep {
  std::vector<int> gather, need, prefetch, release;
  int64_t live = 0;     // gathered non-persistent elements once the prefetches are issued
  int64_t current = 0;  // of which this position's own buckets
};

// One collective of a training step, in issue order (ZeroPlan::step_collectives). Fields match
// the communicator's log (CommRecord): count as passed, bytes = the full buffer size.
struct PlannedCollective {
  int micro = -1;          // micro-step (0-based); -1: at the accumulation boundary or after it
  std::string phase;       // "fwd u2", "bwd u1", "step", "after step"
  CommOp op = CommOp::AllGather;
  CollectiveLabel what;
  std::string label;       // what.to_string(): the label the engine passes ("b3", "gather b3", ...)
  size_t count = 0, bytes = 0;
  DType dtype = DType::F32;
  RankGroup group;         // the ranks it spans (comm_log.h); default: the world
};

// Which region of each bucket ZeroPlan::pieces intersects with the parameters.
enum class PieceScope : uint8_t {
  Owned,    // the rank's slice (what it writes to a checkpoint; the ownership table)
  Updated,  // what the rank's optimizer updates: updated(b, rank) (whole buckets at stage 0)
};

// One parameter's elements inside one rank's region of its bucket (ZeroPlan::pieces).
struct PlanPiece {
  int param = 0, bucket = 0;
  int64_t begin = 0, count = 0;  // elements [begin, begin + count) of the parameter
  int64_t flat = 0;              // Layout::Full offset of element `begin`
  int64_t shard = 0;             // its offset in the rank's Layout::Shard buffers (at stage 0,
                                 // where nothing is sharded, the flat offset, as updated() says)
  ElemRange at(Layout l) const { return {l == Layout::Full ? flat : shard, count}; }
};

struct PlanOptions {
  int stage = 0;
  int world = 1;
  // DeepSpeed's knobs by DeepSpeed's names, in elements (EngineOptions holds the same values).
  int64_t reduce_bucket_size = 1;
  int64_t allgather_bucket_size = 1;           // stages 1-2 post-step groups
  int64_t param_persistence_threshold = 0;     // stage 3
  int64_t prefetch_bucket_size = 0, max_live_parameters = 0, max_reuse_distance = 0;  // stage 3
  DType compute = DType::F32, grad_accum = DType::F32, wire = DType::F32;
  bool contiguous_gradients = true;
  bool param_norms = false;                 // LAMB: per-parameter norms summed across ranks each step
  bool host_grads = false;                  // offload_optimizer: the reduced gradients accumulate on the host
  int64_t quantized_weights_block = 0;      // stage 3 zero_quantized_weights: int8 blocks of this size (0: off)
  int hpz = 1;                              // stage 3 zero_hpz_partition_size: secondary partition ranks (1: off)
  int64_t quantized_grads_block = 0;        // stage 3 zero_quantized_gradients: int4 blocks of this size (0: off)
  int nodes = 1;                            // nodes the world's ranks are placed on, blocked (qgZ's two hops)
};

struct ZeroPlan {
  StageFlow flow;
  int world = 1;
  int64_t reduce_bucket_size = 0;
  int64_t persistence_threshold = -1;  // < 0: no persistent buckets
  std::vector<PlanBucket> buckets;
  std::vector<PlanParam> params;       // indexed like Model::params()
  std::vector<std::vector<int>> unit_buckets;  // buckets holding the params of each unit
  std::vector<std::vector<int>> unit_params;   // parameters each unit's forward/backward reads
  int64_t numel = 0;                   // Σ parameter elements
  int64_t padded_numel = 0;            // Σ bucket.padded (a multiple of A·N)
  int64_t shard_numel = 0;             // padded_numel / N (a multiple of A)

  // ---- dtypes and gradient staging ----
  DType compute = DType::F32;
  DType grad_dtype = DType::F32;       // accumulated gradients (grad_accum_dtype at stages 0-1 and 2-3's shard)
  DType wire = DType::F32;             // gradient collectives
  bool staged_grads = false;           // backward writes per-parameter compute-dtype buffers, added at close
  // Stages 0-1 with bf16 compute and fp32 accumulation (contiguous_gradients): backward adds each
  // gradient straight into the full fp32 buffer (the model's grad dtype is fp32: bf16-input,
  // fp32-output GEMMs and column sums), so no 16-bit gradient copy exists — Megatron's main_grad.
  // Model states are then 6 + 12/N bytes per parameter (2 bf16 params, 4 fp32 grads, 12/N optimizer).
  bool fp32_backward_grads = false;
  // LAMB at stages 1-3: one all-reduce "lamb norms" of [2 x params] fp32 per step, after the step
  // statistics (each parameter's weight and update squared norms, summed over the ranks' pieces).
  bool param_norms_all_reduce = false;
  // offload_optimizer (stages 1-3): right after its reduction, the rank's reduced slice of each
  // bucket goes down on the copy lane and is added into a host fp32 gradient shard (Layout::Shard,
  // grad_dtype); the optimizer, the norms and the overflow check read that shard. Stages 2-3 then
  // keep no device gradient accumulator; stage 1 keeps only its unpartitioned backward buffer.
  bool host_grads = false;
  // ---- backward schedule: buckets opened / closed by each unit's backward ----
  std::vector<std::vector<int>> opens_at, closes_at;
  // ---- bucket ring (stages 2-3) and wire slots (wire dtype != the reduced buffer's) ----
  // The ring is one arena of ring_elems compute-dtype elements; bucket b's gradients live at
  // [ring_offset[b], + padded) while it is open. ring_overlaps[b]: every bucket (b included)
  // whose region intersects b's — opening b waits for their last reductions to be consumed.
  int64_t ring_elems = 0;
  std::vector<int64_t> ring_offset;
  std::vector<std::vector<int>> ring_overlaps;
  int wire_slots = 0;
  int64_t wire_slot_elems = 0;
  // ---- post-step all-gather groups (stages 1-2): [first, end) bucket ids ----
  std::vector<ElemRange> ag_groups;
  // ---- stage 3: per position, and the static peaks the schedule reaches ----
  std::vector<GatherStep> gather_steps;
  int64_t peak_live_elems = 0, peak_live_beyond_current = 0;

  // ---- named coordinates ----
  int num_units() const { return static_cast<int>(unit_params.size()); }
  // Schedule positions: 0..U-1 are the forwards in unit order, U..2U-1 the backwards from unit
  // U-1 down to unit 0 (gather_steps is indexed by position).
  int position_of(int unit, bool backward) const { return backward ? 2 * num_units() - 1 - unit : unit; }
  int unit_of(int pos) const { return pos < num_units() ? pos : 2 * num_units() - 1 - pos; }
  StepStatsLayout step_stats() const { return {static_cast<int64_t>(buckets.size()) + 1}; }
  const PlanBucket& bucket(int b) const { return buckets[static_cast<size_t>(b)]; }
  const PlanParam& param(int p) const { return params[static_cast<size_t>(p)]; }
  ElemRange bucket_range(int b) const { return {bucket(b).flat_begin, bucket(b).padded}; }  // Full
  ElemRange param_range(int p) const { return {param(p).flat_begin, param(p).numel}; }      // Full
  // Parameter p inside its bucket's buffer (a ring slot or a gathered bucket).
  ElemRange param_in_bucket(int p) const { return {param(p).flat_begin - bucket(param(p).bucket).flat_begin, param(p).numel}; }
  // Rank's slice of bucket b, in layout l.
  ElemRange slice(int b, int rank, Layout l) const {
    const PlanBucket& k = bucket(b);
    return l == Layout::Full ? ElemRange{k.flat_begin + rank * k.slice, k.slice} : ElemRange{k.shard_begin, k.slice};
  }
  // The head of rank's slice of bucket b that lies inside the bucket's span (parameters and the
  // zero alignment gaps between them; the tail padding excluded), in layout l.
  ElemRange real_slice(int b, int rank, Layout l) const;
  // The range of bucket b this rank's optimizer updates, in layout l: the whole bucket when the
  // optimizer is not sharded (stage 0), else the rank's slice.
  ElemRange updated(int b, int rank, Layout l) const {
    return flow.optimizer == Layout::Full ? bucket_range(b) : slice(b, rank, l);
  }
  int64_t numel_in(Layout l) const { return l == Layout::Full ? padded_numel : shard_numel; }
  // Where the optimizer reads the accumulated gradients: the host shard (host_grads) or flow.grads.
  Layout optimizer_grads() const { return host_grads ? Layout::Shard : flow.grads; }
  // The dtype of a bucket's reduced slice where its reduction leaves it: the full gradient buffer
  // (stages 0-1, grad_dtype) or the ring slot / wire slot (stages 2-3).
  DType reduced_dtype() const;
  int64_t max_slice() const;  // the widest bucket slice (elements)
  // ---- stage 3 with zero_quantized_weights (qwZ) ----
  // Every gather sends the rank's slice as int8 codes in blocks of quantized_weights_block
  // elements plus one fp32 scale per block (zero_ops::quantize_blockwise), packed into fp32 words:
  // [codes, padded to a whole word | scales]. 0: gathers send the compute dtype.
  int64_t quantized_weights_block = 0;
  int64_t quantized_gather_words(int64_t slice_elems) const;  // words per rank of one gather
  // ---- stage 3 with zero_hpz_partition_size (ZeRO++ hpZ) ----
  // A secondary copy of every non-persistent bucket, sharded over the rank's block of hpz
  // consecutive ranks (under blocked placement, inside its node): rank r keeps part r % hpz of the
  // gathered bucket, secondary_slice(b) = padded / hpz elements (a multiple of A) at
  // secondary_offset[b] of one buffer of secondary_numel compute-dtype elements. A gather from the
  // world refreshes the part; the step program's `secondary` gathers all-gather the bucket over
  // the block from it (step_program.h says which). 1: off (no secondary buffer).
  int hpz = 1;
  std::vector<int64_t> secondary_offset;  // per bucket; -1 for persistent buckets (never released)
  int64_t secondary_numel = 0;
  int64_t secondary_slice(int b) const { return bucket(b).padded / hpz; }
  // ---- stage 3 with zero_quantized_gradients (ZeRO++ qgZ) ----
  // Every Reduce is a two-hop quantised reduce-scatter (quantized_reduce.h): each destination
  // slice in int4 blocks of quantized_grads_block elements (one fp32 scale each), all_to_all among
  // the qgz_local ranks of a node, the node's partial sums (fp32) re-quantised and all_to_all'd
  // among the ranks of the same local rank on every node, the arrivals summed in fp32. A hop over
  // one rank is left out (one node: no second hop). 0: plain reduce-scatter in the wire dtype.
  int64_t quantized_grads_block = 0;
  int qgz_local = 1;   // L: ranks per node (the first hop's group); world / L nodes in the second
  int qgz_nodes() const { return world / qgz_local; }
  int64_t quantized_grad_words(int64_t slice_elems) const;  // fp32 words of one quantised slice
  int64_t owned_flat_begin(int b, int rank) const { return slice(b, rank, Layout::Full).begin; }
  // real_slice of every bucket in rank's shard, as (shard offset, count) runs (empty ones left out).
  std::vector<std::pair<int64_t, int64_t>> real_shard_runs(int rank) const;
  // Every parameter ∩ rank's region of its bucket, in bucket order then layout order (empty
  // intersections left out). The one place parameter and slice geometry meet: master
  // initialisation, checkpoint pieces and offsets, and the ownership table read it.
  std::vector<PlanPiece> pieces(int rank, PieceScope scope = PieceScope::Owned) const;

  // Stable hash of everything every rank must agree on (compared across ranks at start-up).
  uint64_t hash() const;
  std::string describe() const;  // human-readable table: bucket, unit, elements, padding, slice
  // One step of the schedule, position by position ("bwd u3: close b3 -> reduce-scatter b3 ...").
  std::string describe_timeline() const;
  // Every collective one optimizer step issues (without an overflow skip), in issue order: the
  // collectives of the step program's ops (step_program.h); the engine's comm log shows exactly these.
  std::vector<PlannedCollective> step_collectives(int gradient_accumulation_steps) const;
  // Which rank owns which real elements of each parameter (one line per parameter).
  std::string describe_ownership(const std::vector<std::string>& param_names = {}) const;
};

// The bucket layout alone (no schedule). persistence_threshold < 0 disables persistent buckets.
ZeroPlan make_zero_plan(const std::vector<ParamSpec>& params, int num_units, int world, int64_t reduce_bucket_size,
                        int64_t persistence_threshold);
// Layout + the whole static schedule the engine executes.
ZeroPlan make_engine_plan(const std::vector<ParamSpec>& params, const std::vector<std::vector<int>>& unit_params,
                          const PlanOptions& o);

}  // namespace zt
