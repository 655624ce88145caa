// ops_sequence.cpp — validated entry points of zt::ops for token-sequence ops: causal
// attention (GPT's packed qkv and grouped-query), token + position embedding, softmax
// cross-entropy, MSE. See ops.cpp for the checking and dispatch conventions. tokens / targets are
// int32 on the op's device; their device cannot be checked here (raw pointers), only their presence.
#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

namespace {
void check_attention_dims(int64_t B, int64_t T, int64_t C, int64_t H, const char* op) {
  ZT_CHECK(B >= 0 && T >= 0 && C >= 0, std::string("ops::") + op + ": negative B/T/C");
  ZT_CHECK(H > 0 && C % H == 0, std::string("ops::") + op + ": C=" + std::to_string(C) +
                                    " is not divisible by H=" + std::to_string(H));
}
}  // namespace

void attention_forward(Stream& s, const TensorView& out, const TensorView& att, const TensorView& qkv, int64_t B,
                       int64_t T, int64_t C, int64_t H) {
  const char* op = "attention_forward";
  check_attention_dims(B, T, C, H, op);
  check_tensor(s, qkv, op, "qkv");
  check_numel(qkv, B * T * 3 * C, op, "qkv");
  check_like(s, out, B * T * C, qkv, op, "out");
  check_f32(s, att, B * H * T * T, op, "att");
  dispatch::attention_forward(s, out, att, qkv, B, T, C, H);
}

void attention_backward(Stream& s, const TensorView& dqkv, const TensorView& datt_scratch, const TensorView& dout,
                        const TensorView& qkv, const TensorView& att, int64_t B, int64_t T, int64_t C, int64_t H) {
  const char* op = "attention_backward";
  check_attention_dims(B, T, C, H, op);
  check_tensor(s, qkv, op, "qkv");
  check_numel(qkv, B * T * 3 * C, op, "qkv");
  check_pair(s, op, qkv, "qkv", dqkv, "dqkv");
  check_like(s, dout, B * T * C, qkv, op, "dout");
  check_f32(s, att, B * H * T * T, op, "att");
  check_f32(s, datt_scratch, B * H * T * T, op, "datt_scratch");
  dispatch::attention_backward(s, dqkv, datt_scratch, dout, qkv, att, B, T, C, H);
}

namespace {
void check_tiles(int64_t tile_q, int64_t tile_k, const char* op) {
  ZT_CHECK(tile_q >= 0 && tile_k >= 0, std::string("ops::") + op + ": tile sizes must be >= 0 (0 = default), got " +
                                           std::to_string(tile_q) + ", " + std::to_string(tile_k));
}
}  // namespace

void attention_tiled_forward(Stream& s, const TensorView& out, const TensorView& stats, const TensorView& qkv,
                             int64_t B, int64_t T, int64_t C, int64_t H, int64_t tile_q, int64_t tile_k) {
  const char* op = "attention_tiled_forward";
  check_attention_dims(B, T, C, H, op);
  check_tiles(tile_q, tile_k, op);
  check_tensor(s, qkv, op, "qkv");
  check_numel(qkv, B * T * 3 * C, op, "qkv");
  check_like(s, out, B * T * C, qkv, op, "out");
  check_f32(s, stats, B * H * T * 2, op, "stats");
  dispatch::attention_tiled_forward(s, out, stats, qkv, B, T, C, H, tile_q, tile_k);
}

void attention_tiled_backward(Stream& s, const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                              const TensorView& out, const TensorView& stats, int64_t B, int64_t T, int64_t C,
                              int64_t H, int64_t tile_q, int64_t tile_k) {
  const char* op = "attention_tiled_backward";
  check_attention_dims(B, T, C, H, op);
  check_tiles(tile_q, tile_k, op);
  check_tensor(s, qkv, op, "qkv");
  check_numel(qkv, B * T * 3 * C, op, "qkv");
  check_pair(s, op, qkv, "qkv", dqkv, "dqkv");
  check_like(s, dout, B * T * C, qkv, op, "dout");
  check_like(s, out, B * T * C, qkv, op, "out");
  check_f32(s, stats, B * H * T * 2, op, "stats");
  dispatch::attention_tiled_backward(s, dqkv, dout, qkv, out, stats, B, T, C, H, tile_q, tile_k);
}

namespace {
// Grouped-query attention's dimensions and its q, k, v; returns q's element count B·T·H·hs.
int64_t check_gqa(const Stream& s, const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                  int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t hs, int64_t tile_q, int64_t tile_k) {
  ZT_CHECK(B >= 0 && T >= 0, std::string("ops::") + op + ": negative B=" + std::to_string(B) + " or T=" +
                                 std::to_string(T));
  ZT_CHECK(H > 0 && Hkv > 0 && hs > 0, std::string("ops::") + op + ": need H, Hkv, hs > 0, got H=" +
                                           std::to_string(H) + " Hkv=" + std::to_string(Hkv) + " hs=" +
                                           std::to_string(hs));
  ZT_CHECK(H % Hkv == 0, std::string("ops::") + op + ": H=" + std::to_string(H) +
                             " query heads are not a multiple of Hkv=" + std::to_string(Hkv) + " key/value heads");
  check_tiles(tile_q, tile_k, op);
  check_tensor(s, q, op, "q");
  check_numel(q, B * T * H * hs, op, "q");
  check_like(s, k, B * T * Hkv * hs, q, op, "k");
  check_like(s, v, B * T * Hkv * hs, q, op, "v");
  return B * T * H * hs;
}
}  // namespace

void attention_gqa_forward(Stream& s, const TensorView& out, const TensorView& stats, const TensorView& q,
                           const TensorView& k, const TensorView& v, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                           int64_t hs, int64_t tile_q, int64_t tile_k) {
  const char* op = "attention_gqa_forward";
  const int64_t n = check_gqa(s, op, q, k, v, B, T, H, Hkv, hs, tile_q, tile_k);
  check_like(s, out, n, q, op, "out");
  check_f32(s, stats, B * H * T * 2, op, "stats");
  dispatch::attention_gqa_forward(s, out, stats, q, k, v, B, T, H, Hkv, hs, tile_q, tile_k);
}

void attention_gqa_backward(Stream& s, const TensorView& dq, const TensorView& dk, const TensorView& dv,
                            const TensorView& dout, const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& out, const TensorView& stats, int64_t B, int64_t T, int64_t H,
                            int64_t Hkv, int64_t hs, int64_t tile_q, int64_t tile_k) {
  const char* op = "attention_gqa_backward";
  const int64_t n = check_gqa(s, op, q, k, v, B, T, H, Hkv, hs, tile_q, tile_k);
  check_pair(s, op, q, "q", dq, "dq");
  check_pair(s, op, k, "k", dk, "dk");
  check_pair(s, op, v, "v", dv, "dv");
  check_like(s, dout, n, q, op, "dout");
  check_like(s, out, n, q, op, "out");
  check_f32(s, stats, B * H * T * 2, op, "stats");
  dispatch::attention_gqa_backward(s, dq, dk, dv, dout, q, k, v, out, stats, B, T, H, Hkv, hs, tile_q, tile_k);
}

namespace {
// out-like [B,T,C], wte [V,C] with V >= 1, wpe [T',C] with T' >= T or absent (no storage: no
// position term), all one dtype.
// grads: wte and wpe are gradients (x's dtype or fp32), else weights (x's dtype).
void check_embedding(const Stream& s, const char* op, const TensorView& x, const char* xn, const TensorView& wte,
                     const char* wten, const TensorView& wpe, const char* wpen, const int32_t* tokens, int64_t B,
                     int64_t T, int64_t C, bool grads) {
  const auto check_dtype_of = [&](const TensorView& w, const char* name) {
    if (grads) check_grad_dtype(w, x, op, name);
    else check_same(w, x, op, name);
  };
  ZT_CHECK(B >= 0 && T >= 0 && C > 0, std::string("ops::") + op + ": need B, T >= 0 and C > 0");
  check_tensor(s, x, op, xn);
  check_numel(x, B * T * C, op, xn);
  check_tensor(s, wte, op, wten);
  check_rows(wte, C, op, wten);
  check_dtype_of(wte, wten);
  ZT_CHECK(wte.numel() >= C, where(op, wten) + " has no rows");
  check_ptr(tokens, B * T, op, "tokens");
  if (wpe.data == nullptr) return;  // absent
  check_tensor(s, wpe, op, wpen);
  check_rows(wpe, C, op, wpen);
  check_dtype_of(wpe, wpen);
  ZT_CHECK(wpe.numel() >= T * C, where(op, wpen) + " has " + std::to_string(wpe.numel() / C) +
                                     " positions, fewer than T=" + std::to_string(T));
}
}  // namespace

void embedding_forward(Stream& s, const TensorView& out, const int32_t* tokens, const TensorView& wte,
                       const TensorView& wpe, int64_t B, int64_t T, int64_t C) {
  check_embedding(s, "embedding_forward", out, "out", wte, "wte", wpe, "wpe", tokens, B, T, C, false);
  dispatch::embedding_forward(s, out, tokens, wte, wpe, B, T, C);
}

void embedding_backward(Stream& s, const TensorView& dwte, const TensorView& dwpe, const TensorView& dout,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C) {
  check_embedding(s, "embedding_backward", dout, "dout", dwte, "dwte", dwpe, "dwpe", tokens, B, T, C, true);
  dispatch::embedding_backward(s, dwte, dwpe, dout, tokens, B, T, C);
}

void softmax_cross_entropy(Stream& s, const TensorView& losses, const TensorView& dlogits, const TensorView& logits,
                           const int32_t* targets, float dloss) {
  const char* op = "softmax_cross_entropy";
  check_tensor(s, losses, op, "losses");
  check_dtype(losses, DType::F32, op, "losses");
  const int64_t N = losses.numel();
  check_tensor(s, logits, op, "logits");
  ZT_CHECK(N > 0 ? logits.numel() % N == 0 && logits.numel() > 0 : logits.numel() == 0,
           where(op, "logits") + " has shape " + logits.shape_string() + ", not " + std::to_string(N) +
               " non-empty rows");
  check_pair(s, op, logits, "logits", dlogits, "dlogits");
  check_ptr(targets, N, op, "targets");
  dispatch::softmax_cross_entropy(s, losses, dlogits, logits, targets, dloss);
}

void mse_loss(Stream& s, const TensorView& losses, const TensorView& dpred, const TensorView& pred,
              const TensorView& target, float dloss) {
  const char* op = "mse_loss";
  check_tensor(s, losses, op, "losses");
  check_dtype(losses, DType::F32, op, "losses");
  const int64_t N = losses.numel();
  check_tensor(s, pred, op, "pred");
  ZT_CHECK(N > 0 ? pred.numel() % N == 0 : pred.numel() == 0,
           where(op, "pred") + " has shape " + pred.shape_string() + ", not " + std::to_string(N) + " rows");
  check_pair(s, op, pred, "pred", target, "target");
  check_pair(s, op, pred, "pred", dpred, "dpred");
  dispatch::mse_loss(s, losses, dpred, pred, target, dloss);
}

}  // namespace zt::ops
