// ops_decode.cpp — validated entry points of zt::ops for incremental decoding with a key/value
// cache (kv_cache_write, attention_decode and their grouped-query forms kv_cache_write_gqa,
// attention_decode_gqa; contracts in op_list.h). See ops.cpp for the checking and dispatch
// conventions.
#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

namespace {
// Both caches [Hkv, Tmax, hs] (Ckv = Hkv·hs channels per position) in src's dtype and on the
// stream's device; returns Tmax.
int64_t check_cache(const Stream& s, const char* op, const TensorView& k_cache, const TensorView& v_cache,
                    const TensorView& src, const char* src_name, int64_t Ckv) {
  check_tensor(s, src, op, src_name);
  check_tensor(s, k_cache, op, "k_cache");
  check_same(k_cache, src, op, "k_cache");
  ZT_CHECK(k_cache.numel() % Ckv == 0 && k_cache.numel() > 0,
           where(op, "k_cache") + " has " + std::to_string(k_cache.numel()) + " elements, not a positive multiple of " +
               std::to_string(Ckv) + " (heads x head size)");
  check_like(s, v_cache, k_cache.numel(), src, op, "v_cache");
  return k_cache.numel() / Ckv;
}
void check_rows_fit(const char* op, int64_t N, int64_t pos, int64_t Tmax) {
  ZT_CHECK(N >= 0 && pos >= 0 && pos + N <= Tmax, std::string("ops::") + op + ": rows [" + std::to_string(pos) + ", " +
                                                      std::to_string(pos + N) + ") outside the cache's " +
                                                      std::to_string(Tmax) + " positions");
}
void check_position(const char* op, int64_t pos, int64_t Tmax) {
  ZT_CHECK(pos >= 0 && pos < Tmax, std::string("ops::") + op + ": position " + std::to_string(pos) +
                                       " outside the cache's " + std::to_string(Tmax) + " positions");
}
void check_heads(const char* op, int64_t H, int64_t Hkv, int64_t hs) {
  ZT_CHECK(H > 0 && Hkv > 0 && hs > 0 && H % Hkv == 0,
           std::string("ops::") + op + ": need H, Hkv, hs > 0 with H a multiple of Hkv, got H=" + std::to_string(H) +
               " Hkv=" + std::to_string(Hkv) + " hs=" + std::to_string(hs));
}
}  // namespace

void kv_cache_write(Stream& s, const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N,
                    int64_t C, int64_t H, int64_t pos) {
  const char* op = "kv_cache_write";
  ZT_CHECK(C > 0 && H > 0 && C % H == 0, std::string("ops::") + op + ": C=" + std::to_string(C) +
                                             " must be positive and divisible by H=" + std::to_string(H));
  check_rows_fit(op, N, pos, check_cache(s, op, k_cache, v_cache, qkv, "qkv", C));
  check_numel(qkv, N * 3 * C, op, "qkv");
  dispatch::kv_cache_write(s, k_cache, v_cache, qkv, N, C, H, pos);
}

void attention_decode(Stream& s, const TensorView& out, const TensorView& qkv, const TensorView& k_cache,
                      const TensorView& v_cache, int64_t C, int64_t H, int64_t pos) {
  const char* op = "attention_decode";
  ZT_CHECK(C > 0 && H > 0 && C % H == 0, std::string("ops::") + op + ": C=" + std::to_string(C) +
                                             " must be positive and divisible by H=" + std::to_string(H));
  check_position(op, pos, check_cache(s, op, k_cache, v_cache, qkv, "qkv", C));
  check_numel(qkv, 3 * C, op, "qkv");
  check_like(s, out, C, qkv, op, "out");
  dispatch::attention_decode(s, out, qkv, k_cache, v_cache, C, H, pos);
}

void kv_cache_write_gqa(Stream& s, const TensorView& k_cache, const TensorView& v_cache, const TensorView& k,
                        const TensorView& v, int64_t N, int64_t Hkv, int64_t hs, int64_t pos) {
  const char* op = "kv_cache_write_gqa";
  ZT_CHECK(Hkv > 0 && hs > 0, std::string("ops::") + op + ": need Hkv, hs > 0, got Hkv=" + std::to_string(Hkv) +
                                  " hs=" + std::to_string(hs));
  check_rows_fit(op, N, pos, check_cache(s, op, k_cache, v_cache, k, "k", Hkv * hs));
  check_numel(k, N * Hkv * hs, op, "k");
  check_like(s, v, N * Hkv * hs, k, op, "v");
  dispatch::kv_cache_write_gqa(s, k_cache, v_cache, k, v, N, Hkv, hs, pos);
}

void attention_decode_gqa(Stream& s, const TensorView& out, const TensorView& q, const TensorView& k_cache,
                          const TensorView& v_cache, int64_t H, int64_t Hkv, int64_t hs, int64_t pos) {
  const char* op = "attention_decode_gqa";
  check_heads(op, H, Hkv, hs);
  check_position(op, pos, check_cache(s, op, k_cache, v_cache, q, "q", Hkv * hs));
  check_numel(q, H * hs, op, "q");
  check_like(s, out, H * hs, q, op, "out");
  dispatch::attention_decode_gqa(s, out, q, k_cache, v_cache, H, Hkv, hs, pos);
}

}  // namespace zt::ops
