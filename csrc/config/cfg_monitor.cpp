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

// The reading rules of monitor_keys.h beyond config_reader.h's.
enum class StringRule { kString, kNullableString };
constexpr StringRule kString = StringRule::kString, kNullableString = StringRule::kNullableString;

template <typename T>
T read_monitor_key(Section& s, const char* key, T def, Rule rule) {
  return read_key(s, key, def, rule);
}
std::string read_monitor_key(Section& s, const char* key, const std::string& def, StringRule rule) {
  return get_string(s, key, def, rule == StringRule::kNullableString);
}

void read_writer_monitor(Ctx& c, Section& top, const char* key, MonitorConfig& out) {
  const Json* v = section_value(c, top, key);
  if (!v) return;
  Section s(c, v, key, Section::Kind::kStrict);
#define ZT_MONITOR_KEY(sec, name, type, def, read, ...) ZT_MONITOR_READ_##sec(name, type, def, read)
#define ZT_MONITOR_READ_FILE(name, type, def, read) out.name = read_monitor_key(s, #name, type(def), read);
#define ZT_MONITOR_READ_WANDB(...)
#define ZT_MONITOR_READ_COMET(...)
#include "zerotrain/config/monitor_keys.h"
#undef ZT_MONITOR_READ_FILE
#undef ZT_MONITOR_READ_WANDB
#undef ZT_MONITOR_READ_COMET
  s.finish();
  c.cfg.resolved[key] = s.out();
}

// comet.online (monitor_keys.h ZT_MONITOR_SPECIAL): Optional[bool], null when absent.
void read_comet_online(Ctx& c, Section& s) {
  Section::Lookup online = s.take("online");
  if (online.present() && !online.value->is_null()) {
    s.put_lookup("online", to_bool(c, s.key_path("online"), *online.value), online);
  } else {
    s.put_lookup("online", nullptr, online);
  }
}

// wandb or comet: accepted and resolved, never used (no network service is contacted).
void read_network_monitor(Ctx& c, Section& top, const char* key) {
  const Json* v = section_value(c, top, key);
  if (!v) return;
  const bool comet = std::string(key) == "comet";
  Section s(c, v, key, Section::Kind::kStrict);
#define ZT_MONITOR_KEY(sec, name, type, def, read, ...) ZT_MONITOR_READ_##sec(name, type, def, read)
#define ZT_MONITOR_READ_WANDB(name, type, def, read) \
  if (!comet) read_monitor_key(s, #name, type(def), read);
#define ZT_MONITOR_READ_COMET(name, type, def, read) \
  if (comet) read_monitor_key(s, #name, type(def), read);
#define ZT_MONITOR_READ_FILE(...)
#include "zerotrain/config/monitor_keys.h"
#undef ZT_MONITOR_READ_FILE
#undef ZT_MONITOR_READ_WANDB
#undef ZT_MONITOR_READ_COMET
  if (comet) read_comet_online(c, s);
  s.finish();
  c.cfg.resolved[key] = s.out();
}

}  // namespace

void read_monitors(Ctx& c, Section& top) {
  read_writer_monitor(c, top, "tensorboard", c.cfg.tensorboard);
  read_writer_monitor(c, top, "csv_monitor", c.cfg.csv_monitor);
  read_network_monitor(c, top, "wandb");
  read_network_monitor(c, top, "comet");
}

}  // namespace zt::cfg
