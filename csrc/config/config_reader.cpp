// config_reader.cpp — coercion rules, "auto"/provenance bookkeeping, unknown-key detection.
#include "config_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "zerotrain/core/check.h"

namespace zt::cfg {

void Ctx::fail(const std::string& path, const Json& found, const std::string& expected,
               const std::string& hint) const {
  std::string msg = "config " + source + ": " + path + ": found " + describe(found) + "; expected " + expected;
  if (!hint.empty()) msg += "; " + hint;
  throw InputError(msg);
}

void Ctx::error(const std::string& path, const std::string& message) const {
  throw InputError("config " + source + ": " + (path.empty() ? "" : path + ": ") + message);
}

void Ctx::warn(const std::string& path, const std::string& message) {
  cfg.warnings.push_back("config " + source + ": " + (path.empty() ? "" : path + ": ") + message);
}

void Ctx::record(const std::string& path, ConfigSource src, const std::string& note) {
  cfg.provenance[path] = Provenance{src, note};
}

std::string describe(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

namespace {

// Decimal integer text, optional sign, optional ".000" tail (pydantic's str -> int rule).
bool parse_int_text(std::string t, int64_t* out) {
  size_t b = t.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return false;
  t = t.substr(b, t.find_last_not_of(" \t\r\n") - b + 1);
  size_t dot = t.find('.');
  if (dot != std::string::npos) {
    if (t.find_first_not_of('0', dot + 1) != std::string::npos) return false;
    t = t.substr(0, dot);
  }
  size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  if (i >= t.size()) return false;
  for (size_t k = i; k < t.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(t[k]))) return false;
  errno = 0;
  long long v = std::strtoll(t.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

}  // namespace

int64_t to_int(const Ctx& c, const std::string& path, const Json& v, BoolAsInt bools) {
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) c.fail(path, v, "an integer below 2^63");
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_boolean()) {
    if (bools == BoolAsInt::kReject) c.fail(path, v, "an integer (a boolean is not accepted here)");
    return v.get<bool>() ? 1 : 0;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d)) c.fail(path, v, "a finite integer");
    if (d != std::floor(d)) {
      c.fail(path, v, "an integer (got a number with a fractional part)",
             std::fabs(d) < 9.2e18 ? "e.g. " + std::to_string(static_cast<int64_t>(std::floor(d))) : "");
    }
    if (std::fabs(d) >= 9.2e18) c.fail(path, v, "an integer below 2^63");
    return static_cast<int64_t>(d);
  }
  if (v.is_string()) {
    int64_t out = 0;
    if (parse_int_text(v.get<std::string>(), &out)) return out;
    c.fail(path, v, "an integer (a string must be plain digits, e.g. \"500\"; write 5e8 without quotes)");
  }
  c.fail(path, v, "an integer");
}

bool to_bool(const Ctx& c, const std::string& path, const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) {
    double d = v.get<double>();
    if (d == 0.0) return false;
    if (d == 1.0) return true;
    c.fail(path, v, "a boolean (true/false; 0 and 1 are also accepted)");
  }
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    static const char* kTrue[] = {"1", "on", "t", "true", "y", "yes"};
    static const char* kFalse[] = {"0", "off", "f", "false", "n", "no"};
    for (const char* t : kTrue)
      if (s == t) return true;
    for (const char* f : kFalse)
      if (s == f) return false;
  }
  c.fail(path, v, "a boolean (true/false)");
}

bool to_bool_strict(const Ctx& c, const std::string& path, const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) return v.get<int64_t>() == 1;
  c.fail(path, v, "a boolean (true/false)",
         v.is_string() ? "write it without quotes (DeepSpeed would keep the string and misbehave later)" : "");
}

double to_float(const Ctx& c, const std::string& path, const Json& v, bool allow_bool, bool allow_string) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean() && allow_bool) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_string() && allow_string) {
    std::string s = v.get<std::string>();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    while (end && *end && std::isspace(static_cast<unsigned char>(*end))) ++end;
    if (!s.empty() && end && *end == '\0') return d;
  }
  c.fail(path, v, "a number");
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& candidates) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return s;
  };
  std::string k = lower(key);
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const std::string& cand_orig : candidates) {
    std::string cand = lower(cand_orig);
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(cand.size() + 1);
    for (size_t j = 0; j <= cand.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= k.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= cand.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (k[i - 1] == cand[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    size_t d = row[cand.size()];
    // A key that contains the typo (or vice versa) is a good suggestion even when long.
    if (cand.size() >= 4 && k.size() >= 4 && (cand.find(k) != std::string::npos || k.find(cand) != std::string::npos))
      d = std::min(d, size_t(2));
    size_t limit = std::max<size_t>(2, std::max(k.size(), cand.size()) / 3);
    if (d <= limit && d < best_d) {
      best_d = d;
      best = cand_orig;
    }
  }
  return best;
}

Section::Section(Ctx& c, const Json* in, std::string path, Kind kind)
    : c_(c), in_(in), path_(std::move(path)), kind_(kind) {}

void Section::auto_rule(const std::string& key, Json value, std::string note) {
  auto_rules_[key] = {std::move(value), std::move(note)};
}

namespace {

using AutoRules = std::map<std::string, std::pair<Json, std::string>>;

// "auto": the command line's value for `path`, else the section's auto rule for `key`, else the
// default (value nullptr).
Section::Lookup resolve_auto(const ConfigOptions& opt, const AutoRules& rules, const std::string& path,
                             const std::string& key, Section::Lookup l) {
  auto cl = opt.command_line.find(path);
  if (cl != opt.command_line.end()) {
    l.value = &cl->second;
    l.source = ConfigSource::kCommandLine;
    l.note = "\"auto\" in the file";
    return l;
  }
  l.source = ConfigSource::kAuto;
  auto rule = rules.find(key);
  if (rule != rules.end()) {
    l.value = &rule->second.first;
    l.note = rule->second.second;
    return l;
  }
  l.note = "\"auto\" -> DeepSpeed default";
  return l;
}

}  // namespace

namespace {

// The spelling of a setting the section gives: `key`, `alias`, or "" (neither). Both given is an
// error, except that in a strict section DeepSpeed drops "auto" keys first, so "auto" under one
// spelling yields to the other.
std::string given_spelling(const Ctx& c, const Json& in, const std::string& key, const std::string& alias,
                           bool strict, const std::string& alias_path) {
  bool has_key = in.contains(key);
  bool has_alias = !alias.empty() && in.contains(alias);
  if (has_key && has_alias && strict) {
    if (Section::is_auto(in.at(key)) && !Section::is_auto(in.at(alias))) has_key = false;
    else if (Section::is_auto(in.at(alias))) has_alias = false;
  }
  if (has_key && has_alias) {
    c.error(alias_path, "`" + alias + "` and `" + key + "` are two spellings of the same setting; give only one");
  }
  if (has_key) return key;
  return has_alias ? alias : "";
}

}  // namespace

Section::Lookup Section::take(const std::string& key, const std::string& alias) {
  known_.push_back(key);
  if (!alias.empty()) known_.push_back(alias);
  Lookup l;
  if (!in_) return l;
  l.key = given_spelling(c_, *in_, key, alias, kind_ == Kind::kStrict, key_path(alias));
  if (l.key.empty()) return l;
  const Json& v = in_->at(l.key);
  if (is_auto(v)) return resolve_auto(c_.opt, auto_rules_, key_path(key), key, l);
  l.value = &v;
  l.source = ConfigSource::kFile;
  return l;
}

void Section::put(const std::string& key, Json value, ConfigSource src, const std::string& note) {
  out_[key] = std::move(value);
  c_.record(key_path(key), src, note);
}

void Section::put_lookup(const std::string& key, Json value, const Lookup& l) {
  put(key, std::move(value), l.source, l.note);
}

int64_t Section::get_int(const std::string& key, int64_t def, IntRule rule, const std::string& alias) {
  Lookup l = take(key, alias);
  if (!l.present()) {
    put_lookup(key, def, l);
    return def;
  }
  std::string p = key_path(l.key);
  int64_t v = to_int(c_, p, *l.value, rule.bools);
  if (rule.min && v < *rule.min) c_.fail(p, *l.value, "an integer >= " + std::to_string(*rule.min));
  put_lookup(key, v, l);
  return v;
}

bool Section::get_bool(const std::string& key, bool def, const std::string& alias) {
  Lookup l = take(key, alias);
  if (!l.present()) {
    put_lookup(key, def, l);
    return def;
  }
  std::string p = key_path(l.key);
  bool v = kind_ == Kind::kStrict ? to_bool(c_, p, *l.value) : to_bool_strict(c_, p, *l.value);
  put_lookup(key, v, l);
  return v;
}

double Section::get_float(const std::string& key, double def, bool allow_bool, bool allow_string) {
  Lookup l = take(key);
  if (!l.present()) {
    put_lookup(key, def, l);
    return def;
  }
  double v = to_float(c_, key_path(l.key), *l.value, allow_bool, allow_string);
  put_lookup(key, v, l);
  return v;
}

namespace {

// The hint for an unknown key `k` in section `path`: a near known key, or the section it belongs in.
std::string unknown_key_hint(const std::string& k, const std::vector<std::string>& known, const std::string& path) {
  std::string near = nearest_key(k, known);
  if (!near.empty()) return "did you mean `" + near + "`?";
  std::string home = home_section_of(k);
  if (home == "(top level)" && !path.empty()) return "`" + k + "` belongs at the top level, not inside `" + path + "`";
  if (home.empty() || home == path || home == "(top level)") return "";
  std::string hint = "`" + k + "` belongs in `" + home + "`";
  if (home == "fp16" && (path == "bf16" || path == "bfloat16")) hint += " (bf16 needs no loss scaling)";
  return hint;
}

}  // namespace

void Section::finish() {
  if (!in_) return;
  for (auto it = in_->begin(); it != in_->end(); ++it) {
    const std::string& k = it.key();
    if (std::find(known_.begin(), known_.end(), k) != known_.end()) continue;
    std::string p = key_path(k);
    const std::string hint = unknown_key_hint(k, known_, path_);
    const std::string tail = hint.empty() ? "" : "; " + hint;
    if (kind_ == Kind::kStrict && is_auto(it.value()) && !c_.opt.strict) {
      c_.warn(p, "unknown key, ignored (its value is \"auto\", which DeepSpeed drops before validating)" + tail);
      continue;
    }
    if (kind_ == Kind::kStrict) {
      c_.error(p, "unknown key (DeepSpeed rejects unknown keys in `" + path_ + "` too)" + tail);
    }
    if (c_.opt.strict) c_.error(p, "unknown key (--strict)" + tail);
    c_.warn(p, "unknown key, ignored (DeepSpeed ignores it silently)" + tail);
  }
}

bool read_key(Section& s, const char* key, bool def, Rule, const char* alias) { return s.get_bool(key, def, alias); }

int64_t read_key(Section& s, const char* key, int64_t def, Rule rule, const char* alias) {
  IntRule r;
  if (rule == Rule::kCount) r.min = 0;
  if (rule == Rule::kIntNoBool) r.bools = BoolAsInt::kReject;
  return s.get_int(key, def, r, alias);
}

double read_key(Section& s, const char* key, double def, Rule, const char*) {  // kFraction
  Section::Lookup l = s.take(key);
  double v = def;
  if (l.present()) {
    std::string p = s.key_path(l.key);
    v = to_float(s.ctx(), p, *l.value, true, true);
    if (!(v >= 0.0 && v <= 1.0)) s.ctx().fail(p, *l.value, "a number in [0, 1]");
  }
  s.put_lookup(key, v, l);
  return v;
}

}  // namespace zt::cfg
