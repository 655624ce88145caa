// cli_flags.cpp — a command's flag values (cli_flags.h).
#include "cli_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "zerotrain/core/check.h"

namespace zt {

int64_t parse_count_flag(const std::string& command, const std::string& flag, const char* v, int64_t hi) {
  bool digits = *v != 0;
  for (const char* c = v; *c; ++c) digits = digits && *c >= '0' && *c <= '9';
  errno = 0;
  const long long x = digits ? std::strtoll(v, nullptr, 10) : 0;
  if (!digits || errno == ERANGE || x < 1 || x > hi)
    throw InputError(command + ": " + flag + " '" + v + "': expected an integer in [1, " + std::to_string(hi) + "]");
  return x;
}

const char* flag_value(const std::string& command, int argc, char** argv, int& i, const std::string& usage,
                       bool empty_ok) {
  const std::string f = argv[i];
  if (i + 1 >= argc) throw InputError(command + ": " + f + " needs a value" + (usage.empty() ? "" : "\n" + usage));
  if (!argv[i + 1][0] && !empty_ok)
    throw InputError(command + ": " + f + " '': empty value; expected " + f + " VALUE");
  return argv[++i];
}

int64_t parse_bytes(const std::string& text, const std::string& flag) {
  const char* s = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  std::string unit(end);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "TB") scale = 1e12;
  if (end == s || scale == 0 || !(v > 0) || !std::isfinite(v) || v * scale > 9e18)
    throw InputError(flag + " '" + text + "': expected a positive size such as 80GiB, 512MB or 1e9 (bytes)");
  return static_cast<int64_t>(v * scale);
}

}  // namespace zt
