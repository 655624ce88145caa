// ops_decode.cpp — validated entry points of zt::ops for incremental decoding with a key/value
// cache (kv_cache_write, attention_decode; contracts in op_list.h). See ops.cpp for the checking
// and dispatch conventions.
#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

namespace {
// Both caches [H, Tmax, hs] in qkv's dtype and on the stream's device; returns Tmax.
int64_t check_cache(const Stream& s, const char* op, const TensorView& k_cache, const TensorView& v_cache,
                    const TensorView& qkv, int64_t C, int64_t H) {
  ZT_CHECK(C > 0 && H > 0 && C % H == 0, std::string("ops::") + op + ": C=" + std::to_string(C) +
                                             " must be positive and divisible by H=" + std::to_string(H));
  check_tensor(s, qkv, op, "qkv");
  check_tensor(s, k_cache, op, "k_cache");
  check_same(k_cache, qkv, op, "k_cache");
  ZT_CHECK(k_cache.numel() % C == 0 && k_cache.numel() > 0,
           where(op, "k_cache") + " has " + std::to_string(k_cache.numel()) + " elements, not H*Tmax*hs with C=" +
               std::to_string(C));
  check_like(s, v_cache, k_cache.numel(), qkv, op, "v_cache");
  return k_cache.numel() / C;
}
}  // namespace

void kv_cache_write(Stream& s, const TensorView& k_cache, const TensorView& v_cache, const TensorView& qkv, int64_t N,
                    int64_t C, int64_t H, int64_t pos) {
  const char* op = "kv_cache_write";
  const int64_t Tmax = check_cache(s, op, k_cache, v_cache, qkv, C, H);
  ZT_CHECK(N >= 0 && pos >= 0 && pos + N <= Tmax, std::string("ops::") + op + ": rows [" + std::to_string(pos) +
                                                      ", " + std::to_string(pos + N) + ") outside the cache's " +
                                                      std::to_string(Tmax) + " positions");
  check_numel(qkv, N * 3 * C, op, "qkv");
  dispatch::kv_cache_write(s, k_cache, v_cache, qkv, N, C, H, pos);
}

void attention_decode(Stream& s, const TensorView& out, const TensorView& qkv, const TensorView& k_cache,
                      const TensorView& v_cache, int64_t C, int64_t H, int64_t pos) {
  const char* op = "attention_decode";
  const int64_t Tmax = check_cache(s, op, k_cache, v_cache, qkv, C, H);
  ZT_CHECK(pos >= 0 && pos < Tmax, std::string("ops::") + op + ": position " + std::to_string(pos) +
                                       " outside the cache's " + std::to_string(Tmax) + " positions");
  check_numel(qkv, 3 * C, op, "qkv");
  check_like(s, out, C, qkv, op, "out");
  dispatch::attention_decode(s, out, qkv, k_cache, v_cache, C, H, pos);
}

}  // namespace zt::ops
