// train --cuda-graph on a GPU (zero/step_graph.h): the same tiny GPT trained eagerly and with
// captured micro-step graphs gives the same losses and parameters at ZeRO stages 0, 1 and 2
// (world size 1, NCCL), with the graphs really replayed; a batch that changes what a graph
// baked in (the loss divisor, the batch shape) is re-captured, with the reason, and still
// matches the eager run; stage 3 is refused. Plus the device layer on its own: a captured
// kernel + copy replayed, and a wait on an event recorded outside the capture. Skips without
// a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "zerotrain/comm/communicator.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/data/dataset.h"
#include "zerotrain/kernels/ops.h"
#include "zerotrain/optim/lr_schedule.h"
#include "zerotrain/zero/engine.h"
#include "gpu_engine_util.h"

using namespace zt;

namespace {


struct TrainResult {
  std::vector<double> losses, grad_norms;
  std::vector<std::vector<float>> params;
  GraphStats graphs;
  std::vector<std::string> notes;
};

EngineOptions options(int stage, int gas) {
  return gputest::engine_options(stage, gas, 2000);  // several buckets: several collectives per micro-step
}

// `edit(step, micro, batch)` may change a batch after the data filled it (signature changes).
TrainResult train(const EngineOptions& opt, bool graphs, int steps,
          const std::function<void(int, int, Batch&)>& edit = nullptr) {
  const std::string path = "/tmp/zt_gpu_graph_model_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"type":"gpt","vocab_size":32,"n_ctx":16,"n_layer":2,"n_head":2,"n_embd":32,"init_std":0.1})";
  }
  auto dev = make_cuda_device(0);
  auto compute = dev->create_stream("compute");
  std::unique_ptr<Communicator> comm = make_communicator(*dev, MPI_COMM_SELF);
  ModelOptions mopt;
  mopt.compute_dtype = opt.compute_dtype;
  mopt.micro_batch = 4;
  mopt.device = dev.get();
  mopt.stream = compute.get();
  std::unique_ptr<Model> model = load_model(path, mopt);
  std::remove(path.c_str());
  DatasetShape shape;
  shape.vocab_size = 32;
  shape.n_ctx = 16;
  shape.global_batch = mopt.micro_batch * opt.gradient_accumulation_steps;
  shape.seed = 3;
  auto data = make_dataset("markov:vocab=32,order=1,seed=5", shape);
  TrainResult r;
  {
    ZeroEngine engine(*model, *dev, *compute, *comm, opt,
                      make_lr_schedule(LrScheduleSpec{}, opt.optimizer.lr, opt.optimizer.has_betas()));
    engine.init_parameters(11);
    if (graphs) engine.enable_cuda_graphs(2, [&r](const std::string& line) { r.notes.push_back(line); });
    Batch batch;
    const int gas = opt.gradient_accumulation_steps;
    for (int k = 0; k < steps; ++k) {
      for (int j = 0; j < gas; ++j) {
        data->fill(k, sample_range(0, 1, j, gas, mopt.micro_batch), mopt.micro_batch, batch);
        if (edit) edit(k, j, batch);
        engine.micro_step(batch);
      }
      const StepStats st = engine.step();
      r.losses.push_back(st.loss);
      r.grad_norms.push_back(st.grad_norm);
    }
    r.params = engine.gather_parameters(0);
    r.graphs = engine.graph_stats();
  }
  return r;
}

// Same kernels, same arguments, same order: the replay is expected to be bitwise equal; the
// tolerance only keeps a reduction-order difference from hiding the real report.
void expect_same(const TrainResult& eager, const TrainResult& graph, const std::string& what) {
  ASSERT_EQ(eager.losses.size(), graph.losses.size());
  for (size_t k = 0; k < eager.losses.size(); ++k) {
    EXPECT_NEAR(eager.losses[k], graph.losses[k], 1e-6 * std::fabs(eager.losses[k])) << what << " step " << k + 1;
    EXPECT_NEAR(eager.grad_norms[k], graph.grad_norms[k], 1e-6 * std::fabs(eager.grad_norms[k]) + 1e-9)
        << what << " step " << k + 1;
  }
  ASSERT_EQ(eager.params.size(), graph.params.size());
  double worst = 0;
  for (size_t p = 0; p < eager.params.size(); ++p)
    for (size_t i = 0; i < eager.params[p].size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(eager.params[p][i] - graph.params[p][i])));
  std::printf("%s: max |param eager - graph| = %.3g, losses %.6f -> %.6f\n", what.c_str(), worst,
              eager.losses.front(), eager.losses.back());
  EXPECT_LE(worst, 1e-6) << what;
}

}  // namespace

TEST(GpuGraph, CapturedKernelAndCopyReplay) {
  ZT_NEED_GPU();
  auto dev = make_cuda_device(0);
  auto s = dev->create_stream("capture");
  auto other = dev->create_stream("other");
  ASSERT_TRUE(dev->supports_graphs());
  constexpr int64_t n = 1 << 16;
  DeviceBuffer a = dev->alloc(n * 4, MemCategory::Workspace, true), b = dev->alloc(n * 4, MemCategory::Workspace, true);
  std::vector<float> ones(n, 1.0f), out(n);
  dev->memcpy_async(a.data(), ones.data(), n * 4, CopyKind::HostToDevice, *s);
  s->synchronize();
  auto outside = dev->create_event();
  outside->record(*other);  // recorded outside the capture: the wait inside it is skipped
  dev->begin_capture(*s);
  s->wait(*outside);
  ops::scale(*s, a.view(DType::F32, {n}), 2.0f);
  dev->memcpy_async(b.data(), a.data(), n * 4, CopyKind::DeviceToDevice, *s);
  std::unique_ptr<StreamGraph> g = dev->end_capture(*s);
  EXPECT_GE(g->nodes(), 2);
  s->synchronize();
  dev->memcpy_async(out.data(), b.data(), n * 4, CopyKind::DeviceToHost, *s);
  s->synchronize();
  EXPECT_EQ(out[0], 0.0f) << "capture must record the work, not run it";
  for (int i = 0; i < 3; ++i) g->launch(*s);
  dev->memcpy_async(out.data(), b.data(), n * 4, CopyKind::DeviceToHost, *s);
  s->synchronize();
  EXPECT_EQ(out[0], 8.0f);
  EXPECT_EQ(out[n - 1], 8.0f);
}

TEST(GpuGraph, InvalidatedCaptureFailsWithReason) {
  ZT_NEED_GPU();
  auto dev = make_cuda_device(0);
  auto s = dev->create_stream("capture");
  dev->begin_capture(*s);
  // A host sync inside a capture invalidates it (raw call: zerotrain's own checks would end the
  // process on the error, as they should in training).
  EXPECT_NE(cudaStreamSynchronize(static_cast<cudaStream_t>(s->native_handle())), cudaSuccess);
  cudaGetLastError();
  try {
    dev->end_capture(*s);
    ADD_FAILURE() << "an invalidated capture produced a graph";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("capture"), std::string::npos) << e.what();
  }
  dev->abort_capture(*s);  // nothing left to end: must not throw
  s->synchronize();        // the stream is usable again
}

TEST(GpuGraph, SameLossesAndParamsAtStages0To2) {
  ZT_NEED_GPU();
  for (int stage : {0, 1, 2}) {
    for (int gas : {1, 3}) {
      const EngineOptions opt = options(stage, gas);
      const int steps = 6;
      const TrainResult eager = train(opt, false, steps), graph = train(opt, true, steps);
      const std::string what = "stage " + std::to_string(stage) + " gas " + std::to_string(gas);
      expect_same(eager, graph, what);
      // gas 1: one kind ("only"); gas 3: first, middle, last.
      const int kinds = gas == 1 ? 1 : 3;
      EXPECT_EQ(graph.graphs.captures, kinds) << what;
      EXPECT_EQ(graph.graphs.recaptures, 0) << what;
      EXPECT_EQ(graph.graphs.eager_micro_steps, 2 * gas) << what;
      EXPECT_EQ(graph.graphs.replays, (steps - 2) * gas - kinds) << what;
      EXPECT_GT(graph.graphs.nodes, 0) << what;
    }
  }
}

TEST(GpuGraph, Bf16Stage2WithWireDtype) {
  ZT_NEED_GPU();
  EngineOptions opt = options(2, 2);
  opt.compute_dtype = DType::BF16;
  opt.wire_dtype = DType::F32;  // communication_data_type fp32: casts into alternating wire slots
  const TrainResult eager = train(opt, false, 6), graph = train(opt, true, 6);
  expect_same(eager, graph, "bf16 stage 2 fp32 wire");
  EXPECT_GT(graph.graphs.replays, 0);
}

TEST(GpuGraph, SignatureChangeRecapturesAndStaysCorrect) {
  ZT_NEED_GPU();
  // Step 5 ignores some targets (the loss divisor changes); step 7 has a smaller batch.
  const auto edit = [](int step, int, Batch& b) {
    if (step == 4)
      for (size_t i = 0; i < b.targets.size(); i += 3) b.targets[i] = -1;
    if (step == 6) {
      b.B = 2;
      b.inputs.resize(static_cast<size_t>(b.B * b.T));
      b.targets.resize(b.inputs.size());
    }
  };
  for (int stage : {0, 2}) {
    const EngineOptions opt = options(stage, 1);
    const TrainResult eager = train(opt, false, 9, edit), graph = train(opt, true, 9, edit);
    const std::string what = "stage " + std::to_string(stage) + " signature changes";
    expect_same(eager, graph, what);
    // step 5 (divisor), step 6 (divisor back), step 7 (shape), step 8 (shape back)
    EXPECT_EQ(graph.graphs.recaptures, 4) << what;
    bool divisor = false, shape = false;
    for (const std::string& n : graph.notes) {
      divisor |= n.find("loss divisor") != std::string::npos;
      shape |= n.find("batch shape: B=4 T=16 -> B=2 T=16") != std::string::npos;
    }
    EXPECT_TRUE(divisor) << "no re-capture note named the loss divisor";
    EXPECT_TRUE(shape) << "no re-capture note named the batch shape";
  }
}

TEST(GpuGraph, Stage3IsRefused) {
  ZT_NEED_GPU();
  try {
    train(options(3, 1), true, 1);
    FAIL() << "stage 3 with graphs did not throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 3"), std::string::npos) << e.what();
  }
}
