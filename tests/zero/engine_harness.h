// engine_harness.h — runs the ZeRO engine in-process over an MPI communicator (the world, or
// MPI_COMM_SELF for a single-rank reference) on the CPU backend, for the engine tests.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/memory_pool.h"
#include "zerotrain/zero/engine.h"
#include "zerotrain/zero/step_program.h"

namespace zt::testing {

struct RunSpec {
  EngineOptions opt;
  int steps = 5;
  int64_t micro_batch = 2;
  Recompute recompute = Recompute::None;  // GPT activation recompute
  bool cpu_checkpointing = false;         // with recompute: kept block inputs in host memory
  std::string model_json;        // model file contents
  std::string data = "markov:vocab=16,order=1,seed=5";
  uint64_t seed = 7;
  int fail_rank_bucket_size = -1;  // this rank uses a different bucket size (schedule mismatch test)
  // At these optimizer-step attempts (1-based), rank (step % N) writes +inf into its first owned
  // real gradient element before the norm (engine_testing.h), so overflow agreement can be tested.
  std::vector<int64_t> inject_overflow_at_steps;
  TimingLevel timing = TimingLevel::Off;  // ZeroEngine::set_timing before the first step
  // Before every norm, read back the owned gradient padding and count what is not +0.0
  // (RunResult::padding_grads_*). Off by default: it synchronises the compute stream.
  bool check_padding = false;
  // One rank at stage 0 only: copy every parameter's gradient before each step's norm
  // (RunResult::grads), for optimizer references written from the published formulas.
  bool capture_grads = false;
  // Evaluations (ZeroEngine::eval_loss): after each listed number of steps (0: before the first;
  // a number listed twice: two evaluations there), every micro-batch of the fixed global batch RunResult::kEvalBatch, split across the ranks like
  // a training batch.
  std::vector<int> eval_after_steps;
};

struct RunResult {
  std::vector<std::vector<float>> params;  // full fp32 master weights (rank 0 of the communicator)
  std::vector<std::string> names;
  std::vector<StepStats> steps;
  GatherStats gather;
  OffloadStats offload;                    // ZeRO-Offload copies and chunks
  uint64_t all_gathers = 0;                // comm-log all_gather calls (incl. one "step stats" per step)
  uint64_t reduce_scatters = 0, all_reduces = 0;
  std::vector<MemoryLine> memory;
  int64_t gather_peak_bytes = 0;           // tracker peak of MemCategory::Gather
  PoolStats pool, pool_after_first_step;   // the device's memory pool after the last / first step
  ZeroPlan plan;
  std::vector<std::vector<int>> unit_params;
  std::vector<CommRecord> records;         // the comm log's ring, oldest first
  // Collectives issued by the steps: seq in [first_step_seq, last_step_seq] (init and the final
  // gather_parameters excluded).
  uint64_t first_step_seq = 0, last_step_seq = 0;
  std::vector<double> step_wall_ms;        // host wall time of each step (micro-steps + step())
  std::vector<StepTimeline> timelines;     // TimingLevel::Trace
  // With RunSpec::check_padding: owned gradient elements that are alignment padding (plan.h),
  // checked before every norm on this rank, and how many of them were not +0.0 (must be none).
  int64_t padding_grads_checked = 0, padding_grads_nonzero = 0;
  // With RunSpec::capture_grads: the gradient each step's optimizer read, [step][parameter].
  std::vector<std::vector<std::vector<float>>> grads;
  // Every op of the step program the engine ran on this rank during the steps, in order.
  std::vector<StepOp> ops;
  static constexpr int64_t kEvalBatch = 1000;  // the data index the evaluations read
  // Per evaluation: this rank's micro-batch losses, and the device pool's leased bytes and
  // gather counters just before and just after it.
  std::vector<std::vector<double>> eval_losses;
  std::vector<size_t> pool_in_use_before_eval, pool_in_use_after_eval;
  std::vector<int64_t> gathers_before_eval, gathers_after_eval;
};

RunResult run_engine(const RunSpec& spec, MPI_Comm comm);

// A tiny GPT / MLP model file (init_std 0.1 so every block matters to the loss).
std::string tiny_gpt_json(int vocab = 16, int n_ctx = 8, int layers = 2, int heads = 2, int embd = 16);
std::string tiny_mlp_json();
// A tiny Llama (vocab 16, n_ctx 8, C 16, I 24, 4 query heads over 2 key/value heads, init_std 0.1).
std::string tiny_llama_json(bool tied = false, int layers = 2);
// One step of tiny_gpt_json with several buckets per unit at every stage; at stage 3 small
// parameters persistent, the rest gathered per use with a prefetch window of one bucket and a
// live cap.
RunSpec small_buckets(int stage, bool overlap);
// AdamW, lr 1e-2, eps 1e-4, wd 0.01, gradient_clipping 0.3 (active: coefficient < 1).
// eps: Adam divides the round-off of a nearly cancelling gradient element by eps. With eps 1e-6
// a 3-rank run (fp32 sums in another order than one rank) moved one h.1.attn.c_proj.bias element
// by 2.3e-6 after 5 steps (5.8e-5 of the tensor's max); with 1e-4 every case stays below 1e-5.
EngineOptions adamw_options(int stage);

// Max over a tensor of |a-b| relative to max|ref| of that tensor.
double rel_diff(const std::vector<float>& a, const std::vector<float>& ref);
// Every parameter within `tol` relative of the reference. The key part of each c_attn bias
// has an exactly zero true gradient (docs/design.md §7): Adam (and Lion, Adagrad) turn its
// round-off into steps of up to lr, so it is bounded by lr * steps instead.
void expect_params_close(const RunResult& got, const RunResult& ref, double tol, double lr, int steps,
                         const std::string& what);
bool bitwise_equal(const RunResult& a, const RunResult& b);
// One rank, stage 0, default buckets, the same global batch (micro batch x world size).
RunResult reference(RunSpec spec, bool scale_batch = true);

}  // namespace zt::testing
