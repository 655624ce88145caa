// token_stream.cpp — several sources as one stream of windows, the per-epoch permutation and the
// PATHS list expansion (token_stream.h).
#include "zerotrain/data/token_stream.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "counter_rng.h"
#include "zerotrain/core/check.h"

namespace zt {

namespace {

constexpr uint64_t kShuffleStream = 0x5348554646574e44ull;  // "SHUFFWND"

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> glob_files(const std::string& spec, const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty()))
    throw InputError("--data '" + spec + "': the pattern '" + pattern + "' matches no file");
  if (rc != 0) throw InputError("--data '" + spec + "': cannot expand the pattern '" + pattern + "'");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> directory_files(const std::string& spec, const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw InputError("--data '" + spec + "': cannot list the directory '" + dir + "'");
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  const std::string prefix = dir.back() == '/' ? dir : dir + "/";
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (is_regular(prefix + n)) out.push_back(prefix + n);
  if (out.empty()) throw InputError("--data '" + spec + "': the directory '" + dir + "' holds no regular file");
  return out;
}

}  // namespace

WindowPermutation::WindowPermutation(int64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
  ZT_CHECK(n > 0 && n <= (int64_t(1) << 62), "WindowPermutation: domain outside [1, 2^62]");
  int bits = 2;
  while (bits < 62 && (int64_t(1) << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  mask_ = (uint64_t(1) << half_bits_) - 1;
  for (int r = 0; r < 6; ++r) round_keys_[r] = data_rng::hash(seed, kShuffleStream, epoch, static_cast<uint64_t>(r));
}

uint64_t WindowPermutation::network(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & mask_;
  for (uint64_t key : round_keys_) {
    const uint64_t next = left ^ (data_rng::mix64(key ^ right) & mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t WindowPermutation::operator()(int64_t i) const {
  ZT_CHECK(i >= 0 && i < n_, "WindowPermutation: index outside the domain");
  // Cycle-walking: the network permutes [0, 2^bits); following i's cycle until it is back in
  // [0, n) restricts it to a permutation of [0, n).
  uint64_t x = static_cast<uint64_t>(i);
  do x = network(x);
  while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

TokenStreamDataset::TokenStreamDataset(std::string kind, std::vector<std::unique_ptr<TokenSource>> sources,
                                       int64_t vocab, int64_t n_ctx, int64_t global_batch, bool shuffle, uint64_t seed)
    : kind_(std::move(kind)), sources_(std::move(sources)), vocab_(vocab), T_(n_ctx), B_(global_batch),
      shuffle_(shuffle), seed_(seed) {
  ZT_CHECK(!sources_.empty(), "TokenStreamDataset: no source");
  first_window_.push_back(0);
  for (const auto& s : sources_) {
    windows_ += s->windows();
    first_window_.push_back(windows_);
  }
}

int64_t TokenStreamDataset::window_of(int64_t g) const {
  const int64_t epoch = g / windows_, pos = g % windows_;
  return shuffle_ ? WindowPermutation(windows_, seed_, static_cast<uint64_t>(epoch))(pos) : pos;
}

void TokenStreamDataset::sequence(int64_t g, int32_t* seq) const {
  const int64_t w = window_of(g);
  const size_t f = static_cast<size_t>(std::upper_bound(first_window_.begin(), first_window_.end(), w) -
                                       first_window_.begin() - 1);
  sources_[f]->window(w - first_window_[f], seq);
}

void TokenStreamDataset::fill(int64_t k, int64_t first_sample, int64_t count, Batch& out) const {
  ZT_CHECK(first_sample >= 0 && count >= 0 && first_sample + count <= B_, "token fill: samples outside the batch");
  fill_token_batch(count, T_, [&](int64_t i, int32_t* seq) { sequence(k * B_ + first_sample + i, seq); }, out);
}

std::string TokenStreamDataset::describe() const {
  std::ostringstream os;
  if (sources_.size() == 1) {
    os << sources_[0]->describe();
  } else {
    int64_t tokens = 0;
    for (const auto& s : sources_) tokens += s->tokens();
    os << kind_ << ": " << sources_.size() << " files in this order, '" << sources_.front()->path() << "' ... '"
       << sources_.back()->path() << "'; " << tokens << " tokens, " << windows_ << " sequences of " << T_
       << "+1 per epoch (no sequence spans two files)";
  }
  if (shuffle_) os << "; shuffled: a new order every epoch (seed " << seed_ << ")";
  return os.str();
}

std::vector<std::string> expand_data_paths(const std::string& spec, const std::string& paths) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= paths.size()) {
    size_t sep = paths.find(':', pos);
    const std::string item = paths.substr(pos, sep == std::string::npos ? std::string::npos : sep - pos);
    pos = sep == std::string::npos ? paths.size() + 1 : sep + 1;
    if (item.empty()) throw InputError("--data '" + spec + "': an empty path in the list (paths are separated by ':')");
    std::vector<std::string> files;
    if (item.find_first_of("*?[") != std::string::npos) files = glob_files(spec, item);
    else if (is_directory(item)) files = directory_files(spec, item);
    else files = {item};
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

}  // namespace zt
