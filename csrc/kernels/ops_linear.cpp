// ops_linear.cpp — validated entry points of the fused linear ops (op_list.h: linear_forward,
// linear_backward) and of the padded LM head's strided ops (gemm_ld, softmax_cross_entropy_ld). Shapes are checked by element count (ops.cpp's convention); every tensor of
// one call has inp's dtype. Optional tensors (pre, bias, dbias, dinp, gelu_pre) are absent when
// they have no storage (data == nullptr, e.g. TensorView{}), as adam_step's param_out.
#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

namespace {
void check_dims(int64_t N, int64_t IC, int64_t OC, const char* op) {
  ZT_CHECK(N >= 0 && IC >= 0 && OC >= 0, std::string("ops::") + op + ": negative dimension (N=" + std::to_string(N) +
                                             " IC=" + std::to_string(IC) + " OC=" + std::to_string(OC) + ")");
}
// An optional tensor: absent (no storage), or n elements on the stream's device with ref's dtype.
void check_optional(const Stream& s, const TensorView& t, int64_t n, const TensorView& ref, const char* op,
                    const char* name) {
  if (t.data == nullptr) return;  // absent
  check_like(s, t, n, ref, op, name);
}
}  // namespace

void linear_forward(Stream& s, const TensorView& out, const TensorView& pre, const TensorView& inp,
                    const TensorView& weight, const TensorView& bias, int64_t N, int64_t IC, int64_t OC, bool trans_w,
                    bool gelu) {
  const char* op = "linear_forward";
  check_dims(N, IC, OC, op);
  check_like(s, inp, N * IC, inp, op, "inp");
  check_like(s, weight, IC * OC, inp, op, "weight");
  check_like(s, out, N * OC, inp, op, "out");
  check_optional(s, bias, OC, inp, op, "bias");
  if (gelu) {
    check_like(s, pre, N * OC, inp, op, "pre");
    ZT_CHECK(N * OC == 0 || pre.data != out.data, "ops::linear_forward: pre and out must not alias (pre is saved)");
  } else {
    ZT_CHECK(pre.data == nullptr, "ops::linear_forward: pre must be absent without gelu, has shape " + pre.shape_string());
  }
  ZT_CHECK(N * OC == 0 || out.data != inp.data, "ops::linear_forward: out must not alias inp");
  dispatch::linear_forward(s, out, pre, inp, weight, bias, N, IC, OC, trans_w, gelu);
}

void linear_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dbias,
                     const TensorView& dout, const TensorView& inp, const TensorView& weight,
                     const TensorView& gelu_pre, int64_t N, int64_t IC, int64_t OC, bool trans_w) {
  const char* op = "linear_backward";
  check_dims(N, IC, OC, op);
  check_like(s, inp, N * IC, inp, op, "inp");
  check_like(s, weight, IC * OC, inp, op, "weight");
  check_grad(s, dweight, IC * OC, inp, op, "dweight");
  check_like(s, dout, N * OC, inp, op, "dout");
  if (dbias.data != nullptr) check_grad(s, dbias, OC, inp, op, "dbias");
  check_optional(s, dinp, N * IC, inp, op, "dinp");
  check_optional(s, gelu_pre, N * IC, inp, op, "gelu_pre");
  ZT_CHECK(gelu_pre.data == nullptr || dinp.data != nullptr || N * IC == 0,
           "ops::linear_backward: gelu_pre given but no dinp to apply it to");
  ZT_CHECK(dinp.data == nullptr || (dinp.data != dout.data && dinp.data != inp.data),
           "ops::linear_backward: dinp must not alias dout or inp");
  ZT_CHECK(gelu_pre.data == nullptr || dinp.data != gelu_pre.data, "ops::linear_backward: dinp must not alias gelu_pre");
  dispatch::linear_backward(s, dinp, dweight, dbias, dout, inp, weight, gelu_pre, N, IC, OC, trans_w);
}

void gemm_ld(Stream& s, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
             const TensorView& A, int64_t lda, const TensorView& B, int64_t ldb, float beta, const TensorView& C,
             int64_t ldc) {
  const char* op = "gemm_ld";
  ZT_CHECK(M >= 0 && N >= 0 && K >= 0, "ops::gemm_ld: negative dimension");
  // Stored shapes: A [M,K] ([K,M] when trans_a), B [K,N] ([N,K] when trans_b), C [M,N]: rows × ld.
  const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  for (auto [ld, cols, name] : {std::tuple{lda, a_cols, "lda"}, std::tuple{ldb, b_cols, "ldb"},
                                std::tuple{ldc, N, "ldc"}}) {
    ZT_CHECK(ld >= cols && ld >= 1, where(op, name) + " = " + std::to_string(ld) + " is below the row length " +
                                        std::to_string(cols));
  }
  check_like(s, A, a_rows * lda, A, op, "A");
  check_like(s, B, b_rows * ldb, A, op, "B");
  check_grad(s, C, M * ldc, A, op, "C");  // C: A's dtype, or fp32 with 16-bit A and B
  dispatch::gemm_ld(s, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void softmax_cross_entropy_ld(Stream& s, const TensorView& losses, const TensorView& dlogits,
                              const TensorView& logits, const int32_t* targets, float dloss, int64_t V, int64_t ld) {
  const char* op = "softmax_cross_entropy_ld";
  check_tensor(s, losses, op, "losses");
  check_dtype(losses, DType::F32, op, "losses");
  const int64_t N = losses.numel();
  ZT_CHECK(V > 0 && ld >= V, "ops::softmax_cross_entropy_ld: need 0 < V <= ld, got V=" + std::to_string(V) +
                                 " ld=" + std::to_string(ld));
  check_tensor(s, logits, op, "logits");
  check_numel(logits, N * ld, op, "logits");
  check_pair(s, op, logits, "logits", dlogits, "dlogits");
  check_ptr(targets, N, op, "targets");
  dispatch::softmax_cross_entropy_ld(s, losses, dlogits, logits, targets, dloss, V, ld);
}

}  // namespace zt::ops
