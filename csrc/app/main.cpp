// zerotrain — command-line entry point. Each subcommand lives in csrc/app/cmd_<name>.cpp.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"
#include "rank_agreement.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"

namespace {
struct Command {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* help;
};
int cmd_version(int argc, char** argv) {
  if (argc > 1 && (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))) {
    std::printf("usage: zerotrain version\n  prints the version and which backends were built\n");
    return 0;
  }
  std::printf("zerotrain 0.1.0 (CUDA backend: %s)\n", zt::cuda_backend_built() ? "built" : "not built");
  return 0;
}

const Command kCommands[] = {
    {"version", cmd_version, "print the version and which backends were built"},
    {"check-config", zt::cmd_check_config, "validate a DeepSpeed config and print it fully resolved"},
    {"estimate", zt::cmd_estimate, "per-rank memory of a run, per category, without running it"},
    {"simulate", zt::cmd_simulate, "predict one optimizer step's time on a hardware profile, without running"},
    {"tune", zt::cmd_tune, "the fastest ZeRO settings that fit, ranked by simulated step time"},
    {"train", zt::cmd_train, "train a model with ZeRO stage 0-3 (run under mpirun for several ranks)"},
    {"consolidate", zt::cmd_consolidate, "a sharded checkpoint's weights as one safetensors file (one tensor in memory)"},
    {"tokenize", zt::cmd_tokenize, "byte-level BPE: train a tokenizer.json, encode text to an llm.c token file, decode"},
    {"sample", zt::cmd_sample, "generate text from a trained GPT (key/value cache; greedy, top-k, top-p)"},
    {"explain", zt::cmd_explain, "print the ZeRO plan, ownership and one step's collectives, without running"},
};

void usage(FILE* f) {
  std::fprintf(f, "usage: zerotrain COMMAND [ARGS]     (zerotrain COMMAND --help: the command's flags)\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(f, "  %-14s %s\n", c.name, c.help);
  std::fprintf(f, "\nexit codes: 0 ok, 1 internal error, 2 bad input (the message names it), 3 communication\n"
                  "failure (a rank died or hung), 4 train: training went non-finite (NaN/Inf loss or gradients),\n"
                  "75 train: stopped by SIGTERM/SIGUSR1 (checkpoint written with --save-checkpoint)\n");
}
}  // namespace

int main(int argc, char** argv) {
  zt::tune_openblas_or_reexec(argv);
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? zt::kExitBadInput : 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const std::exception& e) {  // last resort: a clean line and a documented code, never an abort
      std::string message;
      const int code = zt::exit_code_of(e, &message);
      if (!message.empty()) std::fprintf(stderr, "zerotrain %s: error: %s\n", c.name, message.c_str());
      return code;
    }
  }
  std::fprintf(stderr, "zerotrain: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return zt::kExitBadInput;
}
