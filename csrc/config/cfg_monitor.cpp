// cfg_monitor.cpp — DeepSpeed's monitor sections (deepspeed/monitor/config.py, pydantic with
// extra="forbid": unknown keys are errors). tensorboard and csv_monitor are implemented
// (app/monitors.h writes them); wandb and comet need a network service zerotrain does not
// contact, so their keys are accepted and classed "not used" (config/key_table.h).
#include "config_reader.h"

namespace zt::cfg {
namespace {

// A pydantic `str` field (no coercion from numbers or booleans); `nullable`: Optional[str], default None.
std::string get_string(Section& s, const std::string& key, const std::string& def, bool nullable) {
  Section::Lookup l = s.take(key);
  if (!l.present() || (nullable && l.value->is_null())) {
    s.put_lookup(key, nullable ? Json(nullptr) : Json(def), l);
    return def;
  }
  const Json& v = *l.value;
  if (!v.is_string()) s.ctx().fail(s.key_path(l.key), v, nullable ? "a string or null" : "a string");
  const std::string out = v.get<std::string>();
  if (out.find('\0') != std::string::npos)
    s.ctx().fail(s.key_path(l.key), v, "a string without NUL characters (it names a file system path)");
  s.put_lookup(key, out, l);
  return out;
}

// The section's object, or nullptr when absent or null (DeepSpeed's default: the model's defaults).
const Json* section_value(Ctx& c, Section& top, const char* key) {
  Section::Lookup l = top.take(key);
  if (!l.present() || l.value->is_null()) return nullptr;
  if (!l.value->is_object()) c.fail(key, *l.value, "an object");
  return l.value;
}

void read_writer_monitor(Ctx& c, Section& top, const char* key, MonitorConfig& out) {
  const Json* v = section_value(c, top, key);
  if (!v) return;
  Section s(c, v, key, Section::Kind::kStrict);
  out.enabled = s.get_bool("enabled", false);
  out.output_path = get_string(s, "output_path", "", false);
  out.job_name = get_string(s, "job_name", "DeepSpeedJobName", false);
  s.finish();
  c.cfg.resolved[key] = s.out();
}

void read_wandb(Ctx& c, Section& top) {
  const Json* v = section_value(c, top, "wandb");
  if (!v) return;
  Section s(c, v, "wandb", Section::Kind::kStrict);
  s.get_bool("enabled", false);
  get_string(s, "group", "", true);
  get_string(s, "team", "", true);
  get_string(s, "project", "deepspeed", false);
  s.finish();
  c.cfg.resolved["wandb"] = s.out();
}

void read_comet(Ctx& c, Section& top) {
  const Json* v = section_value(c, top, "comet");
  if (!v) return;
  Section s(c, v, "comet", Section::Kind::kStrict);
  s.get_bool("enabled", false);
  s.get_int("samples_log_interval", 100);
  for (const char* k : {"project", "workspace", "api_key", "experiment_name", "experiment_key", "mode"})
    get_string(s, k, "", true);
  Section::Lookup online = s.take("online");  // Optional[bool]
  if (online.present() && !online.value->is_null()) {
    s.put_lookup("online", to_bool(c, s.key_path("online"), *online.value), online);
  } else {
    s.put_lookup("online", nullptr, online);
  }
  s.finish();
  c.cfg.resolved["comet"] = s.out();
}

}  // namespace

void read_monitors(Ctx& c, Section& top) {
  read_writer_monitor(c, top, "tensorboard", c.cfg.tensorboard);
  read_writer_monitor(c, top, "csv_monitor", c.cfg.csv_monitor);
  read_wandb(c, top);
  read_comet(c, top);
}

}  // namespace zt::cfg
