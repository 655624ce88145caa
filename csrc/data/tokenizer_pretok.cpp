// tokenizer_pretok.cpp — UTF-8 decoding, GPT-2's pre-tokenizer pattern by hand, the byte-level
// character table and safe chunk boundaries (see tokenizer.h).
#include <algorithm>
#include <array>

#include "tokenizer_internal.h"
#include "zerotrain/data/tokenizer.h"

namespace zt::bpe {

namespace {

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// ASCII classes; \s is \t \n \v \f \r and ' ' (U+001C..U+001F are not White_Space).
constexpr std::array<uint8_t, 128> ascii_classes() {
  std::array<uint8_t, 128> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = kLetter;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = kLetter;
  for (int c = '0'; c <= '9'; ++c) t[c] = kNumber;
  for (int c : {'\t', '\n', '\v', '\f', '\r', ' '}) t[c] = kSpace;
  return t;
}
constexpr std::array<uint8_t, 128> kAscii = ascii_classes();

inline bool cont(unsigned char c) { return (c & 0xC0) == 0x80; }

// The character at i and its class; *len its byte length.
inline CharClass char_at(std::string_view s, size_t i, size_t* len) {
  const unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *len = 1;
    return static_cast<CharClass>(kAscii[b]);
  }
  const char32_t cp = next_char(s, i, len);
  if (cp == kInvalid) return kOther;
  if (is_letter(cp)) return kLetter;
  if (is_number(cp)) return kNumber;
  return is_space(cp) ? kSpace : kOther;
}

// End of the run of characters of class `cls` (or, for kOther, of any class but letter, number
// and space) starting at i.
size_t run_end(std::string_view s, size_t i, CharClass cls) {
  size_t len = 0;
  while (i < s.size() && char_at(s, i, &len) == cls) i += len;
  return i;
}

// 's 't 're 've 'm 'll 'd at i (case-sensitive, as GPT-2's pattern): the length, else 0.
size_t contraction(std::string_view s, size_t i) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const char d = s[i + 1];
  if (d == 's' || d == 't' || d == 'm' || d == 'd') return 2;
  if (i + 2 >= s.size()) return 0;
  const char e = s[i + 2];
  return ((d == 'r' || d == 'v') && e == 'e') || (d == 'l' && e == 'l') ? 3 : 0;
}

struct ByteTable {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};
  ByteTable() {
    to_byte.fill(-1);
    char32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      to_char[b] = printable ? char32_t(b) : extra++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteTable kBytes;

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {  // the table's code points are < U+0800; kept general for completeness
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

char32_t next_char(std::string_view s, size_t i, size_t* len) {
  const auto at = [&](size_t k) -> unsigned char { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0; };
  const unsigned char b = at(i);
  *len = 1;
  if (b < 0x80) return b;
  if (b >= 0xC2 && b <= 0xDF && cont(at(i + 1))) {
    *len = 2;
    return (char32_t(b & 0x1F) << 6) | (at(i + 1) & 0x3F);
  }
  if (b >= 0xE0 && b <= 0xEF) {
    const unsigned char c1 = at(i + 1);
    const bool ok1 = b == 0xE0 ? (c1 >= 0xA0 && c1 <= 0xBF) : b == 0xED ? (c1 >= 0x80 && c1 <= 0x9F) : cont(c1);
    if (ok1 && cont(at(i + 2))) {
      *len = 3;
      return (char32_t(b & 0x0F) << 12) | (char32_t(c1 & 0x3F) << 6) | (at(i + 2) & 0x3F);
    }
    return kInvalid;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const unsigned char c1 = at(i + 1);
    const bool ok1 = b == 0xF0 ? (c1 >= 0x90 && c1 <= 0xBF) : b == 0xF4 ? (c1 >= 0x80 && c1 <= 0x8F) : cont(c1);
    if (ok1 && cont(at(i + 2)) && cont(at(i + 3))) {
      *len = 4;
      return (char32_t(b & 0x07) << 18) | (char32_t(c1 & 0x3F) << 12) | (char32_t(at(i + 2) & 0x3F) << 6) |
             (at(i + 3) & 0x3F);
    }
  }
  return kInvalid;
}

bool is_space(char32_t cp) {
  if (cp < 0x80) return kAscii[cp] == kSpace;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The alternatives of the pattern in order, at position i:
//   contractions; ' ?' then letters, numbers, or other characters; then whitespace: a run
//   followed by the end is taken whole, a run of two or more followed by a non-space gives up its
//   last character (\s+(?!\S)), a single one is taken alone (\s+).
size_t pretoken_end(std::string_view s, size_t i) {
  if (const size_t c = contraction(s, i)) return i + c;
  size_t len = 0;
  size_t j = i;
  CharClass cls = char_at(s, i, &len);
  if (s[i] == ' ' && i + 1 < s.size()) {
    j = i + 1;
    cls = char_at(s, j, &len);
  }
  if (cls != kSpace) return run_end(s, j, cls);
  size_t k = i, last = i;
  while (k < s.size() && char_at(s, k, &len) == kSpace) {
    last = k;
    k += len;
  }
  if (k == s.size() || last == i) return k;
  return last;
}

char32_t byte_char(uint8_t b) { return kBytes.to_char[b]; }

int char_byte(char32_t cp) { return cp < kBytes.to_byte.size() ? kBytes.to_byte[cp] : -1; }

std::string bytes_to_json_token(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_char(static_cast<uint8_t>(c)));
  return out;
}

bool json_token_to_bytes(std::string_view text, std::string* bytes) {
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    const char32_t cp = next_char(text, i, &len);
    const int b = cp == kInvalid ? -1 : char_byte(cp);
    if (b < 0) return false;
    *bytes += static_cast<char>(b);
    i += len;
  }
  return true;
}

}  // namespace zt::bpe

namespace zt {

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  bpe::for_each_pretoken(text, [&](std::string_view p) { out.push_back(p); });
  return out;
}

namespace {
// Whether an occurrence of one of `tokens` in s starts before p and ends after it.
bool straddles(std::string_view s, size_t p, const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    if (t.size() < 2) continue;
    const size_t from = p >= t.size() - 1 ? p - (t.size() - 1) : 0;
    for (size_t at = s.find(t, from); at != std::string_view::npos && at < p; at = s.find(t, at + 1))
      if (at + t.size() > p) return true;
  }
  return false;
}
}  // namespace

size_t safe_split_point(std::string_view s, size_t window, const std::vector<std::string>& keep_whole) {
  const auto printable = [](char c) { return c >= 0x21 && c <= 0x7E; };
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  // A point is tried only when a whole keep_whole token after it is inside s (else the text that
  // follows could complete one across it).
  size_t reach = 0;
  for (const std::string& t : keep_whole) reach = std::max(reach, t.size());
  if (s.size() < reach + 2) return 0;
  const size_t end = s.size() - reach;  // points p < end
  const size_t lo = s.size() > window ? s.size() - window : 0;
  for (size_t p = end - 1; p >= 2 && p > lo; --p)
    if (s[p - 1] == '\n' && printable(s[p - 2]) && printable(s[p]) && !straddles(s, p, keep_whole)) return p;
  for (size_t p = end >= 2 ? end - 2 : 0; p >= 1 && p > lo; --p)
    if (s[p] == ' ' && printable(s[p - 1]) && letter(s[p + 1]) && !straddles(s, p, keep_whole)) return p;
  return 0;
}

}  // namespace zt
