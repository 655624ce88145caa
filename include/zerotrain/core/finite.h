// finite.h — the finiteness check every loader applies to weights and optimizer states.
#pragma once
#include <cstdint>
#include <string>

namespace zt {

// "" when v[0..n) are all finite; else "<what> element <first_index + i> is NaN" (or
// "infinite") for the first non-finite element i.
std::string non_finite_problem(const std::string& what, const float* v, int64_t n, int64_t first_index);

// The advice every refusal ends with (the flag that loads non-finite values for forensics).
inline const char* kAllowNonFiniteHint = "(--allow-non-finite loads it anyway, for forensics)";

}  // namespace zt
