// counter_rng.h — counter-based random numbers for data generation: every value is a pure
// function of (seed, stream, a, b), so any sample can be generated alone, on any rank, in any
// order, with the same result. Streams separate independent uses (tables, tokens, noise, …).
#pragma once
#include <cmath>
#include <cstdint>

namespace zt::data_rng {

// splitmix64 finaliser: a bijection on 64 bits with full avalanche.
inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t hash(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
  return mix64(mix64(mix64(mix64(seed) ^ stream) ^ a) ^ b);
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
  return static_cast<double>(hash(seed, stream, a, b) >> 11) * 0x1.0p-53;
}

// Standard normal (Box–Muller on two independent uniforms keyed (a, 2b) and (a, 2b+1)).
inline double normal(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
  double u1 = 1.0 - uniform(seed, stream, a, 2 * b);  // (0, 1]: log is finite
  double u2 = uniform(seed, stream, a, 2 * b + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

// Stream ids (arbitrary distinct constants).
constexpr uint64_t kMarkovTable = 0x4d41524b5441424cull;   // "MARKTABL"
constexpr uint64_t kMarkovTokens = 0x4d41524b544f4b53ull;  // "MARKTOKS"
constexpr uint64_t kTeacherWeights = 0x5445414357474854ull;
constexpr uint64_t kTeacherInputs = 0x54454143494e5054ull;
constexpr uint64_t kTeacherNoise = 0x544541434e4f4953ull;

}  // namespace zt::data_rng
