// cmd_tune.cpp — `zerotrain tune --config DS.json --model M.json --world-size N --hardware P.json
//   [--nodes K] [--device-memory SIZE] [--host-memory SIZE] [--top K] [--out BEST.json]
//   [--confirm K ...] [client optimizer flags]`: searches the knobs that shape a step (tune.h),
// drops what does not fit, ranks the rest by simulated step time, prints the top ones with why and
// writes the best as a DeepSpeed JSON. Exit 0; 1 when nothing fits; 2 on bad input.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli_flags.h"
#include "commands.h"
#include "estimate.h"
#include "tune.h"
#include "tune_confirm.h"
#include "zerotrain/config/hjson.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {
namespace {

const char* kUsage =
    "usage: zerotrain tune --config DS.json --model M.json --world-size N --hardware P.json [--nodes K]\n"
    "                      [--device-memory SIZE] [--host-memory SIZE] [--top K] [--out BEST.json]\n"
    "                      [--confirm K [--confirm-steps S] [--confirm-rounds R]]\n"
    "  searches stage, micro-batch x accumulation (the config's global batch kept), bucket sizes,\n"
    "  overlap_comm, the stage-3 prefetch and persistence thresholds, recompute and offload_optimizer;\n"
    "  drops what does not fit (estimate's predictor), ranks the rest by simulated step time\n"
    "  --device-memory: per rank (default: the profile's device_memory_bytes); --host-memory: per node\n"
    "  --top: how many to print (default 5); --out: the best as a DeepSpeed JSON\n"
    "  --confirm K: run the top K for real on this machine (CPU backend, mpirun, N ranks) in\n"
    "    interleaved rounds and print predicted vs measured step time\n";

struct TuneArgs {
  std::string config, model, hardware, out;
  int64_t world = 0, nodes = 0, top = 5, device_memory = 0, host_memory = 0;
  ConfirmOptions confirm;
  ClientOptimizer client;
  std::vector<std::string> client_flags;
};

int64_t* count_flag(TuneArgs& a, const std::string& f) {
  if (f == "--world-size") return &a.world;
  if (f == "--nodes") return &a.nodes;
  if (f == "--top") return &a.top;
  if (f == "--confirm") return &a.confirm.count;
  if (f == "--confirm-steps") return &a.confirm.steps;
  if (f == "--confirm-rounds") return &a.confirm.rounds;
  return nullptr;
}

bool parse_args(int argc, char** argv, TuneArgs& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    const auto value = [&] { return flag_value("tune", argc, argv, i, kUsage); };
    if (f == "-h" || f == "--help") {
      std::printf("%s%s", kUsage, client_optimizer_usage());
      return false;
    }
    if (f == "--config") a.config = value();
    else if (f == "--model") a.model = value();
    else if (f == "--hardware") a.hardware = value();
    else if (f == "--out") a.out = value();
    else if (f == "--device-memory") a.device_memory = parse_bytes(value(), "tune: --device-memory");
    else if (f == "--host-memory") a.host_memory = parse_bytes(value(), "tune: --host-memory");
    else if (int64_t* n = count_flag(a, f)) *n = parse_count_flag("tune", f, value(), int64_t(1) << 24);
    else if (const int first = i; take_client_optimizer_flag(a.client, "tune", argc, argv, i))
      a.client_flags.insert(a.client_flags.end(), argv + first, argv + i + 1);
    else
      throw InputError("tune: unknown flag '" + f + "'\n" + kUsage);
  }
  if (a.config.empty() || a.model.empty() || a.world == 0 || a.hardware.empty())
    throw InputError(std::string("tune: --config, --model, --world-size and --hardware are required\n") + kUsage);
  if (a.nodes > 0 && a.world % a.nodes != 0)
    throw InputError("tune: --world-size " + std::to_string(a.world) + " is not a multiple of --nodes " + std::to_string(a.nodes));
  return true;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return b;
}

std::string outcome_line(int rank, const TuneOutcome& o, int64_t device_memory) {
  char b[512];
  std::snprintf(b, sizeof(b),
                "%2d. %9.3f ms per step, %8.3f ms exposed comm, %12.0f tokens/s, MFU %5.1f%%, device %s per rank "
                "(headroom %s)%s\n    %s\n",
                rank, o.step_s * 1e3, o.comm_exposed_s * 1e3, o.tokens_per_s, 100 * o.mfu,
                gib(static_cast<double>(o.device_bytes)).c_str(),
                gib(static_cast<double>(device_memory - o.device_bytes)).c_str(),
                o.duplicates ? (" — " + std::to_string(o.duplicates) + " other setting(s) give this plan").c_str() : "",
                (o.setting.describe() + ", " + std::to_string(o.buckets) + " gradient buckets").c_str());
  return b;
}

TuneInputs inputs(const TuneArgs& a) {
  TuneInputs in;
  in.source = a.config;
  in.base = parse_hjson_file(a.config);
  in.model = parse_model_config_file(a.model);
  in.hw = load_hardware_profile(a.hardware);
  in.world = static_cast<int>(a.world);
  in.nodes = static_cast<int>(a.nodes > 0 ? a.nodes : (a.world + in.hw.gpus_per_node - 1) / in.hw.gpus_per_node);
  if (a.world % in.nodes != 0 || a.world / in.nodes > in.hw.gpus_per_node)
    throw InputError("tune: --world-size " + std::to_string(a.world) + " does not spread evenly over " +
                     std::to_string(in.nodes) + " node(s) of " + std::to_string(in.hw.gpus_per_node) +
                     " GPUs (hardware profile " + a.hardware + "); pass --nodes");
  in.device_memory = a.device_memory > 0 ? a.device_memory : static_cast<int64_t>(in.hw.device_memory_bytes);
  in.host_memory = a.host_memory;
  in.client = a.client;
  in.client_flags = a.client_flags;
  in.model_path = a.model;
  return in;
}

void write_best(const std::string& path, const TuneOutcome& best) {
  AtomicFile f(path, "tune: --out", true);
  f.write(best.config.dump(2) + "\n");
  f.commit();
}

int run(const TuneArgs& a) {
  const auto started = std::chrono::steady_clock::now();
  if (!a.out.empty()) check_output_path(a.out, "tune: --out", true);
  const TuneInputs in = inputs(a);
  const std::vector<TuneOutcome> all = tune_search(in);
  size_t fit = 0, settings = 0;
  for (const TuneOutcome& o : all) {
    fit += o.fits;
    settings += 1 + static_cast<size_t>(o.duplicates);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("tune: %zu settings, %zu distinct plans, %zu fit in %s per rank (N=%d on %d node(s) of %s), searched in %.2f s\n",
              settings, all.size(), fit, gib(static_cast<double>(in.device_memory)).c_str(), in.world, in.nodes,
              in.hw.name.c_str(), took);
  if (fit == 0) {
    std::printf("nothing fits; the smallest needs %s per rank (%s)\n",
                gib(static_cast<double>(all.empty() ? 0 : all.front().device_bytes)).c_str(),
                all.empty() ? "no setting" : all.front().setting.describe().c_str());
    return 1;
  }
  std::printf("fastest predicted (step time at the config's global batch; exposed comm = compute waiting on it):\n");
  for (size_t i = 0; i < fit && i < static_cast<size_t>(a.top); ++i)
    std::printf("%s", outcome_line(static_cast<int>(i + 1), all[i], in.device_memory).c_str());
  if (!a.out.empty()) {
    write_best(a.out, all.front());
    std::printf("best written to %s\n", a.out.c_str());
  }
  if (a.confirm.count > 0) return confirm_top(in, all, a.confirm);
  return 0;
}

}  // namespace

int cmd_tune(int argc, char** argv) {
  try {
    TuneArgs a;
    if (!parse_args(argc, argv, a)) return 0;
    return run(a);
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
