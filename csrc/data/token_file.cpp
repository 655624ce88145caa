// token_file.cpp — text/token files read in order with pread (see token_file.h).
#include "zerotrain/data/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "zerotrain/core/check.h"

namespace zt {

namespace {

// Reads exactly `n` bytes at `offset`; false on a short read or an error (errno kept).
bool pread_all(int fd, void* buf, size_t n, int64_t offset) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return true;
}

const char* format_name(TokenFileDataset::Format f) {
  switch (f) {
    case TokenFileDataset::Format::Bytes: return "bytes";
    case TokenFileDataset::Format::Llmc: return "llm.c";
    case TokenFileDataset::Format::Raw: return "raw uint16";
    default: return "auto";
  }
}

}  // namespace

TokenFileDataset::TokenFileDataset(const std::string& path, Format format, int64_t model_vocab, int64_t n_ctx,
                                   int64_t global_batch, int validate_shard, int validate_shards, Part part)
    : path_(path), format_(format), vocab_(model_vocab), T_(n_ctx), B_(global_batch) {
  const std::string what = "data file '" + path_ + "'";
  if (T_ < 1 || vocab_ < 1) throw InputError(what + ": text/tokens data needs a token model (GPT or Llama) with n_ctx and vocab_size");
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd_ < 0) throw InputError(what + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw InputError(what + ": not a regular file");
  }
  const int64_t size = static_cast<int64_t>(st.st_size);
  // From here on the destructor does not run on a throw: close the fd ourselves.
  try {
    if (size == 0) throw InputError(what + ": the file is empty");
    if (format_ == Format::Auto) {
      int32_t magic = 0;
      bool has_magic = size >= kLlmcHeaderBytes && pread_all(fd_, &magic, 4, 0) && magic == kLlmcMagic;
      format_ = has_magic ? Format::Llmc : Format::Raw;
    }
    if (format_ == Format::Bytes) {
      token_bytes_ = 1;
      data_offset_ = 0;
      ntok_ = size;
      vocab_ = std::min<int64_t>(vocab_, 256);
    } else if (format_ == Format::Raw) {
      token_bytes_ = 2;
      data_offset_ = 0;
      if (size % 2 != 0)
        throw InputError(what + ": raw uint16 token file has an odd size (" + std::to_string(size) + " bytes)");
      ntok_ = size / 2;
    } else {
      data_offset_ = kLlmcHeaderBytes;
      int32_t header[256];
      if (size < kLlmcHeaderBytes || !pread_all(fd_, header, sizeof(header), 0))
        throw InputError(what + ": too short for an llm.c header (" + std::to_string(size) + " bytes, need 1024)");
      if (header[0] != kLlmcMagic)
        throw InputError(what + ": bad magic " + std::to_string(header[0]) + " in the llm.c header (expected " +
                         std::to_string(kLlmcMagic) + ")");
      if (header[1] != 1 && header[1] != 2)
        throw InputError(what + ": unsupported llm.c version " + std::to_string(header[1]) +
                         " (expected 1: uint16 tokens, or 2: uint32 tokens)");
      token_bytes_ = header[1] == 2 ? 4 : 2;
      ntok_ = header[2];
      const int64_t expected = kLlmcHeaderBytes + token_bytes_ * ntok_;
      if (ntok_ < 0 || expected != size)
        throw InputError(what + ": the llm.c header says " + std::to_string(header[2]) + " tokens (" +
                         std::to_string(expected) + " bytes) but the file has " + std::to_string(size) + " bytes");
    }
    if (part.split < 1) select_part(part);
    if (ntok_ < T_ + 1)
      throw InputError(what + ": holds " + std::to_string(ntok_) + " tokens" + part_ + ", fewer than n_ctx + 1 = " +
                       std::to_string(T_ + 1));
    seq_per_pass_ = (ntok_ - 1) / T_;
    validate_tokens(validate_shard, validate_shards);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

// The part's tokens become the stream: token 0 is the part's first, ntok_ its count.
void TokenFileDataset::select_part(const Part& part) {
  const int64_t cut = static_cast<int64_t>(std::floor(part.split * static_cast<double>(ntok_)));
  data_offset_ += (part.holdout ? cut : 0) * token_bytes_;
  ntok_ = part.holdout ? ntok_ - cut : cut;
  char text[96];
  std::snprintf(text, sizeof(text), " in its %s %g%% (split=%g)", part.holdout ? "last" : "first",
                100.0 * (part.holdout ? 1 - part.split : part.split), part.split);
  part_ = text;
}

TokenFileDataset::~TokenFileDataset() {
  if (fd_ >= 0) ::close(fd_);
}

// One sequential pass over this shard at open: a bad id is reported with the file and its
// position, before any training step. Shards partition [0, ntok_): shard s checks
// [s·ntok/shards, (s+1)·ntok/shards), so all shards together check every token exactly once.
void TokenFileDataset::validate_tokens(int shard, int shards) {
  const int64_t chunk = int64_t(1) << 20;
  shards = std::max(shards, 1);
  shard = std::min(std::max(shard, 0), shards - 1);
  const int64_t lo = ntok_ / shards * shard + std::min<int64_t>(shard, ntok_ % shards);
  const int64_t hi = lo + ntok_ / shards + (shard < ntok_ % shards ? 1 : 0);
  std::vector<int32_t> buf;
  for (int64_t first = lo; first < hi; first += chunk) {
    int64_t n = std::min(chunk, hi - first);
    buf.resize(static_cast<size_t>(n));
    read_tokens(first, n, buf.data());
    for (int64_t i = 0; i < n; ++i) {
      if (buf[i] >= vocab_)
        throw InputError("data file '" + path_ + "': token " + std::to_string(buf[i]) + " at position " +
                         std::to_string(first + i) + " is >= the model's vocab_size " + std::to_string(vocab_));
    }
  }
}

void TokenFileDataset::read_tokens(int64_t first, int64_t count, int32_t* out) const {
  const size_t nbytes = static_cast<size_t>(count * token_bytes_);
  const int64_t offset = data_offset_ + first * token_bytes_;
  if (token_bytes_ == 1) {
    std::vector<uint8_t> raw(nbytes);
    if (!pread_all(fd_, raw.data(), nbytes, offset))
      throw InputError("data file '" + path_ + "': read failed at byte " + std::to_string(offset) +
                       " (was the file truncated while training?)");
    for (int64_t i = 0; i < count; ++i) out[i] = raw[i];
  } else if (token_bytes_ == 4) {  // llm.c version 2; ids >= 2^31 fail validation (>= vocab)
    std::vector<uint32_t> raw(static_cast<size_t>(count));
    if (!pread_all(fd_, raw.data(), nbytes, offset))
      throw InputError("data file '" + path_ + "': read failed at byte " + std::to_string(offset) +
                       " (was the file truncated while training?)");
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(std::min<uint32_t>(raw[i], INT32_MAX));
  } else {
    std::vector<uint16_t> raw(static_cast<size_t>(count));
    if (!pread_all(fd_, raw.data(), nbytes, offset))
      throw InputError("data file '" + path_ + "': read failed at byte " + std::to_string(offset) +
                       " (was the file truncated while training?)");
    for (int64_t i = 0; i < count; ++i) out[i] = raw[i];  // little-endian host (x86-64, aarch64)
  }
}

void TokenFileDataset::fill(int64_t k, int64_t first_sample, int64_t count, Batch& out) const {
  ZT_CHECK(first_sample >= 0 && count >= 0 && first_sample + count <= B_, "token fill: samples outside the batch");
  fill_token_batch(
      count, T_,
      [&](int64_t i, int32_t* seq) { read_tokens(sequence_offset(k * B_ + first_sample + i), T_ + 1, seq); }, out);
}

std::string TokenFileDataset::describe() const {
  std::ostringstream os;
  os << (format_ == Format::Bytes ? "text" : "tokens") << ": '" << path_ << "' (" << format_name(format_)
     << (format_ == Format::Llmc ? (token_bytes_ == 4 ? " uint32" : " uint16") : "") << "), "
     << ntok_ << " tokens" << part_ << ", " << seq_per_pass_ << " sequences of " << T_ << "+1 per pass";
  return os.str();
}

}  // namespace zt
