// ops_llama.cpp — validated entry points of the Llama block's normalisation and elementwise ops
// (op_list.h: rmsnorm_forward/backward, rope_forward/backward, swiglu_forward/backward). See
// ops.cpp for the checking and dispatch conventions (shapes by element count, ZT_CHECK).
#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

namespace {
// weight[C] with C > 0; inp and out-like tensors [N,C] with N = rstd.numel(); rstd fp32.
void check_rmsnorm(const Stream& s, const char* op, const TensorView& inp, const TensorView& weight,
                   const TensorView& rstd) {
  check_tensor(s, inp, op, "inp");
  check_like(s, weight, weight.numel(), inp, op, "weight");
  ZT_CHECK(weight.numel() > 0, where(op, "weight") + " has no elements (RMSNorm needs C > 0)");
  check_f32(s, rstd, rstd.numel(), op, "rstd");
  check_numel(inp, rstd.numel() * weight.numel(), op, "inp");
}
}  // namespace

void rmsnorm_forward(Stream& s, const TensorView& out, const TensorView& rstd, const TensorView& inp,
                     const TensorView& weight, float eps) {
  const char* op = "rmsnorm_forward";
  check_rmsnorm(s, op, inp, weight, rstd);
  check_like(s, out, inp.numel(), inp, op, "out");
  ZT_CHECK(eps >= 0.0f, "ops::rmsnorm_forward: eps must be non-negative, got " + std::to_string(eps));
  dispatch::rmsnorm_forward(s, out, rstd, inp, weight, eps);
}

void rmsnorm_backward(Stream& s, const TensorView& dinp, const TensorView& dweight, const TensorView& dout,
                      const TensorView& inp, const TensorView& weight, const TensorView& rstd) {
  const char* op = "rmsnorm_backward";
  check_rmsnorm(s, op, inp, weight, rstd);
  check_like(s, dinp, inp.numel(), inp, op, "dinp");
  check_like(s, dout, inp.numel(), inp, op, "dout");
  check_grad(s, dweight, weight.numel(), inp, op, "dweight");
  // dinp accumulates while dout and inp are still read for dweight.
  ZT_CHECK(inp.numel() == 0 || (dinp.data != dout.data && dinp.data != inp.data),
           "ops::rmsnorm_backward: dinp must not alias dout or inp");
  dispatch::rmsnorm_backward(s, dinp, dweight, dout, inp, weight, rstd);
}

namespace {
// x[B,T,nh·hs] (any dtype), hs even, table fp32 [Tmax,hs] with pos + T <= Tmax.
void check_rope(const Stream& s, const char* op, const TensorView& x, const char* xn, const TensorView& table,
                int64_t B, int64_t T, int64_t nh, int64_t hs, int64_t pos) {
  ZT_CHECK(B >= 0 && T >= 0 && nh >= 0, std::string("ops::") + op + ": negative B/T/nh (B=" + std::to_string(B) +
                                            " T=" + std::to_string(T) + " nh=" + std::to_string(nh) + ")");
  ZT_CHECK(hs > 0 && hs % 2 == 0,
           std::string("ops::") + op + ": hs=" + std::to_string(hs) + " must be even and positive (rotate-half pairs)");
  ZT_CHECK(pos >= 0, std::string("ops::") + op + ": pos=" + std::to_string(pos) + " is negative");
  check_tensor(s, x, op, xn);
  check_numel(x, B * T * nh * hs, op, xn);
  check_tensor(s, table, op, "table");
  check_dtype(table, DType::F32, op, "table");
  check_rows(table, hs, op, "table");
  const int64_t rows = table.numel() / hs;
  ZT_CHECK(pos + T <= rows, where(op, "table") + " has " + std::to_string(rows) + " positions, fewer than pos + T = " +
                                std::to_string(pos) + " + " + std::to_string(T));
}
}  // namespace

void rope_forward(Stream& s, const TensorView& x, const TensorView& table, int64_t B, int64_t T, int64_t nh,
                  int64_t hs, int64_t pos) {
  check_rope(s, "rope_forward", x, "x", table, B, T, nh, hs, pos);
  dispatch::rope_forward(s, x, table, B, T, nh, hs, pos);
}

void rope_backward(Stream& s, const TensorView& dx, const TensorView& table, int64_t B, int64_t T, int64_t nh,
                   int64_t hs, int64_t pos) {
  check_rope(s, "rope_backward", dx, "dx", table, B, T, nh, hs, pos);
  dispatch::rope_backward(s, dx, table, B, T, nh, hs, pos);
}

void swiglu_forward(Stream& s, const TensorView& out, const TensorView& gate, const TensorView& up) {
  const char* op = "swiglu_forward";
  check_pair(s, op, gate, "gate", up, "up");
  check_pair(s, op, gate, "gate", out, "out");
  dispatch::swiglu_forward(s, out, gate, up);
}

void swiglu_backward(Stream& s, const TensorView& dgate, const TensorView& dup, const TensorView& dout,
                     const TensorView& gate, const TensorView& up) {
  const char* op = "swiglu_backward";
  check_pair(s, op, gate, "gate", up, "up");
  check_pair(s, op, gate, "gate", dout, "dout");
  check_pair(s, op, gate, "gate", dgate, "dgate");
  check_pair(s, op, gate, "gate", dup, "dup");
  ZT_CHECK(gate.numel() == 0 || dgate.data != dup.data, "ops::swiglu_backward: dgate and dup must not alias");
  dispatch::swiglu_backward(s, dgate, dup, dout, gate, up);
}

}  // namespace zt::ops
