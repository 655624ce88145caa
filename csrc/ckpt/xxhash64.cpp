// xxhash64.cpp — XXH64 as specified in xxHash's doc/xxhash_spec.md (little-endian reads).
#include "zerotrain/ckpt/xxhash64.h"

#include <cstdio>
#include <cstring>

namespace zt {
namespace {

constexpr uint64_t P1 = 11400714785074694791ull;
constexpr uint64_t P2 = 14029467366897019727ull;
constexpr uint64_t P3 = 1609587929392839161ull;
constexpr uint64_t P4 = 9650029242287828579ull;
constexpr uint64_t P5 = 2870177450012600261ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // x86 / ARM little-endian, as the format is defined
  return v;
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t lane) {
  acc += lane * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}
inline uint64_t merge(uint64_t acc, uint64_t v) {
  acc ^= round(0, v);
  return acc * P1 + P4;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : seed_(seed) {
  v_[0] = seed + P1 + P2;
  v_[1] = seed + P2;
  v_[2] = seed;
  v_[3] = seed - P1;
}

void Xxh64::update(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  if (buffered_ + bytes < 32) {
    if (bytes) std::memcpy(buf_ + buffered_, p, bytes);
    buffered_ += bytes;
    return;
  }
  if (buffered_) {
    const size_t fill = 32 - buffered_;
    std::memcpy(buf_ + buffered_, p, fill);
    for (int i = 0; i < 4; ++i) v_[i] = round(v_[i], read64(buf_ + 8 * i));
    p += fill;
    bytes -= fill;
    buffered_ = 0;
  }
  uint64_t a = v_[0], b = v_[1], c = v_[2], d = v_[3];
  while (bytes >= 32) {
    a = round(a, read64(p));
    b = round(b, read64(p + 8));
    c = round(c, read64(p + 16));
    d = round(d, read64(p + 24));
    p += 32;
    bytes -= 32;
  }
  v_[0] = a, v_[1] = b, v_[2] = c, v_[3] = d;
  if (bytes) std::memcpy(buf_, p, bytes);
  buffered_ = bytes;
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
    for (int i = 0; i < 4; ++i) h = merge(h, v_[i]);
  } else {
    h = seed_ + P5;
  }
  h += total_;
  const unsigned char* p = buf_;
  size_t n = buffered_;
  while (n >= 8) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    h ^= static_cast<uint64_t>(read32(p)) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
    n -= 4;
  }
  while (n > 0) {
    h ^= static_cast<uint64_t>(*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
    --n;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed) {
  Xxh64 h(seed);
  h.update(data, bytes);
  return h.digest();
}

std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof(s), "%016llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace zt
