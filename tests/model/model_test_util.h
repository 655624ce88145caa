// model_test_util.h — what the model tests share: a CPU device with model options, random
// parameters that exercise every term, and the per-unit binding check.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "zerotrain/core/device.h"
#include "zerotrain/model/local_state.h"
#include "zerotrain/model/model.h"
#include "zerotrain/model/unit_runner.h"

namespace zt {

// A device (the CPU unless given) and its compute stream, with model options on them.
struct Env {
  std::unique_ptr<Device> dev;
  std::unique_ptr<Stream> stream;
  explicit Env(std::unique_ptr<Device> d = make_cpu_device())
      : dev(std::move(d)), stream(dev->create_stream("compute")) {}
  ModelOptions opt(int64_t micro_batch, DType dt = DType::F32) const {
    ModelOptions o;
    o.compute_dtype = dt;
    o.micro_batch = micro_batch;
    o.device = dev.get();
    o.stream = stream.get();
    return o;
  }
};

inline bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Random parameters that exercise every term: weights N(0, 0.3), LayerNorm weights 1 + N(0, 0.2),
// biases N(0, 0.1) (GPT-2's zero biases would hide bias bugs); one vector per parameter, in the
// specs' order (what the decoders take).
inline std::vector<std::vector<float>> random_param_tensors(const std::vector<ParamSpec>& specs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> out;
  for (const ParamSpec& p : specs) {
    std::vector<float> v(static_cast<size_t>(p.numel));
    for (float& x : v)
      x = p.init == InitKind::Ones ? 1.0f + 0.2f * nd(rng) : p.init == InitKind::Zeros ? 0.1f * nd(rng) : 0.3f * nd(rng);
    out.push_back(std::move(v));
  }
  return out;
}

// The same values as one flat vector (the model's parameter order).
inline std::vector<float> random_params(const Model& m, uint32_t seed) {
  std::vector<float> flat;
  for (const std::vector<float>& v : random_param_tensors(m.params(), seed)) flat.insert(flat.end(), v.begin(), v.end());
  return flat;
}

// B sequences of T random tokens (inputs and targets uniform over [0, V)).
inline Batch random_token_batch(int64_t V, int64_t B, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  Batch b;
  b.B = B;
  b.T = T;
  for (int64_t i = 0; i < B * T; ++i) {
    b.inputs.push_back(static_cast<int32_t>(rng() % V));
    b.targets.push_back(static_cast<int32_t>(rng() % V));
  }
  return b;
}

// Stage-3 style: only the parameters (and gradients) of unit_params(u) are bound while unit u
// runs; every other pointer is null. A unit that reads a parameter it does not list would hit
// the "not bound" check. Result must equal the fully bound run.
template <typename M>
void check_unit_params_suffice(M& m, LocalModelState& st, const Batch& batch) {
  st.zero_grads();
  st.forward_backward(batch);
  std::vector<float> full = st.grads();
  auto unbind_all = [&] {
    for (size_t i = 0; i < m.params().size(); ++i) {
      m.bind_param(static_cast<int>(i), nullptr);
      m.bind_grad(static_cast<int>(i), nullptr);
    }
  };
  std::vector<std::string> order;
  UnitHooks hooks;
  hooks.before_forward = [&](int u) {
    order.push_back("f" + std::to_string(u));
    for (int i : m.unit_params(u)) m.bind_param(i, st.param_data(i));
  };
  hooks.after_forward = [&](int u) { unbind_all(); };
  hooks.before_backward = [&](int u) {
    order.push_back("b" + std::to_string(u));
    for (int i : m.unit_params(u)) m.bind_param(i, st.param_data(i)), m.bind_grad(i, st.grad_data(i));
  };
  hooks.after_backward = [&](int u) { unbind_all(); };
  st.zero_grads();
  unbind_all();
  m.set_batch(batch);
  run_forward(m, hooks);
  run_backward(m, 1.0f, hooks);
  std::vector<float> per_unit = st.grads();
  EXPECT_EQ(per_unit, full);
  const int U = m.num_units();
  ASSERT_EQ(order.size(), static_cast<size_t>(2 * U));
  for (int u = 0; u < U; ++u) {
    EXPECT_EQ(order[u], "f" + std::to_string(u));
    EXPECT_EQ(order[U + u], "b" + std::to_string(U - 1 - u));
  }
}

}  // namespace zt
