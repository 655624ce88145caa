// outside_memory.cpp — the per-GPU sums behind outside_memory.h (plain atomics, no CUDA calls).
#include "zerotrain/core/outside_memory.h"

#include <array>
#include <atomic>

namespace zt {

namespace {
struct Registry {
  std::array<std::array<std::atomic<int64_t>, kNumOutsideCategories>, kMaxOutsideOrdinals> bytes{};
  std::array<std::atomic<bool>, kMaxOutsideOrdinals> context_claimed{};
};
Registry& registry() {
  static Registry r;  // zero-initialised atomics; trivially destructible contents
  return r;
}
bool valid(int ordinal) { return ordinal >= 0 && ordinal < kMaxOutsideOrdinals; }
}  // namespace

const char* outside_category_name(OutsideCategory c) {
  static const char* kNames[kNumOutsideCategories] = {"cuda_context", "cublas_workspace", "stream_scratch",
                                                      "nccl_internal"};
  const int i = static_cast<int>(c);
  return i >= 0 && i < kNumOutsideCategories ? kNames[i] : "?";
}

void add_outside_bytes(int ordinal, OutsideCategory c, int64_t delta) {
  if (valid(ordinal)) registry().bytes[ordinal][static_cast<int>(c)].fetch_add(delta);
}

int64_t outside_bytes(int ordinal, OutsideCategory c) {
  return valid(ordinal) ? registry().bytes[ordinal][static_cast<int>(c)].load() : 0;
}

bool claim_context_measurement(int ordinal) {
  return valid(ordinal) && !registry().context_claimed[ordinal].exchange(true);
}

}  // namespace zt
