// optimizer_hparams.cpp — per-step Adam / SGD / Lion / Adagrad / LAMB parameters from OptimizerHparams (which
// config/cfg_optim.cpp reads from the DeepSpeed `optimizer` section).
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
  } else if (kind == OptimizerKind::SGD) {
    os << "SGD lr=" << lr << " momentum=" << momentum << " dampening=" << dampening
       << " weight_decay=" << weight_decay << " nesterov=" << (nesterov ? "true" : "false");
  } else if (kind == OptimizerKind::Lion) {
    os << "lion lr=" << lr << " betas=(" << beta1 << "," << beta2 << ") weight_decay=" << weight_decay;
  } else if (kind == OptimizerKind::Adagrad) {
    os << "adagrad lr=" << lr << " lr_decay=" << lr_decay << " eps=" << eps << " weight_decay=" << weight_decay
       << " initial_accumulator_value=" << initial_accumulator_value;
  } else {
    os << "lamb lr=" << lr << " betas=(" << beta1 << "," << beta2 << ") eps=" << eps
       << (eps_inside_sqrt ? " (inside sqrt)" : "") << " weight_decay=" << weight_decay
       << " bias_correction=" << (bias_correction ? "true" : "false") << " trust ratio in [" << min_coeff << ", "
       << max_coeff << "]";
  }
  return os.str();
}

int OptimizerHparams::moment_count() const {
  switch (kind) {
    case OptimizerKind::Adam:
    case OptimizerKind::Lamb: return 2;
    case OptimizerKind::SGD: return momentum != 0.0 ? 1 : 0;
    case OptimizerKind::Lion:
    case OptimizerKind::Adagrad: return 1;
  }
  return 0;
}

std::vector<std::string> OptimizerHparams::moment_names() const {
  switch (kind) {
    case OptimizerKind::Adam:
    case OptimizerKind::Lamb: return {"exp_avg", "exp_avg_sq"};
    case OptimizerKind::SGD: return momentum != 0.0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
    case OptimizerKind::Lion: return {"exp_avg"};
    case OptimizerKind::Adagrad: return {"sum"};
  }
  return {};
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

optim::LionParams lion_params_for_step(const OptimizerHparams& h, const LrValues& sched) {
  ZT_CHECK(h.kind == OptimizerKind::Lion, "lion_params_for_step on a non-Lion optimizer");
  optim::LionParams a;
  a.lr = static_cast<float>(sched.lr);
  a.beta1 = static_cast<float>(sched.has_betas ? sched.beta1 : h.beta1);
  a.beta2 = static_cast<float>(sched.has_betas ? sched.beta2 : h.beta2);
  a.after_decay = 1.0f - a.lr * static_cast<float>(h.weight_decay);  // fp32, as FusedLion
  return a;
}

optim::AdagradParams adagrad_params_for_step(const OptimizerHparams& h, int64_t step, const LrValues& sched) {
  ZT_CHECK(h.kind == OptimizerKind::Adagrad, "adagrad_params_for_step on a non-Adagrad optimizer");
  ZT_CHECK(step >= 1, "Adagrad step numbers start at 1");
  optim::AdagradParams a;
  a.clr = static_cast<float>(sched.lr / (1.0 + static_cast<double>(step - 1) * h.lr_decay));  // torch: in double
  a.eps = static_cast<float>(h.eps);
  a.weight_decay = static_cast<float>(h.weight_decay);
  return a;
}

optim::LambParams lamb_params_for_step(const OptimizerHparams& h, int64_t step, const LrValues& sched) {
  ZT_CHECK(h.kind == OptimizerKind::Lamb, "lamb_params_for_step on a non-LAMB optimizer");
  ZT_CHECK(step >= 1, "LAMB step numbers start at 1");
  optim::LambParams a;
  a.beta1 = static_cast<float>(sched.has_betas ? sched.beta1 : h.beta1);
  a.beta2 = static_cast<float>(sched.has_betas ? sched.beta2 : h.beta2);
  a.eps = static_cast<float>(h.eps);
  a.weight_decay = static_cast<float>(h.weight_decay);
  a.max_coeff = static_cast<float>(h.max_coeff);
  a.min_coeff = static_cast<float>(h.min_coeff);
  a.eps_inside_sqrt = h.eps_inside_sqrt;
  const float lr = static_cast<float>(sched.lr);
  if (h.bias_correction) {  // FusedLamb: fp32 corrections of the fp32 betas, step size in fp32
    const double t = static_cast<double>(step);
    const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta1), t));
    const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(a.beta2), t));
    a.step_size = lr * std::sqrt(bc2) / bc1;
  } else {
    a.step_size = lr;
  }
  return a;
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
