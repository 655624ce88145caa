// cmd_train.cpp — `zerotrain train`: one process per rank (mpirun/srun), the ZeRO engine over a
// built-in workload, DeepSpeed config, progress lines, metrics JSONL, memory report.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "zerotrain/app/commands.h"
#include "zerotrain/app/train_setup.h"
#include "zerotrain/comm/communicator.h"
#include "zerotrain/comm/mpi_env.h"
#include "zerotrain/data/dataset.h"
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

std::unique_ptr<Device> pick_device(const std::string& want, const NodeLocal& local) {
  const int gpus = cuda_device_count();
  if (want == "cpu" || (want == "auto" && gpus == 0)) return make_cpu_device();
  if (gpus == 0) throw InputError("train: --device cuda, but no CUDA GPU is visible on " + process_info().host);
  return make_cuda_device(cuda_ordinal_for_local_rank(local.local_rank, local.local_size, gpus));
}

// Every rank's line "rank R host H local L device D", printed by rank 0 in rank order.
void print_rank_map(const Communicator& comm, const NodeLocal& local, const Device& dev) {
  char line[256];
  std::snprintf(line, sizeof(line), "  rank %d  host %s  local_rank %d/%d  device %s", comm.rank(),
                process_info().host.c_str(), local.local_rank, local.local_size, dev.description().c_str());
  std::vector<char> all(sizeof(line) * static_cast<size_t>(comm.world_size()));
  ZT_MPI_CHECK(MPI_Gather(line, sizeof(line), MPI_CHAR, all.data(), sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD));
  if (comm.rank() == 0) {
    std::printf("rank map:\n");
    for (int r = 0; r < comm.world_size(); ++r) std::printf("%s\n", all.data() + r * sizeof(line));
  }
}

// Dense peak FLOP/s of the device for MFU (0 = unknown): NVIDIA datasheet numbers, tensor cores
// for bf16/fp16, plain fp32 otherwise (cuBLAS does not use TF32 unless asked).
double peak_flops(const Device& dev, DType compute) {
  if (dev.kind() != DeviceKind::CUDA) return 0;
  const std::string d = dev.description();
  const bool half = compute != DType::F32;
  if (d.find("H100") != std::string::npos || d.find("H200") != std::string::npos) return half ? 989e12 : 67e12;
  if (d.find("A100") != std::string::npos) return half ? 312e12 : 19.5e12;
  return 0;
}

nlohmann::json memory_json(const ZeroEngine& engine, int rank) {
  nlohmann::json cats = nlohmann::json::object();
  for (const MemoryLine& l : engine.memory_lines()) {
    nlohmann::json c;
    c["predicted_bytes"] = l.predicted < 0 ? nlohmann::json() : nlohmann::json(l.predicted);
    c["measured_bytes"] = l.measured;
    c["peak_bytes"] = l.peak;
    cats[mem_category_name(l.category)] = c;
  }
  return {{"rank", rank}, {"categories", cats}, {"zero_paper_model_state_bytes", engine.zero_paper_model_state_bytes()}};
}

// Collects every rank's JSON on rank 0 (variable length strings over MPI).
std::vector<nlohmann::json> gather_json(const nlohmann::json& mine, const Communicator& comm) {
  std::string s = mine.dump();
  int n = static_cast<int>(s.size());
  std::vector<int> sizes(static_cast<size_t>(comm.world_size())), offs(sizes.size());
  ZT_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) { offs[i] = total; total += sizes[i]; }
  std::vector<char> buf(static_cast<size_t>(total) + 1);
  ZT_MPI_CHECK(MPI_Gatherv(s.data(), n, MPI_CHAR, buf.data(), sizes.data(), offs.data(), MPI_CHAR, 0, MPI_COMM_WORLD));
  std::vector<nlohmann::json> out;
  if (comm.rank() == 0)
    for (size_t i = 0; i < sizes.size(); ++i) out.push_back(nlohmann::json::parse(std::string(buf.data() + offs[i], sizes[i])));
  return out;
}

int run_train(const TrainArgs& args, Rank0Log& log) {
  NodeLocal local = node_local(MPI_COMM_WORLD);
  std::unique_ptr<Device> dev = pick_device(args.device, local);
  std::unique_ptr<Communicator> comm = make_communicator(*dev);
  log.rank = comm->rank();
  const int world = comm->world_size();

  ModelConfig mcfg = parse_model_config_file(args.model);
  ConfigOptions copt;
  copt.world_size = world;
  copt.world_size_origin = "MPI";
  copt.strict = args.strict;
  copt.hidden_size = model_hidden_size(mcfg);
  DsConfig cfg = load_ds_config(args.config, copt);
  for (const std::string& w : cfg.warnings)
    if (comm->rank() == 0) std::fprintf(stderr, "warning: %s\n", w.c_str());
  EngineOptions eopt = engine_options_from(cfg);

  auto compute = dev->create_stream("compute");
  ModelOptions mopt;
  mopt.compute_dtype = eopt.compute_dtype;
  mopt.micro_batch = cfg.train_micro_batch_size_per_gpu;
  mopt.device = dev.get();
  mopt.stream = compute.get();
  std::unique_ptr<Model> model = load_model(args.model, mopt);

  DatasetShape shape;
  if (mcfg.type == ModelConfig::Type::GPT) {
    shape.vocab_size = mcfg.gpt.vocab_size;
    shape.n_ctx = mcfg.gpt.n_ctx;
  } else {
    shape.mlp_dims = mcfg.mlp.dims;
    shape.mlp_relu = mcfg.mlp.activation == Activation::ReLU;
    shape.mlp_classification = mcfg.mlp.task == MlpTask::Classification;
  }
  shape.global_batch = cfg.train_batch_size;
  shape.seed = args.seed;
  std::unique_ptr<Dataset> data = make_dataset(args.data, shape);

  std::unique_ptr<LrSchedule> sched = schedule_from(cfg, eopt.optimizer);
  for (const std::string& w : sched->warnings())
    if (comm->rank() == 0) std::fprintf(stderr, "warning: scheduler: %s\n", w.c_str());
  print_rank_map(*comm, local, *dev);
  ZeroEngine engine(*model, *dev, *compute, *comm, eopt, std::move(sched));
  log("model: %s\n", model->describe().c_str());
  log("data: %s\n", data->describe().c_str());
  log("ZeRO stage %d, world %d, batch %lld = micro %lld x accumulation %lld x ranks %d, %s compute, overlap_comm %s\n",
      eopt.stage, world, static_cast<long long>(cfg.train_batch_size),
      static_cast<long long>(cfg.train_micro_batch_size_per_gpu), static_cast<long long>(cfg.gradient_accumulation_steps),
      world, dtype_name(eopt.compute_dtype), eopt.overlap_comm ? "on" : "off");
  log("%s", engine.plan().describe().c_str());

  if (!args.init_from.empty()) {
    ModelWeightsReader reader(args.init_from, model->params());
    engine.load_parameters([&](int p, int64_t begin, int64_t count, float* out) {
      reader.read_param_slice(p, begin, count, out);
    });
    log("initialised from %s\n", args.init_from.c_str());
  } else {
    engine.init_parameters(args.seed);
  }
  if (cfg.memory_breakdown) log("%s", engine.memory_report().c_str());

  std::unique_ptr<std::ofstream> metrics;
  if (!args.metrics.empty() && comm->rank() == 0) {
    metrics = std::make_unique<std::ofstream>(args.metrics);
    if (!*metrics) throw InputError("train: --metrics " + args.metrics + ": cannot open for writing");
  }
  int64_t every = args.log_every;
  if (every == 0) every = cfg.steps_per_print && *cfg.steps_per_print > 0 ? *cfg.steps_per_print
                                                                          : std::max<int64_t>(1, args.steps / 10);
  const int gas = static_cast<int>(cfg.gradient_accumulation_steps);
  const int64_t mbs = cfg.train_micro_batch_size_per_gpu;
  const double tokens_per_sample = mcfg.type == ModelConfig::Type::GPT ? static_cast<double>(mcfg.gpt.n_ctx) : 1.0;
  const double peak = peak_flops(*dev, eopt.compute_dtype) * world;
  if (peak > 0)
    log("MFU: model FLOPs per sample %.4g (PaLM: 6N + 12*L*C*T per token) / peak %.4g FLOP/s (%d x %s dense %s)\n",
        model->flops_per_sample(), peak, world, dev->description().c_str(), dtype_name(eopt.compute_dtype));
  int64_t samples_done = 0;
  Batch batch;
  for (int64_t k = 0; k < args.steps; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    for (int j = 0; j < gas; ++j) {
      data->fill(k, sample_range(comm->rank(), world, j, gas, mbs), mbs, batch);
      engine.micro_step(batch);
    }
    StepStats st;
    try {
      st = engine.step();
    } catch (const LossScaleAtMinimum& e) {
      throw InputError(std::string("step ") + std::to_string(k + 1) + ": fp16 loss scale: " + e.what() +
                       " (gradients overflow even at fp16.min_loss_scale; lower the learning rate or use bf16)");
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double samples_s = cfg.train_batch_size / secs;
    double tflops = model->flops_per_sample() * cfg.train_batch_size / secs / 1e12;
    samples_done += cfg.train_batch_size;
    if (metrics) {
      nlohmann::json mem = nlohmann::json::object();
      for (int c = 0; c < kNumMemCategories; ++c)
        mem[mem_category_name(static_cast<MemCategory>(c))] = {
            {"current_bytes", dev->tracker().current(static_cast<MemCategory>(c))},
            {"peak_bytes", dev->tracker().peak(static_cast<MemCategory>(c))}};
      nlohmann::json m = {{"step", st.step}, {"loss", st.loss}, {"lr", st.lr}, {"grad_norm", st.grad_norm},
                          {"clip_coef", st.clip_coefficient}, {"loss_scale", st.loss_scale},
                          {"skipped", st.skipped}, {"samples", samples_done},
                          {"tokens", static_cast<int64_t>(samples_done * tokens_per_sample)},
                          {"step_ms", secs * 1e3}, {"tokens_per_s", samples_s * tokens_per_sample},
                          {"samples_per_s", samples_s}, {"tflops", tflops},
                          {"mfu", peak > 0 ? nlohmann::json(tflops * 1e12 / peak) : nlohmann::json()},
                          {"mem_peak_bytes", dev->tracker().peak_total()}, {"memory", mem}};
      *metrics << m.dump() << "\n";
      metrics->flush();
    }
    if ((k + 1) % every == 0 || k == 0 || k + 1 == args.steps) {
      char mfu[48] = "";
      if (peak > 0) std::snprintf(mfu, sizeof(mfu), " | MFU %.1f%%", 100.0 * tflops * 1e12 / peak);
      log("step %5lld | loss %.6f | lr %.3e | grad norm %.4f (clip x%.3f) | loss scale %g%s | %.1f ms | %.0f tok/s | "
          "%.3f TFLOP/s%s | peak mem %.1f MiB\n",
          static_cast<long long>(st.step), st.loss, st.lr, st.grad_norm, st.clip_coefficient, st.loss_scale,
          st.skipped ? " | SKIPPED (overflow)" : "", secs * 1e3, samples_s * tokens_per_sample, tflops, mfu,
          dev->tracker().peak_total() / 1048576.0);
    }
    if (k + 1 == args.steps && !std::isnan(data->best_loss()))
      log("best achievable loss of this data: %.6f (final loss %.6f, gap %.6f)\n", data->best_loss(), st.loss,
          st.loss - data->best_loss());
  }
  if (cfg.memory_breakdown) log("%s", engine.memory_report().c_str());
  if (!args.memory_report.empty()) {
    std::vector<nlohmann::json> all = gather_json(memory_json(engine, comm->rank()), *comm);
    if (comm->rank() == 0) {
      std::ofstream f(args.memory_report);
      if (!f) throw InputError("train: --memory-report " + args.memory_report + ": cannot open for writing");
      f << nlohmann::json({{"stage", eopt.stage}, {"world_size", world}, {"ranks", all}}).dump(2) << "\n";
    }
  }
  if (!args.save_weights.empty()) {
    std::vector<std::vector<float>> full = engine.gather_parameters(0);
    if (comm->rank() == 0) {
      save_model_weights(args.save_weights, model->params(), DType::F32,
                         [&](int i, float* out) { std::copy(full[static_cast<size_t>(i)].begin(),
                                                            full[static_cast<size_t>(i)].end(), out); });
      log("saved weights to %s\n", args.save_weights.c_str());
    }
  }
  return 0;
}

}  // namespace

int cmd_train(int argc, char** argv) {
  MpiEnvironment env(&argc, &argv);
  Rank0Log log;
  log.rank = env.rank();
  try {
    TrainArgs args = parse_train_args(argc, argv);
    return run_train(args, log);
  } catch (const InputError& e) {
    // Bad input is found identically on every rank (same files, same flags); rank 0 reports it.
    if (env.rank() == 0) std::fprintf(stderr, "zerotrain train: error: %s\n", e.what());
    return kExitBadInput;
  }
}

}  // namespace zt
