// init_rng.cpp — counter-based Normal generator and init_param_slice (see init_rng.h).
#include "zerotrain/model/init_rng.h"

#include <cmath>

#include "zerotrain/core/check.h"
#include "zerotrain/model/model.h"

namespace zt {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Uniform in (0, 1]: 53 random bits, never 0 (log(0) would be -inf).
double uniform_open0(uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

uint64_t tensor_key(uint64_t seed, const std::string& name) { return splitmix64(seed ^ splitmix64(fnv1a64(name))); }

double normal_from_key(uint64_t key, int64_t index) {
  uint64_t pair = static_cast<uint64_t>(index) >> 1;
  double u1 = uniform_open0(splitmix64(key + 2 * pair));
  double u2 = uniform_open0(splitmix64(key + 2 * pair + 1));
  double r = std::sqrt(-2.0 * std::log(u1));
  double theta = kTwoPi * u2;
  return (index & 1) ? r * std::sin(theta) : r * std::cos(theta);
}

}  // namespace

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double init_normal(uint64_t seed, const std::string& name, int64_t index) {
  return normal_from_key(tensor_key(seed, name), index);
}

void init_normal_slice(uint64_t seed, const std::string& name, float std, int64_t begin, int64_t count, float* out) {
  uint64_t key = tensor_key(seed, name);
  for (int64_t j = 0; j < count; ++j) out[j] = static_cast<float>(std * normal_from_key(key, begin + j));
}

void init_param_slice(uint64_t seed, const ParamSpec& spec, int64_t begin, int64_t count, float* out) {
  ZT_CHECK(begin >= 0 && count >= 0 && begin + count <= spec.numel,
           "init slice [" + std::to_string(begin) + ", +" + std::to_string(count) + ") outside " + spec.name +
               " (numel " + std::to_string(spec.numel) + ")");
  switch (spec.init) {
    case InitKind::Zeros:
      for (int64_t j = 0; j < count; ++j) out[j] = 0.0f;
      break;
    case InitKind::Ones:
      for (int64_t j = 0; j < count; ++j) out[j] = 1.0f;
      break;
    case InitKind::Normal:
      init_normal_slice(seed, spec.name, spec.init_std, begin, count, out);
      break;
  }
}

}  // namespace zt
