// hjson.cpp — recursive-descent reader for JSON + the HJSON relaxations (see hjson.h).
#include "zerotrain/config/hjson.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"

namespace zt {
namespace {

constexpr int kMaxDepth = 256;

bool is_punctuator(char c) { return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':'; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return std::string();
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

size_t skip_digits(const std::string& t, size_t i) {
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  return i;
}

bool digit_at(const std::string& t, size_t i) { return i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); }

// Whether the whole of `t` matches the JSON number grammar -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?;
// *is_float: it has a fraction or an exponent.
bool json_number_grammar(const std::string& t, bool* is_float) {
  size_t i = 0, n = t.size();
  *is_float = false;
  if (i < n && t[i] == '-') ++i;
  if (!digit_at(t, i)) return false;
  i = t[i] == '0' ? i + 1 : skip_digits(t, i);
  if (i < n && t[i] == '.') {
    if (!digit_at(t, i + 1)) return false;
    i = skip_digits(t, i + 1);
    *is_float = true;
  }
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < n && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digit_at(t, i)) return false;
    i = skip_digits(t, i);
    *is_float = true;
  }
  return i == n;
}

// Parses the JSON number grammar over the whole of `t`. Applies the integer rule of
// docs/config.md §17.1. Returns false when `t` is not a number.
bool parse_number(const std::string& t, Json* out, bool* overflow) {
  *overflow = false;
  bool is_float = false;
  if (!json_number_grammar(t, &is_float)) return false;
  if (!is_float) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (errno != ERANGE) {
      *out = static_cast<int64_t>(v);
      return true;
    }
    // Beyond int64: keep the magnitude as a double; integer fields then report it as out of range.
  }
  double d = std::strtod(t.c_str(), nullptr);
  if (std::isinf(d)) {
    *overflow = true;
    return true;
  }
  if (std::fabs(d) < 1e10 && d == std::floor(d)) {
    *out = static_cast<int64_t>(d);
  } else {
    *out = d;
  }
  return true;
}

// A UTF-8 lead byte: the sequence length (0: not a valid lead byte) and its payload bits.
size_t utf8_lead(unsigned char c, unsigned* cp) {
  if (c >= 0xC2 && c <= 0xDF) { *cp = c & 0x1F; return 2; }
  if (c >= 0xE0 && c <= 0xEF) { *cp = c & 0x0F; return 3; }
  if (c >= 0xF0 && c <= 0xF4) { *cp = c & 0x07; return 4; }
  return 0;
}

// Overlong forms, surrogates and values above U+10FFFF are invalid.
bool utf8_codepoint_ok(size_t len, unsigned cp) {
  if (len == 3 && cp < 0x800) return false;
  if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
  return !(cp >= 0xD800 && cp <= 0xDFFF);
}

}  // namespace

size_t first_invalid_utf8(const std::string& s) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    unsigned cp = 0;
    const size_t len = utf8_lead(c, &cp);
    if (len == 0 || i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char t = static_cast<unsigned char>(s[i + k]);
      if ((t & 0xC0) != 0x80) return i + k;
      cp = (cp << 6) | (t & 0x3F);
    }
    if (!utf8_codepoint_ok(len, cp)) return i;
    i += len;
  }
  return std::string::npos;
}

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : s_(text), src_(source) {}

  Json parse_root() {
    size_t bad = first_invalid_utf8(s_);
    if (bad != std::string::npos) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(s_[bad]));
      fail_at(bad, std::string("invalid UTF-8 byte ") + hex + " at byte offset " + std::to_string(bad) +
                       "; expected a UTF-8 text file");
    }
    if (s_.compare(0, 3, "\xEF\xBB\xBF") == 0) i_ = 3;
    skip_ws();
    if (eof()) return Json::object();
    Json root;
    if (peek() == '{') {
      root = parse_object("", 0, false);
    } else if (peek() == '[') {
      fail("the top level must be an object ({...}); found an array");
    } else {
      root = parse_object("", 0, true);
    }
    skip_ws();
    if (!eof()) fail(std::string("unexpected '") + peek() + "' after the end of the top-level object");
    return root;
  }

 private:
  const std::string& s_;
  std::string src_;
  size_t i_ = 0;

  bool eof() const { return i_ >= s_.size(); }
  char peek() const { return eof() ? '\0' : s_[i_]; }
  char peek_at(size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }

  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < pos && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::ostringstream os;
    os << "config " << src_ << ": line " << line << ", column " << col << ": " << what;
    throw InputError(os.str());
  }
  [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }

  // Skips whitespace and all three comment styles.
  void skip_ws() {
    while (!eof()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#' || (c == '/' && peek_at(1) == '/')) {
        while (!eof() && peek() != '\n') ++i_;
      } else if (c == '/' && peek_at(1) == '*') {
        size_t start = i_;
        size_t end = s_.find("*/", i_ + 2);
        if (end == std::string::npos) fail_at(start, "unterminated /* comment");
        i_ = end + 2;
      } else {
        return;
      }
    }
  }

  Json parse_object(const std::string& path, int depth, bool braceless) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    size_t open = i_;
    if (!braceless) ++i_;  // '{'
    Json obj = Json::object();
    std::unordered_set<std::string> seen;  // this object's keys: duplicate check in O(1)
    for (;;) {
      skip_ws();
      if (eof()) {
        if (braceless) return obj;
        fail_at(open, "unterminated object: no closing '}' for this '{'");
      }
      if (!braceless && peek() == '}') {
        ++i_;
        return obj;
      }
      size_t key_pos = i_;
      std::string key = parse_key(braceless && obj.empty());
      skip_ws();
      if (peek() != ':') {
        if (braceless && obj.empty()) fail_at(key_pos, "the top level must be an object ({...})");
        fail("expected ':' after key `" + child_path(path, key) + "`");
      }
      ++i_;
      std::string kp = child_path(path, key);
      if (!seen.insert(key).second) {
        fail_at(key_pos, "duplicate key `" + kp + "` (DeepSpeed rejects duplicate keys too; keep one)");
      }
      skip_ws();
      if (eof()) fail("expected a value for `" + kp + "`");
      // Appended to the ordered map's vector directly: `seen` already guarantees uniqueness, and
      // ordered_json's own insert searches linearly (quadratic over a large object).
      Json value = parse_value(kp, depth + 1);
      auto& members = obj.get_ref<Json::object_t&>();
      members.Container::emplace_back(std::move(key), std::move(value));
      skip_ws();
      if (peek() == ',') ++i_;
    }
  }

  Json parse_array(const std::string& path, int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    size_t open = i_++;
    Json arr = Json::array();
    for (;;) {
      skip_ws();
      if (eof()) fail_at(open, "unterminated array: no closing ']' for this '['");
      if (peek() == ']') {
        ++i_;
        return arr;
      }
      arr.push_back(parse_value(path + "[" + std::to_string(arr.size()) + "]", depth + 1));
      skip_ws();
      if (peek() == ',') ++i_;
    }
  }

  std::string parse_key(bool first_root_key) {
    char c = peek();
    if (c == '"' || c == '\'') return parse_quoted(c);
    size_t start = i_;
    while (!eof()) {
      char k = peek();
      if (k == ':' || k == ' ' || k == '\t' || k == '\n' || k == '\r') break;
      if (is_punctuator(k)) {
        if (first_root_key) fail_at(start, "the top level must be an object ({...})");
        fail(std::string("unexpected '") + k + "' in a key name (quote the key or check the syntax)");
      }
      ++i_;
    }
    if (i_ == start) fail("expected a key");
    return s_.substr(start, i_ - start);
  }

  Json parse_value(const std::string& path, int depth) {
    char c = peek();
    if (c == '{') return parse_object(path, depth, false);
    if (c == '[') return parse_array(path, depth);
    if (c == '\'' && peek_at(1) == '\'' && peek_at(2) == '\'') return parse_multiline();
    if (c == '"' || c == '\'') return parse_quoted(c);
    if (is_punctuator(c)) fail(std::string("unexpected '") + c + "' where the value of `" + path + "` should be");
    return parse_quoteless(path);
  }

  // Whether position p ends a quoteless value (end of line, `,`, `}`, `]`, a comment); *eol: at
  // the end of a line or of the text.
  bool quoteless_end(size_t p, bool* eol) const {
    *eol = p >= s_.size() || s_[p] == '\n' || s_[p] == '\r';
    if (*eol) return true;
    const char c = s_[p];
    return c == ',' || c == '}' || c == ']' || c == '#' ||
           (c == '/' && p + 1 < s_.size() && (s_[p + 1] == '/' || s_[p + 1] == '*'));
  }

  // true / false / null / a number; false when `t` is none of them.
  bool quoteless_literal(const std::string& t, Json* v, size_t start, const std::string& path) {
    bool overflow = false;
    if (t == "true") *v = true;
    else if (t == "false") *v = false;
    else if (t == "null") *v = nullptr;
    else if (!parse_number(t, v, &overflow)) return false;
    if (overflow) fail_at(start, "`" + path + "`: number " + t + " is out of range");
    return true;
  }

  // A quoteless value: true/false/null/number when followed by a delimiter, else a string
  // running to the end of the line.
  Json parse_quoteless(const std::string& path) {
    size_t start = i_;
    for (size_t p = i_;; ++p) {
      bool eol = false;
      const bool delim = quoteless_end(p, &eol);
      if (delim && p > start) {
        std::string t = trim(s_.substr(start, p - start));
        Json v;
        if (quoteless_literal(t, &v, start, path)) {
          i_ = start + (s_.substr(start, p - start).find_last_not_of(" \t") + 1);
          return v;
        }
        if (eol) {
          i_ = p;
          return Json(t);
        }
        continue;
      }
      if (eol) {  // only reachable with p == start, which parse_value rules out
        fail("expected a value for `" + path + "`");
      }
    }
  }

  // The character a backslash escape stands for (`u`: four hex digits, as UTF-8).
  void append_escape(char e, std::string* out) {
    static const std::pair<char, char> kEscapes[] = {{'"', '"'},  {'\'', '\''}, {'\\', '\\'}, {'/', '/'},
                                                     {'b', '\b'}, {'f', '\f'},   {'n', '\n'},   {'r', '\r'},
                                                     {'t', '\t'}};
    for (const auto& [k, v] : kEscapes) {
      if (e == k) {
        *out += v;
        return;
      }
    }
    if (e != 'u') fail_at(i_ - 2, std::string("invalid escape '\\") + e + "' in a string");
    append_utf8(read_hex4(), out);
  }

  std::string parse_quoted(char q) {
    size_t open = i_++;
    std::string out;
    for (;;) {
      if (eof()) fail_at(open, "unterminated string");
      char c = s_[i_++];
      if (c == q) return out;
      if (c == '\n') fail_at(open, "unterminated string (a newline inside quotes)");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (eof()) fail_at(open, "unterminated string");
      append_escape(s_[i_++], &out);
    }
  }

  unsigned read_hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
      else fail_at(i_ - 1, "invalid hex digit in a \\u escape");
    }
    return v;
  }

  void append_utf8(unsigned cp, std::string* out) {
    if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek_at(1) == 'u') {
      i_ += 2;
      unsigned lo = read_hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid UTF-16 surrogate pair in a \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) fail("lone UTF-16 surrogate in a \\u escape (not valid Unicode)");
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // '''multi-line''' string: the opening column's indentation is removed from each line, and
  // the newline after the opening and before the closing quotes is dropped.
  Json parse_multiline() {
    size_t open = i_;
    size_t line_start = s_.rfind('\n', open == 0 ? 0 : open - 1);
    size_t indent = (line_start == std::string::npos) ? open : open - line_start - 1;
    i_ += 3;
    size_t end = s_.find("'''", i_);
    if (end == std::string::npos) fail_at(open, "unterminated ''' string");
    std::string body = s_.substr(i_, end - i_);
    i_ = end + 3;
    size_t first_nl = body.find('\n');
    if (first_nl != std::string::npos && trim(body.substr(0, first_nl)).empty()) body.erase(0, first_nl + 1);
    size_t last_nl = body.rfind('\n');
    if (last_nl != std::string::npos && trim(body.substr(last_nl)).empty()) body.erase(last_nl);
    std::string out;
    std::istringstream lines(body);
    std::string line;
    bool first = true;
    while (std::getline(lines, line)) {
      size_t k = 0;
      while (k < indent && k < line.size() && (line[k] == ' ' || line[k] == '\t')) ++k;
      if (!first) out += '\n';
      out += line.substr(k);
      first = false;
    }
    return Json(out);
  }
};

}  // namespace

Json parse_hjson(const std::string& text, const std::string& source) {
  return Parser(text, source).parse_root();
}

Json parse_hjson_file(const std::string& path) {
  return parse_hjson(read_regular_file(path, "config " + path, kMaxConfigFileBytes), path);
}

}  // namespace zt
