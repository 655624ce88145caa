// train --cuda-graph's host-side rules, without a GPU: which runs may be captured
// (graph_refusal), what a captured graph's signature compares (signature_difference), the
// flags, and the CPU backend's refusal to capture at all.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/zero/step_graph.h"

using namespace zt;

namespace {

GraphEligibility eligible() {
  GraphEligibility g;
  g.device = DeviceKind::CUDA;
  g.stage = 2;
  g.warmup_steps = 2;
  return g;
}

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

GraphSignature signature() {
  GraphSignature s;
  s.plan_hash = 0x1234;
  s.stage = 1;
  s.world = 1;
  s.gas = 2;
  s.first = true;
  s.boundary = false;
  s.batch_B = 4;
  s.batch_T = 32;
  s.model_scalars = {128};
  s.dloss = 0.5f;
  static int a, b, c;
  s.buffers = {&a, &b, &c};
  return s;
}

TrainArgs parse(std::vector<std::string> extra) {
  std::vector<std::string> words = {"train", "--config", "c.json", "--model", "m.json", "--data", "d", "--steps", "3"};
  words.insert(words.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parse_train_args(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST(StepGraph, EligibleStagesZeroToTwoOnCuda) {
  for (int stage : {0, 1, 2}) {
    GraphEligibility g = eligible();
    g.stage = stage;
    EXPECT_EQ(graph_refusal(g), "") << "stage " << stage;
  }
}

TEST(StepGraph, RefusalsNameTheReason) {
  struct Case {
    const char* what;
    void (*edit)(GraphEligibility&);
    const char* expect;
  };
  const Case cases[] = {
      {"cpu backend", [](GraphEligibility& g) { g.device = DeviceKind::CPU; }, "CPU backend"},
      {"stage 3", [](GraphEligibility& g) { g.stage = 3; }, "stage 3"},
      {"offload optimizer", [](GraphEligibility& g) { g.offload_optimizer = true; }, "ZeRO-Offload"},
      {"offload param", [](GraphEligibility& g) { g.offload_params = true; }, "ZeRO-Offload"},
      {"timing", [](GraphEligibility& g) { g.timing = true; }, "wall_clock_breakdown"},
      {"comm log", [](GraphEligibility& g) { g.comm_log = true; }, "--comm-log"},
      {"sync check", [](GraphEligibility& g) { g.sync_check = true; }, "ZT_CUDA_SYNC_CHECK"},
      {"side stream", [](GraphEligibility& g) { g.side_stream = true; }, "cpu_checkpointing"},
      {"no warm-up", [](GraphEligibility& g) { g.warmup_steps = 0; }, "warm-up"},
  };
  for (const Case& c : cases) {
    GraphEligibility g = eligible();
    c.edit(g);
    const std::string r = graph_refusal(g);
    EXPECT_TRUE(mentions(r, c.expect)) << c.what << ": '" << r << "'";
  }
}

TEST(StepGraph, EqualSignaturesHaveNoDifference) {
  EXPECT_EQ(signature_difference(signature(), signature()), "");
}

TEST(StepGraph, EveryBakedFieldIsCompared) {
  struct Case {
    const char* what;
    void (*edit)(GraphSignature&);
    const char* expect;
  };
  static int other;
  const Case cases[] = {
      {"plan", [](GraphSignature& s) { s.plan_hash = 99; }, "plan hash"},
      {"stage", [](GraphSignature& s) { s.stage = 2; }, "ZeRO stage: 1 -> 2"},
      {"world", [](GraphSignature& s) { s.world = 2; }, "world size"},
      {"gas", [](GraphSignature& s) { s.gas = 4; }, "gradient_accumulation_steps: 2 -> 4"},
      {"kind", [](GraphSignature& s) { s.boundary = true; }, "micro-step kind: first -> only"},
      {"wire", [](GraphSignature& s) { s.wire_next = 1; }, "wire slot phase"},
      {"B", [](GraphSignature& s) { s.batch_B = 2; }, "batch shape: B=4 T=32 -> B=2 T=32"},
      {"T", [](GraphSignature& s) { s.batch_T = 16; }, "batch shape: B=4 T=32 -> B=4 T=16"},
      {"divisor", [](GraphSignature& s) { s.model_scalars = {127}; }, "loss divisor): [128] -> [127]"},
      {"dloss", [](GraphSignature& s) { s.dloss = 0.25f; }, "dloss"},
      {"buffer count", [](GraphSignature& s) { s.buffers.pop_back(); }, "buffer count: 3 -> 2"},
      {"buffer address", [](GraphSignature& s) { s.buffers[1] = &other; }, "buffer 1 address"},
  };
  for (const Case& c : cases) {
    GraphSignature now = signature();
    c.edit(now);
    const std::string d = signature_difference(signature(), now);
    EXPECT_TRUE(mentions(d, c.expect)) << c.what << ": '" << d << "'";
  }
}

TEST(StepGraph, MicroStepKinds) {
  GraphSignature s = signature();
  s.first = true, s.boundary = true;
  EXPECT_EQ(micro_kind_name(s), "only");
  s.first = false, s.boundary = false;
  EXPECT_EQ(micro_kind_name(s), "middle");
  s.boundary = true, s.wire_next = 1;
  EXPECT_EQ(micro_kind_name(s), "last (wire slot 1)");
}

TEST(StepGraph, Flags) {
  EXPECT_FALSE(parse({}).cuda_graph);
  const TrainArgs a = parse({"--cuda-graph", "--cuda-graph-warmup", "3"});
  EXPECT_TRUE(a.cuda_graph);
  EXPECT_EQ(a.cuda_graph_warmup, 3);
  EXPECT_EQ(parse({"--cuda-graph"}).cuda_graph_warmup, 2);
  EXPECT_THROW(parse({"--cuda-graph", "--cuda-graph-warmup", "0"}), InputError);
  EXPECT_THROW(parse({"--cuda-graph", "--cuda-graph-warmup", "x"}), InputError);
  EXPECT_THROW(parse({"--cuda-graph-warmup", "2"}), InputError);  // without --cuda-graph
  EXPECT_THROW(parse({"--cuda-graph=on"}), InputError);
}

TEST(StepGraph, CpuBackendCannotCapture) {
  auto dev = make_cpu_device();
  auto s = dev->create_stream("compute");
  EXPECT_FALSE(dev->supports_graphs());
  try {
    dev->begin_capture(*s);
    FAIL() << "begin_capture on the CPU backend did not throw";
  } catch (const InputError& e) {
    EXPECT_TRUE(mentions(e.what(), "CUDA backend")) << e.what();
  }
}
