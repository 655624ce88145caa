// cmd_train.cpp — `zerotrain train`: one process per rank (mpirun/srun), the ZeRO engine; progress, outputs.
// run_train: set up (set_up) -> optimizer steps (train_loop) -> outputs (write_outputs).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "commands.h"
#include "metrics_writer.h"
#include "mfu.h"
#include "zerotrain/app/monitors.h"
#include "non_finite.h"
#include "observe.h"
#include "rank_agreement.h"
#include "stop_signals.h"
#include "zerotrain/app/thread_layout.h"
#include "train_agreement.h"
#include "train_checkpoint.h"
#include "stage3_note.h"
#include "train_checks.h"
#include "train_eval.h"
#include "train_progress.h"
#include "train_sample.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/ckpt/weights_export.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/kernels/cuda_ops.h"
#include "zerotrain/model/mlp.h"
#include "zerotrain/model/weights_io.h"

namespace zt {

namespace {

struct Rank0Log {
  int rank = 0;
  template <typename... A> void operator()(const char* fmt, A... args) const {
    if (rank != 0) return;
    std::printf(fmt, args...);
    std::fflush(stdout);
  }
};

// Everything a run holds. Members are destroyed in reverse order: the engine (which refers to
// the model, device, streams, communicator and options) goes first.
struct TrainRun {
  NodeLocal local;
  std::unique_ptr<Device> dev;
  std::unique_ptr<Communicator> comm;
  ModelConfig model_cfg;
  DsConfig cfg;
  EngineOptions engine_opt;
  std::unique_ptr<Stream> compute;
  std::unique_ptr<Model> model;
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Dataset> eval_data;  // --eval-data
  std::unique_ptr<LrSchedule> sched;  // built in phase A, handed to the engine
  std::unique_ptr<ZeroEngine> engine;
  std::optional<Monitors> monitors;  // rank 0, with tensorboard or csv_monitor enabled
};

bool wants_cuda(const std::string& want) { return want == "cuda" || (want == "auto" && cuda_device_count() > 0); }

// Local check (phase A): a CUDA device asked for where none is visible.
void check_device_available(const std::string& want) {
  if (want == "cuda" && cuda_device_count() == 0)
    throw InputError("train: --device cuda, but no CUDA GPU is visible on " + process_info().host);
  cpu_kernel_paths();  // ZT_CPU_ISA and ZT_CPU_BF16_GEMM are valid (InputError otherwise)
}

std::unique_ptr<Device> pick_device(const std::string& want) {
  if (!wants_cuda(want)) return make_cpu_device();
  return make_cuda_device(select_local_cuda_device(MPI_COMM_WORLD));  // collective: distinct GPUs per node
}

// Every rank's line "rank R host H node N/K local_rank L/S device D", printed by rank 0 in rank
// order.
void print_rank_map(Communicator& comm, const NodeLocal& local, const Device& dev) {
  char line[256];
  std::snprintf(line, sizeof(line), "  rank %d  host %s  node %d/%d  local_rank %d/%d  device %s", comm.rank(),
                process_info().host.c_str(), local.node, local.nodes, local.local_rank, local.local_size,
                dev.description().c_str());
  std::vector<std::string> all = comm.gather_strings(line, 0, "rank map");
  if (comm.rank() != 0) return;
  std::printf("rank map:\n");
  for (const std::string& l : all) std::printf("%s\n", l.c_str());
}

void warn_rank0(const Communicator& comm, const char* prefix, const std::vector<std::string>& warnings) {
  if (comm.rank() != 0) return;
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s%s\n", prefix, w.c_str());
}

// DeepSpeed tutorials set NCCL/PyTorch variables zerotrain does not read: say what it uses.
void notice_foreign_timeout_variables() {
  for (char** e = ::environ; e && *e; ++e) {  // <unistd.h> declares environ (g++ defines _GNU_SOURCE)
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (name == "NCCL_TIMEOUT" || name == "NCCL_ASYNC_ERROR_HANDLING" || name.rfind("TORCH_NCCL_", 0) == 0 ||
        name == "NCCL_BLOCKING_WAIT")
      std::fprintf(stderr, "notice: %s is a PyTorch/NCCL setting zerotrain does not read; its hang timeout is "
                   "ZT_COMM_TIMEOUT_S (seconds, default 300), and a failed or stuck rank always ends the job (exit 3)\n",
                   name.c_str());
  }
}

// train --cuda-graph's rules (zero/step_graph.h graph_refusal) for this run's flags and config.
GraphEligibility graph_eligibility(const TrainRun& run, const TrainArgs& args) {
  GraphEligibility g;
  g.device = wants_cuda(args.device) ? DeviceKind::CUDA : DeviceKind::CPU;
  g.stage = run.engine_opt.stage;
  g.offload_optimizer = run.engine_opt.offload.optimizer;
  g.offload_params = run.engine_opt.offload.params;
  g.timing = run.cfg.wall_clock_breakdown || !args.trace_dir.empty();
  g.comm_log = !args.comm_log.empty() || run.cfg.comms_logger.enabled;
  g.side_stream = run.cfg.activation_cpu_checkpointing && recompute_of(run.cfg, args.recompute) != Recompute::None;
  g.sync_check = kernels::sync_check_enabled();
  g.warmup_steps = static_cast<int>(std::min<int64_t>(args.cuda_graph_warmup, 1 << 30));
  return g;
}

// Phase A, no collective and no allocation: model file, config, engine options, schedule, data,
// model size, output paths. Every rank runs it; run_train agrees on the verdict.
void check_inputs(TrainRun& run, const TrainArgs& args, int rank, int world) {
  check_device_available(args.device);
  CommOptions::default_timeout_s();  // ZT_COMM_TIMEOUT_S is valid (InputError otherwise)
  if (wants_cuda(args.device)) NcclBufferSizes::from_env();  // so are the NCCL_* sizes the memory report reads
  if (rank == 0) notice_foreign_timeout_variables();
  run.model_cfg = train_model_config(args);
  check_sample_flags(args, run.model_cfg);
  run.cfg = load_config(args, run.model_cfg, world);
  run.engine_opt = engine_options_from(run.cfg, args.client_optimizer);
  run.sched = schedule_from(run.cfg, run.engine_opt.optimizer);
  check_model_fits(run.cfg, run.model_cfg, world, recompute_of(run.cfg, args.recompute), args.client_optimizer,
                   !wants_cuda(args.device));
  if (args.cuda_graph) {  // opt-in: a run the graphs cannot serve is refused (exit 2), never silently eager
    const std::string refusal = graph_refusal(graph_eligibility(run, args));
    if (!refusal.empty()) throw InputError("train: --cuda-graph: " + refusal);
  }
  if (rank == 0) check_output_paths(args, world);
  check_data_cursor(args.steps, run.cfg.train_batch_size);
  run.data = make_dataset(args.data, dataset_shape(run.model_cfg, run.cfg, args.seed, rank, world));
  run.eval_data = make_eval_data(args, dataset_shape(run.model_cfg, run.cfg, args.seed, rank, world));
  if (rank == 0 && (run.cfg.tensorboard.enabled || run.cfg.csv_monitor.enabled))
    run.monitors.emplace(run.cfg.tensorboard, run.cfg.csv_monitor, run.cfg.fp16.enabled, run.cfg.wall_clock_breakdown,
                         args.eval_every > 0);
}

// Phase B: device, model, communicator and engine; prints the set-up lines. Inputs are valid.
void set_up(TrainRun& run, const TrainArgs& args, Rank0Log& log, const MaxOverRanks& world_max, int rank, int world) {
  run.local = node_local(MPI_COMM_WORLD);
  const ThreadLayout threads = apply_thread_layout(run.local.local_size, !wants_cuda(args.device));  // before any pool
  run.dev = pick_device(args.device);
  log.rank = rank;
  const EngineOptions& eopt = run.engine_opt;
  run_agreed(world_max, rank, world, "zerotrain train", [&] {
    run.compute = run.dev->create_stream("compute");
    ModelOptions mopt;
    mopt.compute_dtype = eopt.compute_dtype;
    mopt.micro_batch = run.cfg.train_micro_batch_size_per_gpu;
    mopt.recompute = recompute_of(run.cfg, args.recompute);
    mopt.cpu_checkpointing = run.cfg.activation_cpu_checkpointing;
    mopt.device = run.dev.get();
    mopt.stream = run.compute.get();
    run.model = make_model(run.model_cfg, mopt);
  });
  run.comm = make_communicator(*run.dev);
  warn_rank0(*run.comm, "", run.cfg.warnings);
  warn_rank0(*run.comm, "scheduler: ", run.sched->warnings());
  print_rank_map(*run.comm, run.local, *run.dev);
  log("threads: %s\n", describe(threads).c_str());
  run.engine = std::make_unique<ZeroEngine>(*run.model, *run.dev, *run.compute, *run.comm, eopt, std::move(run.sched));
  log("model: %s\n", run.model->describe().c_str());
  log("data: %s\n", run.data->describe().c_str());
  if (run.eval_data)
    log("validation: %s; %lld global batch(es) every %lld step(s) and at the end\n", run.eval_data->describe().c_str(),
        static_cast<long long>(args.eval_batches), static_cast<long long>(args.eval_every));
  log("ZeRO stage %d, world %d, batch %lld = micro %lld x accumulation %lld x ranks %d, %s compute, overlap_comm %s\n",
      eopt.stage, world, static_cast<long long>(run.cfg.train_batch_size),
      static_cast<long long>(run.cfg.train_micro_batch_size_per_gpu),
      static_cast<long long>(run.cfg.gradient_accumulation_steps), world, dtype_name(eopt.compute_dtype),
      eopt.overlap_comm ? "on" : "off");
  log("%s", bf16_cpu_note(eopt.compute_dtype == DType::BF16, run.dev->kind() == DeviceKind::CPU).c_str());
  log("%s\n", optimizer_line(run.cfg, args.client_optimizer, eopt.optimizer).c_str());
  const OffloadOptions& off = eopt.offload;
  if (off.optimizer) {
    log("offload: optimizer states and master weights%s in %s host memory; CPU optimizer on %d thread(s), %d staging "
        "slots\n", off.params ? " and the parameter shard" : "", off.pin_memory ? "pinned" : "pageable",
        off.host_threads, off.buffer_count);
  }
  log("%s%s", run.engine->plan().describe().c_str(),
      stage3_threshold_note(run.cfg, run.model_cfg, world, recompute_of(run.cfg, args.recompute),
                            wants_cuda(args.device) ? CommBackend::NCCL : CommBackend::MPI, args.client_optimizer).c_str());
  if (!args.cuda_graph) {
    log("cuda graph: off\n");
    return;
  }
  run.engine->enable_cuda_graphs(static_cast<int>(args.cuda_graph_warmup), [&log](const std::string& line) {
    log("%s\n", line.c_str());
  });
  log("cuda graph: on; captured per micro-step kind after %lld eager step(s): every unit's forward, the loss "
      "accumulation, every unit's backward and its grad-sync launches (compute + comm streams); not captured: the "
      "batch upload and the boundary step (norm/loss readback, clipping, overflow, optimizer, parameter all-gather)\n",
      static_cast<long long>(args.cuda_graph_warmup));
}

MaxOverRanks comm_max(Communicator& comm) {
  return [&comm](const std::vector<int64_t>& v) { return comm.max_over_ranks(v, "verdict"); };
}

void init_weights(TrainRun& run, const TrainArgs& args, Rank0Log& log) {
  if (args.init_from.empty()) {
    run.engine->init_parameters(args.seed);
    return;
  }
  // Each rank reads (and checks for non-finite values) its own slices. load_parameters ends in
  // collectives (shards -> parameters), so a slice error must not leave it early: it is recorded,
  // the load completes with zeros, and the ranks agree on the verdict afterwards.
  const MaxOverRanks max = comm_max(*run.comm);
  const int rank = run.comm->rank(), world = run.comm->world_size();
  std::unique_ptr<ModelWeightsReader> reader;
  run_agreed(max, rank, world, "zerotrain train",
             [&] {
               reader = std::make_unique<ModelWeightsReader>(args.init_from, run.model->params(), args.allow_non_finite);
             });
  std::string slice_error;
  run.engine->load_parameters([&](int p, int64_t begin, int64_t count, float* out) {
    try {
      if (slice_error.empty()) return reader->read_param_slice(p, begin, count, out);
    } catch (const InputError& e) {
      slice_error = e.what();
    }
    std::fill(out, out + count, 0.0f);
  });
  run_agreed(max, rank, world, "zerotrain train", [&] {
    if (!slice_error.empty()) throw InputError(slice_error);
  });
  log("initialised from %s\n", args.init_from.c_str());
}

// wall_clock_breakdown, --trace, --comm-log and comms_logger around the training loop.
struct Observers {
  bool breakdown = false, tracing = false;
  StepRange trace_steps;
  double clock_origin_s = 0;              // the start-up barrier on this rank's comm log clock
  std::optional<CommLogWriter> comm_log;
  std::vector<StepBreakdown> steps;

  Observers(TrainRun& run, const TrainArgs& args)
      : breakdown(run.cfg.wall_clock_breakdown), tracing(!args.trace_dir.empty()),
        trace_steps(parse_step_range("train: --trace-steps", args.trace_steps)) {
    if (tracing) clock_origin_s = align_clocks(*run.comm);
  }
  // Per-rank output files (--comm-log opened, --trace's directory and files checked): the caller
  // agrees on the verdict, so one rank's bad path ends every rank with exit 2.
  void open_outputs(TrainRun& run, const TrainArgs& args) {
    if (tracing) check_trace_outputs(args.trace_dir, run.comm->rank());
    if (!args.comm_log.empty()) comm_log.emplace(args.comm_log, *run.comm);
  }
  TimingLevel level(int64_t step) const {  // step: 1-based
    if (tracing && trace_steps.contains(step)) return TimingLevel::Trace;
    return breakdown ? TimingLevel::Breakdown : TimingLevel::Off;
  }
  void after_step(TrainRun& run, const StepStats& st) {
    if (breakdown && st.breakdown) steps.push_back(*st.breakdown);
    if (steps.size() > kOwnExposedSteps)  // the summary reads only the last ones' waits
      std::vector<double>().swap(steps[steps.size() - 1 - kOwnExposedSteps].comm_stall_exposed_ms);
    if (comm_log) comm_log->write_completed();
  }
  // Collective: every rank calls it once, after the last step.
  void finish(TrainRun& run, const TrainArgs& args, Rank0Log& log) {
    Communicator& comm = *run.comm;
    if (breakdown) log("%s", breakdown_summary(comm, steps).c_str());
    if (tracing) {
      write_traces(args.trace_dir, comm, run.engine->take_timelines(), clock_origin_s);
      log("trace: %s/trace.json (every rank) and trace.rank<r>.json; open in https://ui.perfetto.dev or chrome://tracing\n",
          args.trace_dir.c_str());
    }
    comm.synchronize();
    if (comm_log)
      run_agreed(comm_max(comm), comm.rank(), comm.world_size(), "zerotrain train", [&] {
        comm_log->write_completed();
        comm_log->close();
      });
    const CommsLoggerConfig& cl = run.cfg.comms_logger;
    if (!cl.enabled) return;
    const std::vector<std::string> all =
        comm.gather_strings(comm_summary(comm, cl.prof_all, cl.prof_ops), 0, "comms_logger");
    for (size_t r = 0; r < all.size(); ++r) log("rank %zu %s", r, all[r].c_str());
  }
};

// One optimizer step: gradient_accumulation_steps micro-steps, then the update.
StepStats optimizer_step(TrainRun& run, int64_t k, Batch& batch) {
  const int gas = static_cast<int>(run.cfg.gradient_accumulation_steps);
  const int64_t mbs = run.cfg.train_micro_batch_size_per_gpu;
  for (int j = 0; j < gas; ++j) {
    run.data->fill(k, sample_range(run.comm->rank(), run.comm->world_size(), j, gas, mbs), mbs, batch);
    run.engine->micro_step(batch);
  }
  try {
    return run.engine->step();
  } catch (const LossScaleAtMinimum& e) {
    // The loss scale is the same on every rank, so every rank is here: rank 0 reports.
    if (run.comm->rank() == 0)
      std::fprintf(stderr, "zerotrain train: error: step %lld: fp16 loss scale: %s (gradients overflow even at "
                   "fp16.min_loss_scale; lower the learning rate or use bf16)\n", static_cast<long long>(k + 1), e.what());
    throw AgreedFailure(kExitBadInput);
  }
}

// Global steps start..args.steps-1 (start > 0 after --resume); checkpoints as the flags ask.
void train_loop(TrainRun& run, const TrainArgs& args, Rank0Log& log, int64_t start, TrainCheckpoints& ckpt) {
  Observers obs(run, args);
  const int rank = run.comm->rank();
  std::optional<MetricsWriter> metrics;  // rank 0; with wall_clock_breakdown every rank (F.rank<r>)
  const MaxOverRanks max = comm_max(*run.comm);
  const int world = run.comm->world_size();
  run_agreed(max, rank, world, "zerotrain train", [&] {
    if (!args.metrics.empty() && (rank == 0 || obs.breakdown))
      metrics.emplace(per_rank_output(args.metrics, rank));
    obs.open_outputs(run, args);
  });
  NonFiniteWatch nonfinite(args.max_skipped_steps, run.engine_opt.check_overflow);
  const int64_t every = progress_interval(args, run.cfg);
  const int64_t tbs = run.cfg.train_batch_size;
  const ModelConfig& mcfg = run.model_cfg;
  const double tokens_per_sample = static_cast<double>(mcfg.context_length());
  const DType compute = run.engine_opt.compute_dtype;
  const double peak = device_peak_flops(*run.dev, compute) * run.comm->world_size();
  if (peak > 0)
    log("MFU: model FLOPs per sample %.4g (PaLM: 6N + 12*L*C*T per token) / peak %.4g FLOP/s (%d x %s dense %s)\n",
        run.model->flops_per_sample(), peak, run.comm->world_size(), run.dev->description().c_str(),
        dtype_name(compute));
  if (run.monitors) log("%s", run.monitors->describe().c_str());
  int64_t samples_done = start * tbs;
  if (start > 0 && start >= args.steps)
    log("the checkpoint is at step %lld and --steps is %lld: nothing to train\n", static_cast<long long>(start),
        static_cast<long long>(args.steps));
  TrainEval evals(args, std::move(run.eval_data), run.cfg.train_micro_batch_size_per_gpu,
                  static_cast<int>(run.cfg.gradient_accumulation_steps), ckpt.resumed_validation());
  TrainSampler samples(args, run.model_cfg);
  const auto line = [&log](const std::string& l) { log("%s", l.c_str()); };
  if (start >= args.steps && evals.enabled())  // nothing to train: the loaded weights' validation loss
    log("step %5lld | val loss %.6f\n", static_cast<long long>(start), evals.evaluate(*run.engine, *run.comm));
  int64_t last = std::max(start, args.steps);
  Batch batch;
  for (int64_t k = start; k < args.steps; ++k) {
    line(epoch_line(k, tbs, run.data->sequences_per_epoch()));  // rank 0, at each epoch's first sequence
    run.engine->set_timing(obs.level(k + 1));
    auto t0 = std::chrono::steady_clock::now();
    StepStats st = optimizer_step(run, k, batch);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    StepThroughput tp = step_throughput(secs, tbs, tokens_per_sample, run.model->flops_per_sample(), peak);
    samples_done += tbs;
    std::optional<double> val;
    if (evals.due(k + 1, args.steps)) val = evals.evaluate(*run.engine, *run.comm);
    // This step's per-rank outputs and the stop request (stop_signals.h): one reduction per step.
    const int64_t stop_signal = run_agreed_with(max, rank, world, "zerotrain train", [&] {
      if (metrics) metrics->write_step(st, tp, samples_done, tokens_per_sample, run.dev->tracker(), val);
      if (run.monitors) run.monitors->write_step(st, samples_done, val);  // rank 0; a write error warns and stops it
      obs.after_step(run, st);
    }, StopSignals::pending());
    const bool printed = (k + 1) % every == 0 || k == start || k + 1 == args.steps || val;
    if (printed) line(step_line(st, tp, run.dev->tracker().peak_total(), obs.breakdown, val));
    // StepStats are the same on every rank (loss and norm are agreed), so every rank stops at
    // the same step.
    std::string stop = nonfinite.after_step(st);
    if (stop.empty() && k + 1 == args.steps) stop = nonfinite.after_last_step(st);
    if (!stop.empty()) {
      if (!printed) line(step_line(st, tp, run.dev->tracker().peak_total(), obs.breakdown, val));
      if (rank == 0) std::fprintf(stderr, "zerotrain train: error: %s\n", stop.c_str());
      throw AgreedFailure(kExitStalled);
    }
    if (k + 1 == args.steps && !std::isnan(run.data->best_loss()))
      log("best achievable loss of this data: %.6f (final loss %.6f, gap %.6f)\n", run.data->best_loss(), st.loss,
          st.loss - run.data->best_loss());
    const bool early_stop = val && evals.conclude(*val, k + 1, ckpt, line);  // the same verdict on every rank
    if (samples.due(k + 1, args.steps)) samples.sample(*run.engine, *run.comm, run.model->params(), k + 1);
    ckpt.after_step(k + 1);
    if (stop_signal) ckpt.stop(k + 1, static_cast<int>(stop_signal));
    if (early_stop) {
      last = k + 1;
      break;
    }
  }
  ckpt.at_end(last);
  obs.finish(run, args, log);
  if (metrics) metrics->close();
  if (args.cuda_graph) {
    const GraphStats g = run.engine->graph_stats();
    log("cuda graph: %lld capture(s) (%lld re-capture(s)), %lld replay(s), %lld eager warm-up micro-step(s), %lld "
        "graph nodes held\n", static_cast<long long>(g.captures), static_cast<long long>(g.recaptures),
        static_cast<long long>(g.replays), static_cast<long long>(g.eager_micro_steps),
        static_cast<long long>(g.nodes));
  }
}

// Bucket by bucket to rank 0 (ckpt/weights_export.h): fp32 master weights, or the 16-bit
// compute-dtype weights with zero_optimization.stage3_gather_16bit_weights_on_model_save; a
// directory target ("out/") gets model.safetensors + config.json (GPT2LMHeadModel).
void save_weights(TrainRun& run, const std::string& path, Rank0Log& log) {
  const DType dtype = run.cfg.zero.stage3_gather_16bit_weights_on_model_save ? run.engine_opt.compute_dtype : DType::F32;
  const std::string file = export_weights(*run.engine, *run.comm, *run.dev, run.model->params(), run.model_cfg, path, dtype);
  log("saved weights to %s (%s)\n", file.c_str(), dtype_name(dtype));
}

void write_outputs(TrainRun& run, const TrainArgs& args, Rank0Log& log) {
  if (run.cfg.memory_breakdown) log("%s", run.engine->memory_report().c_str());
  const MaxOverRanks max = comm_max(*run.comm);
  const int rank = run.comm->rank(), world = run.comm->world_size();
  // Rank 0 writes after a gather; the verdict is agreed so no rank runs ahead into the next gather.
  if (!args.memory_report.empty())
    run_agreed(max, rank, world, "zerotrain train",
               [&] { write_memory_report(args.memory_report, *run.engine, *run.comm, run.engine_opt.stage); });
  if (!args.save_weights.empty())
    run_agreed(max, rank, world, "zerotrain train", [&] { save_weights(run, args.save_weights, log); });
}

int run_train(const TrainArgs& args_in, Rank0Log& log, WorldControl& control) {
  TrainRun run;
  TrainArgs args = args_in;
  const int rank = control.rank(), world = control.world_size();
  const MaxOverRanks world_max = control.max_fn("start-up verdict");
  run_agreed(world_max, rank, world, "zerotrain train", [&] { check_inputs(run, args, rank, world); });
  set_up(run, args, log, world_max, rank, world);
  TrainCheckpoints ckpt(args, run.model_cfg, run.cfg, *run.model, *run.engine, *run.comm, *run.dev,
                        [&](const std::string& line) { log("%s", line.c_str()); });
  ckpt.check_save_dir();
  int64_t start = 0;
  if (args.resume.empty()) {
    init_weights(run, args, log);
  } else {
    start = ckpt.resume(&args.seed);  // the checkpoint's seed unless --seed was given
    if (args.seed != args_in.seed) {
      run.data = make_dataset(args.data, dataset_shape(run.model_cfg, run.cfg, args.seed, rank, world));
      run.eval_data = make_eval_data(args, dataset_shape(run.model_cfg, run.cfg, args.seed, rank, world));
    }
  }
  if (run.cfg.memory_breakdown) log("%s", run.engine->memory_report().c_str());
  train_loop(run, args, log, start, ckpt);
  write_outputs(run, args, log);
  return 0;
}

}  // namespace

int cmd_train(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("%s%s", train_usage(), client_optimizer_usage());
      return 0;
    }
  }
  MpiEnvironment env(&argc, &argv);
  StopSignals stop_signals;
  Rank0Log log;
  log.rank = env.rank();
  try {
    // Flags may differ per rank (mpirun's MPMD "A : B"): a bad flag on one rank, or ranks given
    // different flags or files, ends every rank with exit 2 and one message (train_agreement.h).
    WorldControl control;
    TrainArgs args;
    run_agreed(control.max_fn("start-up flags"), env.rank(), env.world_size(), "zerotrain train",
               [&] { args = parse_train_args(argc, argv); });
    run_agreed(control.max_fn("start-up flags"), env.rank(), env.world_size(), "zerotrain train",
               [&] { check_same_arguments_on_every_rank(args, control); });
    return run_train(args, log, control);
  } catch (const std::exception& e) {
    // Past the agreed phases, an error is reported by the rank that saw it (its peers end
    // through the same error or the comm layer's watchdog, exit 3).
    std::string message;
    const int code = exit_code_of(e, &message);
    if (!message.empty()) std::fprintf(stderr, "zerotrain train: error [%s]: %s\n", process_tag().c_str(), message.c_str());
    return code;
  }
}

}  // namespace zt
