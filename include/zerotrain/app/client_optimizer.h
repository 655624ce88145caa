// client_optimizer.h — the optimizer the trainer brings when the DeepSpeed config has none.
//
// In DeepSpeed a config without an "optimizer" section is valid: the training script passes its
// own optimizer (deepspeed.initialize(optimizer=...)). `zerotrain train` is that script, so it
// takes the client optimizer from flags (docs/config.md §4):
//   --optimizer adamw|adam|sgd  --lr LR  --weight-decay WD  --betas B1,B2  --eps EPS  --momentum M
// with the common GPT recipe's defaults (nanoGPT / llm.c): AdamW, lr 3e-4, betas (0.9, 0.95),
// eps 1e-8, weight decay 0.1 (0 for adam and sgd: torch's default for those classes).
// Rules:
//   * a config with an "optimizer" section (with a type) uses the section; giving any of these
//     flags as well is an InputError (exit 2) naming the flag: one source, never a silent choice;
//   * no section (or a section without a type, as DeepSpeed): the client optimizer;
//   * flags that do not apply to the chosen type (--momentum with adam/adamw, --betas / --eps
//     with sgd) are InputErrors naming the flag.
// The client optimizer goes through the same reader as a config section of that type
// (parse_optimizer), so `--optimizer sgd --lr 0.01` and {"type":"SGD","params":{"lr":0.01}}
// give the same hyper-parameters, bit for bit.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/config/ds_config.h"
#include "zerotrain/optim/optimizer_hparams.h"

namespace zt {

namespace client_defaults {
constexpr const char* kType = "adamw";
constexpr double kLr = 3e-4;
constexpr double kBeta1 = 0.9, kBeta2 = 0.95;
constexpr double kEps = 1e-8;
constexpr double kAdamWWeightDecay = 0.1;  // adam, sgd: 0
}  // namespace client_defaults

struct ClientOptimizer {
  std::string type = client_defaults::kType;  // "adamw" | "adam" | "sgd"
  std::optional<double> lr, weight_decay, eps, momentum;
  std::optional<std::pair<double, double>> betas;
  std::vector<std::string> flags_given;  // in command-line order, each once: "--optimizer", "--lr", ...

  bool any_flag() const { return !flags_given.empty(); }
};

// When argv[i] is a client optimizer flag: reads it and its value (advancing i) and returns
// true; a bad value is an InputError "<cmd>: --lr 'x': expected ...". Otherwise returns false.
bool take_client_optimizer_flag(ClientOptimizer& c, const std::string& cmd, int argc, char** argv, int& i);

// Usage lines for the flags (shared by train and check-config).
const char* client_optimizer_usage();

// The optimizer a run uses: the config's section when it has one (InputError naming the first
// client flag when flags are given too), else the client optimizer (InputError for a flag that
// does not apply to its type).
OptimizerHparams resolve_optimizer(const DsConfig& cfg, const ClientOptimizer& c);

// One line naming what a run uses and where it came from, e.g.
//   optimizer: AdamW lr 0.0003 betas (0.9, 0.95) eps 1e-08 weight_decay 0.1 (client optimizer:
//   defaults; a config "optimizer" section takes precedence); scheduler: none (constant lr)
std::string optimizer_line(const DsConfig& cfg, const ClientOptimizer& c, const OptimizerHparams& h);

}  // namespace zt
