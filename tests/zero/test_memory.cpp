// Activation recompute and the memory prediction under mpirun (CPU backend):
//  * recompute block / selective vs none, stages 0-3: losses and final weights bitwise equal; the
//    activations category (peak) equals an independent formula — the block inputs plus one
//    block's internals for `block`;
//  * the prediction (memory_predict.h, what `zerotrain estimate` prints) equals the measured
//    memory report for every category it predicts — gpt-tiny, a 4-layer GPT and the MLP, stages
//    0-3, two bucket sizes, stage-3 knobs, recompute on/off, cpu_checkpointing (host_activations)
//    — from a plan-only model, as the estimate builds it; the communicator category (the MPI
//    chunk scratch) also equals the documented formula at 1-4 ranks;
//  * activations + workspace grow at most 2.2x per doubling of T (tiled attention: linear).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "engine_harness.h"
#include "zerotrain/model/mlp.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/zero/memory_predict.h"

#include <nlohmann/json.hpp>

using namespace zt;
using namespace zt::testing;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int world_size() { int n; MPI_Comm_size(MPI_COMM_WORLD, &n); return n; }

int64_t line_of(const RunResult& r, MemCategory c, bool peak) {
  for (const MemoryLine& l : r.memory)
    if (l.category == c) return peak ? l.peak : l.measured;
  return -1;
}
int64_t predicted_of(const RunResult& r, MemCategory c) {
  for (const MemoryLine& l : r.memory)
    if (l.category == c) return l.predicted;
  return -1;
}

// Activations of the GPT written out from its definition (gpt.cpp header), not from gpt_buffer_plan.
int64_t gpt_activation_formula(int64_t V, int64_t T, int64_t L, int64_t H, int64_t C, int64_t B, int64_t e,
                               Recompute r) {
  const int64_t N = B * T;
  const int64_t stats = B * H * T * 2 * 4;                       // tiled attention's (max, sum)
  const int64_t kept_sel = 10 * N * C * e + 4 * N * 4;          // ln1, qkv (3), mid, ln2, fc (4) + 4 stats vectors
  const int64_t dropped_sel = stats + N * C * e + 4 * N * C * e;  // att, atty, fc_gelu
  const int64_t block = kept_sel + dropped_sel;
  const int64_t base = 4 + 4 * N + 8 * N + (L + 1) * N * C * e + N * C * e + 8 * N + N * V * e + 4 * N;
  switch (r) {
    case Recompute::None: return base + L * block;
    case Recompute::Block: return base + block;
    case Recompute::Selective: return base + L * kept_sel + dropped_sel;
  }
  return -1;
}

TEST(Recompute, BitwiseIdenticalAndActivationsDropToTheFormula) {
  const int64_t V = 16, T = 8, L = 3, H = 2, C = 16, B = 2;
  for (int stage = 0; stage <= 3; ++stage) {
    RunSpec base;
    base.model_json = tiny_gpt_json(V, T, L, H, C);
    base.opt = adamw_options(stage);
    base.opt.reduce_bucket_size = 300;
    base.steps = 3;
    base.micro_batch = B;
    RunResult ref = run_engine(base, MPI_COMM_WORLD);
    EXPECT_EQ(line_of(ref, MemCategory::Activations, true), gpt_activation_formula(V, T, L, H, C, B, 4, Recompute::None));
    for (Recompute rc : {Recompute::Block, Recompute::Selective}) {
      RunSpec s = base;
      s.recompute = rc;
      RunResult r = run_engine(s, MPI_COMM_WORLD);
      const std::string what = std::string("stage ") + std::to_string(stage) + " recompute " + recompute_name(rc);
      const int64_t want = gpt_activation_formula(V, T, L, H, C, B, 4, rc);
      EXPECT_EQ(line_of(r, MemCategory::Activations, true), want) << what;
      EXPECT_EQ(predicted_of(r, MemCategory::Activations), want) << what;
      EXPECT_LT(want, line_of(ref, MemCategory::Activations, true)) << what;
      if (world_rank() != 0) continue;
      ASSERT_EQ(r.steps.size(), ref.steps.size());
      for (size_t k = 0; k < ref.steps.size(); ++k) EXPECT_EQ(r.steps[k].loss, ref.steps[k].loss) << what;
      for (size_t p = 0; p < ref.params.size(); ++p)
        EXPECT_EQ(0, std::memcmp(r.params[p].data(), ref.params[p].data(), ref.params[p].size() * sizeof(float)))
            << what << " " << ref.names[p];
    }
  }
}

// Activations of the Llama written out from its definition (llama.cpp header), not from
// llama_buffer_plan: qw = H·hs, kw = Hkv·hs.
int64_t llama_activation_formula(int64_t V, int64_t T, int64_t L, int64_t H, int64_t Hkv, int64_t C, int64_t I,
                                 int64_t B, int64_t e, Recompute r) {
  const int64_t N = B * T, hs = C / H, qw = H * hs, kw = Hkv * hs;
  const int64_t stats = B * H * T * 2 * 4;
  const int64_t kept_sel = (2 * C + qw + 2 * kw + C + 2 * I) * N * e + 2 * N * 4;  // ln1, ln2, q, k, v, mid, gate, up + rstd
  const int64_t dropped_sel = stats + N * qw * e + N * I * e;                      // att, atty, act
  const int64_t block = kept_sel + dropped_sel;
  // loss, ones, tokens, targets, residual 0..L, rope table, lnf + rstd, logits, losses
  const int64_t base = 4 + 4 * N + 8 * N + (L + 1) * N * C * e + T * hs * 4 + N * C * e + 4 * N + N * V * e + 4 * N;
  switch (r) {
    case Recompute::None: return base + L * block;
    case Recompute::Block: return base + block;
    case Recompute::Selective: return base + L * kept_sel + dropped_sel;
  }
  return -1;
}

TEST(Recompute, LlamaBitwiseIdenticalAndActivationsDropToTheFormula) {
  for (int stage = 0; stage <= 3; ++stage) {
    RunSpec base;
    base.model_json = tiny_llama_json(true, 3);
    base.opt = adamw_options(stage);
    base.opt.reduce_bucket_size = 300;
    base.steps = 2;
    base.micro_batch = 2;
    RunResult ref = run_engine(base, MPI_COMM_WORLD);
    EXPECT_EQ(line_of(ref, MemCategory::Activations, true),
              llama_activation_formula(16, 8, 3, 4, 2, 16, 24, 2, 4, Recompute::None));
    for (Recompute rc : {Recompute::Block, Recompute::Selective}) {
      RunSpec s = base;
      s.recompute = rc;
      RunResult r = run_engine(s, MPI_COMM_WORLD);
      const std::string what = std::string("stage ") + std::to_string(stage) + " recompute " + recompute_name(rc);
      const int64_t want = llama_activation_formula(16, 8, 3, 4, 2, 16, 24, 2, 4, rc);
      EXPECT_EQ(line_of(r, MemCategory::Activations, true), want) << what;
      EXPECT_EQ(predicted_of(r, MemCategory::Activations), want) << what;
      if (world_rank() != 0) continue;
      ASSERT_EQ(r.steps.size(), ref.steps.size());
      for (size_t k = 0; k < ref.steps.size(); ++k) EXPECT_EQ(r.steps[k].loss, ref.steps[k].loss) << what;
      EXPECT_TRUE(bitwise_equal(r, ref)) << what;
    }
  }
}

// The MPI communicator's chunk scratch as docs/design.md states it: none at one rank, else
// max(2·(n−1)·256 KiB pipelined chunks, n·16 KiB small all-reduce contributions).
int64_t mpi_scratch_formula(int n) {
  return n == 1 ? 0 : std::max<int64_t>(2 * (n - 1) * (int64_t(256) << 10), n * (int64_t(16) << 10));
}

// The estimate's path: a plan-only model (nothing allocated) -> plan_for_model -> predict_memory.
MemoryPrediction offline(const RunSpec& s, int world, int rank) {
  auto dev = make_cpu_device();
  auto stream = dev->create_stream("plan");
  ModelOptions mo;
  mo.compute_dtype = s.opt.compute_dtype;
  mo.micro_batch = s.micro_batch;
  mo.recompute = s.recompute;
  mo.cpu_checkpointing = s.cpu_checkpointing;
  mo.device = dev.get();
  mo.stream = stream.get();
  mo.plan_only = true;
  auto model = make_model(parse_model_config(nlohmann::json::parse(s.model_json), "<test>"), mo);
  CommOptions copt;  // the harness's options (only the timeout differs from the defaults)
  const MemoryPrediction p = predict_memory(plan_for_model(*model, s.opt, world), s.opt, rank, model->buffer_plan(),
                                            comm_buffer_plan(CommBackend::MPI, world, copt));
  EXPECT_EQ(dev->tracker().current_total(), 0u) << "the estimate allocated";
  return p;
}

TEST(Estimate, EqualsTheMeasuredReport) {
  struct M { const char* name; std::string json; };
  const M models[] = {{"gpt-tiny", tiny_gpt_json()}, {"gpt 4 layers", tiny_gpt_json(32, 16, 4, 4, 32)},
                      {"mlp", tiny_mlp_json()}, {"llama", tiny_llama_json()}, {"llama tied 3 layers", tiny_llama_json(true, 3)}};
  for (const M& m : models)
    for (int stage = 0; stage <= 3; ++stage)
      for (int64_t bucket : {int64_t(500), int64_t(100000)})
        for (int variant = 0; variant < 3; ++variant) {
          if (variant == 2 && std::string(m.name) == "mlp") continue;  // cpu_checkpointing is the GPT's
          RunSpec s;
          s.model_json = m.json;
          if (std::string(m.name) == "mlp") s.data = "teacher:noise=0.1,seed=2";
          s.opt = adamw_options(stage);
          s.opt.reduce_bucket_size = bucket;
          s.steps = 1;
          if (variant == 1) {  // recompute (GPT) and stage-3 knobs, bf16 compute
            s.recompute = Recompute::Block;
            s.opt.compute_dtype = s.opt.wire_dtype = DType::BF16;
            s.opt.param_persistence_threshold = 64;
            s.opt.prefetch_bucket_size = 800;
            s.opt.max_live_parameters = 2000;
          }
          if (variant == 2) {  // selective recompute, block inputs in host memory
            s.recompute = Recompute::Selective;
            s.cpu_checkpointing = true;
          }
          const std::string what = std::string(m.name) + " stage " + std::to_string(stage) + " bucket " +
                                   std::to_string(bucket) + " variant " + std::to_string(variant);
          RunResult r = run_engine(s, MPI_COMM_WORLD);
          const MemoryPrediction p = offline(s, world_size(), world_rank());
          for (const MemoryLine& l : r.memory) {
            const int64_t want = p.at(l.category);
            EXPECT_EQ(l.predicted, want) << what << " " << mem_category_name(l.category);  // same code in-run
            if (want < 0) continue;
            // Gather is transient (its peak); everything else is held (current).
            const int64_t got = l.category == MemCategory::Gather ? l.peak : l.measured;
            EXPECT_EQ(got, want) << what << " " << mem_category_name(l.category);
            if (l.category == MemCategory::Communicator) {
              EXPECT_EQ(got, mpi_scratch_formula(world_size())) << what;
            }
          }
          EXPECT_EQ(p.at(MemCategory::HostActivations) > 0, variant == 2) << what;
        }
}

TEST(Estimate, ActivationsAndWorkspaceAreLinearInT) {
  int64_t prev = 0;
  for (int64_t T : {256, 512, 1024, 2048}) {
    RunSpec s;
    s.model_json = tiny_gpt_json(16, static_cast<int>(T), 1, 2, 16);
    s.opt = adamw_options(2);
    s.micro_batch = 1;
    s.steps = 1;
    s.data = "markov:vocab=16,order=1,seed=5";
    RunResult r = run_engine(s, MPI_COMM_WORLD);
    const int64_t now = line_of(r, MemCategory::Activations, true) + line_of(r, MemCategory::Workspace, false);
    if (prev > 0) {
      EXPECT_LE(static_cast<double>(now) / static_cast<double>(prev), 2.2) << "T " << T;
    }
    prev = now;
  }
}

}  // namespace
