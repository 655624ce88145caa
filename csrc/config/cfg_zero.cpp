// cfg_zero.cpp — zero_optimization with offload_param / offload_optimizer (docs/config.md §8).
// Every key is declared once in config/zero_keys.h: ordinary keys go through one generic reader,
// the special ones (the legacy boolean form, stage, overlap_comm's stage-dependent default, the
// offload sections and their deprecated spellings, the deprecated 16-bit-save spelling, lists)
// through the named handlers below, in the list's order; the "auto" bucket rules and the
// refusals of unsupported features follow.
#include <algorithm>

#include "config_reader.h"

namespace zt::cfg {
namespace {

void reject_enabled(Ctx& c, const std::string& path, const std::string& what) {
  c.error(path, what + " is not supported by zerotrain; remove it or set it to its default");
}

// What the handlers share while zero_optimization is read.
struct ZeroRead {
  ZeroConfig& z;
  Section& s;
  bool legacy_true = false;  // "zero_optimization": true
  bool loco = false;         // zeropp_loco_param given as an object (LoCo on)
};

// ---- special keys of zero_optimization (zero_keys.h names each handler) ----

void kNone(Ctx&, ZeroRead&) {}

void read_stage(Ctx& c, ZeroRead& r) {
  Section::Lookup l = r.s.take("stage");
  int64_t st = 0;
  if (l.present()) {
    std::string p = r.s.key_path(l.key);
    if (l.value->is_null()) c.fail(p, *l.value, "0, 1, 2 or 3");
    st = to_int(c, p, *l.value, BoolAsInt::kAccept);
    if (st < 0 || st > 3) c.fail(p, *l.value, "0, 1, 2 or 3");
  }
  r.z.stage = static_cast<int>(st);
  if (r.legacy_true) r.s.put("stage", st, ConfigSource::kDerived, "legacy \"zero_optimization\": true");
  else r.s.put_lookup("stage", st, l);
}

// null or absent: true iff stage == 3.
void read_overlap_comm(Ctx& c, ZeroRead& r) {
  Section::Lookup l = r.s.take("overlap_comm");
  bool v = r.z.stage == 3;
  if (l.present() && !l.value->is_null()) {
    v = to_bool(c, r.s.key_path(l.key), *l.value);
    r.s.put_lookup("overlap_comm", v, l);
  } else {
    r.s.put("overlap_comm", v, l.source == ConfigSource::kFile ? ConfigSource::kDerived : l.source,
            l.source == ConfigSource::kAuto ? "\"auto\" -> true iff stage == 3" : "null -> true iff stage == 3");
  }
  r.z.overlap_comm = v;
}

std::string read_device(Ctx& c, Section& s) {
  Section::Lookup l = s.take("device");
  std::string dev = "none";
  if (l.present()) {
    std::string p = s.key_path(l.key);
    const Json& v = *l.value;
    if (!v.is_string() || (v != "none" && v != "cpu" && v != "nvme")) {
      c.fail(p, v, "one of \"none\", \"cpu\", \"nvme\" (lower case)");
    }
    dev = v.get<std::string>();
    if (dev == "nvme") {
      c.error(p, "\"nvme\" offload is not supported by zerotrain; use \"cpu\" or \"none\"");
    }
  }
  s.put_lookup("device", dev, l);
  return dev;
}

std::optional<std::string> read_nvme_path(Ctx& c, Section& s) {
  Section::Lookup l = s.take("nvme_path");
  if (!l.present() || l.value->is_null()) {
    s.put_lookup("nvme_path", nullptr, l);
    return std::nullopt;
  }
  if (!l.value->is_string()) c.fail(s.key_path(l.key), *l.value, "a path (a string) or null");
  s.put_lookup("nvme_path", *l.value, l);
  return l.value->get<std::string>();
}

// One offload section (`v`: its value, an object or null meaning "no offload"), read by the
// generic reader for its ordinary keys. Returns the resolved JSON.
template <typename Config, typename ReadKeys>
Json read_offload(Ctx& c, const Json& v, const std::string& path, std::optional<Config>* out, ReadKeys read_keys) {
  if (v.is_null()) return nullptr;
  if (!v.is_object()) c.fail(path, v, "an object or null");
  Section s(c, &v, path, Section::Kind::kStrict);
  Config o;
  o.device = read_device(c, s);
  o.nvme_path = read_nvme_path(c, s);
  read_keys(s, o);
  s.finish();
  *out = o;
  return s.out();
}

Json read_offload_optimizer(Ctx& c, const Json& v, const std::string& path,
                            std::optional<OffloadOptimizerConfig>* out) {
  Json j = read_offload(c, v, path, out, [](Section& s, OffloadOptimizerConfig& o) {
#define ZT_ZERO_KEY_OO(name, def, rule, alias) o.name = read_key(s, #name, decltype(o.name)(def), rule, alias);
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context) \
  ZT_ZERO_KEY_##sec(name, def, rule, alias)
#define ZT_ZERO_KEY_Z(...)
#define ZT_ZERO_KEY_OP(...)
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_KEY_Z
#undef ZT_ZERO_KEY_OO
#undef ZT_ZERO_KEY_OP
  });
  if (*out && (*out)->super_offload) c.error(path + ".super_offload", "true is not supported by zerotrain (SuperOffload)");
  return j;
}

Json read_offload_param(Ctx& c, const Json& v, const std::string& path, std::optional<OffloadParamConfig>* out) {
  return read_offload(c, v, path, out, [](Section& s, OffloadParamConfig& o) {
#define ZT_ZERO_KEY_OP(name, def, rule, alias) o.name = read_key(s, #name, decltype(o.name)(def), rule, alias);
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context) \
  ZT_ZERO_KEY_##sec(name, def, rule, alias)
#define ZT_ZERO_KEY_Z(...)
#define ZT_ZERO_KEY_OO(...)
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_KEY_Z
#undef ZT_ZERO_KEY_OO
#undef ZT_ZERO_KEY_OP
  });
}

// A deprecated boolean spelling of an offload section (§8). Both the old and the new key given is
// an error even when the old one is false (§17.3). Returns the old key's value.
bool deprecated_offload(Ctx& c, Section& s, const Section::Lookup& old_l, const char* old_key, const char* new_key) {
  if (!s.has_value(old_key)) return false;
  if (s.has_value(new_key)) {
    c.error(s.key_path(old_key), std::string("deprecated; cannot be given together with its replacement `") + new_key +
                                     "` (DeepSpeed rejects this too); keep only `" + new_key + "`");
  }
  c.warn(s.key_path(old_key), std::string("deprecated; use `") + new_key + "` instead");
  return old_l.present() && to_bool(c, s.key_path(old_key), *old_l.value);
}

// offload_optimizer / offload_param, or their deprecated spellings cpu_offload / cpu_offload_param.
template <typename Config>
void read_offload_key(Ctx& c, Section& s, const Section::Lookup& old_l, const char* old_key,
                      const Section::Lookup& new_l, const char* new_key, std::optional<Config>* out,
                      Json (*read)(Ctx&, const Json&, const std::string&, std::optional<Config>*)) {
  const std::string path = s.key_path(new_key);
  if (deprecated_offload(c, s, old_l, old_key, new_key)) {
    s.out()[new_key] = read(c, Json{{"device", "cpu"}}, path, out);
    c.record(path, ConfigSource::kDerived, std::string("deprecated ") + old_key + ": true");
    return;
  }
  s.out()[new_key] = new_l.present() ? read(c, *new_l.value, path, out) : Json(nullptr);
  if (!new_l.present()) c.record(path, new_l.source, new_l.note);
}

void read_offload_sections(Ctx& c, ZeroRead& r) {
  Section& s = r.s;
  Section::Lookup l_cpu_off = s.take("cpu_offload");
  Section::Lookup l_cpu_off_param = s.take("cpu_offload_param");
  Section::Lookup l_pin = s.take("cpu_offload_use_pin_memory");
  Section::Lookup l_ofo = s.take("offload_optimizer");
  Section::Lookup l_ofp = s.take("offload_param");
  read_offload_key(c, s, l_cpu_off, "cpu_offload", l_ofo, "offload_optimizer", &r.z.offload_optimizer,
                   &read_offload_optimizer);
  read_offload_key(c, s, l_cpu_off_param, "cpu_offload_param", l_ofp, "offload_param", &r.z.offload_param,
                   &read_offload_param);
  if (l_pin.present()) {
    to_bool(c, s.key_path(l_pin.key), *l_pin.value);
    c.warn(s.key_path(l_pin.key), "deprecated and unused; use offload_optimizer.pin_memory / offload_param.pin_memory");
  }
}

void read_zenflow(Ctx& c, ZeroRead& r) {
  Section::Lookup l = r.s.take("zenflow");
  if (l.present() && !l.value->is_null()) reject_enabled(c, r.s.key_path("zenflow"), "ZenFlow");
  r.s.put_lookup("zenflow", nullptr, l);
}

// stage3_gather_16bit_weights_on_model_save, or its deprecated fp16 spelling.
void read_gather_16bit(Ctx& c, ZeroRead& r) {
  Section& s = r.s;
  const char* const old_key = "stage3_gather_fp16_weights_on_model_save";
  Section::Lookup l_old = s.take(old_key);
  if (!s.has_value(old_key)) {
    r.z.stage3_gather_16bit_weights_on_model_save =
        s.get_bool("stage3_gather_16bit_weights_on_model_save", ZeroConfig{}.stage3_gather_16bit_weights_on_model_save,
                   "gather_16bit_weights_on_model_save");
    return;
  }
  if (s.has_value("stage3_gather_16bit_weights_on_model_save") || s.has_value("gather_16bit_weights_on_model_save")) {
    c.error(s.key_path(old_key),
            "deprecated; cannot be given together with its replacement `stage3_gather_16bit_weights_on_model_save` "
            "(DeepSpeed rejects this too); keep only the 16bit key");
  }
  c.warn(s.key_path(old_key), "deprecated; use `stage3_gather_16bit_weights_on_model_save` instead");
  bool v = l_old.present() && to_bool(c, s.key_path(old_key), *l_old.value);
  s.take("stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save");
  s.put("stage3_gather_16bit_weights_on_model_save", v, ConfigSource::kDerived,
        "from deprecated stage3_gather_fp16_weights_on_model_save");
  r.z.stage3_gather_16bit_weights_on_model_save = v;
}

void read_loco(Ctx& c, ZeroRead& r) {
  Section::Lookup l = r.s.take("zeropp_loco_param");
  if (l.present() && !l.value->is_null() && !l.value->is_object()) {
    c.fail(r.s.key_path("zeropp_loco_param"), *l.value, "an object or null");
  }
  r.s.put_lookup("zeropp_loco_param", l.present() ? *l.value : Json(nullptr), l);
  r.loco = l.present() && l.value->is_object();
}

// A string or a list of strings, de-duplicated, as DeepSpeed's leaf_module lists.
Json read_string_list(Ctx& c, Section& ls, const char* k) {
  Section::Lookup lk = ls.take(k);
  Json list = Json::array();
  if (!lk.present()) {
    if (std::string(k) == "classes") {
      list = {"transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
              "transformers.models.qwen2_moe.modeling_qwen2_moe.Qwen2MoeSparseMoeBlock",
              "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock"};
    }
  } else if (lk.value->is_string()) {
    list.push_back(*lk.value);
  } else if (lk.value->is_array()) {
    for (const Json& e : *lk.value) {
      if (!e.is_string()) c.fail(ls.key_path(k), *lk.value, "a string or a list of strings");
      if (std::find(list.begin(), list.end(), e) == list.end()) list.push_back(e);
    }
  } else {
    c.fail(ls.key_path(k), *lk.value, "a string or a list of strings");
  }
  ls.put_lookup(k, list, lk);
  return list;
}

void read_leaf_module(Ctx& c, ZeroRead& r) {
  Section::Lookup l = r.s.take("leaf_module");
  const Json empty = Json::object();
  if (l.present() && !l.value->is_object()) c.fail(r.s.key_path("leaf_module"), *l.value, "an object");
  Section ls(c, l.present() ? l.value : &empty, r.s.key_path("leaf_module"), Section::Kind::kStrict);
  for (const char* k : {"classes", "names", "name_suffixes"}) read_string_list(c, ls, k);
  ls.finish();
  r.s.out()["leaf_module"] = ls.out();
}

// ---- the section ----

// The section's input: its object, or the one the legacy boolean form stands for (true:
// {"stage": 1, "allgather_bucket_size": the top-level allgather_size}; false: {}).
const Json* zero_input(Ctx& c, const Section::Lookup& lz, const Section::Lookup& allgather_size, bool* legacy_true,
                       Json& legacy) {
  if (!lz.present()) return nullptr;
  const Json& v = *lz.value;
  if (v.is_object()) return &v;
  if (!v.is_boolean()) c.fail("zero_optimization", v, "an object (e.g. {\"stage\": 2})");
  legacy = Json::object();
  if (v.get<bool>()) {
    *legacy_true = true;
    legacy["stage"] = 1;
    legacy["allgather_bucket_size"] =
        allgather_size.present() ? *allgather_size.value : Json(ZeroConfig{}.allgather_bucket_size);
    c.warn("zero_optimization", "the boolean form is deprecated; true means {\"stage\": 1}");
  }
  return &legacy;
}

// "auto" for the bucket sizes: functions of the model's hidden size h.
void zero_auto_rules(Ctx& c, Section& s) {
  const std::optional<int64_t>& h = c.opt.hidden_size;
  if (!h) return;
  std::string hs = std::to_string(*h);
  s.auto_rule("reduce_bucket_size", *h * *h, "\"auto\" -> h*h with hidden size h = " + hs);
  s.auto_rule("stage3_prefetch_bucket_size", (9 * *h * *h) / 10, "\"auto\" -> floor(0.9*h*h) with hidden size h = " + hs);
  s.auto_rule("stage3_param_persistence_threshold", 10 * *h, "\"auto\" -> 10*h with hidden size h = " + hs);
}

// Every key of zero_keys.h in its order: ordinary keys by the generic reader, special ones by
// their handler.
void read_zero_keys(Ctx& c, ZeroRead& r) {
  ZeroConfig& z = r.z;
  Section& s = r.s;
#define ZT_ZERO_KEY_Z(name, def, rule, alias) z.name = read_key(s, #name, decltype(z.name)(def), rule, alias);
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context) \
  ZT_ZERO_KEY_##sec(name, def, rule, alias)
#define ZT_ZERO_KEY_OO(...)
#define ZT_ZERO_KEY_OP(...)
#define ZT_ZERO_SPECIAL(sec, path, handler, use, why, probe, effects, context, alias, input_only, input_default) \
  handler(c, r);
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_KEY_Z
#undef ZT_ZERO_KEY_OO
#undef ZT_ZERO_KEY_OP
}

// Refusals of ordinary keys that turn an unsupported feature on (zero_keys.h: refuse_above).
void refuse_enabled_features(Ctx& c, const ZeroConfig& z) {
#define ZT_ZERO_KEY_Z(name, refuse_above, refused) \
  if (static_cast<double>(z.name) > (refuse_above)) reject_enabled(c, "zero_optimization." #name, refused);
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context) \
  ZT_ZERO_KEY_##sec(name, refuse_above, refused)
#define ZT_ZERO_KEY_OO(...)
#define ZT_ZERO_KEY_OP(...)
#include "zerotrain/config/zero_keys.h"
#undef ZT_ZERO_KEY_Z
#undef ZT_ZERO_KEY_OO
#undef ZT_ZERO_KEY_OP
}

// Model-level rules, then zerotrain's "known but not supported" policy.
void check_zero(Ctx& c, const ZeroRead& r) {
  const ZeroConfig& z = r.z;
  const Json& out = r.s.out();
  if (z.offload_optimizer && z.offload_optimizer->ratio < 1.0) {
    if (z.stage != 3) {
      c.error("zero_optimization.offload_optimizer.ratio",
              "found " + describe(out["offload_optimizer"]["ratio"]) +
                  "; expected 1.0 below stage 3 (Partial offloading only supported for ZeRO Stage 3)");
    }
    reject_enabled(c, "zero_optimization.offload_optimizer.ratio", "partial optimizer offload (ratio < 1)");
  }
  if (z.stage == 3 && z.elastic_checkpoint) {
    c.warn("zero_optimization.elastic_checkpoint", "ZeRO-3 elastic checkpointing is deprecated (ignored)");
  }
  refuse_enabled_features(c, z);
  if (r.loco) reject_enabled(c, "zero_optimization.zeropp_loco_param", "ZeRO++ LoCo");
  if (z.params_offloaded() && z.stage != 3) {
    c.warn("zero_optimization.offload_param", "only used by stage 3; ignored at stage " + std::to_string(z.stage));
  }
}

}  // namespace

void read_zero(Ctx& c, Section& top) {
  Section::Lookup lz = top.take("zero_optimization");
  Section::Lookup lsize = top.take("allgather_size");
  Json legacy;
  bool legacy_true = false;
  const Json* zin = zero_input(c, lz, lsize, &legacy_true, legacy);
  Section s(c, zin, "zero_optimization", Section::Kind::kStrict);
  ZeroRead r{c.cfg.zero, s, legacy_true};
  zero_auto_rules(c, s);
  read_zero_keys(c, r);
  if (r.legacy_true) {
    c.record("zero_optimization.allgather_bucket_size", lsize.present() ? ConfigSource::kFile : ConfigSource::kDefault,
             "legacy \"zero_optimization\": true takes top-level allgather_size");
  }
  s.finish();
  check_zero(c, r);
  c.cfg.resolved["zero_optimization"] = s.out();
}

}  // namespace zt::cfg
