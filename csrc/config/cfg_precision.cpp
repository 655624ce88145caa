// cfg_precision.cpp — fp16 (docs/config.md §6), bf16 / bfloat16 (§7), data_types and torch_autocast (§9).
#include <cmath>
#include <utility>

#include "config_reader.h"

namespace zt::cfg {
namespace {

// DeepSpeed's DtypeEnum spellings. "int8" is a DeepSpeed dtype zerotrain does not train in.
std::optional<DType> parse_ds_dtype(Ctx& c, const std::string& path, const Json& v) {
  if (v.is_null()) return std::nullopt;
  static const char* kExpected = "one of \"fp32\"/\"float32\"/\"float\"/\"torch.float32\", "
                                 "\"fp16\"/\"float16\"/\"half\"/\"torch.float16\", \"bf16\"/\"bfloat16\"/\"torch.bfloat16\", or null";
  static const std::pair<const char*, DType> kSpellings[] = {
      {"fp32", DType::F32}, {"float32", DType::F32}, {"float", DType::F32}, {"torch.float32", DType::F32},
      {"fp16", DType::F16}, {"float16", DType::F16}, {"half", DType::F16}, {"torch.float16", DType::F16},
      {"bf16", DType::BF16}, {"bfloat16", DType::BF16}, {"torch.bfloat16", DType::BF16}};
  if (!v.is_string()) c.fail(path, v, kExpected);
  const std::string s = v.get<std::string>();
  for (const auto& [name, t] : kSpellings) {
    if (s == name) return t;
  }
  if (s == "int8" || s == "torch.int8") c.error(path, "\"int8\" is not supported by zerotrain");
  c.fail(path, v, kExpected);
}

const Json* section_object(Ctx& c, const Section::Lookup& l, const std::string& path) {
  if (!l.present()) return nullptr;
  if (!l.value->is_object()) c.fail(path, *l.value, "an object (e.g. {\"enabled\": true})");
  return l.value;
}

// 0: dynamic loss scaling; > 0: a static scale. A number (numeric strings accepted), no boolean.
void read_loss_scale(Ctx& c, Section& s, Fp16Config& f) {
  Section::Lookup ls = s.take("loss_scale");
  double v = Fp16Config{}.loss_scale;
  if (ls.present()) {
    std::string p = s.key_path(ls.key);
    const Json& x = *ls.value;
    if (x.is_array() || x.is_object()) c.fail(p, x, "a number (fp16.loss_scale must be a number)");
    if (x.is_boolean()) c.fail(p, x, "a number (0 = dynamic loss scaling, > 0 = static scale); not a boolean");
    v = to_float(c, p, x, false, true);
    if (!std::isfinite(v) || v < 0) c.fail(p, x, "a finite number >= 0 (0 = dynamic loss scaling, > 0 = static scale)");
  }
  f.loss_scale = v;
  s.put_lookup("loss_scale", v, ls);
}

// The dynamic-scaling bounds DeepSpeed checks once fp16 is on.
void check_fp16(Ctx& c, const Fp16Config& f) {
  if (f.enabled && f.dynamic()) {
    if (f.loss_scale_window <= 0) {
      c.fail("fp16.loss_scale_window", f.loss_scale_window,
             "an integer > 0 when dynamic loss scaling is enabled (loss_scale=0)");
    }
    if (f.min_loss_scale <= 0) {
      c.fail("fp16.min_loss_scale", f.min_loss_scale, "an integer > 0 when dynamic loss scaling is enabled (loss_scale=0)");
    }
  }
  if (f.enabled && f.initial_scale_power > 1023) {
    c.fail("fp16.initial_scale_power", f.initial_scale_power, "an integer <= 1023 (2^p must be a finite number)");
  }
}

// Every fp16 key of precision_keys.h in its order: ordinary keys by the generic reader.
void read_fp16(Ctx& c, Section& top) {
  Fp16Config& f = c.cfg.fp16;
  Section::Lookup l = top.take("fp16");
  Section s(c, section_object(c, l, "fp16"), "fp16", Section::Kind::kStrict);
#define ZT_PRECISION_KEY(sec, name, type, def, rule, ...) ZT_PRECISION_READ_##sec(name, def, rule)
#define ZT_PRECISION_READ_F16(name, def, rule) f.name = read_key(s, #name, decltype(f.name)(def), rule);
#define ZT_PRECISION_READ_B16(name, def, rule)
#define ZT_PRECISION_SPECIAL(sec, path, ...) ZT_PRECISION_SPECIAL_##sec
#define ZT_PRECISION_SPECIAL_F16 read_loss_scale(c, s, f);  // the one special fp16 key
#define ZT_PRECISION_SPECIAL_B16
#define ZT_PRECISION_SPECIAL_TOP
#define ZT_PRECISION_SPECIAL_DT
#define ZT_PRECISION_SPECIAL_TA
#include "zerotrain/config/precision_keys.h"
#undef ZT_PRECISION_READ_F16
#undef ZT_PRECISION_READ_B16
#undef ZT_PRECISION_SPECIAL_F16
#undef ZT_PRECISION_SPECIAL_B16
#undef ZT_PRECISION_SPECIAL_TOP
#undef ZT_PRECISION_SPECIAL_DT
#undef ZT_PRECISION_SPECIAL_TA
  s.finish();
  check_fp16(c, f);
  c.cfg.resolved["fp16"] = s.out();
}

void read_bf16(Ctx& c, Section& top) {
  Bf16Config& b = c.cfg.bf16;
  // "bf16" wins whenever it is present and not null; otherwise the legacy "bfloat16".
  Section::Lookup l = top.take("bf16");
  Section::Lookup legacy = top.take("bfloat16");
  std::string name = "bf16";
  if (l.present() && !l.value->is_null()) {
    if (legacy.present()) c.warn("bfloat16", "ignored because `bf16` is given (as in DeepSpeed)");
  } else if (legacy.present() && !legacy.value->is_null()) {
    l = legacy;
    name = "bfloat16";
  } else {
    l = Section::Lookup{};
  }
  Section s(c, section_object(c, l, name), name, Section::Kind::kStrict);
#define ZT_PRECISION_KEY(sec, name, type, def, rule, ...) ZT_PRECISION_READ_##sec(name, def, rule)
#define ZT_PRECISION_READ_F16(name, def, rule)
#define ZT_PRECISION_READ_B16(name, def, rule) b.name = read_key(s, #name, decltype(b.name)(def), rule);
#include "zerotrain/config/precision_keys.h"
#undef ZT_PRECISION_READ_F16
#undef ZT_PRECISION_READ_B16
  s.finish();
  c.cfg.resolved["bf16"] = s.out();
  if (name == "bfloat16") {  // provenance under the DeepSpeed name of the section
    for (auto it = s.out().begin(); it != s.out().end(); ++it) {
      c.cfg.provenance["bf16." + it.key()] = c.cfg.provenance["bfloat16." + it.key()];
      c.cfg.provenance.erase("bfloat16." + it.key());
    }
  }
}

void read_data_types(Ctx& c, Section& top) {
  Section::Lookup l = top.take("data_types");
  Section s(c, section_object(c, l, "data_types"), "data_types", Section::Kind::kLoose);
  for (const char* k : {"grad_accum_dtype", "param_dtype", "buffer_dtype"}) {
    Section::Lookup lk = s.take(k);
    std::optional<DType> t;
    if (lk.present()) t = parse_ds_dtype(c, s.key_path(lk.key), *lk.value);
    s.put_lookup(k, t ? Json(dtype_name(*t)) : Json(nullptr), lk);
    if (std::string(k) == "grad_accum_dtype") c.cfg.grad_accum_dtype = t;
    else if (t) c.error(s.key_path(k), "is not supported by zerotrain (parameter and buffer dtypes follow fp16/bf16); remove it");
  }
  s.finish();
  c.cfg.resolved["data_types"] = s.out();
}

void read_torch_autocast(Ctx& c, Section& top) {
  Section::Lookup l = top.take("torch_autocast");
  if (!l.present()) return;
  Section s(c, section_object(c, l, "torch_autocast"), "torch_autocast", Section::Kind::kLoose);
  bool enabled = s.get_bool("enabled", false);
  Section::Lookup ld = s.take("dtype");
  if (ld.present()) parse_ds_dtype(c, s.key_path(ld.key), *ld.value);
  s.put_lookup("dtype", ld.present() ? *ld.value : Json(nullptr), ld);
  Section::Lookup lm = s.take("lower_precision_safe_modules");
  if (lm.present() && !lm.value->is_null()) {
    bool ok = lm.value->is_array();
    if (ok) for (const Json& e : *lm.value) ok = ok && e.is_string();
    if (!ok) c.fail(s.key_path("lower_precision_safe_modules"), *lm.value, "a list of module names (strings)");
  }
  s.put_lookup("lower_precision_safe_modules", lm.present() ? *lm.value : Json(nullptr), lm);
  s.finish();
  c.cfg.resolved["torch_autocast"] = s.out();
  if (enabled) c.error("torch_autocast.enabled", "true is not supported by zerotrain (use fp16 or bf16)");
}

}  // namespace

void read_precision(Ctx& c, Section& top) {
  read_fp16(c, top);
  read_bf16(c, top);
  if (c.cfg.fp16.enabled && c.cfg.bf16.enabled) {
    c.error("fp16.enabled", "found true together with bf16.enabled true; expected at most one of them "
                            "(bfloat16 and fp16 modes cannot be simultaneously enabled)");
  }
  read_torch_autocast(c, top);
  read_data_types(c, top);
}

}  // namespace zt::cfg
