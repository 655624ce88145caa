// ds_config.cpp — resolution order (docs/config.md §1.3), the resolved document, explain().
#include "zerotrain/config/ds_config.h"

#include <sstream>

#include "config_reader.h"
#include "zerotrain/config/key_table.h"
#include "zerotrain/core/check.h"

namespace zt {

const char* config_source_name(ConfigSource s) {
  switch (s) {
    case ConfigSource::kFile: return "file";
    case ConfigSource::kDefault: return "default";
    case ConfigSource::kAuto: return "auto";
    case ConfigSource::kCommandLine: return "command line";
    case ConfigSource::kDerived: return "derived";
  }
  return "?";
}

namespace {

void explain_walk(const DsConfig& cfg, const Json& v, const std::string& path, std::ostringstream& os) {
  if (v.is_object() && !v.empty() && path.find('[') == std::string::npos) {
    bool leaf_section = cfg.provenance.count(path) && !v.empty() && path.find('.') == std::string::npos &&
                        cfg.provenance.at(path).note == "disabled";
    if (!leaf_section) {
      for (auto it = v.begin(); it != v.end(); ++it) explain_walk(cfg, it.value(), path.empty() ? it.key() : path + "." + it.key(), os);
      return;
    }
  }
  os << path << " = " << v.dump();
  // The nearest recorded ancestor explains values written as a whole (e.g. a section object).
  std::string p = path;
  for (;;) {
    auto it = cfg.provenance.find(p);
    if (it != cfg.provenance.end()) {
      os << "  [" << config_source_name(it->second.source);
      if (!it->second.note.empty()) os << ": " << it->second.note;
      os << "]";
      break;
    }
    size_t dot = p.rfind('.');
    if (dot == std::string::npos) break;
    p = p.substr(0, dot);
  }
  os << "\n";
}

}  // namespace

std::string DsConfig::explain() const {
  std::ostringstream os;
  explain_walk(*this, resolved, "", os);
  return os.str();
}

namespace {

// Resolution proper: every reader, in DeepSpeed's order, into one resolved document.
DsConfig resolve_document(const Json& doc, const std::string& source, const ConfigOptions& opt) {
  if (opt.world_size < 1) throw InputError("world size must be >= 1 (got " + std::to_string(opt.world_size) + ")");
  DsConfig cfg;
  cfg.source = source;
  cfg.world_size = opt.world_size;
  cfg.resolved = Json::object();
  cfg::Ctx c{source, opt, cfg};
  if (!doc.is_object()) {
    throw InputError("config " + source + ": the top level must be an object ({...}); found " + cfg::describe(doc));
  }
  cfg::Section top(c, &doc, "", cfg::Section::Kind::kLoose);
  // The batch keys are read last (DeepSpeed resolves them after every section); mark them known.
  top.accept("train_batch_size");
  top.accept("train_micro_batch_size_per_gpu");
  top.accept("gradient_accumulation_steps");
  cfg::read_top_level_scalars(c, top);
  cfg::read_zero(c, top);
  cfg::read_precision(c, top);
  cfg::read_optimizer(c, top);
  cfg::read_scheduler(c, top);
  cfg::read_other_sections(c, top);
  cfg::resolve_batch(c, top);
  cfg::check_combinations(c);
  top.finish();

  // Final document: the batch triad first, then the other top-level scalars, then the sections.
  Json out = Json::object();
  for (const char* k : {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}) {
    out[k] = top.out()[k];
  }
  for (auto it = top.out().begin(); it != top.out().end(); ++it) {
    if (!out.contains(it.key())) out[it.key()] = it.value();
  }
  for (auto it = cfg.resolved.begin(); it != cfg.resolved.end(); ++it) out[it.key()] = it.value();
  cfg.resolved = std::move(out);
  return cfg;
}

// The spelling of `e` the file uses (its path, or its alias in the same section), or "".
std::string spelling_in(const Json& doc, const KeyEntry& e) {
  if (json_at_path(doc, e.path)) return e.path;
  if (e.alias.empty()) return "";
  const size_t dot = e.path.rfind('.');
  const std::string alias = dot == std::string::npos ? e.alias : e.path.substr(0, dot + 1) + e.alias;
  return json_at_path(doc, alias) ? alias : "";
}

void erase_path(Json& doc, const std::string& path) {
  const size_t dot = path.rfind('.');
  Json* parent = dot == std::string::npos ? &doc : json_at_path(doc, path.substr(0, dot));
  if (parent && parent->is_object()) parent->erase(path.substr(dot + 1));  // npos + 1 == 0: the whole path
}

// Whether the file's value of a "not used" key differs from what resolution gives without it.
bool set_to_non_default(const Json& doc, const DsConfig& cfg, const KeyEntry& e, const std::string& spelling,
                        const ConfigOptions& opt) {
  const Json& given = *json_at_path(doc, spelling);
  if (e.input_only) return e.input_default.empty() || given != Json::parse(e.input_default);
  const Json* resolved = json_at_path(cfg.resolved, e.path);
  Json without = doc;
  erase_path(without, spelling);
  try {
    const DsConfig ref = resolve_document(without, cfg.source, opt);
    const Json* base = json_at_path(ref.resolved, e.path);
    return !resolved || !base || *resolved != *base;
  } catch (const InputError&) {
    return true;  // the file needs the key to resolve at all: it is set
  }
}

// --explain tags a "not used" key that is in the resolved document; a key recorded only as part of
// its section inherits the section's source.
void tag_unused_key(DsConfig& cfg, const KeyEntry& e) {
  if (!cfg.provenance.count(e.path)) {
    for (std::string p = e.path; p.find('.') != std::string::npos;) {
      p = p.substr(0, p.rfind('.'));
      if (cfg.provenance.count(p)) {
        cfg.provenance[e.path] = cfg.provenance[p];
        break;
      }
    }
  }
  Provenance& p = cfg.provenance[e.path];
  p.note += std::string(p.note.empty() ? "" : "; ") + "not used by zerotrain: " + e.why;
}

// A key classed "not used" and set to a non-default value is never silent: one warning lists
// them all, and --explain tags every not-used key.
void flag_unused_keys(const Json& doc, DsConfig& cfg, const ConfigOptions& opt) {
  const bool legacy_zero = doc.contains("zero_optimization") && doc["zero_optimization"].is_boolean();
  std::string listed;
  for (const KeyEntry& e : key_table()) {
    if (e.use != KeyUse::kNotUsed) continue;
    if (json_at_path(cfg.resolved, e.path)) tag_unused_key(cfg, e);
    if (legacy_zero && (e.path == "allgather_size" || e.path.rfind("zero_optimization.", 0) == 0)) continue;
    const std::string spelling = spelling_in(doc, e);
    if (spelling.empty() || !set_to_non_default(doc, cfg, e, spelling, opt)) continue;
    listed += std::string(listed.empty() ? "" : "; ") + spelling + " = " + cfg::describe(*json_at_path(doc, spelling)) +
              " (" + e.why + ")";
    cfg.unused_keys.push_back(spelling);
  }
  if (!listed.empty()) {
    cfg.warnings.push_back("config " + cfg.source + ": set but not used by zerotrain (no effect on this run): " + listed);
  }
}

}  // namespace

DsConfig resolve_ds_config(const Json& doc, const std::string& source, const ConfigOptions& opt) {
  DsConfig cfg = resolve_document(doc, source, opt);
  if (doc.is_object()) flag_unused_keys(doc, cfg, opt);
  return cfg;
}

DsConfig parse_ds_config(const std::string& text, const std::string& source, const ConfigOptions& opt) {
  return resolve_ds_config(parse_hjson(text, source), source, opt);
}

DsConfig load_ds_config(const std::string& path, const ConfigOptions& opt) {
  return resolve_ds_config(parse_hjson_file(path), path, opt);
}

}  // namespace zt
