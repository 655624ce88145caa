// step_graph.h — CUDA graphs for the steady-state micro-step (`zerotrain train --cuda-graph`).
//
// The captured region is one micro-step's device work after set_batch: every unit's forward,
// the loss accumulation, every unit's backward and the grad-sync hooks it fires (the scale /
// cast / reduce-scatter or all-reduce / accumulate launches on the compute and comm streams;
// the cross-stream events inside it become graph edges, NCCL calls become graph nodes).
// Outside it, every step: set_batch (host checks, tokens/targets copied into the model's fixed
// device buffers on the compute stream, before the launch) and the whole boundary step()
// (finish_grad_sync, the norm/loss exchange the host reads back, clipping, the overflow
// verdict, the loss scaler, the optimizer, the post-step all-gather). Those read device values
// on the host or make host decisions from them, so they cannot be replayed as they were.
//
// Ordering invariant (the joins): before each launch the compute stream waits for everything
// issued on the comm stream so far; after it the comm stream waits for the compute stream.
// So a launch is a full barrier between the engine's streams, and waits inside the region on
// events recorded outside it are redundant — the device layer skips them while capturing
// (core/device.h StreamGraph). This costs the overlap of the post-step parameter all-gather
// (stages 1-2) with the next micro-step's first units.
//
// A graph bakes in pointers, shapes and host scalars: GraphSignature lists them; it is taken
// before every launch and compared with the one captured; any difference means a re-capture,
// with a one-line reason. Graphs are cached per micro-step kind (first / middle / last of the
// accumulation window and the wire-slot phase), since those issue different work.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/core/tensor.h"

namespace zt {

// What decides whether the step's schedule is static enough to capture (train's flags and the
// resolved config). Host-only, so the rules are unit-tested without a GPU.
struct GraphEligibility {
  DeviceKind device = DeviceKind::CPU;
  int stage = 0;
  bool offload_optimizer = false, offload_params = false;
  bool timing = false;      // wall_clock_breakdown or --trace: per-unit timing events on the host
  bool comm_log = false;    // --comm-log or comms_logger: one host record per collective
  bool sync_check = false;  // ZT_CUDA_SYNC_CHECK=1: a stream sync after every op (illegal in a capture)
  bool side_stream = false; // the model also works on a stream of its own (Model::uses_side_stream)
  int warmup_steps = 0;
};
// Empty when eligible; otherwise one sentence naming the setting that makes capture wrong.
std::string graph_refusal(const GraphEligibility& g);

// Everything a captured micro-step baked in. Equal signatures: the replay issues exactly the
// work an eager micro-step would.
struct GraphSignature {
  uint64_t plan_hash = 0;       // buckets, units, stage, dtypes, world (plan.h ZeroPlan::hash)
  int stage = 0, world = 1;
  int gas = 1;                  // gradient_accumulation_steps
  bool first = true, boundary = true;  // first / last micro-step of the window (grad-sync work differs)
  int wire_next = 0;            // the next wire slot (communication_data_type casts alternate slots)
  int64_t batch_B = 0, batch_T = 0;
  std::vector<double> model_scalars;  // Model::launch_scalars (the loss divisor)
  float dloss = 1;              // loss scale / gas: a kernel argument of the head's backward
  std::vector<const void*> buffers;   // params, grads, staged grads, ring, wire slots, loss slot
};
// Empty when equal; otherwise the first difference, as "what: captured -> now".
std::string signature_difference(const GraphSignature& captured, const GraphSignature& now);
// "first", "middle", "last" or "only" (gas 1), plus the wire phase when it matters.
std::string micro_kind_name(const GraphSignature& s);

// What graphs did over a run (the end-of-run line and the tests).
struct GraphStats {
  int64_t captures = 0, replays = 0, eager_micro_steps = 0;
  int64_t recaptures = 0;       // captures that replaced a graph whose signature no longer held
  int64_t nodes = 0;            // graph nodes of the graphs held now
  std::string last_recapture;   // the last re-capture's reason
};

}  // namespace zt
