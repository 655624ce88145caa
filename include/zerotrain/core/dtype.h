// dtype.h — fp32 / bf16 / fp16 storage types and round-to-nearest-even conversions.
// Every function here is usable from host and device code (ZT_HD), so the CPU tests
// check exactly the arithmetic the CUDA kernels run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZT_HD __host__ __device__ __forceinline__
#else
#define ZT_HD inline
#endif

namespace zt {

enum class DType : uint8_t { F32 = 0, BF16 = 1, F16 = 2 };

constexpr size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
const char* dtype_name(DType t);                  // "fp32", "bf16", "fp16"
bool parse_dtype(const char* s, DType* out);      // accepts fp32/float32/float, bf16/bfloat16, fp16/float16/half

ZT_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u; std::memcpy(&u, &f, 4); return u;
#endif
}
ZT_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f; std::memcpy(&f, &u, 4); return f;
#endif
}

// ---- bf16: top 16 bits of an fp32 ------------------------------------------------------
// Branch-free (a select, not a branch), so loops over it vectorise.
ZT_HD uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // nearest, ties to even; overflow → inf
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;                  // NaN stays NaN (quiet), sign kept
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
ZT_HD float bf16_bits_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// ---- fp16: IEEE binary16, 5 exponent bits, 10 mantissa bits, subnormals kept -----------
ZT_HD uint16_t f32_to_f16_bits(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {                                // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x0200u | ((a >> 13) & 0x3ffu) : 0u));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                // normal fp16 range (>= 2^-14)
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xc8000fffu + mant_odd;                         // rebias exponent (-112 << 23) and round
    return static_cast<uint16_t>(sign | (a >> 13));
  }
  if (a < 0x33000000u) return sign;                      // < 2^-25 (half the smallest subnormal): 0
  // subnormal: shift the 24-bit significand right and round to nearest even
  uint32_t exp = a >> 23;                                // 102..112
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - exp;                           // 14..24
  uint32_t half = 1u << (shift - 1);
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t q = mant >> shift;
  if (rem > half || (rem == half && (q & 1u))) q += 1u;
  return static_cast<uint16_t>(sign | q);
}
ZT_HD float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (mant << 13));   // inf / NaN
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // subnormal: value = mant * 2^-24, exact in fp32
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Storage types. Plain 16-bit payloads: trivially copyable, no implicit arithmetic.
struct bf16 {
  uint16_t bits;
  bf16() = default;
  ZT_HD explicit bf16(float f) : bits(f32_to_bf16_bits(f)) {}
  ZT_HD explicit operator float() const { return bf16_bits_to_f32(bits); }
  ZT_HD static bf16 from_bits(uint16_t b) { bf16 r; r.bits = b; return r; }
};
struct fp16 {
  uint16_t bits;
  fp16() = default;
  ZT_HD explicit fp16(float f) : bits(f32_to_f16_bits(f)) {}
  ZT_HD explicit operator float() const { return f16_bits_to_f32(bits); }
  ZT_HD static fp16 from_bits(uint16_t b) { fp16 r; r.bits = b; return r; }
};
static_assert(sizeof(bf16) == 2 && sizeof(fp16) == 2, "16-bit storage types");

// Generic load/store used by kernels templated on the storage type.
ZT_HD float to_f32(float v) { return v; }
ZT_HD float to_f32(bf16 v) { return bf16_bits_to_f32(v.bits); }
ZT_HD float to_f32(fp16 v) { return f16_bits_to_f32(v.bits); }
template <typename T> ZT_HD T from_f32(float v);
template <> ZT_HD float from_f32<float>(float v) { return v; }
template <> ZT_HD bf16 from_f32<bf16>(float v) { return bf16::from_bits(f32_to_bf16_bits(v)); }
template <> ZT_HD fp16 from_f32<fp16>(float v) { return fp16::from_bits(f32_to_f16_bits(v)); }

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<fp16> { static constexpr DType value = DType::F16; };

// Host-side bulk conversions (n elements; src and dst may not overlap).
void convert(const void* src, DType src_t, void* dst, DType dst_t, size_t n);

}  // namespace zt
