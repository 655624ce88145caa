// optimizer_hparams.cpp — per-step Adam / SGD parameters from OptimizerHparams (which
// config/optim_inputs.cpp reads from the DeepSpeed `optimizer` section).
#include "zerotrain/optim/optimizer_hparams.h"

#include <cmath>
#include <sstream>

#include "zerotrain/core/check.h"

namespace zt {

std::string OptimizerHparams::describe() const {
  std::ostringstream os;
  if (kind == OptimizerKind::Adam) {
    os << type << " lr=" << lr << " betas=(" << beta1 << "," << beta2 << ") eps=" << eps
       << " weight_decay=" << weight_decay << " bias_correction=" << (bias_correction ? "true" : "false")
       << " mode=" << (adam_w_mode ? "decoupled (AdamW)" : "L2 (Adam)");
  } else {
    os << "SGD lr=" << lr << " momentum=" << momentum << " dampening=" << dampening
       << " weight_decay=" << weight_decay << " nesterov=" << (nesterov ? "true" : "false");
  }
  return os.str();
}

math::AdamParams adam_params_for_step(const OptimizerHparams& h, int64_t step, const LrValues& sched) {
  ZT_CHECK(h.kind == OptimizerKind::Adam, "adam_params_for_step on a non-Adam optimizer");
  ZT_CHECK(step >= 1, "Adam step numbers start at 1");
  double beta1 = sched.has_betas ? sched.beta1 : h.beta1;
  double beta2 = sched.has_betas ? sched.beta2 : h.beta2;
  math::AdamParams a{};
  a.lr = static_cast<float>(sched.lr);
  a.beta1 = static_cast<float>(beta1);
  a.beta2 = static_cast<float>(beta2);
  a.eps = static_cast<float>(h.eps);
  a.weight_decay = static_cast<float>(h.weight_decay);
  // The kernel sees float betas; correct with exactly those values.
  double t = static_cast<double>(step);
  a.bias_correction1 = h.bias_correction ? static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta1), t)) : 1.0f;
  a.bias_correction2 = h.bias_correction ? static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta2), t)) : 1.0f;
  a.adam_w_mode = h.adam_w_mode;
  return a;
}

optim::SgdParams sgd_params_for_step(const OptimizerHparams& h, const LrValues& sched) {
  ZT_CHECK(h.kind == OptimizerKind::SGD, "sgd_params_for_step on a non-SGD optimizer");
  optim::SgdParams s;
  s.lr = static_cast<float>(sched.lr);
  s.momentum = static_cast<float>(h.momentum);
  s.dampening = static_cast<float>(h.dampening);
  s.weight_decay = static_cast<float>(h.weight_decay);
  s.nesterov = h.nesterov;
  return s;
}

void sgd_step_cpu(float* params, float* momentum_buf, const float* grads, int64_t n, const optim::SgdParams& s,
                  bool first_step) {
  ZT_CHECK(s.momentum == 0.0f || momentum_buf != nullptr, "SGD with momentum needs a momentum buffer");
  float unused = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float& buf = momentum_buf ? momentum_buf[i] : unused;
    optim::sgd_update(params[i], buf, grads[i], s, first_step);
  }
}

}  // namespace zt
