// Checkpoints at the engine level under mpirun (CPU backend): what the CLI cannot reach yet
// (ZeRO-Offload's host-resident master and moments) and the engine contract itself — an
// interrupted run resumed from a checkpoint continues bitwise, with the state saved from host
// or device memory and restored into either.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "engine_harness.h"
#include "zerotrain/ckpt/checkpoint.h"
#include "zerotrain/ckpt/ckpt_fs.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/model/model_config.h"
#include "zerotrain/optim/lr_schedule.h"

using namespace zt;
using namespace zt::testing;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }

// A directory every rank agrees on (rank 0 creates it).
std::string shared_tmp_dir() {
  char name[256] = "/tmp/zt_ckpt_test_XXXXXX";
  if (world_rank() == 0) ZT_CHECK(mkdtemp(name) != nullptr, "mkdtemp");
  MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, MPI_COMM_WORLD);
  return name;
}

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;  // rank 0
};

// Trains global steps [from, to): resumes from `resume` when from > 0, saves to `save` at the end.
Outcome run(const EngineOptions& opt, int from, int to, const std::string& resume, const std::string& save) {
  const int64_t micro = 2;
  const std::string json = tiny_gpt_json();
  std::string path = "/tmp/zt_ckpt_model_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream f(path);
    f << json;
  }
  auto dev = make_cpu_device();
  auto compute = dev->create_stream("compute");
  CommOptions copt;
  copt.timeout_s = 120;
  auto comm = make_mpi_communicator(*dev, MPI_COMM_WORLD, copt);
  ModelOptions mopt;
  mopt.compute_dtype = opt.compute_dtype;
  mopt.micro_batch = micro;
  mopt.device = dev.get();
  mopt.stream = compute.get();
  Outcome out;
  {
    auto model = load_model(path, mopt);
    const ModelConfig mcfg = parse_model_config_file(path);
    std::remove(path.c_str());
    const int world = comm->world_size(), gas = opt.gradient_accumulation_steps;
    DatasetShape shape;
    shape.vocab_size = mcfg.vocab_size();
    shape.n_ctx = mcfg.context_length();
    shape.global_batch = micro * gas * world;
    shape.seed = 7;
    auto data = make_dataset("markov:vocab=16,order=1,seed=5", shape);
    LrScheduleSpec ls;
    ls.type = LrScheduleType::kWarmupDecayLR;
    ls.warmup_num_steps = 3;
    ls.total_num_steps = 10;
    ZeroEngine engine(*model, *dev, *compute, *comm, opt, make_lr_schedule(ls, opt.optimizer.lr, true));
    CheckpointRunInfo info;
    info.model = mcfg;
    info.params = model->params();
    info.data_spec = "markov";
    info.seed = 7;
    info.train_batch_size = shape.global_batch;
    info.lr_schedule = "WarmupDecayLR";
    if (from == 0) engine.init_parameters(7);
    else EXPECT_EQ(load_checkpoint(engine, *comm, *dev, resume, "", info).counters.global_steps, from);
    Batch batch;
    for (int k = from; k < to; ++k) {
      for (int j = 0; j < gas; ++j) {
        data->fill(k, sample_range(comm->rank(), world, j, gas, micro), micro, batch);
        engine.micro_step(batch);
      }
      out.losses.push_back(engine.step().loss);
    }
    if (!save.empty()) save_checkpoint(engine, *comm, *dev, save, default_checkpoint_tag(to), info);
    out.params = engine.gather_parameters(0);
  }
  return out;
}

EngineOptions options(int stage, bool offload) {
  EngineOptions o = adamw_options(stage);
  o.offload.optimizer = offload;
  return o;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  if (world_rank() != 0) return;
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t p = 0; p < a.params.size(); ++p)
    EXPECT_EQ(0, std::memcmp(a.params[p].data(), b.params[p].data(), a.params[p].size() * sizeof(float)))
        << what << ": parameter " << p << " differs";
}

// 6 steps straight == 3 steps, a checkpoint, and 3 more from it, bitwise.
void expect_resumes_bitwise(const EngineOptions& o, const std::string& what) {
  const std::string dir = shared_tmp_dir();
  const Outcome straight = run(o, 0, 6, "", "");
  run(o, 0, 3, "", dir);
  const Outcome resumed = run(o, 3, 6, dir, "");
  expect_same(resumed, straight, what);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) ckptfs::remove_tree(dir);
}
}  // namespace

// 6 steps straight == 3 steps, save, a fresh engine resumes, 3 more — with the optimizer state
// in host memory (offload) at stages 1-3, and moved host -> device and device -> host.
TEST(Checkpoint, OffloadResumeIsBitwise) {
  for (int stage : {1, 2, 3}) {
    const std::string dir = shared_tmp_dir();
    const Outcome straight = run(options(stage, true), 0, 6, "", "");
    const Outcome first = run(options(stage, true), 0, 3, "", dir);
    const Outcome second = run(options(stage, true), 3, 6, dir, "");
    std::vector<double> losses = first.losses;
    losses.insert(losses.end(), second.losses.begin(), second.losses.end());
    EXPECT_EQ(losses, straight.losses) << "stage " << stage;
    expect_same(second, straight, "offload stage " + std::to_string(stage));
    // The same checkpoint into device-resident state, and back: the host optimizer is bitwise
    // the device one (docs/optim.md), so the runs agree bitwise too.
    const Outcome on_device = run(options(stage, false), 3, 6, dir, "");
    expect_same(on_device, straight, "offload checkpoint resumed without offload, stage " + std::to_string(stage));
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) ckptfs::remove_tree(dir);
  }
}

TEST(Checkpoint, DeviceStateResumesIntoOffload) {
  const std::string dir = shared_tmp_dir();
  const Outcome straight = run(options(2, false), 0, 6, "", "");
  run(options(2, false), 0, 3, "", dir);
  const Outcome offloaded = run(options(2, true), 3, 6, dir, "");
  expect_same(offloaded, straight, "device checkpoint resumed with offload");
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) ckptfs::remove_tree(dir);
}

// Lion (exp_avg), Adagrad (sum) and LAMB (exp_avg, exp_avg_sq): the states are saved and loaded,
// so an interrupted run resumes bitwise, at stages 0 and 2 and with the host optimizer.
TEST(Checkpoint, LionAdagradLambResumeBitwise) {
  for (OptimizerKind kind : {OptimizerKind::Lion, OptimizerKind::Adagrad, OptimizerKind::Lamb})
    for (int stage : {0, 2})
      for (bool offload : {false, true}) {
        if (offload && stage == 0) continue;  // offload_optimizer needs stages 1-3
        EngineOptions o = options(stage, offload);
        o.optimizer.kind = kind;
        o.optimizer.type = kind == OptimizerKind::Lion ? "lion" : kind == OptimizerKind::Adagrad ? "adagrad" : "lamb";
        o.optimizer.initial_accumulator_value = 0.1;
        o.optimizer.lr_decay = 0.01;
        expect_resumes_bitwise(o, o.optimizer.type + " stage " + std::to_string(stage) + (offload ? " offload" : ""));
      }
}

// Every stage, at this world size: straight == interrupted, bitwise, SGD with momentum too.
TEST(Checkpoint, EveryStageResumesBitwise) {
  for (int stage = 0; stage <= 3; ++stage)
    for (bool sgd : {false, true}) {
      EngineOptions o = options(stage, false);
      if (sgd) {
        o.optimizer.type = "SGD";
        o.optimizer.kind = OptimizerKind::SGD;
        o.optimizer.momentum = 0.9;
        o.optimizer.weight_decay = 0;
      }
      expect_resumes_bitwise(o, "stage " + std::to_string(stage) + (sgd ? " SGD" : " AdamW"));
    }
}
