// tokenizer_internal.h — the byte-level BPE model behind zt::Tokenizer, shared by the
// pre-tokenizer, the encoder, the trainer and the tokenizer.json reader/writer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zt::bpe {

bool is_letter(char32_t cp);  // Unicode general category L (tokenizer_unicode.cpp)
bool is_number(char32_t cp);  // Unicode general category N
bool is_space(char32_t cp);   // Unicode White_Space

// The next character of `s` at `i`: its code point and byte length. A byte that does not start
// a valid UTF-8 sequence (overlong, surrogate, truncated, > U+10FFFF) is one character whose code
// point is kInvalid (neither letter, number nor space).
constexpr char32_t kInvalid = 0xFFFFFFFF;
char32_t next_char(std::string_view s, size_t i, size_t* len);

// Calls fn(piece) for each GPT-2 pre-token of `text`, in order.
template <class Fn>
void for_each_pretoken(std::string_view text, Fn&& fn);
size_t pretoken_end(std::string_view text, size_t i);  // end of the pre-token starting at i

template <class Fn>
void for_each_pretoken(std::string_view text, Fn&& fn) {
  for (size_t i = 0; i < text.size();) {
    const size_t e = pretoken_end(text, i);
    fn(text.substr(i, e - i));
    i = e;
  }
}

// GPT-2's byte -> printable character table: byte b is written as code point byte_char(b) in
// tokenizer.json; char_byte(cp) is the inverse, -1 for a code point that stands for no byte.
char32_t byte_char(uint8_t b);
int char_byte(char32_t cp);
// A token's bytes as tokenizer.json spells them, and back (false when a character of `text`
// stands for no byte).
std::string bytes_to_json_token(std::string_view bytes);
bool json_token_to_bytes(std::string_view text, std::string* bytes);

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = true;
};

struct MergeTarget {
  uint32_t rank;
  uint32_t id;
};

inline uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }

// Invariants: tokens[id] is the id's bytes (an added token's content); byte_id[b] is the token of
// the single byte b; merges[r] = (left, right) of rank r and merge_map[pair_key(left, right)]
// = {r, id of the joined bytes}; ids[bytes] covers every non-added token.
struct Model {
  std::vector<std::string> tokens;
  std::vector<bool> present;        // false for an id no token uses (a gap in a loaded vocab)
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> merges;
  std::unordered_map<uint64_t, MergeTarget> merge_map;
  uint32_t byte_id[256] = {};
  std::vector<AddedToken> added;
  bool add_prefix_space = false;    // ByteLevel pre-tokenizer option: a space before each text
  bool ignore_merges = false;       // BPE option: a pre-token that is a token is not merged
  uint64_t serial = 0;              // unique per model (keys the per-thread encode cache)

  // Fills merge_map from merges; InputError (prefixed by `what`) when a merge's bytes have no token.
  void index_merges(const std::string& what);
  void assign_serial();
};

// Cuts the added tokens out of `text`: calls plain(part) for the text between them and
// added(token) for each occurrence (leftmost first; the longest of those starting there).
template <class Plain, class Added>
void split_added(std::string_view text, const std::vector<AddedToken>& tokens, Plain&& plain, Added&& added) {
  constexpr size_t npos = std::string_view::npos;
  std::vector<size_t> next(tokens.size());  // next occurrence of token t at or after pos
  for (size_t t = 0; t < tokens.size(); ++t) next[t] = text.find(tokens[t].content);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = npos, best_t = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (next[t] != npos && next[t] < pos) next[t] = text.find(tokens[t].content, pos);
      if (next[t] == npos) continue;
      if (next[t] < best || (next[t] == best && tokens[t].content.size() > tokens[best_t].content.size())) {
        best = next[t];
        best_t = t;
      }
    }
    if (best == npos) break;
    if (best > pos) plain(text.substr(pos, best - pos));
    added(tokens[best_t]);
    pos = best + tokens[best_t].content.size();
  }
  if (pos < text.size()) plain(text.substr(pos));
}

// The merged tokens of one pre-token's bytes (rank order, leftmost first among equal ranks).
void bpe_merge(const Model& m, std::string_view piece, std::vector<uint32_t>& out);

}  // namespace zt::bpe
