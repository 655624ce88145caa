// cmd_simulate.cpp — `zerotrain simulate --config DS.json --model M.json --world-size N [--nodes K]
//   --hardware P.json [--recompute none|block|selective] [--json FILE] [--trace FILE]
//   [client optimizer flags]`: one optimizer step predicted from the engine's step program on a
// hardware profile (zerotrain/sim/simulate.h), without running or allocating anything. Exit 0, or
// 2 on bad input (the message names it).
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "cli_flags.h"
#include "commands.h"
#include "estimate.h"
#include "observe.h"
#include "simulate_calibrate.h"
#include "simulate_report.h"
#include "zerotrain/app/client_optimizer.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/sim/hardware.h"

namespace zt {
namespace {

const char* kUsage =
    "usage: zerotrain simulate --config DS.json --model M.json --world-size N --hardware P.json [--nodes K]\n"
    "                          [--recompute none|block|selective] [--json FILE] [--trace FILE]\n"
    "  --hardware: a profile such as configs/hardware/h100_sxm_8x.json (peaks, bandwidths, latencies)\n"
    "  --nodes: nodes the N ranks are spread over (default: as few as the profile's gpus_per_node allows)\n"
    "  --json: the prediction as JSON; --trace: the predicted step as a trace (train --trace's format)\n"
    "  --optimizer, --lr, ...: train's client optimizer flags, for a config without an optimizer\n"
    "   or: mpirun -np N zerotrain simulate --calibrate --config DS.json --model M.json --out P.json [--name NAME]\n"
    "  --calibrate: measure this machine as a profile (the CPU kernels at the model's shapes with all N ranks\n"
    "    running, the collectives between them); use it as --hardware P.json\n";

struct SimArgs {
  std::string config, model, hardware, json_out, trace_out, recompute, out, name;
  bool calibrate = false;
  int64_t world = 0, nodes = 0;
  ClientOptimizer client;
};

std::string* text_flag(SimArgs& a, const std::string& f) {
  const std::pair<const char*, std::string*> flags[] = {{"--config", &a.config}, {"--model", &a.model},
      {"--hardware", &a.hardware}, {"--recompute", &a.recompute}, {"--json", &a.json_out}, {"--trace", &a.trace_out},
      {"--out", &a.out}, {"--name", &a.name}};
  for (const auto& [flag, dest] : flags)
    if (f == flag) return dest;
  return nullptr;
}

// false: --help was printed.
bool parse_args(int argc, char** argv, SimArgs& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const auto value = [&] { return flag_value("simulate", argc, argv, i, kUsage); };
    if (f == "-h" || f == "--help") {
      std::printf("%s%s", kUsage, client_optimizer_usage());
      return false;
    }
    if (f == "--calibrate") a.calibrate = true;
    else if (std::string* text = text_flag(a, f)) *text = value();
    else if (f == "--world-size" || f == "--nodes")
      (f == "--nodes" ? a.nodes : a.world) = parse_count_flag("simulate", f, value(), int64_t(1) << 24);
    else if (!take_client_optimizer_flag(a.client, "simulate", argc, argv, i))
      throw InputError("simulate: unknown flag '" + f + "'\n" + kUsage);
  }
  if (a.calibrate) {
    if (a.config.empty() || a.model.empty() || a.out.empty())
      throw InputError(std::string("simulate --calibrate: --config, --model and --out are required\n") + kUsage);
    if (a.world || a.nodes || !a.hardware.empty() || !a.json_out.empty() || !a.trace_out.empty())
      throw InputError("simulate --calibrate: measures the job it runs in (mpirun -np N); --world-size, --nodes, "
                       "--hardware, --json and --trace do not apply");
    return true;
  }
  if (!a.out.empty() || !a.name.empty())
    throw InputError(std::string("simulate: --out and --name go with --calibrate\n") + kUsage);
  if (a.config.empty() || a.model.empty() || a.world == 0 || a.hardware.empty())
    throw InputError(std::string("simulate: --config, --model, --world-size and --hardware are required\n") + kUsage);
  return true;
}

// --nodes given: it must divide N and fit the profile's nodes; else the fewest nodes that hold N.
int64_t nodes_for(const SimArgs& a, const HardwareProfile& hw) {
  const int64_t nodes = a.nodes > 0 ? a.nodes : (a.world + hw.gpus_per_node - 1) / hw.gpus_per_node;
  const std::string n = std::to_string(a.world), k = std::to_string(nodes);
  if (a.world % nodes != 0)
    throw InputError("simulate: --world-size " + n + " is not a multiple of " + (a.nodes > 0 ? "--nodes " : "the node count ") +
                     k + (a.nodes > 0 ? "" : " (pass --nodes)"));
  if (a.world / nodes > hw.gpus_per_node)
    throw InputError("simulate: --world-size " + n + " on " + k + " node(s) puts " + std::to_string(a.world / nodes) +
                     " ranks on a node; hardware profile " + a.hardware + " has gpus_per_node " +
                     std::to_string(hw.gpus_per_node));
  return nodes;
}

void write_outputs(const SimArgs& a, const SimResult& r, const SimContext& c) {
  if (!a.json_out.empty()) {
    AtomicFile f(a.json_out, "simulate: --json", true);
    f.write(simulate_json(r, c).dump(2) + "\n");
    f.commit();
  }
  if (!a.trace_out.empty()) write_trace_file(a.trace_out, simulate_trace(r), "simulate: --trace");
}

int run(const SimArgs& a) {
  const auto started = std::chrono::steady_clock::now();
  const HardwareProfile hw = load_hardware_profile(a.hardware);
  const int64_t nodes = nodes_for(a, hw);
  if (!a.json_out.empty()) check_output_path(a.json_out, "simulate: --json", true);
  if (!a.trace_out.empty()) check_output_path(a.trace_out, "simulate: --trace");
  const ModelConfig mcfg = parse_model_config_file(a.model);
  ConfigOptions copt;
  copt.world_size = static_cast<int>(a.world);
  copt.world_size_origin = "--world-size";
  copt.hidden_size = model_hidden_size(mcfg);
  copt.recompute_flag = a.recompute;
  const DsConfig cfg = load_ds_config(a.config, copt);
  for (const std::string& w : cfg.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const EngineOptions eopt = engine_options_from(cfg, a.client);
  const Recompute rc = recompute_of(cfg, a.recompute);
  const PlanOnlyModel pm =
      plan_only_model(cfg, mcfg, eopt, rc, CommBackend::NCCL, static_cast<int>(a.world), static_cast<int>(nodes));
  const ZeroPlan& plan = pm.plan;
  const CostModel cost(hw, static_cast<int>(a.world), static_cast<int>(nodes), eopt.compute_dtype);
  const SimWorkload work = make_workload(mcfg, plan, cfg.train_micro_batch_size_per_gpu, rc, eopt.compute_dtype);
  const SimResult r = simulate_step(plan, eopt, work, cost);
  const SimContext c{eopt.stage, static_cast<int>(a.world), static_cast<int>(nodes), eopt.gradient_accumulation_steps,
                     eopt.overlap_comm, eopt.offload.optimizer, dtype_name(eopt.compute_dtype),
                     mcfg.name.empty() ? a.model : mcfg.name, &cost};
  std::printf("%s", simulate_report(r, c).c_str());
  write_outputs(a, r, c);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("  simulated in %.3f s (wall clock, inputs read and plan built included)\n", took);
  return 0;
}

}  // namespace

int cmd_simulate(int argc, char** argv) {
  try {
    SimArgs a;
    if (!parse_args(argc, argv, a)) return 0;
    if (a.calibrate) return run_calibrate({a.config, a.model, a.out, a.name.empty() ? "local" : a.name}, &argc, &argv);
    return run(a);
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
