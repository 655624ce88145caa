// key_table.h — the one table of every DeepSpeed key zerotrain reads, and what it does with it.
//
// Each key is classed:
//   * implemented — it changes what zerotrain does (`effects` says where a 2-step run shows it);
//   * not used    — accepted (DeepSpeed accepts it) but it changes nothing here; `why` says why.
//                   A non-default value is never silent: resolution adds one warning listing every
//                   such key, and `check-config --explain` tags each one;
//   * rejected    — a non-default value ends the run with exit 2 (`why` says why).
//
// The table drives `zerotrain check-config --keys`, docs/config-keys.md (generated from it, and
// compared with it by a test) and the table-driven test tests/config/test_key_table.py, which sets
// every `probe` value, runs check-config and a 2-step `train` with it, and asserts the same exit
// code and that the run changes exactly what the class says.
#pragma once
#include <string>
#include <vector>

#include "zerotrain/config/hjson.h"

namespace zt {

enum class KeyUse { kImplemented, kNotUsed, kRejected };
const char* key_use_name(KeyUse u);  // "implemented", "not used", "rejected"

struct KeyEntry {
  std::string path;     // path in the resolved document, e.g. "zero_optimization.round_robin_gradients"
  KeyUse use;
  std::string why;      // implemented: what it drives; not used / rejected: why
  std::string probe;    // JSON of a non-default value the table-driven test sets
  // Implemented keys: what a 2-step run with `probe` changes, as letters: L loss curve (loss, grad
  // norm, lr, loss scale), M memory report, C comm log, O printed output. "=Suite.Test" instead
  // names the test that shows the effect when no 2-step run can (e.g. loss-scale hysteresis).
  std::string effects;
  std::string context;  // JSON merge patch the probe needs (e.g. {"fp16":{"enabled":true}}), or ""
  std::string alias;    // the other spelling DeepSpeed accepts for this key, or ""
  // Keys that never appear in the resolved document (deprecated spellings mapped elsewhere, keys
  // read only in one legacy form): a value other than `input_default` (JSON; "" = any value)
  // counts as set.
  bool input_only = false;
  std::string input_default;
};

const std::vector<KeyEntry>& key_table();
const KeyEntry* find_key_entry(const std::string& path);

// The table as text: `markdown` for docs/config-keys.md, else aligned columns.
std::string key_table_text(bool markdown);
// The table as JSON (for tests and tools): [{path, use, why, probe, effects, context, alias}].
Json key_table_json();

// A value at a dotted path of a JSON object (nullptr when absent).
const Json* json_at_path(const Json& doc, const std::string& path);
Json* json_at_path(Json& doc, const std::string& path);

}  // namespace zt
