// unit_runner.cpp — see unit_runner.h.
#include "zerotrain/model/unit_runner.h"

namespace zt {

void run_forward(Model& model, const UnitHooks& hooks) {
  for (int u = 0; u < model.num_units(); ++u) {
    if (hooks.before_forward) hooks.before_forward(u);
    model.forward_unit(u);
    if (hooks.after_forward) hooks.after_forward(u);
  }
}

void run_backward(Model& model, float dloss, const UnitHooks& hooks) {
  for (int u = model.num_units() - 1; u >= 0; --u) {
    if (hooks.before_backward) hooks.before_backward(u);
    model.backward_unit(u, dloss);
    if (hooks.after_backward) hooks.after_backward(u);
  }
}

}  // namespace zt
