// estimate.h — `zerotrain estimate`: the per-rank memory of a run, per category, from the
// DeepSpeed config, the model file and the world size, without allocating anything (a plan-only
// model gives the parameters and the buffer list; memory_predict.h does the arithmetic the
// in-run memory report compares against).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zerotrain/app/client_optimizer.h"
#include "zerotrain/config/ds_config.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/zero/memory_predict.h"

namespace zt {

struct MemoryEstimate {
  int stage = 0, world = 1;
  Recompute recompute = Recompute::None;
  CommBackend backend = CommBackend::MPI;  // whose communicator buffers are predicted
  std::vector<MemoryPrediction> ranks;  // per rank (they differ only in host staging)
  int64_t activations_by_recompute[3] = {0, 0, 0};  // activations bytes at none / block / selective
  int64_t psi = 0;                         // Ψ: model parameters (elements)
  bool offload_optimizer = false, offload_params = false;
  int64_t max_device_total() const;
  int64_t max_host_total() const;
};

// A model built for its parameters and buffer list only (nothing allocated) on a CPU device, as
// `train` would build it for this config, and its ZeRO plan at `world` ranks on `nodes` nodes;
// the logits padding is `backend`'s device's. Members are destroyed model first.
struct PlanOnlyModel {
  std::unique_ptr<Device> dev;
  std::unique_ptr<Stream> stream;
  ModelOptions options;
  std::unique_ptr<Model> model;
  ZeroPlan plan;
};
PlanOnlyModel plan_only_model(const DsConfig& cfg, const ModelConfig& model, const EngineOptions& eopt,
                              Recompute recompute, CommBackend backend, int world, int nodes = 1);

// "cpu" -> MPI, "cuda" -> NCCL, "auto" -> as `train --device auto`: NCCL when a CUDA GPU is
// visible, else MPI. InputError naming `flag` otherwise.
CommBackend comm_backend_for_device(const std::string& device, const std::string& flag);
// InputError on settings zerotrain cannot run (same rules as train), or on a bad NCCL_* buffer
// size when `backend` is NCCL (its buffers are estimated from them).
// client: the optimizer when the config has no section (as train's flags; app/client_optimizer.h).
MemoryEstimate estimate_memory(const DsConfig& cfg, const ModelConfig& model, int world, Recompute recompute,
                               CommBackend backend = comm_backend_for_device("auto", "--device"),
                               const ClientOptimizer& client = {});
// Per-category table with units, the named parts of buckets / gather / workspace, the
// activations at each recompute setting.
// ranks_per_node: for the host total per node when host categories are used (offload). With
// offload_optimizer, the model states beside the ZeRO-Offload formula (zero_offload_formula).
std::string estimate_report(const MemoryEstimate& e, int64_t ranks_per_node);
// ZeRO-Offload's figure for these settings, per rank, in bytes (16-bit parameters, fp32 Adam,
// fp32 gradients on the host): device 2Ψ (stage 1 adds its unpartitioned fp32 gradients, 4Ψ;
// stage 3 with offload_param keeps none); host 4Ψ/N gradients + 12Ψ/N optimizer states (+ 2Ψ/N
// parameters with offload_param).
struct OffloadFormula {
  double device = 0, host = 0;
};
OffloadFormula zero_offload_formula(const MemoryEstimate& e);
// The --memory-report JSON schema with predicted_bytes only: {stage, world_size, ranks:[{rank, categories}]}.
std::string estimate_json(const MemoryEstimate& e);

}  // namespace zt
