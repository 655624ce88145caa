// sgd_math.h — per-element SGD with momentum, torch.optim.SGD semantics (DeepSpeed passes
// `"type": "SGD"` straight to torch). Usable from host and device code (ZT_HD).
//   d = g + weight_decay * p
//   momentum != 0:  buf = d on the first step, else buf = momentum * buf + (1 - dampening) * d
//                   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
// `g` is the already-unscaled, clipped gradient.
#pragma once
#include "zerotrain/core/dtype.h"

namespace zt::optim {

struct SgdParams {
  float lr = 1e-3f, momentum = 0.0f, dampening = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
};

// buf is read/written only when momentum != 0. first_step: no momentum buffer exists yet
// (torch creates it as a copy of d, without dampening).
ZT_HD void sgd_update(float& p, float& buf, float g, const SgdParams& s, bool first_step) {
  float d = g;
  if (s.weight_decay != 0.0f) d += s.weight_decay * p;
  if (s.momentum != 0.0f) {
    buf = first_step ? d : s.momentum * buf + (1.0f - s.dampening) * d;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  p -= s.lr * d;
}

}  // namespace zt::optim
