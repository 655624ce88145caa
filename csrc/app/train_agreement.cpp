// train_agreement.cpp — see train_agreement.h.
#include "train_agreement.h"

#include <cstdio>
#include <map>
#include <set>

#include "zerotrain/ckpt/xxhash64.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {

namespace {

constexpr const char* kNotGiven = "\x01not given";  // cannot come from argv (printed as: not given)

std::string content_digest(const std::string& path, int64_t max_bytes) {
  std::string bytes;
  try {
    bytes = read_regular_file(path, path, max_bytes);
  } catch (const InputError&) {
    return "";
  }
  char hex[40];
  std::snprintf(hex, sizeof(hex), "xxh64 0x%016llx", static_cast<unsigned long long>(xxh64(bytes.data(), bytes.size())));
  return hex;
}

bool is_content(const std::string& name) { return name.size() > 8 && name.compare(name.size() - 8, 8, " content") == 0; }

std::string shown(const std::string& v) {
  if (v == kNotGiven) return "not given";
  if (v.rfind("xxh64 ", 0) == 0) return v;
  return "'" + (v.size() > 80 ? v.substr(0, 77) + "..." : v) + "'";
}

std::string encode(const NamedValues& v) {
  std::string out;
  for (const auto& [name, value] : v) {
    out += name;
    out += '\0';
    out += value;
    out += '\0';
  }
  return out;
}

NamedValues decode(const std::string& s) {
  NamedValues v;
  size_t at = 0;
  while (at < s.size()) {
    const size_t a = s.find('\0', at);
    const size_t b = a == std::string::npos ? std::string::npos : s.find('\0', a + 1);
    ZT_CHECK(b != std::string::npos, "start-up agreement: a truncated argument list");
    v.emplace_back(s.substr(at, a - at), s.substr(a + 1, b - a - 1));
    at = b + 1;
  }
  return v;
}

}  // namespace

NamedValues rank_invariants(const TrainArgs& a) {
  std::map<std::string, std::string> last;
  NamedValues out;
  for (const auto& [flag, value] : a.given) {
    if (flag == "--config" || flag == "--model") continue;  // compared by content: the same file may sit elsewhere
    if (flag == "--tag") continue;  // checkpoint.tag_validation decides (Fail: exit 2; Warn/Ignore: rank 0's tag)
    if (!last.count(flag)) out.emplace_back(flag, "");
    last[flag] = value.empty() ? "given" : value;
  }
  for (auto& [flag, value] : out) value = last[flag];
  out.emplace_back("--config content", content_digest(a.config, kMaxConfigFileBytes));
  out.emplace_back("--model content", content_digest(a.model, kMaxModelFileBytes));
  return out;
}

std::string invariants_mismatch(const std::vector<NamedValues>& all) {
  std::vector<std::map<std::string, std::string>> maps;
  std::vector<std::string> names;  // rank 0's order first, then names only other ranks have
  std::set<std::string> seen;
  for (const NamedValues& v : all) {
    maps.emplace_back();
    for (const auto& [name, value] : v) {
      maps.back()[name] = value;
      if (seen.insert(name).second) names.push_back(name);
    }
  }
  std::string msg;
  for (const std::string& name : names) {
    std::vector<std::string> values;
    bool unknown = false;
    for (const auto& m : maps) {
      auto it = m.find(name);
      values.push_back(it == m.end() ? kNotGiven : it->second);
      unknown |= is_content(name) && values.back().empty();
    }
    if (unknown) continue;
    std::map<std::string, std::vector<int>> ranks_of;  // value -> ranks, other than rank 0's value
    for (size_t r = 1; r < values.size(); ++r)
      if (values[r] != values[0]) ranks_of[values[r]].push_back(static_cast<int>(r));
    if (ranks_of.empty()) continue;
    msg += (msg.empty() ? "" : "; ") + name + ": rank 0 " + shown(values[0]);
    for (const auto& [value, ranks] : ranks_of) {
      msg += std::string(ranks.size() > 1 ? ", ranks " : ", rank ");
      for (size_t i = 0; i < ranks.size(); ++i) msg += (i ? "," : "") + std::to_string(ranks[i]);
      msg += " " + shown(value);
    }
  }
  if (msg.empty()) return "";
  return "train: the ranks were started with different arguments (every rank must get the same flags, config "
         "and model file): " + msg;
}

void check_same_arguments_on_every_rank(const TrainArgs& a, WorldControl& world) {
  const std::vector<std::string> all = world.all_gather_strings(encode(rank_invariants(a)), "start-up arguments");
  std::vector<NamedValues> decoded;
  for (const std::string& s : all) decoded.push_back(decode(s));
  const std::string msg = invariants_mismatch(decoded);
  if (!msg.empty()) throw InputError(msg);
}

}  // namespace zt
