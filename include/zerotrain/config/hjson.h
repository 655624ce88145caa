// hjson.h — the config-file reader: JSON plus the HJSON relaxations DeepSpeed's loader accepts.
//
// Accepted beyond strict JSON (as DeepSpeed's hjson loader does for config *files*):
//   comments (// ..., # ..., /* ... */), trailing commas, single-quoted strings, unquoted keys,
//   quoteless string values (they run to the end of the line), a UTF-8 byte-order mark,
//   a root object without braces, ''' multi-line strings ''', and an empty / comment-only file (-> {}).
// Numbers follow docs/config.md §17.1: a whole-valued number with |x| < 1e10 becomes an
// integer ("5e8" -> 500000000, "32.0" -> 32); other numbers stay doubles; a number that
// overflows a double ("1e999") is an error.
// Text that is not valid UTF-8 is an error naming the byte offset.
// A key repeated inside one object, at any depth, is an error naming its JSON path and line.
// Errors throw zt::InputError "config <source>: line L, column C: <what>".
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace zt {

// Config values keep the file's key order (so warnings and printed configs read like the file).
using Json = nlohmann::ordered_json;

// Parses `text`; `source` names the input in error messages (usually the file path).
// The result is always an object (a top-level array, number or string is rejected).
Json parse_hjson(const std::string& text, const std::string& source);

// Reads `path` and parses it; an unreadable file, a non-regular file (FIFO, device) or one
// larger than kMaxConfigFileBytes (core/file_io.h) is an InputError.
Json parse_hjson_file(const std::string& path);

// Byte offset of the first byte that is not part of valid UTF-8 (overlong forms and surrogates
// are invalid), or std::string::npos. Config text must be valid UTF-8 (it is printed as JSON).
size_t first_invalid_utf8(const std::string& s);

}  // namespace zt
