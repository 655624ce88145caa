// calibrate.h — a hardware profile measured on this machine (`zerotrain simulate --calibrate`):
// the CPU backend's kernels timed at the model's shapes while every rank of the job runs the same
// work (ranks share the cores and the memory bus, as in training), and the communicator's
// collectives timed at small and large messages.
//
// What each profile key becomes (the cost model's definitions, cost_model.h):
//  * peak_fp32 / peak_bf16_flops_per_s: the best GEMM rate per rank over square shapes (256-1024) in that dtype;
//  * efficiency.gemm: the block's linear forward + backward at B·T × C (weights C×3C, C×C, C×4C, 4C×C)
//    in the compute dtype, FLOPs / time / peak;
//  * efficiency.attention: tiled attention forward + backward, the cost model's 12·B·T²·C FLOPs
//    / time / peak;
//  * elementwise rate: two LayerNorms, GELU over 4C, two residual adds (the cost model's 18·C
//    bytes per token) / time; optimizer rate: AdamW over a shard, the cost model's bytes per
//    element / time; copy rate: a 64 MiB copy's bytes read + written / time, per rank;
//  * hbm_bytes_per_s: the best of the three (at a small model's working set the caches outrun a
//    large copy), efficiency.elementwise and .optimizer their rates / hbm;
//  * host memory (per node) = copy rate × ranks on the node; host link = copy rate (a memcpy);
//  * collectives, with N ranks: L = an 8-byte all-gather's time, β fitted by least squares through
//    (0, L) to all-gathers of 64 KiB to 16 MiB per rank, t = L + (N-1)/N·bytes / β; launch latency
//    = L and a negligible per-step latency (one world size cannot separate them: the profile is
//    exact at this N), β the intra-node bandwidth. One node:
//    the inter-node link is set to the intra-node one.
//  * collective_beside_compute_s: four 8 KiB-per-rank all-gathers queued while the rank's thread
//    multiplies matrices, the span to the last one's end / 4 (the median of five rounds' medians of
//    six, the slowest rank's); 0 when within twice their idle time. On a machine whose cores are all compute's, this is the
//    OS scheduler's turn for the comm thread (milliseconds), not the link.
// Known limit on a CPU machine: ranks share its cores and memory bus; compute's slowdown from the
// comm thread's turns is not measured.
#pragma once
#include <cstdint>
#include <string>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/dtype.h"
#include "zerotrain/sim/hardware.h"

namespace zt {

struct CalibrationShapes {
  int64_t batch = 1, T = 64, C = 128, H = 4;  // one micro-batch of a GPT block (MLP: T = 1, H = 0)
  DType compute = DType::F32;
  int64_t optimizer_elems = int64_t(1) << 20;  // one rank's shard
  double optimizer_bytes_per_element = 16;    // cost_model.h's optimizer_bytes_per_element
  double seconds_per_measurement = 0.3;       // each rate is the median of repeats filling about this
};

// Collective time measurements (seconds) behind the link fit, for the report.
struct CollectiveFit {
  double small_all_gather_s = 0, large_all_gather_s = 0;  // 8 B and 16 MiB per rank
  double large_bytes = 0;                                  // the large one's whole buffer
};

struct Calibration {
  HardwareProfile profile;
  CollectiveFit links;
};

// Collective over `comm` (every rank calls it); rank 0's profile is the one to write. `name`
// becomes the profile's name.
Calibration calibrate(const CalibrationShapes& shapes, Communicator& comm, int ranks_per_node, const std::string& name);

}  // namespace zt
