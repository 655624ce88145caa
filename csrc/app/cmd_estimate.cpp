// cmd_estimate.cpp — `zerotrain estimate --config DS.json --model M.json --world-size N
//   [--nodes K] [--device-memory SIZE] [--host-memory SIZE] [--recompute none|block|selective]
//   [--device auto|cpu|cuda] [--json FILE] [client optimizer flags]`: per rank and per category, what a run would hold
// (estimate.h), in well under a second and allocating nothing. Exit 0 when it fits, 1 with the
// deficit when the per-rank device total exceeds --device-memory (or a node's host total exceeds
// --host-memory), 2 on bad input.
#include <cstdio>
#include <string>

#include "zerotrain/app/client_optimizer.h"
#include "cli_flags.h"
#include "commands.h"
#include "estimate.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {
namespace {

const char* kUsage =
    "usage: zerotrain estimate --config DS.json --model M.json --world-size N [--nodes K]\n"
    "                          [--device-memory SIZE] [--host-memory SIZE] [--recompute none|block|selective]\n"
    "                          [--device auto|cpu|cuda] [--json FILE]\n"
    "  SIZE: bytes, or with a unit: 80GiB, 141GB, 512MiB; --host-memory is per node\n"
    "  --device: whose communicator buffers to predict, as train --device: cpu = MPI chunk scratch,\n"
    "            cuda = NCCL's buffers (an estimate; NCCL_BUFFSIZE and friends honoured); auto = cuda\n"
    "            when a CUDA GPU is visible here, else cpu\n"
    "  --optimizer, --lr, ...: train's client optimizer flags (moments), for a config without an optimizer\n";

}  // namespace

int cmd_estimate(int argc, char** argv) {
  try {
    std::string config, model, json_out, recompute, device = "auto";
    int64_t world = 0, nodes = 1, device_mem = 0, host_mem = 0;
    ClientOptimizer client;  // when the config has no optimizer section, as train's flags
    for (int i = 1; i < argc; ++i) {
      const std::string f = argv[i];
      const auto value = [&] { return flag_value("estimate", argc, argv, i, kUsage); };
      if (f == "-h" || f == "--help") {
        std::printf("%s%s", kUsage, client_optimizer_usage());
        return 0;
      } else if (f == "--config") config = value();
      else if (f == "--model") model = value();
      else if (f == "--world-size") world = parse_count_flag("estimate", f, value(), int64_t(1) << 24);
      else if (f == "--nodes") nodes = parse_count_flag("estimate", f, value(), int64_t(1) << 24);
      else if (f == "--device-memory") device_mem = parse_bytes(value(), "estimate: --device-memory");
      else if (f == "--host-memory") host_mem = parse_bytes(value(), "estimate: --host-memory");
      else if (f == "--recompute") recompute = value();
      else if (f == "--json") json_out = value();
      else if (f == "--device") device = value();
      else if (take_client_optimizer_flag(client, "estimate", argc, argv, i)) continue;
      else throw InputError("estimate: unknown flag '" + f + "'\n" + kUsage);
    }
    if (config.empty() || model.empty() || world == 0)
      throw InputError(std::string("estimate: --config, --model and --world-size are required\n") + kUsage);
    if (world % nodes != 0)
      throw InputError("estimate: --world-size " + std::to_string(world) + " is not a multiple of --nodes " +
                       std::to_string(nodes));
    const ModelConfig mcfg = parse_model_config_file(model);
    ConfigOptions copt;
    copt.world_size = static_cast<int>(world);
    copt.world_size_origin = "--world-size";
    copt.hidden_size = model_hidden_size(mcfg);
    copt.recompute_flag = recompute;
    const DsConfig cfg = load_ds_config(config, copt);
    for (const std::string& w : cfg.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    const CommBackend backend = comm_backend_for_device(device, "estimate: --device");
    const MemoryEstimate e =
        estimate_memory(cfg, mcfg, static_cast<int>(world), recompute_of(cfg, recompute), backend, client);
    std::printf("%s", estimate_report(e, world / nodes).c_str());
    if (!json_out.empty()) {
      AtomicFile f(json_out, "estimate: --json", true);
      f.write(estimate_json(e) + "\n");
      f.commit();
    }
    int rc = 0;
    if (device_mem > 0 && e.max_device_total() > device_mem) {
      std::printf("does not fit: device memory per rank %lld B > --device-memory %lld B (deficit %lld B)\n",
                  static_cast<long long>(e.max_device_total()), static_cast<long long>(device_mem),
                  static_cast<long long>(e.max_device_total() - device_mem));
      rc = 1;
    }
    const int64_t per_node = e.max_host_total() * (world / nodes);
    if (host_mem > 0 && per_node > host_mem) {
      std::printf("does not fit: host memory per node %lld B > --host-memory %lld B (deficit %lld B)\n",
                  static_cast<long long>(per_node), static_cast<long long>(host_mem),
                  static_cast<long long>(per_node - host_mem));
      rc = 1;
    }
    if (rc == 0 && device_mem > 0)
      std::printf("fits: device memory per rank %lld B of %lld B\n", static_cast<long long>(e.max_device_total()),
                  static_cast<long long>(device_mem));
    return rc;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
