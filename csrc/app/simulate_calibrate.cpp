// simulate_calibrate.cpp — `zerotrain simulate --calibrate --config DS.json --model M.json --out P.json`,
// run under mpirun with the ranks the runs will use: measures this machine as a hardware profile
// (zerotrain/sim/calibrate.h) at the model's shapes; rank 0 writes it. Exit 0, or 2 on bad input.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "simulate_calibrate.h"
#include "estimate.h"
#include "zerotrain/app/thread_layout.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/sim/calibrate.h"
#include "zerotrain/sim/cost_model.h"

namespace zt {

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char b[32];
  std::strftime(b, sizeof(b), "%Y-%m-%d", std::gmtime(&t));
  return b;
}

CalibrationShapes shapes_for(const CalibrateArgs& a, int world) {
  const ModelConfig mcfg = parse_model_config_file(a.model);
  ConfigOptions copt;
  copt.world_size = world;
  copt.world_size_origin = "mpirun";
  copt.hidden_size = model_hidden_size(mcfg);
  const DsConfig cfg = load_ds_config(a.config, copt);
  const EngineOptions eopt = engine_options_from(cfg);
  CalibrationShapes s;
  s.batch = cfg.train_micro_batch_size_per_gpu;
  s.compute = eopt.compute_dtype;
  if (mcfg.is_token_model()) {
    s.T = mcfg.context_length();
    s.C = mcfg.hidden_size();
    s.H = mcfg.num_heads();
  } else {
    s.T = 1;
    s.C = mcfg.mlp.dims.empty() ? 128 : *std::max_element(mcfg.mlp.dims.begin(), mcfg.mlp.dims.end());
    s.H = 0;
  }
  const PlanOnlyModel pm = plan_only_model(cfg, mcfg, eopt, Recompute::None, CommBackend::MPI, world);
  const ZeroPlan& plan = pm.plan;
  s.optimizer_elems = std::max<int64_t>(1, plan.numel / (eopt.stage >= 1 ? world : 1));
  s.optimizer_bytes_per_element = optimizer_bytes_per_element(eopt, plan.reduced_dtype());
  return s;
}

nlohmann::ordered_json profile_json(const Calibration& c, const CalibrateArgs& a, const CalibrationShapes& s, int world) {
  const HardwareProfile& h = c.profile;
  char src[1024];
  std::snprintf(src, sizeof(src),
                "measured on %s (%s) on %s by zerotrain simulate --calibrate with %d rank(s), model %s, config %s "
                "(micro-batch %lld, %s); collectives: 8-byte all-gather %.1f us, %.1f MiB all-gather %.3f ms",
                process_info().host.c_str(), cpu_model().c_str(), today().c_str(), world, a.model.c_str(), a.config.c_str(),
                static_cast<long long>(s.batch), dtype_name(s.compute), c.links.small_all_gather_s * 1e6,
                c.links.large_bytes / (1 << 20), c.links.large_all_gather_s * 1e3);
  nlohmann::ordered_json j;
  j["name"] = h.name;
  j["sources"] = src;
  j["peak_bf16_flops_per_s"] = h.peak_bf16_flops;
  j["peak_fp32_flops_per_s"] = h.peak_fp32_flops;
  j["device_memory_bytes"] = h.device_memory_bytes;
  j["hbm_bytes_per_s"] = h.hbm_bytes_per_s;
  j["efficiency"] = {{"gemm", h.efficiency.gemm}, {"attention", h.efficiency.attention},
                     {"elementwise", h.efficiency.elementwise}, {"optimizer", h.efficiency.optimizer}};
  j["collective_launch_latency_s"] = h.launch_latency_s;
  j["gpus_per_node"] = h.gpus_per_node;
  j["intra_node_bytes_per_s"] = h.intra_bytes_per_s;
  j["intra_node_latency_s"] = h.intra_latency_s;
  j["inter_node_bytes_per_s_per_gpu"] = h.inter_bytes_per_s;
  j["inter_node_latency_s"] = h.inter_latency_s;
  j["host_link_bytes_per_s"] = h.host_link_bytes_per_s;
  j["host_memory_bytes_per_s"] = h.host_memory_bytes_per_s;
  j["collective_beside_compute_s"] = h.collective_beside_compute_s;
  return j;
}

}  // namespace

int run_calibrate(const CalibrateArgs& a, int* argc, char*** argv) {
  MpiEnvironment env(argc, argv);
  const NodeLocal local = node_local(MPI_COMM_WORLD);
  if (local.local_size != env.world_size())
    throw InputError("simulate --calibrate: the ranks span several hosts; calibrate one node (its ranks share it as "
                     "training does)");
  apply_thread_layout(local.local_size);
  // Every rank checks its inputs, so a bad one ends all of them before any collective.
  const CalibrationShapes s = shapes_for(a, env.world_size());
  check_output_path(a.out, "simulate: --out", true);
  const std::unique_ptr<Device> dev = make_cpu_device();
  const std::unique_ptr<Communicator> comm = make_communicator(*dev);
  const auto started = std::chrono::steady_clock::now();
  const Calibration c = calibrate(s, *comm, local.local_size, a.name);
  if (env.rank() != 0) return 0;
  AtomicFile f(a.out, "simulate: --out", true);
  f.write(profile_json(c, a, s, env.world_size()).dump(2) + "\n");
  f.commit();
  const HardwareProfile& h = c.profile;
  std::printf("calibrated %s in %.1f s (%d rank(s) at once): peak %.1f GFLOP/s fp32, %.1f GFLOP/s bf16 per rank; "
              "copy %.2f GB/s per rank; efficiency gemm %.2f, attention %.2f, elementwise %.2f, optimizer %.2f; "
              "collective launch %.1f us, %.2f us per ring step, %.2f GB/s per rank, %.2f ms beside compute\n"
              "written to %s\n",
              h.name.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
              env.world_size(), h.peak_fp32_flops / 1e9, h.peak_bf16_flops / 1e9, h.hbm_bytes_per_s / 1e9,
              h.efficiency.gemm, h.efficiency.attention, h.efficiency.elementwise, h.efficiency.optimizer,
              h.launch_latency_s * 1e6, h.intra_latency_s * 1e6, h.intra_bytes_per_s / 1e9,
              h.collective_beside_compute_s * 1e3, a.out.c_str());
  return 0;
}

}  // namespace zt
