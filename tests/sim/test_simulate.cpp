// The step simulator (zerotrain/sim): the profile reader and the cost model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/mlp.h"
#include "zerotrain/sim/cost_model.h"
#include "zerotrain/zero/memory_predict.h"

using namespace zt;

namespace {

HardwareProfile h100() { return load_hardware_profile(std::string(ZT_SOURCE_DIR) + "/configs/hardware/h100_sxm_8x.json"); }

// A 4-block GPT, small buckets: several buckets per unit, stage 3 gathers again in backward.
struct SimSetup {
  std::unique_ptr<Device> dev = make_cpu_device();
  std::unique_ptr<Stream> stream = dev->create_stream("sim test");
  ModelConfig model;
  EngineOptions opt;
  std::unique_ptr<Model> m;
  ZeroPlan plan;
  SimSetup(int stage, bool overlap, int gas, int world, bool offload = false) {
    model = parse_model_config(nlohmann::json{{"type", "gpt"}, {"vocab_size", 96}, {"n_ctx", 32}, {"n_layer", 4},
                                              {"n_head", 2}, {"n_embd", 32}},
                               "test gpt");
    opt.stage = stage;
    opt.overlap_comm = overlap;
    opt.gradient_accumulation_steps = gas;
    opt.compute_dtype = DType::BF16;
    opt.reduce_bucket_size = 3000;
    opt.allgather_bucket_size = 6000;
    opt.prefetch_bucket_size = 4000;
    opt.max_reuse_distance = 0;
    opt.param_persistence_threshold = 100;
    opt.offload.optimizer = offload;
    ModelOptions mo;
    mo.compute_dtype = opt.compute_dtype;
    mo.micro_batch = 2;
    mo.device = dev.get();
    mo.stream = stream.get();
    mo.plan_only = true;
    m = make_model(model, mo);
    plan = plan_for_model(*m, opt, world);
  }
};

}  // namespace

TEST(SimHardware, ShippedProfilesLoad) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(ZT_SOURCE_DIR) + "/configs/hardware")) {
    const HardwareProfile h = load_hardware_profile(e.path().string());
    EXPECT_EQ(h.name + ".json", e.path().filename().string());
    EXPECT_GT(h.peak_bf16_flops, h.peak_fp32_flops);
    EXPECT_GE(h.intra_bytes_per_s, h.inter_bytes_per_s) << h.name;
    ++n;
  }
  EXPECT_GE(n, 4);
  EXPECT_DOUBLE_EQ(h100().inter_bytes_per_s, 400e9 / 8);  // 400 Gb/s per GPU
}

TEST(SimHardware, BadProfilesNameFileAndKey) {
  const std::string good = std::string(ZT_SOURCE_DIR) + "/configs/hardware/a100_40gb_8x.json";
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(good));
  const std::string path = ::testing::TempDir() + "/bad_profile.json";
  auto expect_error = [&](const nlohmann::json& d, const std::string& key) {
    std::ofstream(path) << d.dump();
    try {
      load_hardware_profile(path);
      ADD_FAILURE() << "accepted a profile with a bad " << key;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  };
  nlohmann::json d = doc;
  d.erase("hbm_bytes_per_s");
  expect_error(d, "hbm_bytes_per_s");
  d = doc;
  d["hbm_bandwidth"] = 1;
  expect_error(d, "hbm_bandwidth");
  d = doc;
  d["inter_node_latency_s"] = 0;
  expect_error(d, "inter_node_latency_s");
  d = doc;
  d["efficiency"]["gemm"] = 1.5;
  expect_error(d, "efficiency.gemm");
  d = doc;
  d["efficiency"].erase("optimizer");
  expect_error(d, "efficiency.optimizer");
  d = doc;
  d["gpus_per_node"] = 2.5;
  expect_error(d, "gpus_per_node");
}

TEST(SimCostModel, RingAlphaBeta) {
  HardwareProfile h = h100();
  const CostModel one_node(h, 8, 1, DType::BF16), two_nodes(h, 16, 2, DType::BF16);
  const double B = 1e9;
  EXPECT_DOUBLE_EQ(one_node.collective_seconds(CommOp::ReduceScatter, B), 7 * h.intra_latency_s + 7.0 / 8 * B / h.intra_bytes_per_s);
  EXPECT_DOUBLE_EQ(one_node.collective_seconds(CommOp::AllReduce, B), 2 * one_node.collective_seconds(CommOp::AllGather, B));
  EXPECT_DOUBLE_EQ(two_nodes.collective_seconds(CommOp::AllGather, B), 15 * h.inter_latency_s + 15.0 / 16 * B / h.inter_bytes_per_s);
  EXPECT_EQ(CostModel(h, 1, 1, DType::BF16).collective_seconds(CommOp::AllReduce, B), 0);
  EXPECT_DOUBLE_EQ(one_node.unit_seconds({2e12, 0, 0}), 2e12 / (h.peak_bf16_flops * h.efficiency.gemm));
  EXPECT_DOUBLE_EQ(CostModel(h, 8, 1, DType::F32).unit_seconds({0, 1e12, 0}), 1e12 / (h.peak_fp32_flops * h.efficiency.attention));
}

TEST(SimCostModel, WorkloadFlopsMatchTheModelCount) {
  const SimSetup s(0, true, 1, 1);
  const SimWorkload w = make_workload(s.model, s.plan, 2, Recompute::None, DType::BF16);
  double flops = 0;
  for (size_t u = 0; u < w.forward.size(); ++u)
    flops += w.forward[u].gemm_flops + w.forward[u].attention_flops + w.backward[u].gemm_flops + w.backward[u].attention_flops;
  // The model count's 6N includes the position embeddings (a lookup, no GEMM): within 2%.
  EXPECT_NEAR(flops / (2 * w.flops_per_sample), 1.0, 0.02);
  const SimWorkload rc = make_workload(s.model, s.plan, 2, Recompute::Block, DType::BF16);
  EXPECT_DOUBLE_EQ(rc.backward[1].gemm_flops, 3 * w.forward[1].gemm_flops);
}
