// tokenizer_files.cpp — text files read in chunks cut at safe pre-token boundaries, and
// `zerotrain tokenize encode`'s llm.c token file writer: chunks encoded in parallel, written
// in order (see tokenizer.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "zerotrain/core/check.h"
#include "zerotrain/core/file_io.h"
#include "zerotrain/core/host_thread_pool.h"
#include "zerotrain/data/token_file.h"
#include "zerotrain/data/tokenizer.h"

namespace zt {

void read_text_chunks(const std::string& path, size_t chunk_bytes, const std::function<void(std::string_view)>& chunk,
                      const std::vector<std::string>& keep_whole) {
  ZT_CHECK(chunk_bytes > 0, "read_text_chunks: chunk_bytes must be positive");
  UniqueFd fd = open_regular_file(path, "text file");
  size_t reach = 0;  // points this close to the end are tried again once more text is read
  for (const std::string& t : keep_whole) reach = std::max(reach, t.size());
  std::string buf;
  std::vector<char> block(chunk_bytes);
  for (;;) {
    ssize_t got = ::read(fd.get(), block.data(), block.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError("text file: read error on " + path + " (" + std::strerror(errno) + ")");
    if (got == 0) break;
    buf.append(block.data(), static_cast<size_t>(got));
    if (buf.size() < chunk_bytes) continue;
    // Only the newly read bytes (and the reach + 2 before them) can hold a split point not yet tried.
    const size_t p = safe_split_point(buf, static_cast<size_t>(got) + reach + 2, keep_whole);
    if (p == 0) continue;  // none yet: the chunk grows until one turns up or the file ends
    chunk(std::string_view(buf).substr(0, p));
    buf.erase(0, p);
  }
  if (!buf.empty()) chunk(buf);
}

namespace {

// Texts encoded together: `threads` tasks of about chunk_bytes each, then written in order.
class ChunkEncoder {
 public:
  ChunkEncoder(const Tokenizer& tok, const EncodeFilesOptions& o, AtomicFile& out, bool wide)
      : tok_(tok), pool_(o.threads), out_(out), wide_(wide), capacity_(static_cast<size_t>(2 * o.threads)) {}

  void add_text(std::string_view text, bool file_start) {
    texts_.emplace_back(text);
    eot_.push_back(false);
    start_.push_back(file_start);
    if (texts_.size() >= capacity_) flush();
  }
  void add_eot() {
    texts_.emplace_back();
    eot_.push_back(true);
    start_.push_back(true);
  }
  void flush() {
    ids_.resize(texts_.size());
    pool_.parallel_for(static_cast<int64_t>(texts_.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        ids_[i].clear();
        if (!eot_[i]) tok_.encode_into(texts_[i], ids_[i], start_[i]);
      }
    });
    for (size_t i = 0; i < texts_.size(); ++i) {
      if (eot_[i]) ids_[i].assign(1, eot_id_);
      write(ids_[i]);
    }
    texts_.clear();
    eot_.clear();
    start_.clear();
  }
  void set_eot_id(uint32_t id) { eot_id_ = id; }
  int64_t tokens() const { return tokens_; }

 private:
  void write(const std::vector<uint32_t>& ids) {
    tokens_ += static_cast<int64_t>(ids.size());
    if (tokens_ > std::numeric_limits<int32_t>::max())
      throw InputError("--out: more than 2^31 - 1 tokens, the most an llm.c header can count; split the input");
    if (wide_) {
      out_.write(ids.data(), ids.size() * sizeof(uint32_t));
      return;
    }
    narrow_.assign(ids.begin(), ids.end());
    out_.write(narrow_.data(), narrow_.size() * sizeof(uint16_t));
  }

  const Tokenizer& tok_;
  cpu::HostThreadPool pool_;
  AtomicFile& out_;
  bool wide_;
  size_t capacity_;
  uint32_t eot_id_ = 0;
  int64_t tokens_ = 0;
  std::vector<std::string> texts_;
  std::vector<bool> eot_;    // per text: the EOT token instead
  std::vector<bool> start_;  // per text: the first chunk of a file
  std::vector<std::vector<uint32_t>> ids_;
  std::vector<uint16_t> narrow_;
};

}  // namespace

EncodeFilesResult encode_files(const Tokenizer& tok, const std::vector<std::string>& inputs, const std::string& out_path,
                               const EncodeFilesOptions& o) {
  if (o.threads < 1) throw InputError("--threads " + std::to_string(o.threads) + ": expected at least 1");
  int64_t eot = -1;
  if (o.eot) {
    eot = tok.added_token_id("<|endoftext|>");
    if (eot < 0) throw InputError("--eot: the tokenizer has no <|endoftext|> token");
  }
  EncodeFilesResult r;
  for (const std::string& path : inputs) {  // every input readable before anything is written
    int64_t size = 0;
    open_regular_file(path, "text file", &size);
    r.bytes_in += size;
  }
  r.version = tok.vocab_size() > 65536 ? 2 : 1;
  AtomicFile out(out_path, "--out");
  int32_t header[256] = {};
  out.write(header, sizeof(header));
  ChunkEncoder enc(tok, o, out, r.version == 2);
  const std::vector<std::string> added = tok.added_tokens();
  if (eot >= 0) enc.set_eot_id(static_cast<uint32_t>(eot));
  for (const std::string& path : inputs) {
    if (eot >= 0) enc.add_eot();
    bool first = true;
    read_text_chunks(
        path, o.chunk_bytes,
        [&](std::string_view text) {
          enc.add_text(text, first);
          first = false;
        },
        added);
  }
  enc.flush();
  r.tokens = enc.tokens();
  header[0] = TokenFileDataset::kLlmcMagic;
  header[1] = r.version;
  header[2] = static_cast<int32_t>(r.tokens);
  out.write_at(0, header, sizeof(header));
  out.commit();
  return r;
}

}  // namespace zt
