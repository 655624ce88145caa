// gpu_engine_util.h — what the GPU engine tests (whole ZeroEngine runs on CUDA over NCCL at world
// size 1) share: the skip without a GPU, the engine options they start from, a tiny GPT with its
// device, stream, communicator and data, a memory line.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/device.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/model/model.h"
#include "zerotrain/zero/engine.h"

#define ZT_NEED_GPU() \
  if (zt::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU visible (zt::cuda_device_count() == 0)"

namespace zt::gputest {

// AdamW (lr 1e-2, eps 1e-4, weight decay 0.01), clipping at 0.3, `bucket` elements per bucket.
inline EngineOptions engine_options(int stage, int gas, int64_t bucket) {
  EngineOptions o;
  o.stage = stage;
  o.gradient_accumulation_steps = gas;
  o.gradient_clipping = 0.3;
  o.optimizer.type = "adamw";
  o.optimizer.lr = 1e-2;
  o.optimizer.eps = 1e-4;
  o.optimizer.weight_decay = 0.01;
  o.reduce_bucket_size = bucket;
  return o;
}

// A GPT (vocab 64, 4 heads, init_std 0.1) of `layers` x `embd` at context `ctx` on CUDA device 0,
// micro-batches of `micro` samples of markov data; `mopt` brings any other model option
// (recompute, cpu_checkpointing), its device, stream, dtype and batch are set here.
struct TinyGptRun {
  std::unique_ptr<Device> dev;
  std::unique_ptr<Stream> compute;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Model> model;
  std::unique_ptr<Dataset> data;
  TinyGptRun(const EngineOptions& opt, ModelOptions mopt, int64_t layers, int64_t embd, int64_t ctx, int64_t micro) {
    const std::string path = "/tmp/zt_gpu_engine_model_" + std::to_string(getpid()) + ".json";
    {
      std::ofstream f(path);
      f << R"({"type":"gpt","vocab_size":64,"n_ctx":)" << ctx << R"(,"n_layer":)" << layers
        << R"(,"n_head":4,"n_embd":)" << embd << R"(,"init_std":0.1})";
    }
    dev = make_cuda_device(0);
    compute = dev->create_stream("compute");
    comm = make_communicator(*dev, MPI_COMM_SELF);
    mopt.compute_dtype = opt.compute_dtype;
    mopt.micro_batch = micro;
    mopt.device = dev.get();
    mopt.stream = compute.get();
    model = load_model(path, mopt);
    std::remove(path.c_str());
    DatasetShape shape;
    shape.vocab_size = 64;
    shape.n_ctx = ctx;
    shape.global_batch = micro * opt.gradient_accumulation_steps;
    shape.seed = 3;
    data = make_dataset("markov:vocab=64,order=1,seed=5", shape);
  }
};

inline const MemoryLine& memory_line(const std::vector<MemoryLine>& lines, MemCategory c) {
  for (const MemoryLine& l : lines)
    if (l.category == c) return l;
  ADD_FAILURE() << "no memory line " << mem_category_name(c);
  return lines.front();
}

}  // namespace zt::gputest
