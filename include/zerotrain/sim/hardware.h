// hardware.h — a machine as the step simulator sees it (configs/hardware/*.json): peak FLOP/s,
// memory and link bandwidths, latencies, and the fraction of peak each class of op reaches.
//
// File format (every key required but the last below, no other key allowed; numbers > 0,
// efficiencies in (0, 1]):
//   {"name": "h100_sxm_8x", "sources": "where each number comes from",
//    "peak_bf16_flops_per_s": 989e12, "peak_fp32_flops_per_s": 67e12,
//    "device_memory_bytes": 85899345920, "hbm_bytes_per_s": 3.35e12,
//    "efficiency": {"gemm": 0.6, "attention": 0.4, "elementwise": 0.7, "optimizer": 0.6},
//    "gpus_per_node": 8, "collective_launch_latency_s": 8e-6,
//    "intra_node_bytes_per_s": 360e9, "intra_node_latency_s": 8e-6,
//    "inter_node_bytes_per_s_per_gpu": 50e9, "inter_node_latency_s": 15e-6,
//    "host_link_bytes_per_s": 50e9, "host_memory_bytes_per_s": 300e9,
//    "collective_beside_compute_s": 0.007}   (optional, >= 0; absent: 0)
// Latencies are per ring step (hop) except the launch latency, paid once per collective.
// Link bandwidths are per GPU and per direction; host memory bandwidth is the node's (its ranks
// share it). collective_beside_compute_s: where the collectives run on a thread that shares the
// rank's cores with compute (the CPU backend with as many threads as cores), the time one takes
// while compute runs — the OS scheduler's turn for that thread, not the link's; once compute
// blocks on it, it runs at the link's speed. 0 where communication has engines of its own (GPUs).
#pragma once
#include <cstdint>
#include <string>

namespace zt {

struct OpEfficiency {
  double gemm = 1, attention = 1, elementwise = 1, optimizer = 1;  // fraction of peak reached
};

struct HardwareProfile {
  std::string name, sources;
  double peak_bf16_flops = 0;   // FLOP/s per GPU, dense bf16 / fp16 tensor cores
  double peak_fp32_flops = 0;   // FLOP/s per GPU, plain fp32
  double device_memory_bytes = 0;  // one GPU's memory (what `tune` fits candidates into)
  double hbm_bytes_per_s = 0;   // device memory bandwidth
  OpEfficiency efficiency;
  int64_t gpus_per_node = 1;
  double launch_latency_s = 0;                        // a collective's fixed cost (NCCL's base latency)
  double intra_bytes_per_s = 0, intra_latency_s = 0;  // one node's GPUs (NVLink / PCIe peer); latency per ring step
  double inter_bytes_per_s = 0, inter_latency_s = 0;  // between nodes, per GPU (its NIC's share)
  double host_link_bytes_per_s = 0;                   // device <-> pinned host memory (PCIe)
  double host_memory_bytes_per_s = 0;                 // the node's DRAM, shared by its ranks
  double collective_beside_compute_s = 0;             // a collective's least time while compute runs (0: none)
};

// Reads and validates a profile; InputError naming the file and the key (missing, unknown,
// wrong type, not > 0, an efficiency above 1).
HardwareProfile load_hardware_profile(const std::string& path);

}  // namespace zt
