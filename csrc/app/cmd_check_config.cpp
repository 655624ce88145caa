// cmd_check_config.cpp — `zerotrain check-config FILE [--world-size N] [--strict] [--explain]
//                         [--hidden-size H] [--set PATH=VALUE]... [client optimizer flags]`
//
// Prints the fully resolved config (DeepSpeed key names and nesting, every default filled) as
// JSON on stdout and exits 0; warnings go to stderr, and so does the optimizer `train` would use
// when the config leaves it to the client (or with --explain). A config DeepSpeed (or zerotrain's
// policy) rejects: the reason on stderr, exit 2. Under mpirun the world size comes from the
// launcher's environment (no MPI_Init needed) and only rank 0 prints.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli_flags.h"
#include "zerotrain/app/client_optimizer.h"
#include "commands.h"
#include "estimate.h"
#include "stage3_note.h"
#include "rank_agreement.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/config/ds_config.h"
#include "zerotrain/config/hjson.h"
#include "zerotrain/config/key_table.h"
#include "zerotrain/core/check.h"

namespace zt {
namespace {

void usage(FILE* f) {
  std::fprintf(f,
               "usage: zerotrain check-config FILE [--world-size N] [--strict] [--explain] [--hidden-size H]\n"
               "                                   [--set PATH=VALUE]...\n"
               "  --world-size N   data-parallel world size (default: from mpirun/srun, else 1)\n"
               "  --strict         unknown top-level keys are errors instead of warnings\n"
               "  --explain        print where every value came from (stderr)\n"
               "  --hidden-size H  model hidden size for the \"auto\" bucket rules\n"
               "  --model M.json   also print the memory estimate for this model (stderr; as `zerotrain estimate`;\n"
               "                   host totals per node assume one node: estimate --nodes K for more)\n"
               "  --set PATH=VALUE value for a key the file sets to \"auto\", e.g. --set optimizer.params.lr=3e-4\n"
               "  --optimizer, --lr, --weight-decay, --betas, --eps, --momentum: train's client optimizer flags\n"
               "                   (below); the optimizer train would use is printed on stderr\n"
               "       zerotrain check-config --keys [markdown|json]\n"
               "  --keys           print every DeepSpeed key zerotrain reads: implemented, not used (why) or\n"
               "                   rejected (why); no FILE needed\n");
  std::fprintf(f, "%s", client_optimizer_usage());
}

bool parse_positive(const char* s, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (!*s || *end || errno == ERANGE || v < 1) return false;
  *out = v;
  return true;
}

}  // namespace

int cmd_check_config(int argc, char** argv) {
  const ProcessInfo& proc = process_info();
  const bool printer = proc.rank <= 0;  // rank 0, or not launched by mpirun/srun
  std::string file;
  ConfigOptions opt;
  opt.world_size = proc.world_size;
  opt.world_size_origin = proc.rank >= 0 ? "from the launcher (mpirun/srun)" : "default: 1, not launched by mpirun";
  bool explain = false;
  std::string model;
  ClientOptimizer client;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      const auto value = [&] { return flag_value("check-config", argc, argv, i, ""); };
      if (a == "-h" || a == "--help") {
        if (printer) usage(stdout);
        return 0;
      } else if (a == "--world-size") {
        int64_t n = 0;
        const char* v = value();
        if (!parse_positive(v, &n) || n > (1 << 24)) {
          throw InputError(std::string("check-config: --world-size: found '") + v + "'; expected a positive integer");
        }
        opt.world_size = static_cast<int>(n);
        opt.world_size_origin = "--world-size";
      } else if (a == "--keys") {
        const std::string form = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "text";
        if (form != "text" && form != "markdown" && form != "json")
          throw InputError("check-config: --keys: found '" + form + "'; expected text, markdown or json");
        if (printer) {
          if (form == "json") std::printf("%s\n", key_table_json().dump(1).c_str());
          else std::printf("%s", key_table_text(form == "markdown").c_str());
        }
        return 0;
      } else if (a == "--strict") {
        opt.strict = true;
      } else if (a == "--explain") {
        explain = true;
      } else if (a == "--hidden-size") {
        int64_t h = 0;
        const char* v = value();
        if (!parse_positive(v, &h)) {
          throw InputError(std::string("check-config: --hidden-size: found '") + v + "'; expected a positive integer");
        }
        opt.hidden_size = h;
      } else if (a == "--model") {
        model = value();
      } else if (a == "--set") {
        std::string kv = value();
        const size_t bad = first_invalid_utf8(kv);
        if (bad != std::string::npos)
          throw InputError("check-config: --set: invalid UTF-8 byte at byte offset " + std::to_string(bad) +
                           " of the argument; expected UTF-8 text");
        size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) {
          throw InputError("check-config: --set: found '" + kv + "'; expected PATH=VALUE");
        }
        std::string text = kv.substr(eq + 1);
        Json v = Json::parse(text, nullptr, false);
        if (v.is_discarded()) v = text;  // a bare word is a string
        opt.command_line[kv.substr(0, eq)] = v;
      } else if (take_client_optimizer_flag(client, "check-config", argc, argv, i)) {
        continue;
      } else if (!a.empty() && a[0] == '-') {
        throw InputError("check-config: unknown option '" + a + "'");
      } else if (file.empty()) {
        file = a;
      } else {
        throw InputError("check-config: more than one FILE given ('" + file + "', '" + a + "')");
      }
    }
    if (file.empty()) {
      if (printer) usage(stderr);
      return kExitBadInput;
    }
    ModelConfig mcfg;
    if (!model.empty()) {
      mcfg = parse_model_config_file(model);
      if (!opt.hidden_size) opt.hidden_size = model_hidden_size(mcfg);
    }
    DsConfig cfg = load_ds_config(file, opt);
    // What `train` checks next, before any step: the engine options and the LR schedule. Running
    // them here makes check-config's exit code predict train's.
    const EngineOptions eopt = engine_options_from(cfg, client);
    schedule_from(cfg, eopt.optimizer);
    const std::string estimate =
        model.empty() ? ""
                      : estimate_report(estimate_memory(cfg, mcfg, opt.world_size, recompute_of(cfg, ""),
                                                        comm_backend_for_device("auto", "--device"), client),
                                        opt.world_size);
    if (printer) {
      for (const std::string& w : cfg.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
      if (explain) std::fprintf(stderr, "%s", cfg.explain().c_str());
      // The optimizer is not in the resolved document when the config leaves it to the client.
      if (explain || !cfg.optimizer)
        std::fprintf(stderr, "%s\n", optimizer_line(cfg, client, eopt.optimizer).c_str());
      std::printf("%s\n", cfg.resolved_json().dump(2).c_str());
      if (!estimate.empty())
        std::fprintf(stderr, "%s%s", estimate.c_str(),
                     stage3_threshold_note(cfg, mcfg, opt.world_size, recompute_of(cfg, ""),
                                           comm_backend_for_device("auto", "--device"), client).c_str());
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::string message;
    const int code = exit_code_of(e, &message);
    if (printer) std::fprintf(stderr, "error: %s\n", message.c_str());
    return code;
  }
}

}  // namespace zt
