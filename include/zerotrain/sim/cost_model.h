// cost_model.h — how long each piece of a training step takes on a HardwareProfile
// (docs/design.md, "The step simulator"). Pure arithmetic, no state besides the machine.
//
//  * Unit forward / backward: GEMM FLOPs at peak x efficiency.gemm, attention's T² FLOPs at
//    peak x efficiency.attention, elementwise bytes at HBM bandwidth x efficiency.elementwise.
//    Peak is bf16 for a bf16 / fp16 compute dtype, fp32 otherwise.
//  * Optimizer: the bytes it moves per element of the range it updates at HBM bandwidth x
//    efficiency.optimizer (device), or at the rank's share of the node's host memory bandwidth
//    (offload_optimizer's CPU optimizer).
//  * Collectives (alpha-beta per algorithm, NCCL's latency decomposition): a ring reduce-scatter /
//    all-gather of B bytes over N ranks on K nodes takes α0 + (N-K)·α_intra + (K-1)·α_inter +
//    (N-1)/N·B/β, all-reduce two passes of it; β is the intra-node link's, or the inter-node link's
//    per GPU once the ring spans nodes. Across nodes an all-reduce takes the faster of the ring and
//    a tree: α0 + 2·((N/K-1)·α_intra + ⌈log2 K⌉·α_inter) + 2·B/(0.9·β_inter).
//  * Host <-> device copies at the host link's bandwidth.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "zerotrain/comm/comm_log.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/sim/hardware.h"
#include "zerotrain/zero/engine.h"
#include "zerotrain/zero/plan.h"

namespace zt {

// The work of one unit's forward or backward over one micro-batch on one rank.
struct UnitCost {
  double gemm_flops = 0;         // matrix multiplications
  double attention_flops = 0;    // GPT blocks: QKᵀ and probabilities·V (the T² terms)
  double elementwise_bytes = 0;  // lookups, norms, activations, residual adds, the loss
};

// What a model asks of one rank per micro-step, unit by unit (indexed like plan units).
struct SimWorkload {
  std::vector<UnitCost> forward, backward;  // backward includes the recomputed forward work
  int64_t micro_batch = 1;                  // samples per rank per micro-step
  double tokens_per_sample = 1;             // GPT: n_ctx; MLP: 1
  double flops_per_sample = 0;              // model FLOPs (forward + backward), as train's MFU
};

// Forward: 2·params·tokens GEMM FLOPs per unit (GPT: the embeddings are lookups, the head's
// GEMM is the tied wte), plus 4·B·T²·C attention FLOPs per GPT block; backward twice the
// forward; recompute block adds each block's forward to its backward, selective its attention.
SimWorkload make_workload(const ModelConfig& model, const ZeroPlan& plan, int64_t micro_batch, Recompute recompute,
                          DType compute);

// One collective as the cost model prices it.
struct CollectiveCost {
  const char* algorithm = "none";  // "ring" or "tree"; "none" on one rank
  double latency_s = 0;            // the α part
  double seconds = 0;              // α part + bytes / bandwidth part
};

class CostModel {
 public:
  // world ranks on `nodes` nodes (world / nodes ranks per node); compute: the engine's dtype.
  CostModel(const HardwareProfile& hw, int world, int nodes, DType compute);
  double unit_seconds(const UnitCost& c) const;
  double elementwise_seconds(double bytes) const;
  double optimizer_seconds(double bytes) const;      // device optimizer
  double host_optimizer_seconds(double bytes) const;  // this rank's share of the node's DRAM
  double copy_seconds(double bytes) const;            // host link
  // One collective of a buffer of `bytes` (the whole buffer, as PlannedCollective::bytes), over
  // every rank or a group of them (RankGroup): on the intra-node link when the group lies inside a
  // node, else at the inter-node link, its steps crossing as many node boundaries as the group
  // spans nodes. all_to_all: g−1 direct exchanges of bytes/g each.
  CollectiveCost collective(CommOp op, double bytes, RankGroup group = {}) const;
  double collective_seconds(CommOp op, double bytes, RankGroup group = {}) const;
  // A collective that takes `alone_s` with the rank's cores to itself, while compute runs beside it
  // (the profile's collective_beside_compute_s: the comm thread waits for its turn on a shared core).
  double beside_compute_seconds(double alone_s) const { return std::max(alone_s, hw_.collective_beside_compute_s); }
  bool comm_shares_cores() const { return hw_.collective_beside_compute_s > 0; }
  bool ring_spans_nodes() const { return nodes_ > 1; }
  double link_bytes_per_s() const;
  double link_latency_s() const;
  double peak_flops() const { return peak_; }  // one GPU's, for the compute dtype
  const HardwareProfile& hardware() const { return hw_; }

 private:
  HardwareProfile hw_;
  int world_ = 1, nodes_ = 1;
  double peak_ = 0;
};

// Bytes the optimizer moves per element it updates: master, moments, the gradient (accumulation
// dtype) and the compute-dtype parameter it writes (AdamW with bf16 compute, fp32 states: 18 B).
double optimizer_bytes_per_element(const EngineOptions& o, DType grad_dtype);

}  // namespace zt
