// cfg_optim.cpp — the "optimizer" section (docs/config.md §4), read once into the
// OptimizerHparams the optimizer uses: type normalisation (Adam, AdamW, SGD, Lion, Adagrad, LAMB),
// params with DeepSpeed's defaults and checks, the max_grad_norm rule (§4, §17.4), "auto" params.
// parse_optimizer() runs the same reader for callers without a config file (the client optimizer).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "config_reader.h"
#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/core/check.h"

namespace zt::cfg {
namespace {

// Names DeepSpeed lower-cases and maps to its own optimizers.
const char* const kDsLowerNames[] = {"adagrad", "adam", "adamw", "lamb", "onebitadam", "zerooneadam",
                                     "onebitlamb", "muadam", "muadamw", "musgd", "lion", "muon"};
// torch.optim classes DeepSpeed would accept by exact name (case-sensitive).
const char* const kTorchOptimNames[] = {"SGD", "ASGD", "Adadelta", "Adafactor", "Adamax", "LBFGS", "NAdam",
                                        "RAdam", "RMSprop", "Rprop", "SparseAdam"};

double read_number(Ctx& c, Section& s, const std::string& key, double def, double min_value) {
  Section::Lookup l = s.take(key);
  double v = def;
  if (l.present()) {
    std::string p = s.key_path(l.key);
    if (!l.value->is_number()) c.fail(p, *l.value, "a number");
    v = l.value->get<double>();
    if (!std::isfinite(v) || v < min_value) {
      c.fail(p, *l.value, "a finite number >= " + describe(Json(min_value)));
    }
  }
  s.put_lookup(key, v, l);
  return v;
}

bool read_flag(Ctx& c, Section& s, const std::string& key, bool def) {
  Section::Lookup l = s.take(key);
  bool v = def;
  if (l.present()) v = to_bool_strict(c, s.key_path(l.key), *l.value);
  s.put_lookup(key, v, l);
  return v;
}

void read_betas(Ctx& c, Section& s, OptimizerConfig& o) {
  Section::Lookup l = s.take("betas");
  if (l.present()) {
    std::string p = s.key_path(l.key);
    const Json& v = *l.value;
    bool ok = v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number();
    if (ok) {
      o.beta1 = v[0].get<double>();
      o.beta2 = v[1].get<double>();
      ok = o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1;
    }
    if (!ok) c.fail(p, v, "a list of two numbers in [0, 1), e.g. [0.9, 0.999]");
  }
  s.put_lookup("betas", Json::array({o.beta1, o.beta2}), l);
}

void read_adam_params(Ctx& c, Section& s, OptimizerConfig& o) {
  o.lr = read_number(c, s, "lr", optim_defaults::kLr, 0.0);
  read_betas(c, s, o);
  o.eps = read_number(c, s, "eps", optim_defaults::kAdamEps, 0.0);
  o.weight_decay = read_number(c, s, "weight_decay", optim_defaults::kWeightDecay, 0.0);
  o.bias_correction = read_flag(c, s, "bias_correction", optim_defaults::kAdamBiasCorrection);
  const bool w_mode_param = read_flag(c, s, "adam_w_mode", optim_defaults::kAdamWMode);
  if (read_flag(c, s, "amsgrad", false)) {
    c.error(s.key_path("amsgrad"), "true is not supported (DeepSpeed's FusedAdam rejects it too)");
  }
  read_flag(c, s, "torch_adam", false);
  read_flag(c, s, "fp32_optimizer_states", true);
  read_flag(c, s, "set_grad_none", true);
  // Effective decoupled weight decay: "adamw" always; "adam" unless adam_w_mode is false.
  o.adam_w_mode = o.type == "adamw" || w_mode_param;
  o.kind = OptimizerKind::Adam;
}

// torch's implementation switches: null or a bool, no effect here.
void read_torch_switches(Ctx& c, Section& s) {
  for (const char* k : {"foreach", "fused"}) {
    Section::Lookup l = s.take(k);
    if (l.present() && !l.value->is_null()) to_bool_strict(c, s.key_path(l.key), *l.value);
    s.put_lookup(k, l.present() ? *l.value : Json(nullptr), l);
  }
  read_flag(c, s, "differentiable", false);
}

void read_sgd_params(Ctx& c, Section& s, OptimizerConfig& o) {
  o.kind = OptimizerKind::SGD;
  o.lr = read_number(c, s, "lr", optim_defaults::kLr, 0.0);
  o.momentum = read_number(c, s, "momentum", optim_defaults::kSgdMomentum, 0.0);
  o.dampening = read_number(c, s, "dampening", optim_defaults::kSgdDampening, -INFINITY);
  o.weight_decay = read_number(c, s, "weight_decay", optim_defaults::kWeightDecay, 0.0);
  o.nesterov = read_flag(c, s, "nesterov", false);
  if (read_flag(c, s, "maximize", false)) c.error(s.key_path("maximize"), "true is not supported by zerotrain");
  read_torch_switches(c, s);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    c.error(s.key_path("nesterov"), "true requires momentum > 0 and dampening 0 (Nesterov momentum requires a "
                                    "momentum and zero dampening)");
  }
}

// FusedLion (set_grad_none) and DeepSpeedCPULion (fp32_optimizer_states): the union is accepted.
void read_lion_params(Ctx& c, Section& s, OptimizerConfig& o) {
  o.kind = OptimizerKind::Lion;
  o.lr = read_number(c, s, "lr", optim_defaults::kLr, 0.0);
  o.beta2 = optim_defaults::kLionBeta2;
  read_betas(c, s, o);
  o.weight_decay = read_number(c, s, "weight_decay", optim_defaults::kWeightDecay, 0.0);
  read_flag(c, s, "set_grad_none", true);
  read_flag(c, s, "fp32_optimizer_states", true);
}

// torch.optim.Adagrad (no offload) and DeepSpeedCPUAdagrad (offload): the union is accepted.
void read_adagrad_params(Ctx& c, Section& s, OptimizerConfig& o) {
  o.kind = OptimizerKind::Adagrad;
  o.lr = read_number(c, s, "lr", optim_defaults::kAdagradLr, 0.0);
  o.lr_decay = read_number(c, s, "lr_decay", 0.0, 0.0);
  o.weight_decay = read_number(c, s, "weight_decay", optim_defaults::kWeightDecay, 0.0);
  o.initial_accumulator_value = read_number(c, s, "initial_accumulator_value", 0.0, 0.0);
  o.eps = read_number(c, s, "eps", optim_defaults::kAdagradEps, 0.0);
  if (read_flag(c, s, "maximize", false)) c.error(s.key_path("maximize"), "true is not supported by zerotrain");
  if (read_flag(c, s, "amsgrad", false)) c.error(s.key_path("amsgrad"), "true is not supported (Adagrad has no AMSGrad variant)");
  read_flag(c, s, "fp32_optimizer_states", true);
  read_torch_switches(c, s);
}

// FusedLamb. DeepSpeed's engine requires dynamic loss scaling with it.
void read_lamb_params(Ctx& c, Section& s, OptimizerConfig& o) {
  o.kind = OptimizerKind::Lamb;
  o.lr = read_number(c, s, "lr", optim_defaults::kLr, 0.0);
  o.bias_correction = read_flag(c, s, "bias_correction", optim_defaults::kAdamBiasCorrection);
  read_betas(c, s, o);
  o.eps = read_number(c, s, "eps", optim_defaults::kAdamEps, 0.0);
  o.eps_inside_sqrt = read_flag(c, s, "eps_inside_sqrt", false);
  o.weight_decay = read_number(c, s, "weight_decay", optim_defaults::kWeightDecay, 0.0);
  o.max_coeff = read_number(c, s, "max_coeff", optim_defaults::kLambMaxCoeff, 0.0);
  o.min_coeff = read_number(c, s, "min_coeff", optim_defaults::kLambMinCoeff, 0.0);
  if (read_flag(c, s, "amsgrad", false)) {
    c.error(s.key_path("amsgrad"), "true is not supported (DeepSpeed's FusedLamb rejects it too)");
  }
  if (o.min_coeff > o.max_coeff) {
    c.error(s.key_path("min_coeff"), "must be <= max_coeff (" + describe(Json(o.max_coeff)) + "): the trust ratio is "
                                     "clamped to [min_coeff, max_coeff]");
  }
  if (c.cfg.fp16.enabled && !c.cfg.fp16.dynamic()) {
    c.error("optimizer.type", "LAMB requires dynamic loss scaling (fp16.loss_scale 0), as in DeepSpeed; found a static "
                              "fp16.loss_scale of " + describe(Json(c.cfg.fp16.loss_scale)));
  }
}

// What an optimizer name is to DeepSpeed: the normalised name (lower-cased where DeepSpeed
// lower-cases it) and whether zerotrain supports it.
enum class TypeClass { kSupported, kCompressed, kDeepSpeedOther, kUnknown };
struct TypeName {
  std::string type;
  TypeClass cls;
};

TypeName classify_type(const std::string& given) {
  std::string lower = given;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const bool ds_lower = std::find(std::begin(kDsLowerNames), std::end(kDsLowerNames), lower) != std::end(kDsLowerNames);
  TypeName t{ds_lower ? lower : given, TypeClass::kUnknown};
  const bool torch = std::find(std::begin(kTorchOptimNames), std::end(kTorchOptimNames), t.type) != std::end(kTorchOptimNames);
  if (t.type == "adam" || t.type == "adamw" || t.type == "SGD" || t.type == "lion" || t.type == "adagrad" ||
      t.type == "lamb") {
    t.cls = TypeClass::kSupported;
  } else if (t.type == "onebitadam" || t.type == "zerooneadam" || t.type == "onebitlamb") {
    t.cls = TypeClass::kCompressed;
  } else if (ds_lower || torch) {
    t.cls = TypeClass::kDeepSpeedOther;
  }
  return t;
}

[[noreturn]] void fail_unsupported_type(Ctx& c, const Json& v, const std::string& given, const TypeName& t) {
  const std::string kinds = "\"Adam\", \"AdamW\", \"SGD\", \"Lion\", \"Adagrad\" or \"LAMB\"";
  if (t.cls == TypeClass::kCompressed) {
    c.fail("optimizer.type", v, kinds + " (" + given + " is one of DeepSpeed's compressed-communication "
           "optimizers, which replace the gradient all-reduce with 1-bit error-compensated exchanges; DeepSpeed "
           "refuses them with ZeRO, and zerotrain, whose every stage is ZeRO, does not implement them)",
           t.type == "onebitlamb" ? "use \"LAMB\"" : "use \"Adam\" or \"AdamW\"");
  }
  if (t.cls == TypeClass::kDeepSpeedOther) {
    c.fail("optimizer.type", v, kinds + " (" + given + " is a DeepSpeed optimizer that is not supported by "
           "zerotrain)");
  }
  std::string near = nearest_key(given, {"Adam", "AdamW", "SGD", "Adagrad", "Lamb", "Lion", "OneBitAdam"});
  c.fail("optimizer.type", v, kinds + " (DeepSpeed does not know `" + given + "` either)",
         near.empty() ? "" : "did you mean `" + near + "`?");
}

// max_grad_norm (§4, §17.4): DeepSpeed zeroes it when fp16 is off, and refuses the key when it
// builds the optimizer (optimizer_of). Clipping is the top-level gradient_clipping. Returns
// whether the key was given (and takes it out of `params_in`).
bool take_max_grad_norm(Ctx& c, Json& params_in) {
  if (!params_in.contains("max_grad_norm")) return false;
  const Json mgn = params_in["max_grad_norm"];
  params_in.erase("max_grad_norm");
  if (!mgn.is_number()) c.fail("optimizer.params.max_grad_norm", mgn, "a number (better: remove it and use gradient_clipping)");
  if (c.cfg.fp16.enabled) {
    c.error("optimizer.params.max_grad_norm", "is not supported as an optimizer parameter (DeepSpeed rejects it when "
            "building the optimizer); use the top-level `gradient_clipping` instead");
  }
  return true;
}

void read_params(Ctx& c, Section& ps, OptimizerConfig& o) {
  if (o.type == "SGD") read_sgd_params(c, ps, o);
  else if (o.type == "lion") read_lion_params(c, ps, o);
  else if (o.type == "adagrad") read_adagrad_params(c, ps, o);
  else if (o.type == "lamb") read_lamb_params(c, ps, o);
  else read_adam_params(c, ps, o);
}

const char* const kMaxGradNormRefused =
    "optimizer.params.max_grad_norm: 'max_grad_norm' is not supported as an optimizer parameter, please switch to "
    "using the deepspeed parameter 'gradient_clipping'";

}  // namespace

void read_optimizer(Ctx& c, Section& top) {
  Section::Lookup l = top.take("optimizer");
  if (!l.present()) {
    c.record("optimizer", l.source, "no optimizer section");
    return;
  }
  if (!l.value->is_object()) c.fail("optimizer", *l.value, "an object {\"type\": ..., \"params\": {...}}");
  Section s(c, l.value, "optimizer", Section::Kind::kLoose);
  Section::Lookup lt = s.take("type");
  Section::Lookup lp = s.take("params");
  bool legacy_fusion = s.get_bool("legacy_fusion", false);
  s.finish();
  if (!lt.present() || lt.value->is_null()) {
    if (lp.present()) c.warn("optimizer.params", "ignored: the optimizer has no `type` (as in DeepSpeed)");
    c.record("optimizer", ConfigSource::kDefault, "no optimizer type");
    return;
  }
  if (!lt.value->is_string()) c.fail("optimizer.type", *lt.value, "an optimizer name (a string), e.g. \"AdamW\"");
  const std::string given = lt.value->get<std::string>();
  const TypeName t = classify_type(given);
  if (t.cls != TypeClass::kSupported) fail_unsupported_type(c, *lt.value, given, t);
  OptimizerConfig o;
  o.type = t.type;
  Json params_in = Json::object();
  if (lp.present()) {
    if (!lp.value->is_object()) c.fail("optimizer.params", *lp.value, "an object of optimizer parameters");
    params_in = *lp.value;
  }
  const bool has_mgn = take_max_grad_norm(c, params_in);
  Section ps(c, &params_in, "optimizer.params", Section::Kind::kStrict);
  read_params(c, ps, o);
  ps.finish();
  if (has_mgn) {
    ps.put("max_grad_norm", 0.0, ConfigSource::kDerived, "set to 0.0 because fp16 is off (as DeepSpeed does)");
    c.warn("optimizer.params.max_grad_norm", "set to 0.0 and ignored (fp16 is off); use the top-level `gradient_clipping`");
  }
  o.params = ps.out();
  c.cfg.resolved["optimizer"] = Json{{"type", o.type}, {"params", o.params}, {"legacy_fusion", legacy_fusion}};
  c.record("optimizer.type", ConfigSource::kFile, given == o.type ? "" : "\"" + given + "\" normalised");
  c.cfg.optimizer = o;
}

}  // namespace zt::cfg

namespace zt {

OptimizerHparams parse_optimizer(const std::string& type, const Json& params) {
  static const char* kSupported = "(supported: Adam, AdamW, SGD, Lion, Adagrad, LAMB)";
  if (type.empty())
    throw InputError("optimizer.type: missing; zerotrain needs an optimizer (Adam, AdamW, SGD, Lion, Adagrad or LAMB)");
  const cfg::TypeName t = cfg::classify_type(type);
  if (t.cls == cfg::TypeClass::kCompressed)
    throw InputError("optimizer.type: '" + type + "' is a DeepSpeed compressed-communication optimizer (1-bit / 0-1 "
                     "error-compensated gradient exchange), which DeepSpeed refuses with ZeRO and zerotrain does not "
                     "implement " + kSupported);
  if (t.cls == cfg::TypeClass::kDeepSpeedOther)
    throw InputError("optimizer.type: '" + type + "' is a DeepSpeed optimizer that zerotrain does not support " + kSupported);
  if (t.cls == cfg::TypeClass::kUnknown) {
    std::string hint = t.type == "sgd" ? " (did you mean 'SGD'? torch optimizer names are case-sensitive)" : "";
    throw InputError("optimizer.type: '" + type + "' is not supported " + kSupported + hint);
  }
  if (params.is_object() && params.contains("max_grad_norm")) throw InputError(cfg::kMaxGradNormRefused);
  Json section{{"type", type}};
  if (!params.is_null()) section["params"] = params;
  const Json doc{{"optimizer", section}};
  const ConfigOptions opt;
  DsConfig cfg;
  cfg::Ctx c{"(optimizer arguments)", opt, cfg};
  cfg::Section top(c, &doc, "", cfg::Section::Kind::kLoose);
  cfg::read_optimizer(c, top);
  return *cfg.optimizer;
}

OptimizerHparams optimizer_of(const DsConfig& cfg) {
  ZT_CHECK(cfg.optimizer.has_value(), "optimizer_of: the config has no optimizer (engine_options_from uses the client optimizer)");
  if (cfg.optimizer->params.contains("max_grad_norm")) throw InputError(cfg::kMaxGradNormRefused);
  return *cfg.optimizer;
}

}  // namespace zt
