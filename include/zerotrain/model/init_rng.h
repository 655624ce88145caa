// init_rng.h — counter-based parameter initialisation (docs/design.md, "shard-local initialisation").
//
// Element i of a parameter named `name` under `seed` is a pure function of (seed, name, i):
//   key   = splitmix64(seed ^ splitmix64(fnv1a64(name)))
//   pair  = i / 2;  (u1, u2) = two 53-bit uniforms from splitmix64(key + 2·pair), (+1)
//   z     = Box-Muller(u1, u2): cos branch for even i, sin branch for odd i
// so any slice of any tensor initialises on its own and equals that slice of a full init, at
// any world size. The stream is fixed by this file: changing it changes every run's weights.
#pragma once
#include <cstdint>
#include <string>

namespace zt {

uint64_t fnv1a64(const std::string& s);
uint64_t splitmix64(uint64_t x);
// Standard normal N(0,1) for element `index` of tensor `name` under `seed`.
double init_normal(uint64_t seed, const std::string& name, int64_t index);
// Fills out[0..count) with std * N(0,1) for elements [begin, begin+count) of `name`.
void init_normal_slice(uint64_t seed, const std::string& name, float std, int64_t begin, int64_t count, float* out);

}  // namespace zt
