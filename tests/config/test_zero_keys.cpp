// The key declarations (config/zero_keys.h, config/precision_keys.h) drive the reader, the typed
// fields and the key table: every ordinary key is checked here through the same lists, so a new
// entry is covered without a new test.
#include <cmath>

#include "cfg_test.h"
#include "zerotrain/config/key_table.h"

using namespace zt_test;
using zt::Json;

namespace {

enum class Rule { kFlag, kCount, kInt, kIntNoBool, kFraction };
constexpr Rule kFlag = Rule::kFlag, kCount = Rule::kCount, kInt = Rule::kInt, kIntNoBool = Rule::kIntNoBool,
               kFraction = Rule::kFraction;

struct Decl {
  std::string path;  // from the config root, e.g. "zero_optimization.offload_optimizer.ratio"
  std::string key;   // inside its section
  std::string alias;
  Rule rule;
  Json def;
  bool refused;
};

std::vector<Decl> ordinary_keys() {
  const std::string Z = "zero_optimization.", OO = Z + "offload_optimizer.", OP = Z + "offload_param.";
  const double kNever = INFINITY;
  std::vector<Decl> out;
#define ZT_ZERO_KEY(sec, name, type, def, rule, alias, refuse_above, refused, use, why, probe, effects, context) \
  out.push_back({sec + #name, #name, alias, rule, Json(static_cast<type>(def)), (refuse_above) != kNever});
#include "zerotrain/config/zero_keys.h"
  return out;
}

// A config whose zero_optimization (or one of its offload sections, with CPU offload on) sets
// `key` to `value`.
std::string with_key(const Decl& d, const Json& value) {
  Json zero = Json::object();
  if (d.path.rfind("zero_optimization.offload_", 0) == 0) {
    const std::string section = d.path.substr(18, d.path.find('.', 18) - 18);
    zero[section] = Json{{"device", "cpu"}, {d.key, value}};
  } else {
    zero[d.key] = value;
  }
  return tb("\"zero_optimization\": " + zero.dump());
}

const Json* resolved_at(const zt::DsConfig& c, const std::string& path) { return zt::json_at_path(c.resolved, path); }

}  // namespace

TEST(ZeroKeys, EveryOrdinaryKeyDefaultsAsDeclared) {
  const zt::DsConfig c = resolve(tb("\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\"}, "
                                    "\"offload_param\": {\"device\": \"cpu\"}, \"stage\": 3}"));
  for (const Decl& d : ordinary_keys()) {
    const Json* v = resolved_at(c, d.path);
    ASSERT_NE(v, nullptr) << d.path;
    EXPECT_EQ(*v, d.def) << d.path;
    EXPECT_EQ(c.provenance.at(d.path).source, zt::ConfigSource::kDefault) << d.path;
  }
}

TEST(ZeroKeys, GenericReaderChecksTypeAndBounds) {
  for (const Decl& d : ordinary_keys()) {
    const std::string err = error_of(with_key(d, "maybe"));
    EXPECT_NE(err.find(d.path), std::string::npos) << d.path << ": " << err;
    EXPECT_NE(err.find("found \"maybe\""), std::string::npos) << d.path << ": " << err;
    if (d.rule == kCount) {
      EXPECT_NE(error_of(with_key(d, -1)).find("an integer >= 0"), std::string::npos) << d.path;
      EXPECT_EQ(error_of(with_key(d, true)), "") << d.path << ": a boolean counts as 1";
    }
    if (d.rule == kFraction) {
      EXPECT_NE(error_of(with_key(d, 1.5)).find("a number in [0, 1]"), std::string::npos) << d.path;
    }
  }
}

TEST(ZeroKeys, GenericReaderTakesFileValuesAndAliases) {
  for (const Decl& d : ordinary_keys()) {
    if (d.refused || d.path.find("offload_optimizer.ratio") != std::string::npos ||
        d.path.find("super_offload") != std::string::npos)
      continue;  // a non-default value ends the run (RefusedKeysEndTheRun)
    const Json value = d.rule == kFlag ? Json(!d.def.get<bool>()) : d.rule == kFraction ? Json(0.5) : Json(7);
    zt::DsConfig c = resolve(with_key(d, value));
    EXPECT_EQ(*resolved_at(c, d.path), value) << d.path;
    EXPECT_EQ(c.provenance.at(d.path).source, zt::ConfigSource::kFile) << d.path;
    if (d.alias.empty()) continue;
    Decl by_alias = d;
    by_alias.key = d.alias;
    c = resolve(with_key(by_alias, value));
    EXPECT_EQ(*resolved_at(c, d.path), value) << d.alias;
    Json both = Json{{d.key, value}, {d.alias, value}};
    EXPECT_NE(error_of(tb("\"zero_optimization\": " + both.dump())).find("two spellings of the same setting"),
              std::string::npos)
        << d.path;
  }
}

TEST(ZeroKeys, RefusedKeysEndTheRun) {
  int refused = 0;
  for (const Decl& d : ordinary_keys()) {
    if (!d.refused) continue;
    ++refused;
    const Json on = d.rule == kFlag ? Json(true) : Json(2);
    const std::string err = error_of(with_key(d, on));
    EXPECT_NE(err.find(d.path + ": "), std::string::npos) << err;
    EXPECT_NE(err.find("is not supported by zerotrain"), std::string::npos) << err;
    EXPECT_EQ(error_of(with_key(d, d.def)), "") << d.path << ": the default is accepted";
    const zt::KeyEntry* e = zt::find_key_entry(d.path);
    ASSERT_NE(e, nullptr) << d.path;
    EXPECT_EQ(e->use, zt::KeyUse::kRejected) << d.path;
  }
  EXPECT_EQ(refused, 3);  // legacy_stage1, quantized non-trainable weights, MiCS
}

TEST(ZeroKeys, KeyTableRowsComeFromTheDeclaration) {
  size_t declared = 0;
#define ZT_ZERO_KEY(sec, name, ...) ++declared;
#define ZT_ZERO_SPECIAL(sec, path, ...) ++declared;
#include "zerotrain/config/zero_keys.h"
  size_t rows = 0;
  for (const zt::KeyEntry& e : zt::key_table()) {
    if (e.path.rfind("zero_optimization.", 0) == 0 || e.path == "allgather_size") ++rows;
  }
  EXPECT_EQ(rows, declared);
  for (const Decl& d : ordinary_keys()) {
    const zt::KeyEntry* e = zt::find_key_entry(d.path);
    ASSERT_NE(e, nullptr) << d.path;
    EXPECT_EQ(e->alias, d.alias) << d.path;
  }
}

namespace {

std::vector<Decl> precision_keys() {
  const std::string F16 = "fp16", B16 = "bf16";
  std::vector<Decl> out;
#define ZT_PRECISION_KEY(sec, name, type, def, rule, use, why, probe, effects, context) \
  out.push_back({sec + "." #name, #name, "", rule, Json(static_cast<type>(def)), false});
#include "zerotrain/config/precision_keys.h"
  return out;
}

std::string section_of(const Decl& d) { return d.path.substr(0, d.path.find('.')); }

}  // namespace

TEST(PrecisionKeys, GenericReaderDefaultsChecksAndTakesValues) {
  const zt::DsConfig defaults = resolve(tb("\"fp16\": {}, \"bf16\": {}"));
  for (const Decl& d : precision_keys()) {
    EXPECT_EQ(*resolved_at(defaults, d.path), d.def) << d.path;
    // Stage 1 and bf16 master weights: the cross-key rules of check_combinations hold for every value.
    const auto with = [&](const Json& v) {
      Json section{{d.key, v}};
      if (d.key == "bf16_optimizer_states") section["bf16_master_weights_and_grads"] = true;
      return tb("\"zero_optimization\": {\"stage\": 1}, \"" + section_of(d) + "\": " + section.dump());
    };
    const std::string err = error_of(with("maybe"));
    EXPECT_NE(err.find(d.path + ": found \"maybe\""), std::string::npos) << err;
    if (d.rule == kIntNoBool) {
      EXPECT_NE(error_of(with(true)).find("a boolean is not accepted here"), std::string::npos) << d.path;
    }
    if (d.rule == kInt) {
      EXPECT_EQ(error_of(with(true)), "") << d.path << ": a boolean counts as 1";
    }
    if (d.rule != kFlag) continue;
    const zt::DsConfig c = resolve(with(!d.def.get<bool>()));
    EXPECT_EQ(*resolved_at(c, d.path), !d.def.get<bool>()) << d.path;
    EXPECT_EQ(c.provenance.at(d.path).source, zt::ConfigSource::kFile) << d.path;
  }
}

TEST(PrecisionKeys, KeyTableRowsComeFromTheDeclaration) {
  std::vector<std::string> declared;
  const std::string F16 = "fp16.", B16 = "bf16.", DT = "data_types.", TA = "torch_autocast.", TOP;
#define ZT_PRECISION_KEY(sec, name, ...) declared.push_back(sec + #name);
#define ZT_PRECISION_SPECIAL(sec, path, ...) declared.push_back(sec + path);
#include "zerotrain/config/precision_keys.h"
  std::vector<std::string> rows;
  for (const zt::KeyEntry& e : zt::key_table()) {
    for (const char* s : {"fp16.", "bf16.", "data_types.", "torch_autocast."}) {
      if (e.path.rfind(s, 0) == 0) rows.push_back(e.path);
    }
    if (e.path == "bfloat16") rows.push_back(e.path);
  }
  EXPECT_EQ(rows, declared);
}
