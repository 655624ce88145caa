// client_optimizer.cpp — the client optimizer's flags, their checks, and the choice between
// the config's "optimizer" section and the flags (include/zerotrain/app/client_optimizer.h).
#include "zerotrain/app/client_optimizer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/core/check.h"

namespace zt {
namespace {

// A finite number above lo (or at it, when lo_inclusive) and below hi; InputError naming the flag.
double parse_number(const std::string& where, const std::string& text, double lo, bool lo_inclusive, double hi,
                    const std::string& expected) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  const bool ok = !text.empty() && *end == '\0' && errno != ERANGE && std::isfinite(v) &&
                  (lo_inclusive ? v >= lo : v > lo) && v < hi;
  if (!ok) throw InputError(where + " '" + text + "': expected " + expected);
  return v;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string joined(const std::vector<std::string>& flags) {
  std::string s;
  for (const std::string& f : flags) s += (s.empty() ? "" : ", ") + f;
  return s;
}

bool given(const ClientOptimizer& c, const char* flag) {
  return std::find(c.flags_given.begin(), c.flags_given.end(), flag) != c.flags_given.end();
}

// The first flag of `flags` that is given, or "".
std::string first_given(const ClientOptimizer& c, std::initializer_list<const char*> flags) {
  for (const std::string& f : c.flags_given) {
    for (const char* x : flags) {
      if (f == x) return f;
    }
  }
  return "";
}

std::string describe_hparams(const OptimizerHparams& h) {
  std::string s;
  if (h.kind == OptimizerKind::Adam) {
    s = h.type == "adamw" ? "AdamW" : h.adam_w_mode ? "Adam (decoupled weight decay: adam_w_mode)" : "Adam (L2 weight decay)";
    s += " lr " + num(h.lr) + " betas (" + num(h.beta1) + ", " + num(h.beta2) + ") eps " + num(h.eps) +
         " weight_decay " + num(h.weight_decay);
    if (!h.bias_correction) s += " bias_correction false";
  } else if (h.kind == OptimizerKind::SGD) {
    s = "SGD lr " + num(h.lr) + " momentum " + num(h.momentum);
    if (h.dampening != 0) s += " dampening " + num(h.dampening);
    if (h.nesterov) s += " nesterov";
    s += " weight_decay " + num(h.weight_decay);
  } else {
    s = h.describe();
  }
  return s;
}

}  // namespace

const char* client_optimizer_usage() {
  return "  client optimizer, used when the config has no \"optimizer\" section (a section takes precedence;\n"
         "  giving these flags with one is an error):\n"
         "  --optimizer adamw|adam|sgd  default adamw (adam: L2 weight decay, as torch.optim.Adam)\n"
         "  --lr LR               learning rate, > 0 (default 3e-4)\n"
         "  --weight-decay WD     >= 0 (default 0.1 for adamw, 0 for adam and sgd)\n"
         "  --betas B1,B2         adam/adamw, each in [0, 1) (default 0.9,0.95)\n"
         "  --eps EPS             adam/adamw, > 0 (default 1e-8)\n"
         "  --momentum M          sgd, in [0, 1) (default 0)\n";
}

bool take_client_optimizer_flag(ClientOptimizer& c, const std::string& cmd, int argc, char** argv, int& i) {
  const std::string f = argv[i];
  static const char* const kFlags[] = {"--optimizer", "--lr", "--weight-decay", "--betas", "--eps", "--momentum"};
  if (std::find(std::begin(kFlags), std::end(kFlags), f) == std::end(kFlags)) return false;
  if (i + 1 >= argc) throw InputError(cmd + ": " + f + " needs a value");
  const std::string v = argv[++i];
  const std::string where = cmd + ": " + f;
  if (f == "--optimizer") {
    if (v != "adamw" && v != "adam" && v != "sgd") throw InputError(where + " '" + v + "': expected adamw, adam or sgd");
    c.type = v;
  } else if (f == "--lr") {
    c.lr = parse_number(where, v, 0.0, false, INFINITY, "a finite learning rate > 0, e.g. 3e-4");
  } else if (f == "--weight-decay") {
    c.weight_decay = parse_number(where, v, 0.0, true, INFINITY, "a finite number >= 0, e.g. 0.1");
  } else if (f == "--eps") {
    c.eps = parse_number(where, v, 0.0, false, INFINITY, "a finite number > 0, e.g. 1e-8");
  } else if (f == "--momentum") {
    c.momentum = parse_number(where, v, 0.0, true, 1.0, "a number in [0, 1), e.g. 0.9");
  } else {  // --betas
    const size_t comma = v.find(',');
    const std::string expected = "two numbers B1,B2, each in [0, 1), e.g. 0.9,0.95";
    if (comma == std::string::npos) throw InputError(where + " '" + v + "': expected " + expected);
    c.betas = std::make_pair(parse_number(where + " (B1)", v.substr(0, comma), 0.0, true, 1.0, expected),
                             parse_number(where + " (B2)", v.substr(comma + 1), 0.0, true, 1.0, expected));
  }
  if (!given(c, f.c_str())) c.flags_given.push_back(f);
  return true;
}

OptimizerHparams resolve_optimizer(const DsConfig& cfg, const ClientOptimizer& c) {
  if (cfg.optimizer) {
    if (c.any_flag())
      throw InputError(c.flags_given.front() + ": given, but the config " + cfg.source +
                       " has an \"optimizer\" section, which sets the optimizer and takes precedence over the client "
                       "optimizer flags; remove " + joined(c.flags_given) + " or the config's \"optimizer\" section");
    return optimizer_of(cfg);
  }
  const bool sgd = c.type == "sgd";
  const std::string misplaced = sgd ? first_given(c, {"--betas", "--eps"}) : first_given(c, {"--momentum"});
  if (!misplaced.empty())
    throw InputError(misplaced + ": does not apply to --optimizer " + c.type + "; expected " +
                     (sgd ? "--betas and --eps only with adamw or adam" : "--momentum only with sgd"));
  Json params = Json::object();
  params["lr"] = c.lr.value_or(client_defaults::kLr);
  if (sgd) {
    params["momentum"] = c.momentum.value_or(0.0);
    params["weight_decay"] = c.weight_decay.value_or(0.0);
    return parse_optimizer("SGD", params);
  }
  const std::pair<double, double> betas = c.betas.value_or(std::make_pair(client_defaults::kBeta1, client_defaults::kBeta2));
  params["betas"] = Json::array({betas.first, betas.second});
  params["eps"] = c.eps.value_or(client_defaults::kEps);
  if (c.type == "adamw") {
    params["weight_decay"] = c.weight_decay.value_or(client_defaults::kAdamWWeightDecay);
    return parse_optimizer("AdamW", params);
  }
  params["weight_decay"] = c.weight_decay.value_or(0.0);
  params["adam_w_mode"] = false;  // torch.optim.Adam: the decay is added to the gradient
  return parse_optimizer("Adam", params);
}

std::string optimizer_line(const DsConfig& cfg, const ClientOptimizer& c, const OptimizerHparams& h) {
  std::string line = "optimizer: " + describe_hparams(h);
  if (cfg.optimizer) {
    line += " (the config's \"optimizer\" section)";
  } else {
    line += c.any_flag() ? " (client optimizer from " + joined(c.flags_given) + ", defaults for the rest"
                         : " (client optimizer: the defaults";
    line += "; a config \"optimizer\" section takes precedence)";
  }
  line += "; scheduler: ";
  line += cfg.scheduler ? cfg.scheduler->type + " (the config's \"scheduler\" section)" : "none (constant lr)";
  return line;
}

}  // namespace zt
