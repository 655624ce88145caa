// memory_predict.h — the per-rank memory prediction, per category, as a pure function of the
// plan, the engine options and the model's buffer list. ZeroEngine::memory_lines() (the in-run
// memory report) and `zerotrain estimate` / `check-config --model` call the same function, so
// the estimate is what a run measures. Nothing is allocated.
#pragma once
#include <cstdint>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/allocator.h"
#include "zerotrain/model/model.h"
#include "zerotrain/zero/engine.h"
#include "zerotrain/zero/plan.h"

namespace zt {

struct MemoryPrediction {
  std::vector<int64_t> bytes = std::vector<int64_t>(kNumMemCategories, -1);  // per category; -1: not predicted
  std::vector<BufferSpec> items;  // named parts (model buffers, ring, wire slots, gathered buckets, ...)
  int64_t at(MemCategory c) const { return bytes[static_cast<int>(c)]; }
  // Σ of the predicted categories that live in device memory / in host memory.
  int64_t device_total() const;
  int64_t host_total() const;
};

// Steady-state bytes after set-up (what the tracker's current counts hold during training) on
// `rank`. Transient buffers (parameter initialisation staging, --save-weights gathers) are not
// included: they are freed before training and bounded by kInitStagingElems / the save path.
// `comm_buffers` (comm_buffer_plan, or Communicator::buffers()) make the communicator category;
// entries marked `estimate` (NCCL's own buffers) are predicted but never measured by the tracker.
MemoryPrediction predict_memory(const ZeroPlan& plan, const EngineOptions& opt, int rank,
                                const std::vector<BufferSpec>& model_buffers,
                                const std::vector<CommBufferSpec>& comm_buffers);
// Σ of the `estimate` entries: bytes the communicator category predicts that the tracker cannot see.
int64_t untracked_comm_bytes(const std::vector<CommBufferSpec>& comm_buffers);

// Parameter initialisation / loading stages the fp32 master through at most this many elements.
constexpr int64_t kInitStagingElems = int64_t(1) << 22;

bool is_host_category(MemCategory c);

// The ZeRO paper's model states per rank (16-bit parameters and gradients, fp32 Adam: K = 12 bytes
// per parameter) for `psi` parameters on `world` ranks at `stage`: (2+2+K)Ψ, 4Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N,
// (4+K)Ψ/N.
double zero_paper_model_state_bytes(int stage, double psi, int world);
// Params + grads + master + optimizer moments of a prediction (the paper's "model states").
int64_t model_state_bytes(const MemoryPrediction& p);

// ZeRO-Offload's host staging on `rank`: `count` parameter slots (offload buffer_count, at least
// 2), each one widest optimizer chunk (sub_group_size) of compute-dtype parameters; and
// `grad_count` gradient slots, each one widest bucket slice in plan.reduced_dtype().
struct OffloadSlots {
  int count = 0;
  int64_t elems = 0;       // elements per parameter slot
  int grad_count = 0;
  int64_t grad_elems = 0;  // elements per gradient slot
  int64_t bytes(const ZeroPlan& plan) const;  // all slots
};
OffloadSlots offload_slots(const ZeroPlan& plan, const EngineOptions& o, int rank);

// The engine's plan for a model (its params and units) under these options at `world` ranks on
// `nodes` nodes (placed blocked; qgZ's hops follow them) — what ZeroEngine builds at start-up; the
// estimate calls it on a plan-only model.
PlanOptions plan_options_of(const EngineOptions& o, int world, int nodes = 1);
ZeroPlan plan_for_model(const Model& model, const EngineOptions& o, int world, int nodes = 1);

}  // namespace zt
