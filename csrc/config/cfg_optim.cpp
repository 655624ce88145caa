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

// The reading rules of optim_keys.h: one type each, so that a key's rule picks its reader.
struct NonNegative {};
struct AnyNumber {};
struct Switch {};
struct NullableSwitch {};
struct Betas {};
constexpr NonNegative kNonNegative;
constexpr AnyNumber kAnyNumber;
constexpr Switch kSwitch;
constexpr NullableSwitch kNullableSwitch;
constexpr Betas kBetas;

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

double read_param(Ctx& c, Section& s, OptimizerConfig&, const char* key, double def, NonNegative) {
  return read_number(c, s, key, def, 0.0);
}
double read_param(Ctx& c, Section& s, OptimizerConfig&, const char* key, double def, AnyNumber) {
  return read_number(c, s, key, def, -INFINITY);
}

bool read_param(Ctx& c, Section& s, OptimizerConfig&, const char* key, bool def, Switch) {
  Section::Lookup l = s.take(key);
  bool v = def;
  if (l.present()) v = to_bool_strict(c, s.key_path(l.key), *l.value);
  s.put_lookup(key, v, l);
  return v;
}

// torch's implementation switches: null or a bool, kept as given; `false` when absent or null.
bool read_param(Ctx& c, Section& s, OptimizerConfig&, const char* key, bool, NullableSwitch) {
  Section::Lookup l = s.take(key);
  bool on = false;
  if (l.present() && !l.value->is_null()) on = to_bool_strict(c, s.key_path(l.key), *l.value);
  s.put_lookup(key, l.present() ? *l.value : Json(nullptr), l);
  return on;
}

// Both betas into `o`; `beta2_def`: this optimizer's default beta2 (beta1's is kAdamBeta1).
double read_param(Ctx& c, Section& s, OptimizerConfig& o, const char* key, double beta2_def, Betas) {
  o.beta2 = beta2_def;
  Section::Lookup l = s.take(key);
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
  s.put_lookup(key, Json::array({o.beta1, o.beta2}), l);
  return o.beta2;
}

// A switch whose true turns on what zerotrain does not implement (optim_keys.h: refused).
void refuse_if_on(Ctx& c, Section& s, const char* key, bool on, const char* refused) {
  if (on && *refused) c.error(s.key_path(key), refused);
}
void refuse_if_on(Ctx&, Section&, const char*, double, const char*) {}

// The params of o.kind (set by the caller), in optim_keys.h's order for that kind.
void read_declared_params(Ctx& c, Section& s, OptimizerConfig& o) {
#define ZT_OPTIM_KEY(name, rule, ...) constexpr auto kRuleOf_##name = rule;
#include "zerotrain/config/optim_keys.h"
#define ZT_OPTIM_INTO_STORE(name, def) (o.name = read_param(c, s, o, #name, def, kRuleOf_##name))
#define ZT_OPTIM_INTO_NONE(name, def) read_param(c, s, o, #name, def, kRuleOf_##name)
#define ZT_OPTIM_PARAM(kind_, name, def, store, refused) \
  if (o.kind == OptimizerKind::kind_) refuse_if_on(c, s, #name, ZT_OPTIM_INTO_##store(name, def), refused);
#include "zerotrain/config/optim_keys.h"
#undef ZT_OPTIM_INTO_STORE
#undef ZT_OPTIM_INTO_NONE
}

// The rules beyond one key's, after read_declared_params.
void check_params(Ctx& c, Section& s, OptimizerConfig& o) {
  // Effective decoupled weight decay: "adamw" always; "adam" unless adam_w_mode is false.
  if (o.kind == OptimizerKind::Adam) o.adam_w_mode = o.type == "adamw" || o.adam_w_mode;
  if (o.kind == OptimizerKind::SGD && o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    c.error(s.key_path("nesterov"), "true requires momentum > 0 and dampening 0 (Nesterov momentum requires a "
                                    "momentum and zero dampening)");
  }
  if (o.kind != OptimizerKind::Lamb) return;
  if (o.min_coeff > o.max_coeff) {
    c.error(s.key_path("min_coeff"), "must be <= max_coeff (" + describe(Json(o.max_coeff)) + "): the trust ratio is "
                                     "clamped to [min_coeff, max_coeff]");
  }
  // DeepSpeed's engine requires dynamic loss scaling with FusedLamb.
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
  if (o.type == "SGD") o.kind = OptimizerKind::SGD;
  else if (o.type == "lion") o.kind = OptimizerKind::Lion;
  else if (o.type == "adagrad") o.kind = OptimizerKind::Adagrad;
  else if (o.type == "lamb") o.kind = OptimizerKind::Lamb;
  else o.kind = OptimizerKind::Adam;
  read_declared_params(c, ps, o);
  check_params(c, ps, o);
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
