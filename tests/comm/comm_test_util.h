// comm_test_util.h — shared helpers for the comm tests: deterministic per-rank inputs exactly
// representable in each dtype, the rank-order reference reduction, and bitwise comparison.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/dtype.h"

namespace zt::testing_comm {

inline uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Input element i of rank `rank` for test case `salt`, already rounded to the dtype. Fractional
// values of different magnitudes, so sums need rounding and the order of rounding matters.
inline float input_value(size_t i, DType dt, int rank, uint64_t salt) {
  uint32_t h = mix((salt << 40) ^ (uint64_t(rank) << 32) ^ i);
  float v = (static_cast<float>(h % 20001) - 10000.0f) / 256.0f * (1.0f + 0.37f * static_cast<float>(rank));
  if (h & 0x80000000u) v *= 1.0f / 1024.0f;
  if (dt == DType::BF16) return bf16_bits_to_f32(f32_to_bf16_bits(v));
  if (dt == DType::F16) return f16_bits_to_f32(f32_to_f16_bits(v));
  return v;
}

inline void store(uint8_t* p, size_t i, DType dt, float v);

// Rank `rank`'s whole input buffer of `count` elements, as raw dtype storage.
inline void fill_input(std::vector<uint8_t>& buf, size_t count, DType dt, int rank, uint64_t salt) {
  buf.resize(count * dtype_size(dt));
  for (size_t i = 0; i < count; ++i) store(buf.data(), i, dt, input_value(i, dt, rank, salt));
}

inline float load(const uint8_t* p, size_t i, DType dt) {
  if (dt == DType::F32) { float f; std::memcpy(&f, p + i * 4, 4); return f; }
  uint16_t b;
  std::memcpy(&b, p + i * 2, 2);
  return dt == DType::BF16 ? bf16_bits_to_f32(b) : f16_bits_to_f32(b);
}

inline void store(uint8_t* p, size_t i, DType dt, float v) {
  if (dt == DType::F32) { std::memcpy(p + i * 4, &v, 4); return; }
  uint16_t b = dt == DType::BF16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
  std::memcpy(p + i * 2, &b, 2);
}

// Reference: elements [first, first+count) of the reduction over ranks 0..n-1 (in that order, in
// fp32, rounded once), where rank k's input element i is input_value(i, dt, k, salt).
inline std::vector<uint8_t> reference(size_t first, size_t count, DType dt, ReduceOp op, int n, uint64_t salt) {
  std::vector<uint8_t> out(count * dtype_size(dt));
  for (size_t j = 0; j < count; ++j) {
    float acc = input_value(first + j, dt, 0, salt);
    for (int k = 1; k < n; ++k) {
      float x = input_value(first + j, dt, k, salt);
      acc = op == ReduceOp::Max ? (x > acc ? x : acc) : acc + x;
    }
    if (op == ReduceOp::Avg) acc /= static_cast<float>(n);
    store(out.data(), j, dt, acc);
  }
  return out;
}

// Bitwise equality; on failure names the first differing element.
inline ::testing::AssertionResult same_bits(const uint8_t* got, const uint8_t* want, size_t count, DType dt) {
  const size_t elt = dtype_size(dt);
  if (count == 0 || std::memcmp(got, want, count * elt) == 0) return ::testing::AssertionSuccess();
  size_t bad = 0, first = count;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(got + i * elt, want + i * elt, elt) != 0) {
      if (first == count) first = i;
      ++bad;
    }
  }
  return ::testing::AssertionFailure() << bad << " of " << count << " " << dtype_name(dt)
                                       << " elements differ; first at " << first << ": got "
                                       << load(got, first, dt) << ", want " << load(want, first, dt);
}

}  // namespace zt::testing_comm
