// tokenizer_train.cpp — byte-level BPE training (see BpeTrainer in tokenizer.h).
//
// Pair counts are kept for the whole corpus of distinct pre-tokens ("words", each with its
// count) and updated incrementally: a merge visits only the words that hold its pair (an index
// pair -> words), subtracts their old adjacent pairs and adds their new ones. The best pair comes
// from a max-heap of (count, pair) entries that are upper bounds of the true counts (a pair's
// count only grows in the merge that creates its new token, which pushes a fresh entry); a popped
// entry whose count is stale is pushed again with the true count.
#include <algorithm>
#include <queue>

#include "tokenizer_internal.h"
#include "zerotrain/core/check.h"
#include "zerotrain/data/tokenizer.h"

namespace zt {

struct BpeTrainer::Counts {
  std::unordered_map<std::string, uint64_t> words;
  std::vector<bpe::AddedToken> specials;
};

BpeTrainer::BpeTrainer(uint32_t vocab_size, std::vector<std::string> specials)
    : counts_(std::make_unique<Counts>()), vocab_size_(vocab_size), specials_(std::move(specials)) {
  if (vocab_size_ < 256 + specials_.size() || vocab_size_ >= (uint32_t(1) << 31))
    throw InputError("--vocab-size " + std::to_string(vocab_size_) + ": expected at least 256 + " +
                     std::to_string(specials_.size()) + " special token(s) = " +
                     std::to_string(256 + specials_.size()) + " and below 2^31");
  for (size_t i = 0; i < specials_.size(); ++i) {
    const std::string& s = specials_[i];
    size_t len = 0;
    for (size_t k = 0; k < s.size(); k += len)
      if (bpe::next_char(s, k, &len) == bpe::kInvalid)
        throw InputError("--special: token " + std::to_string(i) + " is not valid UTF-8");
    if (s.empty()) throw InputError("--special: an empty special token");
    if (std::count(specials_.begin(), specials_.end(), s) > 1)
      throw InputError("--special '" + s + "': given twice");
    counts_->specials.push_back(bpe::AddedToken{s, 0, true});
  }
}

BpeTrainer::~BpeTrainer() = default;

void BpeTrainer::add_text(std::string_view text) {
  bpe::split_added(
      text, counts_->specials,
      [&](std::string_view part) {
        bpe::for_each_pretoken(part, [&](std::string_view piece) { ++counts_->words[std::string(piece)]; });
      },
      [](const bpe::AddedToken&) {});
}

namespace {

struct HeapEntry {
  uint64_t count;
  uint64_t key;
  // std::priority_queue pops the largest: the highest count, then the smallest key.
  bool operator<(const HeapEntry& o) const { return count != o.count ? count < o.count : key > o.key; }
};

// Replaces each (a, b) in s, left to right, by id; false when s holds no (a, b).
bool merge_word(std::vector<uint32_t>& s, uint32_t a, uint32_t b, uint32_t id) {
  size_t out = 0;
  bool any = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
      s[out++] = id;
      ++i;
      any = true;
    } else {
      s[out++] = s[i];
    }
  }
  s.resize(out);
  return any;
}

struct TrainState {
  std::vector<std::vector<uint32_t>> syms;  // per word: its current tokens
  std::vector<uint64_t> count;              // per word: its number of occurrences
  std::unordered_map<uint64_t, uint64_t> pairs;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;  // pair -> words that held it (may be stale)
  std::priority_queue<HeapEntry> heap;
  std::vector<uint64_t> visited;            // per word: the last merge step that rewrote it
  uint64_t step = 0;
  std::vector<uint64_t> touched;            // pairs that gained a word in this merge

  void note(uint64_t k, uint32_t w) {
    auto& list = where[k];
    if (list.empty() || list.back() != w) list.push_back(w);
  }
  void index_word(uint32_t w) {
    const auto& s = syms[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      pairs[bpe::pair_key(s[i], s[i + 1])] += count[w];
      note(bpe::pair_key(s[i], s[i + 1]), w);
    }
  }
  void remove_pairs(const std::vector<uint32_t>& s, uint32_t w) {
    for (size_t i = 0; i + 1 < s.size(); ++i) pairs[bpe::pair_key(s[i], s[i + 1])] -= count[w];
  }
  // The pair with the highest count (ties: the smallest key); false when no pair is left.
  bool pop_best(uint64_t* key) {
    while (!heap.empty()) {
      const HeapEntry top = heap.top();
      heap.pop();
      const auto it = pairs.find(top.key);
      const uint64_t cur = it == pairs.end() ? 0 : it->second;
      if (cur == top.count && cur > 0) {
        *key = top.key;
        return true;
      }
      if (cur > 0) heap.push(HeapEntry{cur, top.key});  // stale: back in at the true count
    }
    return false;
  }

  // Replaces pair `key` by token `id` in every word that holds it, updating the counts, and
  // pushes the pairs that now hold `id`.
  void apply_merge(uint64_t key, uint32_t id) {
    ++step;
    const uint32_t a = static_cast<uint32_t>(key >> 32), b = static_cast<uint32_t>(key);
    const std::vector<uint32_t> words = std::move(where[key]);
    where.erase(key);
    touched.clear();
    for (uint32_t w : words) {
      if (visited[w] == step) continue;
      visited[w] = step;
      const std::vector<uint32_t> before = syms[w];
      if (!merge_word(syms[w], a, b, id)) continue;
      remove_pairs(before, w);
      add_pairs(w, id, &touched);
    }
    pairs.erase(key);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t k : touched)
      if (pairs[k] > 0) heap.push(HeapEntry{pairs[k], k});
  }

  // Adds word w's pairs; those holding token `fresh` are indexed and recorded in *touched.
  void add_pairs(uint32_t w, uint32_t fresh, std::vector<uint64_t>* touched) {
    const auto& s = syms[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = bpe::pair_key(s[i], s[i + 1]);
      pairs[k] += count[w];
      if (s[i] == fresh || s[i + 1] == fresh) {
        note(k, w);
        touched->push_back(k);
      }
    }
  }
};

}  // namespace

Tokenizer BpeTrainer::train() {
  auto m = std::make_shared<bpe::Model>();
  // Ids 0..255: the bytes ordered by the code point of their printable stand-in (GPT-2's order).
  std::vector<int> order(256);
  for (int b = 0; b < 256; ++b) order[b] = b;
  std::sort(order.begin(), order.end(), [](int x, int y) { return bpe::byte_char(x) < bpe::byte_char(y); });
  for (int i = 0; i < 256; ++i) {
    m->tokens.push_back(std::string(1, static_cast<char>(order[i])));
    m->byte_id[order[i]] = static_cast<uint32_t>(i);
    m->ids.emplace(m->tokens.back(), i);
  }
  TrainState st;
  for (auto& [word, c] : counts_->words) {
    std::vector<uint32_t> syms;
    for (char ch : word) syms.push_back(m->byte_id[static_cast<uint8_t>(ch)]);
    st.syms.push_back(std::move(syms));
    st.count.push_back(c);
  }
  counts_->words.clear();
  st.visited.assign(st.syms.size(), 0);
  for (uint32_t w = 0; w < st.syms.size(); ++w) st.index_word(w);
  for (auto& [k, c] : st.pairs) st.heap.push(HeapEntry{c, k});
  const size_t target = vocab_size_ - specials_.size();
  uint64_t key = 0;
  while (m->tokens.size() < target && st.pop_best(&key)) {
    const uint32_t a = static_cast<uint32_t>(key >> 32), b = static_cast<uint32_t>(key);
    const std::string joined = m->tokens[a] + m->tokens[b];
    auto [it, fresh] = m->ids.emplace(joined, static_cast<uint32_t>(m->tokens.size()));
    if (fresh) m->tokens.push_back(joined);
    m->merges.emplace_back(a, b);
    st.apply_merge(key, it->second);
  }
  m->present.assign(m->tokens.size(), true);
  for (const std::string& s : specials_) {
    m->added.push_back(bpe::AddedToken{s, static_cast<uint32_t>(m->tokens.size()), true});
    m->tokens.push_back(s);
    m->present.push_back(true);
  }
  m->index_merges("BPE training");
  m->assign_serial();
  return Tokenizer(std::move(m));
}

}  // namespace zt
