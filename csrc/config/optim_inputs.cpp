// optim_inputs.cpp — the `optimizer` section's params as OptimizerHparams (type resolution,
// FusedAdam / torch SGD / FusedLion / torch Adagrad / FusedLamb defaults and checks; docs/config.md §4).
#include "zerotrain/config/optim_inputs.h"

#include <algorithm>
#include <cctype>

#include "param_reader.h"
#include "zerotrain/core/check.h"

namespace zt {

using cfg::ParamReader;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void reject_max_grad_norm(const Json& params) {
  if (params.is_object() && params.contains("max_grad_norm"))
    throw InputError(
        "optimizer.params.max_grad_norm: 'max_grad_norm' is not supported as an optimizer parameter, please switch to "
        "using the deepspeed parameter 'gradient_clipping'");
}

void read_betas(ParamReader& r, OptimizerHparams& h) {
  if (const Json* betas = r.raw("betas")) {
    if (!betas->is_array() || betas->size() != 2 || !(*betas)[0].is_number() || !(*betas)[1].is_number() ||
        (*betas)[0].is_boolean() || (*betas)[1].is_boolean())
      throw InputError(r.where() + ".betas: expected a list of two numbers [beta1, beta2], found " + betas->dump());
    h.beta1 = (*betas)[0].get<double>();
    h.beta2 = (*betas)[1].get<double>();
  }
}

void parse_adam(ParamReader& r, OptimizerHparams& h) {
  h.lr = r.number("lr", ds_defaults::kLr);
  read_betas(r, h);
  h.eps = r.number("eps", ds_defaults::kAdamEps);
  h.weight_decay = r.number("weight_decay", ds_defaults::kWeightDecay);
  h.bias_correction = r.boolean("bias_correction", ds_defaults::kAdamBiasCorrection);
  if (r.boolean("amsgrad", false))
    throw InputError(r.where() + ".amsgrad: true is not supported (DeepSpeed's FusedAdam rejects it too)");
  bool w_mode_param = r.boolean("adam_w_mode", ds_defaults::kAdamWMode);
  h.adam_w_mode = h.type == "adamw" || w_mode_param;
  r.boolean("torch_adam", false);  // torch.optim.Adam/AdamW: the same update arithmetic
  r.boolean("set_grad_none", true);  // memory policy only
  r.boolean("fp32_optimizer_states", true);  // DeepSpeedCPUAdam: zerotrain's states are fp32
  if (h.bias_correction && (h.beta1 >= 1.0 || h.beta2 >= 1.0))
    throw InputError(r.where() + ".betas: must be < 1 with bias_correction (1 - beta^t would be 0)");
}

void parse_sgd(ParamReader& r, OptimizerHparams& h) {
  h.lr = r.number("lr", ds_defaults::kLr);
  h.momentum = r.number("momentum", ds_defaults::kSgdMomentum);
  h.dampening = r.number("dampening", ds_defaults::kSgdDampening);
  h.weight_decay = r.number("weight_decay", ds_defaults::kWeightDecay);
  h.nesterov = r.boolean("nesterov", false);
  if (r.boolean("maximize", false)) throw InputError(r.where() + ".maximize: true is not supported");
  for (const char* k : {"foreach", "differentiable", "fused"}) r.accept(k);  // torch implementation switches
  if (h.lr < 0) throw InputError(r.where() + ".lr: invalid learning rate " + std::to_string(h.lr) + " (must be >= 0)");
  if (h.momentum < 0) throw InputError(r.where() + ".momentum: must be >= 0, found " + std::to_string(h.momentum));
  if (h.weight_decay < 0)
    throw InputError(r.where() + ".weight_decay: must be >= 0, found " + std::to_string(h.weight_decay));
  if (h.nesterov && (h.momentum <= 0 || h.dampening != 0))
    throw InputError(r.where() + ".nesterov: Nesterov momentum requires a momentum > 0 and zero dampening");
}

void check_non_negative(ParamReader& r, const char* key, double v) {
  if (v < 0) throw InputError(r.where() + "." + key + ": must be >= 0, found " + std::to_string(v));
}

void parse_lion(ParamReader& r, OptimizerHparams& h) {
  h.lr = r.number("lr", ds_defaults::kLr);
  h.beta2 = ds_defaults::kLionBeta2;
  read_betas(r, h);
  h.weight_decay = r.number("weight_decay", ds_defaults::kWeightDecay);
  r.boolean("set_grad_none", true);          // FusedLion: memory policy only
  r.boolean("fp32_optimizer_states", true);  // DeepSpeedCPULion: zerotrain's states are fp32
  check_non_negative(r, "lr", h.lr);
  check_non_negative(r, "weight_decay", h.weight_decay);
}

void parse_adagrad(ParamReader& r, OptimizerHparams& h) {
  h.lr = r.number("lr", ds_defaults::kAdagradLr);
  h.lr_decay = r.number("lr_decay", 0.0);
  h.weight_decay = r.number("weight_decay", ds_defaults::kWeightDecay);
  h.initial_accumulator_value = r.number("initial_accumulator_value", 0.0);
  h.eps = r.number("eps", ds_defaults::kAdagradEps);
  if (r.boolean("maximize", false)) throw InputError(r.where() + ".maximize: true is not supported");
  if (r.boolean("amsgrad", false)) throw InputError(r.where() + ".amsgrad: true is not supported");
  r.boolean("fp32_optimizer_states", true);
  for (const char* k : {"foreach", "differentiable", "fused"}) r.accept(k);
  for (auto [k, v] : {std::pair<const char*, double>{"lr", h.lr}, {"lr_decay", h.lr_decay},
                      {"weight_decay", h.weight_decay}, {"initial_accumulator_value", h.initial_accumulator_value},
                      {"eps", h.eps}})
    check_non_negative(r, k, v);
}

void parse_lamb(ParamReader& r, OptimizerHparams& h) {
  h.lr = r.number("lr", ds_defaults::kLr);
  h.bias_correction = r.boolean("bias_correction", ds_defaults::kAdamBiasCorrection);
  read_betas(r, h);
  h.eps = r.number("eps", ds_defaults::kAdamEps);
  h.eps_inside_sqrt = r.boolean("eps_inside_sqrt", false);
  h.weight_decay = r.number("weight_decay", ds_defaults::kWeightDecay);
  h.max_coeff = r.number("max_coeff", ds_defaults::kLambMaxCoeff);
  h.min_coeff = r.number("min_coeff", ds_defaults::kLambMinCoeff);
  if (r.boolean("amsgrad", false))
    throw InputError(r.where() + ".amsgrad: true is not supported (DeepSpeed's FusedLamb rejects it too)");
  if (h.bias_correction && (h.beta1 >= 1.0 || h.beta2 >= 1.0))
    throw InputError(r.where() + ".betas: must be < 1 with bias_correction (1 - beta^t would be 0)");
  if (h.min_coeff > h.max_coeff)
    throw InputError(r.where() + ".min_coeff: must be <= max_coeff (the trust ratio is clamped to [min_coeff, max_coeff])");
}

}  // namespace

OptimizerHparams parse_optimizer(const std::string& type, const Json& params) {
  if (type.empty())
    throw InputError("optimizer.type: missing; zerotrain needs an optimizer (Adam, AdamW, SGD, Lion, Adagrad or LAMB)");
  OptimizerHparams h;
  std::string low = lower(type);
  static const char* kDeepSpeedOthers[] = {"onebitadam", "zerooneadam", "onebitlamb", "muadam", "muadamw", "musgd", "muon"};
  static const char* kSupported = "(supported: Adam, AdamW, SGD, Lion, Adagrad, LAMB)";
  if (low == "adam" || low == "adamw") {
    h.kind = OptimizerKind::Adam;
    h.type = low;
  } else if (type == "SGD") {
    h.kind = OptimizerKind::SGD;
    h.type = "SGD";
  } else if (low == "lion" || low == "adagrad" || low == "lamb") {
    h.kind = low == "lion" ? OptimizerKind::Lion : low == "adagrad" ? OptimizerKind::Adagrad : OptimizerKind::Lamb;
    h.type = low;
  } else {
    if (low == "onebitadam" || low == "zerooneadam" || low == "onebitlamb")
      throw InputError("optimizer.type: '" + type + "' is a DeepSpeed compressed-communication optimizer (1-bit / 0-1 "
                       "error-compensated gradient exchange), which DeepSpeed refuses with ZeRO and zerotrain does not "
                       "implement " + kSupported);
    for (const char* other : kDeepSpeedOthers) {
      if (low == other)
        throw InputError("optimizer.type: '" + type + "' is a DeepSpeed optimizer that zerotrain does not support " +
                         kSupported);
    }
    std::string hint = low == "sgd" ? " (did you mean 'SGD'? torch optimizer names are case-sensitive)" : "";
    throw InputError("optimizer.type: '" + type + "' is not supported " + kSupported + hint);
  }
  reject_max_grad_norm(params);
  ParamReader r(params, "optimizer.params", "optimizer " + type);
  switch (h.kind) {
    case OptimizerKind::Adam: parse_adam(r, h); break;
    case OptimizerKind::SGD: parse_sgd(r, h); break;
    case OptimizerKind::Lion: parse_lion(r, h); break;
    case OptimizerKind::Adagrad: parse_adagrad(r, h); break;
    case OptimizerKind::Lamb: parse_lamb(r, h); break;
  }
  r.reject_unknown();
  return h;
}

OptimizerHparams optimizer_of(const DsConfig& cfg) {
  ZT_CHECK(cfg.optimizer.has_value(), "optimizer_of: the config has no optimizer (engine_options_from uses the client optimizer)");
  return parse_optimizer(cfg.optimizer->type, cfg.optimizer->params);
}

}  // namespace zt
