// xxhash64.h — XXH64 (Yann Collet's xxHash, 64-bit, seed 0 by default), streaming. The checksum
// every checkpoint shard carries in meta.json ("xxh64", 16 hex digits). ~10 GB/s per core, so a
// save or a resume spends far less time hashing than writing or reading.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace zt {

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t bytes);
  uint64_t digest() const;  // of everything updated so far; the state stays usable

 private:
  uint64_t v_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  unsigned char buf_[32];
  size_t buffered_ = 0;
};

uint64_t xxh64(const void* data, size_t bytes, uint64_t seed = 0);
std::string hex64(uint64_t v);  // 16 lower-case hex digits

}  // namespace zt
