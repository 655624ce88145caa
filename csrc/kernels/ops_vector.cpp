// ops_vector.cpp — validated entry points of zt::ops for flat-vector ops: residual add, scale,
// cast, squared L2 norm, Adam step. See ops.cpp for the checking and dispatch conventions.
#include <cstdlib>
#include <string>

#include "ops_checks.h"

namespace zt::ops {
using namespace detail;

void residual_add(Stream& s, const TensorView& out, const TensorView& a, const TensorView& b) {
  check_pair(s, "residual_add", out, "out", a, "a");
  check_pair(s, "residual_add", out, "out", b, "b");
  dispatch::residual_add(s, out, a, b);
}

void scale(Stream& s, const TensorView& x, float alpha) {
  check_tensor(s, x, "scale", "x");
  dispatch::scale(s, x, alpha);
}

void cast(Stream& s, const TensorView& dst, const TensorView& src) {
  check_tensor(s, dst, "cast", "dst");
  check_tensor(s, src, "cast", "src");
  check_numel(dst, src.numel(), "cast", "dst");
  if (dst.dtype != src.dtype && dst.numel() > 0) {  // a converting cast cannot run in place
    const char* d0 = static_cast<const char*>(dst.data);
    const char* s0 = static_cast<const char*>(src.data);
    ZT_CHECK(d0 + dst.nbytes() <= s0 || s0 + src.nbytes() <= d0, "ops::cast: dst overlaps src with a different dtype");
  }
  dispatch::cast(s, dst, src);
}

void squared_norm(Stream& s, double* out, const TensorView& src) {
  check_tensor(s, src, "squared_norm", "src");
  check_ptr(out, 1, "squared_norm", "out");
  dispatch::squared_norm(s, out, src);
}

namespace {
// The checks adam_step and adam_step_multi share: master p and moments m, v (fp32 or bf16, m and
// v a pair of p's numel), a gradient g on the stream's device.
void check_adam_states(Stream& s, const char* op, const TensorView& p, const TensorView& m, const TensorView& v,
                       const TensorView& g) {
  check_tensor(s, p, op, "p");
  ZT_CHECK(p.dtype == DType::F32 || p.dtype == DType::BF16, where(op, "p") + " must be fp32 or bf16");
  check_pair(s, op, m, "m", v, "v");
  ZT_CHECK(m.dtype == DType::F32 || m.dtype == DType::BF16, where(op, "m") + " must be fp32 or bf16");
  check_numel(m, p.numel(), op, "m");
  check_tensor(s, g, op, "g");
}
}  // namespace

void adam_step(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
               float grad_scale, const math::AdamParams& a, const TensorView& param_out) {
  const char* op = "adam_step";
  check_adam_states(s, op, p, m, v, g);
  check_numel(g, p.numel(), op, "g");
  if (param_out.data != nullptr) {
    check_tensor(s, param_out, op, "param_out");
    check_numel(param_out, p.numel(), op, "param_out");
  }
  ZT_CHECK(a.bias_correction1 > 0.0f && a.bias_correction2 > 0.0f, "ops::adam_step: bias corrections must be > 0");
  dispatch::adam_step(s, p, m, v, g, grad_scale, a, param_out);
}

void adam_step_multi(Stream& s, const TensorView& p, const TensorView& m, const TensorView& v, const TensorView& g,
                     float grad_scale, const math::AdamParams& a, const TensorView& param_out,
                     const std::vector<AdamChunk>& chunks) {
  const char* op = "adam_step_multi";
  check_adam_states(s, op, p, m, v, g);
  const bool out = param_out.data != nullptr;
  if (out) check_tensor(s, param_out, op, "param_out");
  for (size_t i = 0; i < chunks.size(); ++i) {
    const AdamChunk& c = chunks[i];
    const std::string at = std::string("ops::adam_step_multi: chunk ") + std::to_string(i) + " (p " + std::to_string(c.p) +
                           ", g " + std::to_string(c.g) + ", out " + std::to_string(c.out) + ", n " + std::to_string(c.n) + ")";
    ZT_CHECK(c.n >= 0 && c.p >= 0 && c.g >= 0 && c.out >= 0, at + " has a negative field");
    ZT_CHECK(c.p + c.n <= p.numel(), at + " runs past p's " + std::to_string(p.numel()) + " elements");
    ZT_CHECK(c.g + c.n <= g.numel(), at + " runs past g's " + std::to_string(g.numel()) + " elements");
    if (out) ZT_CHECK(c.out + c.n <= param_out.numel(), at + " runs past param_out's " + std::to_string(param_out.numel()) + " elements");
  }
  ZT_CHECK(a.bias_correction1 > 0.0f && a.bias_correction2 > 0.0f, "ops::adam_step_multi: bias corrections must be > 0");
  dispatch::adam_step_multi(s, p, m, v, g, grad_scale, a, param_out, chunks);
}

}  // namespace zt::ops

namespace zt::kernels {

bool parse_sync_check(const char* value) {
  if (value == nullptr || *value == '\0' || std::string(value) == "0") return false;
  if (std::string(value) == "1") return true;
  throw InputError(std::string("ZT_CUDA_SYNC_CHECK: found '") + value + "'; expected 0 or 1");
}

bool sync_check_enabled() {
  static const bool enabled = parse_sync_check(std::getenv("ZT_CUDA_SYNC_CHECK"));
  return enabled;
}

}  // namespace zt::kernels
