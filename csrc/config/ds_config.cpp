// ds_config.cpp — resolution order (docs/config.md §1.3), the resolved document, explain().
#include "zerotrain/config/ds_config.h"

#include <sstream>

#include "config_reader.h"
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

// Top-level keys DeepSpeed knows that no reader above consumes; they are accepted silently.
const char* const kOtherTopLevelKeys[] = {"fp32_allreduce", "zero_allow_comm_data_type_fp32", "train_micro_batch_size"};

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

DsConfig resolve_ds_config(const Json& doc, const std::string& source, const ConfigOptions& opt) {
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
  for (const char* k : kOtherTopLevelKeys) top.accept(k);
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

DsConfig parse_ds_config(const std::string& text, const std::string& source, const ConfigOptions& opt) {
  return resolve_ds_config(parse_hjson(text, source), source, opt);
}

DsConfig load_ds_config(const std::string& path, const ConfigOptions& opt) {
  return resolve_ds_config(parse_hjson_file(path), path, opt);
}

}  // namespace zt
