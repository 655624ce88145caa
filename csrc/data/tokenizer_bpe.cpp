// tokenizer_bpe.cpp — encoding (added tokens, pre-tokens, merges by rank, a per-thread
// pre-token cache) and decoding (see tokenizer.h).
#include <algorithm>
#include <atomic>
#include <functional>

#include "tokenizer_internal.h"
#include "zerotrain/core/check.h"
#include "zerotrain/data/tokenizer.h"

namespace zt::bpe {

void Model::index_merges(const std::string& what) {
  merge_map.clear();
  merge_map.reserve(merges.size() * 2);
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto [a, b] = merges[r];
    joined = tokens[a] + tokens[b];
    const auto it = ids.find(joined);
    if (it == ids.end())
      throw InputError(what + ": merge " + std::to_string(r) + " ('" + bytes_to_json_token(tokens[a]) + "' + '" +
                       bytes_to_json_token(tokens[b]) + "') makes a token that is not in the vocabulary");
    merge_map.emplace(pair_key(a, b), MergeTarget{static_cast<uint32_t>(r), it->second});  // first rank wins
  }
}

void Model::assign_serial() {
  static std::atomic<uint64_t> next{1};
  serial = next.fetch_add(1);
}

namespace {

struct Symbol {
  uint32_t id;
  int32_t prev, next;
  bool alive;
};

struct Candidate {
  uint32_t rank;
  int32_t pos;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// One cache per thread for the model it last served: pre-token bytes -> ids. Bounded; cleared
// when full or when another model is used on the thread.
struct PieceCache {
  uint64_t serial = 0;
  std::unordered_map<std::string, std::vector<uint32_t>> map;
  std::string key;
};
constexpr size_t kCacheEntries = size_t(1) << 18;

}  // namespace

// The linked-list merge: candidates (rank, position) in a min-heap; a popped candidate is acted
// on only if its pair is still there (both symbols alive and adjacent with the same rank).
void bpe_merge(const Model& m, std::string_view piece, std::vector<uint32_t>& out) {
  if (m.ignore_merges) {
    const auto it = m.ids.find(std::string(piece));
    if (it != m.ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const int32_t n = static_cast<int32_t>(piece.size());
  thread_local std::vector<Symbol> sym;  // reused: no allocation per pre-token once grown
  thread_local std::vector<Candidate> heap;
  sym.resize(static_cast<size_t>(n));
  heap.clear();
  for (int32_t i = 0; i < n; ++i)
    sym[i] = Symbol{m.byte_id[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  const auto consider = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const auto it = m.merge_map.find(pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it == m.merge_map.end()) return;
    heap.push_back(Candidate{it->second.rank, pos});
    std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    const auto it = m.merge_map.find(pair_key(left.id, sym[left.next].id));
    if (it == m.merge_map.end() || it->second.rank != c.rank) continue;
    Symbol& right = sym[left.next];
    left.id = it->second.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace zt::bpe

namespace zt {

Tokenizer::Tokenizer(std::shared_ptr<const bpe::Model> model) : model_(std::move(model)) {}

namespace {

// Pre-tokens of one text without added tokens, merged, appended to out.
void encode_plain(const bpe::Model& m, std::string_view text, bool text_start, std::vector<uint32_t>& out) {
  thread_local bpe::PieceCache cache;
  if (cache.serial != m.serial) {
    cache.map.clear();
    cache.serial = m.serial;
  }
  std::string prefixed;
  if (m.add_prefix_space && text_start && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  bpe::for_each_pretoken(text, [&](std::string_view piece) {
    if (piece.size() == 1) {
      out.push_back(m.byte_id[static_cast<uint8_t>(piece[0])]);
      return;
    }
    cache.key.assign(piece.data(), piece.size());
    const auto it = cache.map.find(cache.key);
    if (it != cache.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
    const size_t first = out.size();
    bpe::bpe_merge(m, piece, out);
    if (cache.map.size() >= bpe::kCacheEntries) cache.map.clear();
    cache.map.emplace(cache.key, std::vector<uint32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  });
}

}  // namespace

void Tokenizer::encode_into(std::string_view text, std::vector<uint32_t>& out, bool text_start) const {
  const bpe::Model& m = *model_;
  // The prefix space goes before each part that starts the text or follows an added token.
  bool start = text_start;
  bpe::split_added(
      text, m.added,
      [&](std::string_view part) {
        encode_plain(m, part, start, out);
        start = false;
      },
      [&](const bpe::AddedToken& t) {
        out.push_back(t.id);
        start = true;
      });
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode_into(text, out);
  return out;
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  const bpe::Model& m = *model_;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= m.tokens.size() || !m.present[ids[i]])
      throw InputError("decode: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                       " names no token (vocabulary size " + std::to_string(m.tokens.size()) + ")");
    out += m.tokens[ids[i]];
  }
  return out;
}

uint32_t Tokenizer::vocab_size() const { return static_cast<uint32_t>(model_->tokens.size()); }

int64_t Tokenizer::added_token_id(std::string_view content) const {
  for (const auto& a : model_->added)
    if (a.content == content) return a.id;
  return -1;
}

std::vector<std::string> Tokenizer::added_tokens() const {
  std::vector<std::string> out;
  for (const auto& a : model_->added) out.push_back(a.content);
  return out;
}

const std::string& Tokenizer::token_bytes(uint32_t id) const {
  ZT_CHECK(id < model_->tokens.size(), "token_bytes: id outside the vocabulary");
  return model_->tokens[id];
}

size_t Tokenizer::num_merges() const { return model_->merges.size(); }

}  // namespace zt
