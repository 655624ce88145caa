#include "zerotrain/core/dtype.h"

#include <strings.h>

namespace zt {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
  }
  return "?";
}

bool parse_dtype(const char* s, DType* out) {
  static const struct { const char* name; DType t; } kNames[] = {
      {"fp32", DType::F32}, {"float32", DType::F32}, {"float", DType::F32}, {"torch.float32", DType::F32},
      {"bf16", DType::BF16}, {"bfloat16", DType::BF16}, {"torch.bfloat16", DType::BF16},
      {"fp16", DType::F16}, {"float16", DType::F16}, {"half", DType::F16}, {"torch.float16", DType::F16},
  };
  for (const auto& n : kNames) {
    if (strcasecmp(s, n.name) == 0) { *out = n.t; return true; }
  }
  return false;
}

namespace {
template <typename S, typename D>
void convert_typed(const S* src, D* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
}
template <typename S>
void convert_from(const S* src, void* dst, DType dst_t, size_t n) {
  switch (dst_t) {
    case DType::F32: convert_typed(src, static_cast<float*>(dst), n); break;
    case DType::BF16: convert_typed(src, static_cast<bf16*>(dst), n); break;
    case DType::F16: convert_typed(src, static_cast<fp16*>(dst), n); break;
  }
}
}  // namespace

void convert(const void* src, DType src_t, void* dst, DType dst_t, size_t n) {
  switch (src_t) {
    case DType::F32: convert_from(static_cast<const float*>(src), dst, dst_t, n); break;
    case DType::BF16: convert_from(static_cast<const bf16*>(src), dst, dst_t, n); break;
    case DType::F16: convert_from(static_cast<const fp16*>(src), dst, dst_t, n); break;
  }
}

}  // namespace zt
