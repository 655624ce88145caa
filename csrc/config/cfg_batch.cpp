// cfg_batch.cpp — top-level scalar keys (docs/config.md §3) and the batch triad (§2).
#include <cctype>
#include <algorithm>
#include <cmath>

#include "config_reader.h"

namespace zt::cfg {
namespace {

// The handlers of the ZT_TOP_KEY entries with rules of their own (config/top_keys.h).

std::optional<DType> read_dtype_choice(Ctx& c, Section& top, const char* key, std::optional<DType> def) {
  Section::Lookup l = top.take(key);
  if (!l.present() || l.value->is_null()) {
    top.put_lookup(key, def ? Json(dtype_name(*def)) : Json(nullptr), l);
    return def;
  }
  std::string p = top.key_path(l.key);
  if (!l.value->is_string()) c.fail(p, *l.value, "one of \"fp16\", \"bf16\", \"fp32\" (a string)");
  std::string s = l.value->get<std::string>();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (s != "fp16" && s != "bf16" && s != "fp32") {
    c.fail(p, *l.value, "one of \"fp16\", \"bf16\", \"fp32\" (case-insensitive; DeepSpeed accepts no other spelling)");
  }
  top.put_lookup(key, s, l);
  DType t;
  parse_dtype(s.c_str(), &t);
  return t;
}

// A batch key: absent / null / "auto" (no command-line value) -> nullopt.
std::optional<int64_t> batch_key(Ctx& c, Section& top, const std::string& key, Section::Lookup* l) {
  *l = top.take(key);
  if (!l->present() || l->value->is_null()) return std::nullopt;
  std::string p = top.key_path(l->key);
  const Json& v = *l->value;
  if (!v.is_number()) {
    c.fail(p, v, "a positive integer",
           v.is_string() ? "write the number without quotes" : "");
  }
  return to_int(c, p, v, BoolAsInt::kReject);
}

// A nullable integer (a boolean rejected): absent or null resolves to null and gives `def`; a value
// below `min` fails with `expected`.
std::optional<int64_t> read_nullable_int(Ctx& c, Section& top, const char* key, std::optional<int64_t> def,
                                         int64_t min, const char* expected) {
  Section::Lookup l = top.take(key);
  if (!l.present() || l.value->is_null()) {
    top.put_lookup(key, nullptr, l);
    return def;
  }
  std::string p = top.key_path(l.key);
  int64_t v = to_int(c, p, *l.value, BoolAsInt::kReject);
  if (v < min) c.fail(p, *l.value, expected);
  top.put_lookup(key, v, l);
  return v;
}

std::optional<int64_t> read_steps_per_print(Ctx& c, Section& top, const char* key, std::optional<int64_t> def) {
  return read_nullable_int(c, top, key, def, 0, "an integer >= 0 (0 or null: no periodic progress line)");
}

double read_predivide_factor(Ctx& c, Section& top, const char* key, double def) {
  Section::Lookup l = top.take(key);
  double f = def;
  if (l.present()) {
    std::string p = top.key_path(l.key);
    f = to_float(c, p, *l.value, false, false);
    if (!(f > 0.0) || !std::isfinite(f)) c.fail(p, *l.value, "a number > 0");
  }
  top.put_lookup(key, f, l);
  return f;
}

std::string read_allreduce_op(Ctx& c, Section& top, const char* key, std::string def) {
  Section::Lookup l = top.take(key);
  std::string op = std::move(def);
  if (l.present()) {
    std::string p = top.key_path(l.key);
    if (!l.value->is_string()) c.fail(p, *l.value, "\"mean\" or \"sum\"");
    op = l.value->get<std::string>();
    std::transform(op.begin(), op.end(), op.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (op != "mean" && op != "sum") {
      c.fail(p, *l.value, "\"mean\" or \"sum\" (Invalid gradient_allreduce_op. Supported operations: ['mean', 'sum'])");
    }
  }
  top.put_lookup(key, op, l);
  return op;
}

// "auto" -> DeepSpeed's default (1.0), unless the command line gives a value.
double read_gradient_clipping(Ctx& c, Section& top, const char* key, double def) {
  top.auto_rule(key, def, "\"auto\" -> 1.0");
  Section::Lookup l = top.take(key);
  double v = def;
  if (l.present()) {
    std::string p = top.key_path(l.key);
    if (!l.value->is_number()) c.fail(p, *l.value, "a number (> 0 clips to that global L2 norm; 0 disables clipping)");
    v = l.value->get<double>();
    if (!std::isfinite(v)) c.fail(p, *l.value, "a finite number");
  }
  top.put_lookup(key, v, l);
  return v;
}

Json read_log_level(Ctx& c, Section& top, const char* key, Json def) {
  Section::Lookup l = top.take(key);
  if (l.present() && !l.value->is_null() && !l.value->is_string()) {
    c.fail(top.key_path(l.key), *l.value, "a log level name (a string) or null");
  }
  Json v = l.present() ? *l.value : def;
  top.put_lookup(key, v, l);
  return v;
}

std::optional<int64_t> read_vocabulary_size(Ctx& c, Section& top, const char* key, std::optional<int64_t> def) {
  std::optional<int64_t> v = read_nullable_int(c, top, key, def, 1, "an integer > 0");
  if (v && *v % 8 != 0) c.warn(top.key_path(key), "not a multiple of 8; tensor cores are used less efficiently");
  return v;
}

// Any value, kept as given (a key read only so that it is known and in the resolved document).
Json read_as_given(Ctx&, Section& top, const char* key, Json def) {
  Section::Lookup l = top.take(key);
  Json v = l.present() ? *l.value : def;
  top.put_lookup(key, v, l);
  return v;
}

// §17.2: for config files DeepSpeed's sequence_parallel_size check never fires; W is the
// plain data-parallel world size. Accepted, with a note when it would look meaningful.
void read_parallel_sizes(Ctx& c, Section& top) {
  for (const char* k : {"sequence_parallel_size", "data_parallel_size"}) {
    Section::Lookup l = top.take(k);
    if (!l.present()) continue;
    std::string p = top.key_path(l.key);
    int64_t v = to_int(c, p, *l.value, BoolAsInt::kReject);
    if (v != 1) c.warn(p, "has no effect for a config file (as in DeepSpeed); the world size is the data-parallel size " + std::to_string(c.opt.world_size));
    top.put_lookup(k, v, l);
  }
}

// One declared key: through the generic reader (a rule) or its named handler.
template <typename T>
T read_top(Ctx&, Section& top, const char* key, T def, Rule rule) {
  return read_key(top, key, def, rule);
}
template <typename T>
T read_top(Ctx& c, Section& top, const char* key, T def, T (*handler)(Ctx&, Section&, const char*, T)) {
  return handler(c, top, key, def);
}

// A boolean whose true turns on a feature zerotrain does not implement (top_keys.h: refused).
void refuse_if_on(Ctx& c, const char* key, bool on, const char* refused) {
  if (on && *refused) c.error(key, refused);
}
template <typename T>
void refuse_if_on(Ctx&, const char*, const T&, const char*) {}

}  // namespace

void read_top_level_scalars(Ctx& c, Section& top) {
  DsConfig& g = c.cfg;
#define ZT_TOP_KEY(name, type, def, read, refused, ...)            \
  g.name = read_top(c, top, #name, decltype(g.name)(def), read); \
  refuse_if_on(c, #name, g.name, refused);
#define ZT_TOP_UNLISTED(handler) handler(c, top);
#include "zerotrain/config/top_keys.h"
}

namespace {

// The three batch keys while they are resolved: value (nullopt: not given), lookup, derivation note.
struct Triad {
  std::optional<int64_t> tbs, mbs, gas;
  Section::Lookup lt, lm, lg;
  std::string nt, nm, ng;
};

// Products of the batch keys must not overflow: each given value is capped far above any real batch.
void cap_batch_keys(Ctx& c, Section& top, const Triad& t) {
  const int64_t kMaxBatch = int64_t(1) << 40;
  const std::pair<const std::optional<int64_t>*, const Section::Lookup*> keys[] = {
      {&t.tbs, &t.lt}, {&t.mbs, &t.lm}, {&t.gas, &t.lg}};
  for (const auto& [v, l] : keys) {
    if (*v && (**v > kMaxBatch || **v < -kMaxBatch)) c.fail(top.key_path(l->key), *l->value, "an integer below 2^40");
  }
}

// DeepSpeed's gradient_accumulation_steps when only one of the other two batch keys is given.
constexpr int64_t kDefaultAccumulationSteps = 1;

int64_t checked_mul(Ctx& c, int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) c.error("train_batch_size", "the batch-size product overflows a 64-bit integer");
  return r;
}

void require_nonzero(Ctx& c, Section& top, const std::optional<int64_t>& v, const Section::Lookup& l, const char* key) {
  if (*v == 0) {
    c.fail(top.key_path(l.key.empty() ? key : l.key), *l.value, "an integer > 0 (it is a divisor in the batch-size rule)");
  }
}

// DeepSpeed's rule: the keys not given are derived from those given (gas defaults to 1).
void derive_missing(Ctx& c, Section& top, Triad& t, int64_t W, const std::string& ws) {
  if (t.tbs && t.mbs && t.gas) return;
  if (t.tbs && t.mbs) {
    require_nonzero(c, top, t.mbs, t.lm, "train_micro_batch_size_per_gpu");
    t.gas = (*t.tbs / *t.mbs) / W;
    t.ng = "= train_batch_size / train_micro_batch_size_per_gpu / " + ws;
  } else if (t.tbs && t.gas) {
    require_nonzero(c, top, t.gas, t.lg, "gradient_accumulation_steps");
    t.mbs = (*t.tbs / W) / *t.gas;
    t.nm = "= train_batch_size / " + ws + " / gradient_accumulation_steps";
  } else if (t.mbs && t.gas) {
    t.tbs = checked_mul(c, checked_mul(c, *t.mbs, *t.gas), W);
    t.nt = "= train_micro_batch_size_per_gpu * gradient_accumulation_steps * " + ws;
  } else if (t.tbs) {
    t.gas = kDefaultAccumulationSteps;
    t.mbs = *t.tbs / W;
    t.ng = "= 1 (only train_batch_size given)";
    t.nm = "= train_batch_size / " + ws;
  } else if (t.mbs) {
    t.tbs = checked_mul(c, *t.mbs, W);
    t.gas = kDefaultAccumulationSteps;
    t.nt = "= train_micro_batch_size_per_gpu * " + ws;
    t.ng = "= 1 (only train_micro_batch_size_per_gpu given)";
  } else {
    c.error("train_batch_size", "missing; expected train_batch_size or train_micro_batch_size_per_gpu (or both) "
                                "to be given (DeepSpeed: \"Either train_batch_size or train_micro_batch_size_per_gpu "
                                "needs to be provided\")");
  }
}

void put_batch_key(Section& top, const char* key, int64_t v, const Section::Lookup& l, const std::string& note) {
  if (note.empty()) {
    top.put_lookup(key, v, l);
  } else {
    // Derived; "auto" in the file makes it the auto rule's result.
    top.put(key, v, l.source == ConfigSource::kAuto ? ConfigSource::kAuto : ConfigSource::kDerived, note);
  }
}

void check_triad(Ctx& c, const Triad& t, int64_t W, const std::string& ws) {
  const int64_t tbs = *t.tbs, mbs = *t.mbs, gas = *t.gas;
  const std::string triad = " (train_batch_size " + std::to_string(tbs) + ", train_micro_batch_size_per_gpu " +
                            std::to_string(mbs) + ", gradient_accumulation_steps " + std::to_string(gas) + ", " +
                            ws + ")";
  if (tbs <= 0) c.error("train_batch_size", std::to_string(tbs) + " has to be greater than 0" + triad);
  if (mbs <= 0) c.error("train_micro_batch_size_per_gpu", std::to_string(mbs) + " has to be greater than 0" + triad);
  if (gas <= 0) c.error("gradient_accumulation_steps", std::to_string(gas) + " has to be greater than 0" + triad);
  if (tbs != checked_mul(c, checked_mul(c, mbs, gas), W)) {
    c.error("train_batch_size",
            "found " + std::to_string(tbs) + "; expected train_batch_size == train_micro_batch_size_per_gpu * "
            "gradient_accumulation_steps * world size, but " + std::to_string(tbs) + " != " + std::to_string(mbs) +
            " * " + std::to_string(gas) + " * " + std::to_string(W) + " [" + ws + "]; give two of the three keys "
            "and let the third be derived, or make them consistent");
  }
}

}  // namespace

void resolve_batch(Ctx& c, Section& top) {
  const int64_t W = c.opt.world_size;
  const std::string ws = "world size " + std::to_string(W) + " (" + c.opt.world_size_origin + ")";
  Triad t;
  t.tbs = batch_key(c, top, "train_batch_size", &t.lt);
  t.mbs = batch_key(c, top, "train_micro_batch_size_per_gpu", &t.lm);
  t.gas = batch_key(c, top, "gradient_accumulation_steps", &t.lg);
  cap_batch_keys(c, top, t);
  derive_missing(c, top, t, W, ws);
  put_batch_key(top, "train_batch_size", *t.tbs, t.lt, t.nt);
  put_batch_key(top, "train_micro_batch_size_per_gpu", *t.mbs, t.lm, t.nm);
  put_batch_key(top, "gradient_accumulation_steps", *t.gas, t.lg, t.ng);
  check_triad(c, t, W, ws);
  c.cfg.train_batch_size = *t.tbs;
  c.cfg.train_micro_batch_size_per_gpu = *t.mbs;
  c.cfg.gradient_accumulation_steps = *t.gas;
}

}  // namespace zt::cfg
