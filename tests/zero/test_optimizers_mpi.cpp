// Lion, Adagrad and LAMB on the ZeRO engine (CPU backend, under mpirun at 1-4 ranks):
//  * the memory predictor counts their moments (device, and host with offload);
//  * one rank, stage 0: the weights after a few steps equal a reference written here from the
//    published formulas (torch.optim.Adagrad; Lion as lion-pytorch / the paper with torch.sign;
//    LAMB as DeepSpeed's FusedLamb, per parameter tensor), fed with the gradients the engine saw;
//  * every stage 0-3 at this world size matches the one-rank engine, and the stages agree with
//    each other (bitwise for the element-wise Lion and Adagrad; LAMB's norms are summed in
//    another order at stages 1-3);
//  * offload_optimizer cpu (the host SIMD / scalar paths) is bitwise equal to the device path;
//  * LAMB's extra all-reduce is in the plan's collective list and in the comm log.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "engine_harness.h"

using namespace zt;
using namespace zt::testing;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }

constexpr int kSteps = 4;

EngineOptions options_for(OptimizerKind kind, int stage) {
  EngineOptions o;
  o.stage = stage;
  o.gradient_clipping = 0.0;  // the update reads the raw averaged gradient
  OptimizerHparams& h = o.optimizer;
  h.kind = kind;
  h.weight_decay = 0.01;
  if (kind == OptimizerKind::Lion) {
    h.type = "lion", h.lr = 1e-3, h.beta1 = 0.9, h.beta2 = 0.99;
  } else if (kind == OptimizerKind::Adagrad) {
    h.type = "adagrad", h.lr = 1e-2, h.eps = 1e-10, h.lr_decay = 0.01, h.initial_accumulator_value = 0.1;
  } else {
    h.type = "lamb", h.lr = 1e-2, h.eps = 1e-6, h.beta1 = 0.9, h.beta2 = 0.999;
    h.max_coeff = 10.0, h.min_coeff = 0.01;
  }
  return o;
}

const char* name_of(OptimizerKind k) {
  return k == OptimizerKind::Lion ? "Lion" : k == OptimizerKind::Adagrad ? "Adagrad" : "LAMB";
}

// The published update of one parameter tensor, in fp32 as torch runs it (norms in double).
struct Reference {
  OptimizerHparams h;
  std::vector<float> m, v;
  void step(std::vector<float>& p, const std::vector<float>& g, int t) {
    const size_t n = p.size();
    if (m.empty()) m.assign(n, h.kind == OptimizerKind::Adagrad ? static_cast<float>(h.initial_accumulator_value) : 0.0f);
    if (v.empty()) v.assign(n, 0.0f);
    const float lr = static_cast<float>(h.lr), wd = static_cast<float>(h.weight_decay);
    const float b1 = static_cast<float>(h.beta1), b2 = static_cast<float>(h.beta2), eps = static_cast<float>(h.eps);
    if (h.kind == OptimizerKind::Lion) {  // p *= 1 - lr wd; p -= lr sign(b1 m + (1-b1) g); m = b2 m + (1-b2) g
      for (size_t i = 0; i < n; ++i) {
        const float c = b1 * m[i] + (1 - b1) * g[i];
        p[i] = p[i] * (1 - lr * wd) - lr * static_cast<float>((c > 0) - (c < 0));
        m[i] = b2 * m[i] + (1 - b2) * g[i];
      }
    } else if (h.kind == OptimizerKind::Adagrad) {  // torch.optim.Adagrad
      const float clr = static_cast<float>(h.lr / (1 + (t - 1) * h.lr_decay));
      for (size_t i = 0; i < n; ++i) {
        const float gi = g[i] + wd * p[i];
        m[i] += gi * gi;
        p[i] -= clr * (gi / (std::sqrt(m[i]) + eps));
      }
    } else {  // FusedLamb
      std::vector<float> u(n);
      double w2 = 0, u2 = 0;
      for (size_t i = 0; i < n; ++i) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        u[i] = m[i] / (std::sqrt(v[i]) + eps) + wd * p[i];
        w2 += static_cast<double>(p[i]) * p[i];
        u2 += static_cast<double>(u[i]) * u[i];
      }
      // The kernel's fp32 arithmetic: step size from fp32 bias corrections, ratio in fp32.
      const float wn = std::sqrt(static_cast<float>(w2)), un = std::sqrt(static_cast<float>(u2));
      const float ratio = wn == 0 || un == 0 ? 1.0f : std::clamp(wn / un, static_cast<float>(h.min_coeff),
                                                                 static_cast<float>(h.max_coeff));
      const float bc1 = static_cast<float>(1 - std::pow(b1, t)), bc2 = static_cast<float>(1 - std::pow(b2, t));
      const float step_size = lr * std::sqrt(bc2) / bc1;
      for (size_t i = 0; i < n; ++i) p[i] = p[i] - step_size * ratio * u[i];
    }
  }
};

RunSpec spec_for(OptimizerKind kind, int stage) {
  RunSpec s;
  s.model_json = tiny_gpt_json();
  s.opt = options_for(kind, stage);
  s.steps = kSteps;
  return s;
}

void formula_test(OptimizerKind kind) {
  RunSpec s = spec_for(kind, 0);
  RunSpec init = s;
  init.steps = 0;
  s.capture_grads = true;
  const RunResult start = run_engine(init, MPI_COMM_SELF), got = run_engine(s, MPI_COMM_SELF);
  ASSERT_EQ(got.grads.size(), static_cast<size_t>(kSteps));
  for (size_t p = 0; p < start.params.size(); ++p) {
    Reference ref{s.opt.optimizer, {}, {}};
    std::vector<float> w = start.params[p];
    for (int t = 1; t <= kSteps; ++t) {  // the captured gradients are loss-scaled; the engine unscales exactly
      std::vector<float> g = got.grads[t - 1][p];
      const float unscale = static_cast<float>(1.0 / got.steps[t - 1].loss_scale);
      for (float& x : g) x *= unscale;
      ref.step(w, g, t);
    }
    EXPECT_LE(rel_diff(got.params[p], w), 2e-6) << name_of(kind) << " " << got.names[p];
    EXPECT_GT(rel_diff(got.params[p], start.params[p]), 1e-5) << name_of(kind) << " " << got.names[p] << " did not move";
  }
}

void stages_test(OptimizerKind kind, bool elementwise) {
  const RunSpec base = spec_for(kind, 0);
  const RunResult ref = reference(base);
  std::vector<RunResult> runs;
  for (int stage = 0; stage <= 3; ++stage) {
    RunSpec s = spec_for(kind, stage);
    s.opt.reduce_bucket_size = 700;  // several buckets, parameters split across ranks' slices
    runs.push_back(run_engine(s, MPI_COMM_WORLD));
    if (world_rank() != 0) continue;
    const std::string what = std::string(name_of(kind)) + " stage " + std::to_string(stage);
    // The key bias's zero-true-gradient elements: Lion's sign turns round-off of either sign into
    // a full ±lr step in each run, so the two runs can be 2·lr apart per step.
    const double noise_step = (kind == OptimizerKind::Lion ? 2 : 1) * base.opt.optimizer.lr;
    expect_params_close(runs.back(), ref, 1e-4, noise_step, kSteps, what);
    if (elementwise) EXPECT_TRUE(bitwise_equal(runs.back(), runs.front())) << what << " differs bitwise from stage 0";
    else expect_params_close(runs.back(), runs.front(), 1e-5, noise_step, kSteps, what + " vs stage 0");
  }
}

void offload_test(OptimizerKind kind) {
  for (int stage : {1, 3}) {
    RunSpec dev = spec_for(kind, stage), host = dev;
    host.opt.offload.optimizer = true;
    host.opt.sub_group_size = 300;  // several chunks, pieces of parameters in each
    const RunResult a = run_engine(dev, MPI_COMM_WORLD), b = run_engine(host, MPI_COMM_WORLD);
    if (world_rank() != 0) continue;
    EXPECT_GT(b.offload.chunks, 0) << name_of(kind);
    EXPECT_TRUE(bitwise_equal(a, b)) << name_of(kind) << " stage " << stage << ": offload differs from the device path";
  }
}

}  // namespace

TEST(Optimizers, LionMatchesPublishedFormula) { formula_test(OptimizerKind::Lion); }
TEST(Optimizers, AdagradMatchesTorchFormula) { formula_test(OptimizerKind::Adagrad); }
TEST(Optimizers, LambMatchesFusedLambFormula) { formula_test(OptimizerKind::Lamb); }

TEST(Optimizers, LionEveryStageMatchesOneRank) { stages_test(OptimizerKind::Lion, true); }
TEST(Optimizers, AdagradEveryStageMatchesOneRank) { stages_test(OptimizerKind::Adagrad, true); }
TEST(Optimizers, LambEveryStageMatchesOneRank) { stages_test(OptimizerKind::Lamb, false); }

TEST(Optimizers, LionOffloadBitwise) { offload_test(OptimizerKind::Lion); }
TEST(Optimizers, AdagradOffloadBitwise) { offload_test(OptimizerKind::Adagrad); }
TEST(Optimizers, LambOffloadBitwise) { offload_test(OptimizerKind::Lamb); }

// Stages 1-3: one "lamb norms" all-reduce of [2 x params] fp32 per step, planned and logged;
// stage 0 (every rank holds whole parameters) and the element-wise optimizers issue none.
TEST(Optimizers, LambNormsAllReduceIsPlannedAndLogged) {
  for (OptimizerKind kind : {OptimizerKind::Lamb, OptimizerKind::Lion})
    for (int stage : {0, 2}) {
      const RunResult r = run_engine(spec_for(kind, stage), MPI_COMM_WORLD);
      const bool expected = kind == OptimizerKind::Lamb && stage > 0;
      const size_t words = 2 * r.plan.params.size();
      int planned = 0;
      for (const PlannedCollective& c : r.plan.step_collectives(1))
        if (c.label == "lamb norms") {
          ++planned;
          EXPECT_EQ(c.op, CommOp::AllReduce);
          EXPECT_EQ(c.count, words);
          EXPECT_EQ(c.bytes, words * 4);
        }
      EXPECT_EQ(planned, expected ? 1 : 0) << name_of(kind) << " stage " << stage;
      int logged = 0;
      for (const CommRecord& c : r.records)
        if (c.label == "lamb norms" && c.seq >= r.first_step_seq && c.seq <= r.last_step_seq) ++logged;
      EXPECT_EQ(logged, expected ? kSteps : 0) << name_of(kind) << " stage " << stage;
    }
}

// The memory predictor counts each optimizer's moments (Lion, Adagrad 1; LAMB 2), on the device
// and, with offload, in host memory: predicted == measured.
TEST(Optimizers, MomentMemoryMatchesPrediction) {
  for (OptimizerKind kind : {OptimizerKind::Lion, OptimizerKind::Adagrad, OptimizerKind::Lamb})
    for (bool offload : {false, true}) {
      RunSpec s = spec_for(kind, 2);
      s.opt.offload.optimizer = offload;
      s.steps = 1;
      const RunResult r = run_engine(s, MPI_COMM_WORLD);
      const MemCategory cat = offload ? MemCategory::HostMoments : MemCategory::OptimMoments;
      const int64_t moments = kind == OptimizerKind::Lamb ? 2 : 1;
      bool seen = false;
      for (const MemoryLine& l : r.memory) {
        if (l.category != cat) continue;
        seen = true;
        EXPECT_EQ(l.predicted, l.measured) << name_of(kind) << (offload ? " offload" : "");
        EXPECT_EQ(l.measured, moments * r.plan.shard_numel * 4) << name_of(kind) << (offload ? " offload" : "");
      }
      EXPECT_TRUE(seen) << name_of(kind);
    }
}
