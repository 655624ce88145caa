// The step simulator (zerotrain/sim): the profile reader, the cost model's exact limits, and the
// simulated step against the plan it simulates — its ops are step_program(plan, gas), its bytes
// are the plan's collectives', infinite links leave only compute, zero compute leaves only the
// comm lane, overlap_comm never exposes more, a slower inter-node link is slower, and a comm
// thread sharing compute's cores slows only the collectives that run beside compute.
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
#include "zerotrain/sim/simulate.h"
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
  SimResult run(const HardwareProfile& hw, int world, int nodes) const {
    const CostModel cost(hw, world, nodes, opt.compute_dtype);
    return simulate_step(plan, opt, make_workload(model, plan, 2, Recompute::None, opt.compute_dtype), cost);
  }
};

HardwareProfile infinite_links(HardwareProfile h) {
  h.intra_bytes_per_s = h.inter_bytes_per_s = h.host_link_bytes_per_s = 1e300;
  h.intra_latency_s = h.inter_latency_s = h.launch_latency_s = 0;
  return h;
}

// The comm thread shares compute's cores: a collective beside running compute takes `turn`.
HardwareProfile shared_cores(HardwareProfile h, double turn) {
  h.collective_beside_compute_s = turn;
  return h;
}

HardwareProfile zero_compute(HardwareProfile h) {
  h.peak_bf16_flops = h.peak_fp32_flops = h.hbm_bytes_per_s = h.host_memory_bytes_per_s = 1e300;
  return h;
}

struct Case {
  int stage, gas;
  bool overlap;
};
std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (int stage = 0; stage <= 3; ++stage)
    for (int gas : {1, 3})
      for (bool overlap : {false, true}) out.push_back({stage, gas, overlap});
  return out;
}
std::string name(const Case& c) {
  return "stage " + std::to_string(c.stage) + " gas " + std::to_string(c.gas) + (c.overlap ? " overlap" : " no overlap");
}

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
  d = doc;
  d["collective_beside_compute_s"] = -1e-3;
  expect_error(d, "collective_beside_compute_s");
  d = doc;
  d["collective_beside_compute_s"] = "7 ms";
  expect_error(d, "collective_beside_compute_s");
}

TEST(SimHardware, BesideComputeIsOptional) {
  const std::string good = std::string(ZT_SOURCE_DIR) + "/configs/hardware/a100_40gb_8x.json";
  EXPECT_EQ(load_hardware_profile(good).collective_beside_compute_s, 0);
  nlohmann::json d = nlohmann::json::parse(std::ifstream(good));
  d["collective_beside_compute_s"] = 0.007;
  const std::string path = ::testing::TempDir() + "/beside_profile.json";
  std::ofstream(path) << d.dump();
  EXPECT_DOUBLE_EQ(load_hardware_profile(path).collective_beside_compute_s, 0.007);
}

TEST(SimCostModel, RingAlphaBeta) {
  HardwareProfile h = h100();
  const CostModel one_node(h, 8, 1, DType::BF16), two_nodes(h, 16, 2, DType::BF16);
  const double B = 1e9, a0 = h.launch_latency_s;
  EXPECT_DOUBLE_EQ(one_node.collective_seconds(CommOp::ReduceScatter, B), a0 + 7 * h.intra_latency_s + 7.0 / 8 * B / h.intra_bytes_per_s);
  EXPECT_DOUBLE_EQ(one_node.collective_seconds(CommOp::AllReduce, B),
                   a0 + 14 * h.intra_latency_s + 14.0 / 8 * B / h.intra_bytes_per_s);
  EXPECT_STREQ(one_node.collective(CommOp::AllReduce, B).algorithm, "ring");
  // 15 ring steps, one of them crossing the node boundary; the NIC's bandwidth per GPU.
  EXPECT_DOUBLE_EQ(two_nodes.collective_seconds(CommOp::AllGather, B),
                   a0 + 14 * h.intra_latency_s + h.inter_latency_s + 15.0 / 16 * B / h.inter_bytes_per_s);
  EXPECT_EQ(CostModel(h, 1, 1, DType::BF16).collective_seconds(CommOp::AllReduce, B), 0);
}

// Across many nodes a small all-reduce is latency-bound and NCCL's tree wins; a large one is
// bandwidth-bound and the ring wins. Ring latency grows with N, the tree's with log2 of the nodes.
TEST(SimCostModel, TreeAllReduceAcrossNodes) {
  HardwareProfile h = h100();
  const CostModel big(h, 1024, 128, DType::BF16);
  const CollectiveCost small = big.collective(CommOp::AllReduce, 1e3), large = big.collective(CommOp::AllReduce, 1e10);
  EXPECT_STREQ(small.algorithm, "tree");
  EXPECT_DOUBLE_EQ(small.latency_s, h.launch_latency_s + 2 * (7 * h.intra_latency_s + 7 * h.inter_latency_s));
  EXPECT_STREQ(large.algorithm, "ring");
  const double ring_latency = h.launch_latency_s + 2 * (1023 - 127) * h.intra_latency_s + 2 * 127 * h.inter_latency_s;
  EXPECT_DOUBLE_EQ(large.latency_s, ring_latency);
  // Reduce-scatter and all-gather stay rings (NCCL has no tree for them): N-K intra hops, K-1 inter.
  EXPECT_DOUBLE_EQ(big.collective(CommOp::AllGather, 1e3).latency_s, ring_latency / 2 + h.launch_latency_s / 2);
}

TEST(SimCostModel, UnitSeconds) {
  HardwareProfile h = h100();
  const CostModel one_node(h, 8, 1, DType::BF16);
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

TEST(SimStep, OpsAreTheStepProgram) {
  for (const Case& c : all_cases()) {
    const SimSetup s(c.stage, c.overlap, c.gas, 4);
    const SimResult r = s.run(h100(), 4, 1);
    std::vector<StepOp> want;
    step_program(s.plan, c.gas).for_each([&](int, const StepOp& op) { want.push_back(op); });
    EXPECT_EQ(r.ops, want) << name(c);
  }
}

TEST(SimStep, BytesAreThePlans) {
  for (const Case& c : all_cases()) {
    const SimSetup s(c.stage, c.overlap, c.gas, 4);
    const SimResult r = s.run(h100(), 4, 1);
    double bytes = 0;
    const std::vector<PlannedCollective> planned = s.plan.step_collectives(c.gas);
    for (const PlannedCollective& p : planned) bytes += ring_bytes_per_rank(p.op, p.bytes, 4);
    EXPECT_GT(bytes, 0) << name(c);
    EXPECT_DOUBLE_EQ(r.comm_ring_bytes_per_rank, bytes) << name(c);
    EXPECT_EQ(r.collectives, static_cast<int64_t>(planned.size())) << name(c);
  }
}

TEST(SimStep, InfiniteLinksLeaveOnlyCompute) {
  for (const Case& c : all_cases()) {
    const SimSetup s(c.stage, c.overlap, c.gas, 4);
    const SimResult r = s.run(infinite_links(h100()), 4, 1);
    // Stages 2-3 add each reduced slice into the shard accumulator on the comm lane, at HBM speed:
    // the only comm-lane work left, and all compute can still wait for.
    EXPECT_NEAR(r.step_s, r.compute_ops_s + r.comm_exposed_s, 1e-12 * r.step_s) << name(c);
    if (c.stage < 2) EXPECT_EQ(r.comm_exposed_s, 0) << name(c);
    else EXPECT_LE(r.comm_exposed_s, r.comm_busy_s * (1 + 1e-12)) << name(c);
    // With elementwise work free too, the step is gas x the units' forward and backward.
    HardwareProfile h = infinite_links(h100());
    h.hbm_bytes_per_s = 1e300;
    const CostModel cost(h, 4, 1, DType::BF16);
    const SimWorkload w = make_workload(s.model, s.plan, 2, Recompute::None, DType::BF16);
    double units = 0;
    for (size_t u = 0; u < w.forward.size(); ++u) units += cost.unit_seconds(w.forward[u]) + cost.unit_seconds(w.backward[u]);
    EXPECT_NEAR(s.run(h, 4, 1).step_s, c.gas * units, 1e-9 * units) << name(c);
  }
}

TEST(SimStep, ZeroComputeLeavesTheCommLane) {
  for (const Case& c : all_cases()) {
    const SimSetup s(c.stage, c.overlap, c.gas, 4);
    const HardwareProfile h = zero_compute(h100());
    const SimResult r = s.run(h, 4, 1);
    const CostModel cost(h, 4, 1, DType::BF16);
    double comm = 0;
    for (const PlannedCollective& p : s.plan.step_collectives(c.gas)) comm += cost.collective_seconds(p.op, static_cast<double>(p.bytes));
    EXPECT_NEAR(r.step_s, comm, 1e-9 * comm) << name(c);
    EXPECT_NEAR(r.comm_busy_s, comm, 1e-9 * comm) << name(c);
  }
}

TEST(SimStep, CriticalPathIsAChainThatEndsTheStep) {
  for (const Case& c : all_cases()) {
    const SimSetup s(c.stage, c.overlap, c.gas, 16);
    const SimResult r = s.run(h100(), 16, 2);
    ASSERT_FALSE(r.critical_path.empty()) << name(c);
    EXPECT_NEAR(r.slices[static_cast<size_t>(r.critical_path.back())].end_s, r.step_s, 1e-12) << name(c);
    for (size_t k = 1; k < r.critical_path.size(); ++k) {
      const SimSlice& s1 = r.slices[static_cast<size_t>(r.critical_path[k])];
      EXPECT_EQ(s1.cause, r.critical_path[k - 1]) << name(c);
      // A stall ends when what it waited for ends; other work starts when its cause ends.
      EXPECT_NEAR(s1.stall ? s1.end_s : s1.begin_s, r.slices[static_cast<size_t>(s1.cause)].end_s, 1e-12) << name(c) << " " << s1.name;
    }
    EXPECT_GT(r.mfu, 0) << name(c);
    EXPECT_LT(r.mfu, 1) << name(c);
  }
}

TEST(SimStep, OverlapNeverExposesMore) {
  for (int stage = 0; stage <= 3; ++stage)
    for (int gas : {1, 3})
      for (bool offload : {false, true}) {
        if (offload && stage == 0) continue;
        const SimResult off = SimSetup(stage, false, gas, 16, offload).run(h100(), 16, 2);
        const SimResult on = SimSetup(stage, true, gas, 16, offload).run(h100(), 16, 2);
        EXPECT_GE(off.comm_exposed_s, on.comm_exposed_s) << "stage " << stage << " gas " << gas << " offload " << offload;
        EXPECT_GE(off.step_s, on.step_s) << "stage " << stage << " gas " << gas << " offload " << offload;
        EXPECT_GT(on.comm_busy_s, 0);
      }
}

// A comm thread on compute's cores: collectives waited for as they are issued see no difference
// (compute has left the core); overlapped ones hide less, never more than without overlap; the
// comm lane stays in order, each collective at its own time or the turn; the critical path holds.
TEST(SimStep, SharedCoresSlowOnlyCollectivesBesideCompute) {
  const double turn = 1e-3;  // far above any collective's own time here (microseconds)
  for (const Case& c : all_cases()) {
    for (bool offload : {false, true}) {
      if (offload && c.stage == 0) continue;
      const SimSetup s(c.stage, c.overlap, c.gas, 4, offload);
      const SimResult own = s.run(h100(), 4, 1), shared = s.run(shared_cores(h100(), turn), 4, 1);
      const std::string what = name(c) + (offload ? " offload" : "");
      EXPECT_EQ(shared.ops, own.ops) << what;
      EXPECT_DOUBLE_EQ(shared.comm_ring_bytes_per_rank, own.comm_ring_bytes_per_rank) << what;
      EXPECT_NEAR(shared.compute_busy_s, own.compute_busy_s, 1e-12) << what;
      if (!c.overlap) {
        EXPECT_NEAR(shared.step_s, own.step_s, 1e-12) << what;
        EXPECT_NEAR(shared.comm_exposed_s, own.comm_exposed_s, 1e-12) << what;
      } else {
        const SimResult off = SimSetup(c.stage, false, c.gas, 4, offload).run(shared_cores(h100(), turn), 4, 1);
        EXPECT_GE(shared.comm_exposed_s, own.comm_exposed_s - 1e-12) << what;
        EXPECT_LE(shared.comm_exposed_s, off.comm_exposed_s + 1e-12) << what;
        EXPECT_LE(shared.step_s, off.step_s + 1e-12) << what;
        EXPECT_GT(shared.comm_busy_s, own.comm_busy_s) << what;
      }
      double lane_end = -1;
      for (const SimSlice& k : shared.slices) {
        if (k.lane != Lane::Comm) continue;
        EXPECT_GE(k.begin_s, lane_end - 1e-12) << what << " " << k.name;
        EXPECT_GT(k.end_s, k.begin_s) << what << " " << k.name;
        EXPECT_LE(k.end_s - k.begin_s, turn * (1 + 1e-9)) << what << " " << k.name;
        lane_end = k.end_s;
      }
      for (size_t i = 1; i < shared.critical_path.size(); ++i) {
        const SimSlice& k = shared.slices[static_cast<size_t>(shared.critical_path[i])];
        EXPECT_EQ(k.cause, shared.critical_path[i - 1]) << what;
        EXPECT_NEAR(k.stall ? k.end_s : k.begin_s, shared.slices[static_cast<size_t>(k.cause)].end_s, 1e-12)
            << what << " " << k.name;
      }
    }
  }
}

TEST(SimStep, SlowerInterNodeLinkIsSlower) {
  HardwareProfile slow = h100(), fast = h100();
  slow.inter_bytes_per_s = 100e9 / 8;
  fast.inter_bytes_per_s = 400e9 / 8;
  for (bool overlap : {false, true}) {
    const SimSetup s(3, overlap, 1, 16);
    const SimResult a = s.run(slow, 16, 2), b = s.run(fast, 16, 2);
    EXPECT_GT(a.step_s, b.step_s) << "overlap " << overlap;
    EXPECT_GT(a.comm_busy_s, b.comm_busy_s);
    // Inside one node neither inter-node link is used.
    const SimSetup one(3, overlap, 1, 8);
    EXPECT_EQ(one.run(slow, 8, 1).step_s, one.run(fast, 8, 1).step_s);
  }
}

TEST(SimStep, OffloadUsesTheCopyLane) {
  const SimSetup s(2, true, 2, 4, true);
  const SimResult r = s.run(h100(), 4, 1);
  EXPECT_TRUE(r.has_copy_lane);
  EXPECT_GT(r.copy_busy_s, 0);
  int down = 0, up = 0;
  for (const SimSlice& x : r.slices) {
    if (x.lane != Lane::Copy || x.op < 0) continue;
    down += x.op_name == "d2h";
    up += x.op_name == "h2d";
  }
  EXPECT_EQ(down, 2 * static_cast<int>(s.plan.buckets.size()));  // each reduction of both micro-steps
  EXPECT_GE(up, 1);
}
