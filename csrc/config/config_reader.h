// config_reader.h — internal to csrc/config: value coercion (pydantic "lax" rules + the
// file-specific rules of docs/config.md §17), "auto" resolution, provenance recording
// and unknown-key detection for one config section.
#pragma once
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "zerotrain/config/ds_config.h"

namespace zt::cfg {

// Shared state of one resolution. `cfg` receives provenance and warnings.
struct Ctx {
  std::string source;
  const ConfigOptions& opt;
  DsConfig& cfg;

  // "config FILE: path: found V; expected E[; hint]"
  [[noreturn]] void fail(const std::string& path, const Json& found, const std::string& expected,
                         const std::string& hint = "") const;
  // "config FILE: path: message"
  [[noreturn]] void error(const std::string& path, const std::string& message) const;
  void warn(const std::string& path, const std::string& message);
  void record(const std::string& path, ConfigSource src, const std::string& note = "");
};

std::string describe(const Json& v);  // compact JSON text of a value, shortened if long
std::string join_path(const std::string& parent, const std::string& key);

enum class BoolAsInt { kAccept, kReject };
int64_t to_int(const Ctx& c, const std::string& path, const Json& v, BoolAsInt bools);
bool to_bool(const Ctx& c, const std::string& path, const Json& v);          // pydantic lax bool
bool to_bool_strict(const Ctx& c, const std::string& path, const Json& v);   // true/false/0/1
double to_float(const Ctx& c, const std::string& path, const Json& v, bool allow_bool,
                bool allow_numeric_string);

// Nearest candidate by edit distance, or "" when none is close enough.
std::string nearest_key(const std::string& key, const std::vector<std::string>& candidates);
// For a key unknown where it was found but known in another section: that section's name.
std::string home_section_of(const std::string& key);

struct IntRule {
  BoolAsInt bools = BoolAsInt::kAccept;
  std::optional<int64_t> min;
};

// One config object being read. Every getter marks its key (and alias) as known, resolves
// "auto" (command line > auto rule > default), coerces, writes the resolved value into out()
// and records provenance under path.key.
class Section {
 public:
  enum class Kind { kStrict, kLoose };  // strict: unknown keys are errors (pydantic extra=forbid)
  Section(Ctx& c, const Json* in, std::string path, Kind kind);

  const std::string& path() const { return path_; }
  std::string key_path(const std::string& key) const { return join_path(path_, key); }
  const Json& in() const { return *in_; }
  Json& out() { return out_; }
  Ctx& ctx() { return c_; }

  // An "auto" rule for `key`: used when the file says "auto" and the command line has no value.
  void auto_rule(const std::string& key, Json value, std::string note);

  struct Lookup {
    const Json* value = nullptr;  // nullptr: use the default
    ConfigSource source = ConfigSource::kDefault;
    std::string key;              // the spelling found in the file (key or alias)
    std::string note;
    bool present() const { return value != nullptr; }
  };
  // Finds `key` (or `alias`), marks both known. Rejects giving both. Resolves "auto".
  Lookup take(const std::string& key, const std::string& alias = "");
  bool has(const std::string& key) const { return in_ && in_->contains(key); }
  // Present with a value other than "auto" (DeepSpeed drops "auto" keys before validating).
  bool has_value(const std::string& key) const { return has(key) && !is_auto(in_->at(key)); }
  static bool is_auto(const Json& v) { return v.is_string() && v.get<std::string>() == "auto"; }
  void accept(const std::string& key) { known_.push_back(key); }  // known, read elsewhere

  using IntRule = cfg::IntRule;
  int64_t get_int(const std::string& key, int64_t def, IntRule rule = IntRule(), const std::string& alias = "");
  bool get_bool(const std::string& key, bool def, const std::string& alias = "");
  double get_float(const std::string& key, double def, bool allow_bool = true, bool allow_string = true);

  // Writes a resolved value and its provenance.
  void put(const std::string& key, Json value, ConfigSource src, const std::string& note = "");
  void put_lookup(const std::string& key, Json value, const Lookup& l);

  // Unknown keys: strict section -> error with a suggestion; loose -> warning (error if --strict).
  void finish();

 private:
  Ctx& c_;
  const Json* in_;
  std::string path_;
  Kind kind_;
  Json out_ = Json::object();
  std::vector<std::string> known_;
  std::map<std::string, std::pair<Json, std::string>> auto_rules_;
};

// The reading rules of declared keys (config/zero_keys.h, config/precision_keys.h).
enum class Rule {
  kFlag,       // a boolean (strict sections: pydantic's lax rules)
  kCount,      // an integer >= 0 (a boolean counts as 0/1)
  kInt,        // an integer (a boolean counts as 0/1)
  kIntNoBool,  // an integer (a boolean is rejected)
  kFraction,   // a number in [0, 1]
};
inline constexpr Rule kFlag = Rule::kFlag, kCount = Rule::kCount, kInt = Rule::kInt, kIntNoBool = Rule::kIntNoBool,
                      kFraction = Rule::kFraction;
inline constexpr double kNever = std::numeric_limits<double>::infinity();  // a refusal threshold never crossed

// The generic reader of a declared key: type (by the default's type) and `rule`, bounds, alias,
// "auto", provenance. Returns the resolved value.
bool read_key(Section& s, const char* key, bool def, Rule rule, const char* alias = "");
int64_t read_key(Section& s, const char* key, int64_t def, Rule rule, const char* alias = "");
double read_key(Section& s, const char* key, double def, Rule rule, const char* alias = "");

// Section bodies (one file each). Each reads its part of `doc` into c.cfg and c.cfg.resolved.
void read_top_level_scalars(Ctx& c, Section& top);
void read_zero(Ctx& c, Section& top);
void read_precision(Ctx& c, Section& top);
void read_optimizer(Ctx& c, Section& top);
void read_scheduler(Ctx& c, Section& top);
void read_other_sections(Ctx& c, Section& top);
void read_monitors(Ctx& c, Section& top);  // tensorboard, csv_monitor, wandb, comet
void resolve_batch(Ctx& c, Section& top);
void check_combinations(Ctx& c);

}  // namespace zt::cfg
