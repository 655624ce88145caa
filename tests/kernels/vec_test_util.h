// vec_test_util.h — helpers of the tests of the CPU SIMD tables (cpu_vec_kernels.h): the tables
// this CPU can run, bitwise comparison, random floats, and restoring ZT_CPU_ISA after a test.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../csrc/kernels/cpu/cpu_vec_kernels.h"
#include "kernel_test_util.h"
#include "zerotrain/core/cpu_isa.h"

namespace zt::test {

// Every table this CPU can run, the scalar one first.
inline std::vector<const cpu_ops::vec::Kernels*> vec_tables() {
  std::vector<const cpu_ops::vec::Kernels*> t{&cpu_ops::vec::kScalar};
  if (cpu::isa_supported(cpu::Isa::Avx2)) t.push_back(&cpu_ops::vec::kAvx2);
  if (cpu::isa_supported(cpu::Isa::Avx512)) t.push_back(&cpu_ops::vec::kAvx512);
  return t;
}

// Bitwise equal, or both NaN.
inline void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::memcmp(&got[i], &want[i], 4) == 0 || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same && ++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs scalar " << want[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

inline std::vector<float> random_floats(std::mt19937_64& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// ZT_CPU_ISA as it was before the test, put back when the test ends.
struct RestoreIsaEnv : RestoreEnv {
  RestoreIsaEnv() : RestoreEnv("ZT_CPU_ISA") {}
};

}  // namespace zt::test
