// cli_flags.h — reading a command's flags: the value after a flag, counts and byte sizes, each
// failure an InputError naming the command and the flag (exit 2), shared by every command.
#pragma once
#include <cstdint>
#include <string>

namespace zt {

// The value after flag argv[i] (i moves onto it); InputError "<command>: <flag> needs a value" (then
// `usage`, when not empty) when none follows, or naming the flag when it is empty and not empty_ok.
const char* flag_value(const std::string& command, int argc, char** argv, int& i, const std::string& usage,
                       bool empty_ok = false);
// A flag's integer value in [1, hi]; InputError "<command>: <flag> '<v>': expected ..." otherwise.
int64_t parse_count_flag(const std::string& command, const std::string& flag, const char* v, int64_t hi);
// "80GiB", "512MB", "1.5e9", "1024" -> bytes; InputError naming `flag` otherwise.
int64_t parse_bytes(const std::string& text, const std::string& flag);

}  // namespace zt
