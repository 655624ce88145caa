// cmd_explain.cpp — `zerotrain explain --config DS.json --model M.json --world-size N`: the
// schedule the engine would execute, without running it. Builds the same ZeroPlan as
// ZeroEngine (make_engine_plan over the same options; no MPI, no collectives) and prints its
// bucket table, which rank owns which slice of which parameter, the step's timeline, the step
// program the engine runs (step_program.h) and the ordered list of collectives one optimizer step
// issues with their bytes and what each rank really sends and receives (ZeroPlan::step_collectives,
// checked against a real run's comm log and executed ops by test_step_timing and test_step_program).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_flags.h"
#include "commands.h"
#include "estimate.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/zero/memory_predict.h"
#include "zerotrain/zero/step_program.h"

namespace zt {
namespace {

const char* kUsage =
    "usage: zerotrain explain --config DS.json --model MODEL.json --world-size N [--nodes K] [--strict]\n"
    "  Prints, without running, the ZeRO plan the engine would execute for this config, model and\n"
    "  world size: the bucket plan, which rank owns which slice of which parameter, the schedule\n"
    "  position by position, the step program (every op the engine runs, in order), and the ordered\n"
    "  collectives of one optimizer step (per micro-step and at the boundary) with their bytes and\n"
    "  the bytes each rank sends and receives.\n"
    "  --config DS.json   DeepSpeed config (as for train)\n"
    "  --model M.json     model file (configs/models/*.json)\n"
    "  --world-size N     data-parallel ranks (>= 1)\n"
    "  --nodes K          the nodes the N ranks run on, N/K each, ranks numbered node by node (default 1):\n"
    "                     adds the bytes each node sends to the others per step, per comm backend\n"
    "  --strict           unknown top-level config keys are errors\n";

struct ExplainArgs {
  std::string config, model;
  int world = 0, nodes = 1;
  bool strict = false;
};

int parse_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < 1 || n > 65536)
    throw InputError("explain: " + flag + " '" + v + "': expected an integer between 1 and 65536");
  return static_cast<int>(n);
}

ExplainArgs parse(int argc, char** argv) {
  ExplainArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const auto value = [&] { return std::string(flag_value("explain", argc, argv, i, kUsage)); };
    if (f == "--config") a.config = value();
    else if (f == "--model") a.model = value();
    else if (f == "--world-size") a.world = parse_int(f, value());
    else if (f == "--nodes") a.nodes = parse_int(f, value());
    else if (f == "--strict") a.strict = true;
    else throw InputError("explain: unknown flag '" + f + "'\n" + kUsage);
  }
  if (a.config.empty() || a.model.empty() || a.world == 0)
    throw InputError(std::string("explain: --config, --model and --world-size are required\n") + kUsage);
  if (a.world % a.nodes != 0)
    throw InputError("explain: --world-size " + std::to_string(a.world) + " is not a multiple of --nodes " +
                     std::to_string(a.nodes) + " (every node runs the same number of ranks)");
  return a;
}

std::string human_bytes(double b) {
  char buf[48];
  if (b >= 1048576.0) std::snprintf(buf, sizeof(buf), "%.2f MiB", b / 1048576.0);
  else if (b >= 1024.0) std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof(buf), "%.0f B", b);
  return buf;
}

// What one step's collectives move per rank with ring algorithms (ring_bytes_per_rank), by kind.
struct Traffic {
  double grads = 0, params = 0, stats = 0;
  double total() const { return grads + params + stats; }
};

void print_collectives(const std::vector<PlannedCollective>& cs, int world, int nodes) {
  std::printf("collectives of one optimizer step, in issue order (bytes = the full buffer, as nccl-tests):\n");
  double total = 0;
  Traffic t;
  int k = 0;
  for (const PlannedCollective& c : cs) {
    const std::string when = c.micro >= 0 ? "micro " + std::to_string(c.micro) : "boundary";
    std::printf("  %4d  %-9s %-11s %-15s %-14s count %-9zu %12zu B  %s\n", ++k, when.c_str(), c.phase.c_str(),
                comm_op_name(c.op), c.label.c_str(), c.count, c.bytes, dtype_name(c.dtype));
    total += static_cast<double>(c.bytes);
    const double moved = ring_bytes_per_rank(c.op, c.bytes, c.group.size(world));
    (c.what.grads() ? t.grads : c.what.params() ? t.params : t.stats) += moved;
  }
  std::printf("  total: %d collectives, %s per rank per step\n", k, human_bytes(total).c_str());
  std::printf("  each rank sends %s and receives %s per step (ring algorithms over %d ranks: reduce-scatter and\n"
              "  all-gather of B bytes move (N-1)/N*B each way, all-reduce 2(N-1)/N*B; N = the block's ranks for\n"
              "  the hpz gathers):\n",
              human_bytes(t.total()).c_str(), human_bytes(t.total()).c_str(), world);
  std::printf("    gradient reductions %s, parameter gathers %s, step statistics and norms %s, each way\n",
              human_bytes(t.grads).c_str(), human_bytes(t.params).c_str(), human_bytes(t.stats).c_str());
  if (nodes == 1) return;
  // Every collective over all ranks crosses the nodes; one over a block of ranks (hpZ) only when
  // the block spans nodes.
  const int local = world / nodes;
  double mpi = 0, nccl = 0;
  size_t crossing = 0;
  for (const PlannedCollective& c : cs) {
    const double b = static_cast<double>(c.bytes);
    const double m = group_node_send_bytes(CommBackend::MPI, CommOptions{}, c.op, b, world, local, c.group);
    mpi += m;
    nccl += group_node_send_bytes(CommBackend::NCCL, CommOptions{}, c.op, b, world, local, c.group);
    crossing += c.group.block == 0 || m > 0 ? 1 : 0;
  }
  std::printf("  across %d nodes of %d ranks, %zu of the %zu collectives cross nodes; each node sends the others per step\n"
              "    %s (%.0f B) with the MPI backend (direct exchange: %d*(N-%d)/N*B per reduce-scatter or all-gather)\n"
              "    %s (%.0f B) with NCCL (rings in rank order: (N-1)/N*B per reduce-scatter or all-gather)\n",
              nodes, local, crossing, cs.size(), human_bytes(mpi).c_str(), mpi, local, local, human_bytes(nccl).c_str(),
              nccl);
}

// offload_optimizer: what crosses the host link per step and rank — each offload op's reduced
// slice down, and (without offload_param) the updated parameter slices up after the CPU update.
void print_host_copies(const ZeroPlan& plan, const StepProgram& program, bool params_on_host) {
  double down = 0;
  int copies = 0;
  program.for_each([&](int, const StepOp& op) {
    if (op.kind != OpKind::Offload) return;
    down += static_cast<double>(plan.bucket(op.bucket).slice) * dtype_size(plan.reduced_dtype());
    ++copies;
  });
  const double up = params_on_host ? 0 : static_cast<double>(plan.shard_numel) * dtype_size(plan.compute);
  std::printf("  host link (offload_optimizer): each rank copies %s of reduced gradients down (%d slices, %s) and %s\n"
              "  of parameters up (%s) per step\n",
              human_bytes(down).c_str(), copies, dtype_name(plan.reduced_dtype()), human_bytes(up).c_str(),
              params_on_host ? "none: offload_param keeps them on the host" : dtype_name(plan.compute));
}

int run(const ExplainArgs& a) {
  const ModelConfig mcfg = parse_model_config_file(a.model);
  ConfigOptions copt;
  copt.world_size = a.world;
  copt.world_size_origin = "--world-size";
  copt.strict = a.strict;
  copt.hidden_size = model_hidden_size(mcfg);
  const DsConfig cfg = load_ds_config(a.config, copt);
  for (const std::string& w : cfg.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const EngineOptions eopt = engine_options_from(cfg);
  // The model gives the parameters and units; one sample's activations are all it allocates.
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<Stream> stream = dev->create_stream("compute");
  ModelOptions mopt;
  mopt.compute_dtype = eopt.compute_dtype;
  mopt.micro_batch = 1;
  mopt.device = dev.get();
  mopt.stream = stream.get();
  std::unique_ptr<Model> model = load_model(a.model, mopt);
  std::vector<std::string> names;
  for (const ParamSpec& p : model->params()) names.push_back(p.name);
  const ZeroPlan plan = plan_for_model(*model, eopt, a.world, a.nodes);

  const int gas = eopt.gradient_accumulation_steps;
  std::printf("model: %s\n", model->describe().c_str());
  std::printf("ZeRO stage %d, world size %d, gradient_accumulation_steps %d, overlap_comm %s, %s compute\n\n",
              eopt.stage, a.world, gas, eopt.overlap_comm ? "on" : "off", dtype_name(eopt.compute_dtype));
  std::printf("%s\n%s\n%s\n", plan.describe().c_str(), plan.describe_ownership(names).c_str(),
              plan.describe_timeline().c_str());
  std::printf("%s\n", describe_program(step_program(plan, gas)).c_str());
  print_collectives(plan.step_collectives(gas), a.world, a.nodes);
  if (plan.host_grads) print_host_copies(plan, step_program(plan, gas), eopt.offload.params);
  return 0;
}

}  // namespace

int cmd_explain(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  try {
    return run(parse(argc, argv));
  } catch (const InputError& e) {
    std::fprintf(stderr, "zerotrain explain: error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
