// cost_model.cpp — op durations on a hardware profile (zerotrain/sim/cost_model.h).
#include "zerotrain/sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/model/gpt.h"
#include "zerotrain/model/llama.h"

namespace zt {

namespace {

// Bytes per token per block that the elementwise ops of a GPT block's forward move, in units of
// C·dtype: two LayerNorms (read + write), GELU over 4C (read + write), two residual adds.
constexpr double kBlockElementwisePerTokenC = 4 + 8 + 6;

constexpr double kTreeBusEfficiency = 0.9;

double unit_numel(const ZeroPlan& plan, int u) {
  double n = 0;
  for (int p : plan.unit_params[static_cast<size_t>(u)]) n += static_cast<double>(plan.param(p).numel);
  return n;
}

// A transformer's shape as the cost model sees it (elements per token, any dtype).
struct TransformerShape {
  double T = 0, C = 0, vocab = 0;
  double attention_width = 0;             // H·hs: the scores and the weighted sum's width
  double embed_elements = 0;              // unit 0's lookups forward (and scatter-adds backward)
  double block_elementwise_elements = 0;  // the elementwise ops of one block's forward
  double flops_per_sample = 0;
};

SimWorkload transformer_workload(const TransformerShape& s, const ZeroPlan& plan, int64_t B, Recompute rc, DType compute) {
  SimWorkload w;
  const double tokens = static_cast<double>(B) * s.T, cs = static_cast<double>(dtype_size(compute));
  const int U = plan.num_units();
  w.forward.resize(U);
  w.backward.resize(U);
  for (int u = 0; u < U; ++u) {
    UnitCost f, b;
    if (u == 0) {
      f.elementwise_bytes = s.embed_elements * tokens * cs;
      b.elementwise_bytes = f.elementwise_bytes;
    } else {
      f.gemm_flops = 2 * unit_numel(plan, u) * tokens;
      const bool head = u == U - 1;
      f.attention_flops = head ? 0 : 4 * static_cast<double>(B) * s.T * s.T * s.attention_width;
      f.elementwise_bytes = head ? 2 * tokens * s.vocab * cs : s.block_elementwise_elements * tokens * cs;
      b = {2 * f.gemm_flops, 2 * f.attention_flops, 2 * f.elementwise_bytes};
      if (!head && rc == Recompute::Block) {
        b.gemm_flops += f.gemm_flops;
        b.attention_flops += f.attention_flops;
        b.elementwise_bytes += f.elementwise_bytes;
      } else if (!head && rc == Recompute::Selective) {
        b.attention_flops += f.attention_flops;
      }
    }
    w.forward[u] = f;
    w.backward[u] = b;
  }
  w.tokens_per_sample = s.T;
  w.flops_per_sample = s.flops_per_sample;
  return w;
}

TransformerShape gpt_shape(const GptConfig& g) {
  TransformerShape s;
  s.T = static_cast<double>(g.n_ctx);
  s.C = static_cast<double>(g.n_embd);
  s.vocab = static_cast<double>(g.vocab_size);
  s.attention_width = s.C;
  s.embed_elements = 3 * s.C;  // wte and wpe rows read, the sum written
  s.block_elementwise_elements = kBlockElementwisePerTokenC * s.C;
  s.flops_per_sample = gpt_flops_per_sequence(g, g.n_ctx);
  return s;
}

// Llama's block: two RMSNorms (read + write C), rotary positions over q and k (read + write),
// SwiGLU (gate and up read, I written), two residual adds (3C each).
TransformerShape llama_shape(const LlamaConfig& c) {
  TransformerShape s;
  s.T = static_cast<double>(c.n_ctx);
  s.C = static_cast<double>(c.hidden_size);
  s.vocab = static_cast<double>(c.vocab_size);
  s.attention_width = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double kv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  s.embed_elements = 2 * s.C;  // a row read, a row written
  s.block_elementwise_elements =
      4 * s.C + 2 * (s.attention_width + kv) + 3 * static_cast<double>(c.intermediate_size) + 6 * s.C;
  s.flops_per_sample = llama_flops_per_sequence(c, c.n_ctx);
  return s;
}

SimWorkload mlp_workload(const ZeroPlan& plan, int64_t B) {
  SimWorkload w;
  double params = 0;
  for (int u = 0; u < plan.num_units(); ++u) {
    UnitCost f;
    f.gemm_flops = 2 * unit_numel(plan, u) * static_cast<double>(B);
    params += unit_numel(plan, u);
    w.forward.push_back(f);
    w.backward.push_back({2 * f.gemm_flops, 0, 0});
  }
  w.tokens_per_sample = 1;
  w.flops_per_sample = 6 * params;
  return w;
}

}  // namespace

SimWorkload make_workload(const ModelConfig& model, const ZeroPlan& plan, int64_t micro_batch, Recompute recompute,
                          DType compute) {
  ZT_CHECK(micro_batch >= 1, "micro batch " + std::to_string(micro_batch));
  SimWorkload w;
  if (model.type == ModelConfig::Type::MLP) {
    w = mlp_workload(plan, micro_batch);
  } else {
    const TransformerShape s = model.type == ModelConfig::Type::GPT ? gpt_shape(model.gpt) : llama_shape(model.llama);
    w = transformer_workload(s, plan, micro_batch, recompute, compute);
  }
  w.micro_batch = micro_batch;
  return w;
}

CostModel::CostModel(const HardwareProfile& hw, int world, int nodes, DType compute)
    : hw_(hw), world_(world), nodes_(nodes), peak_(compute == DType::F32 ? hw.peak_fp32_flops : hw.peak_bf16_flops) {
  ZT_CHECK(world >= 1 && nodes >= 1 && world % nodes == 0,
           "world " + std::to_string(world) + " on " + std::to_string(nodes) + " nodes");
}

double CostModel::unit_seconds(const UnitCost& c) const {
  const OpEfficiency& e = hw_.efficiency;
  return c.gemm_flops / (peak_ * e.gemm) + c.attention_flops / (peak_ * e.attention) + elementwise_seconds(c.elementwise_bytes);
}

double CostModel::elementwise_seconds(double bytes) const {
  return bytes / (hw_.hbm_bytes_per_s * hw_.efficiency.elementwise);
}

double CostModel::optimizer_seconds(double bytes) const { return bytes / (hw_.hbm_bytes_per_s * hw_.efficiency.optimizer); }

double CostModel::host_optimizer_seconds(double bytes) const {
  return bytes / (hw_.host_memory_bytes_per_s / static_cast<double>(world_ / nodes_));
}

double CostModel::copy_seconds(double bytes) const { return bytes / hw_.host_link_bytes_per_s; }

double CostModel::link_bytes_per_s() const { return ring_spans_nodes() ? hw_.inter_bytes_per_s : hw_.intra_bytes_per_s; }
double CostModel::link_latency_s() const { return ring_spans_nodes() ? hw_.inter_latency_s : hw_.intra_latency_s; }

CollectiveCost CostModel::collective(CommOp op, double bytes, RankGroup group) const {
  const int g = group.size(world_), local = world_ / nodes_;
  if (g <= 1) return {};
  std::vector<bool> node_seen(static_cast<size_t>(nodes_), false);  // nodes rank 0's group spans
  int spans = 0;
  for (int j = 0; j < g; ++j) {
    const int node = group.member(0, j) / local;
    if (!node_seen[static_cast<size_t>(node)]) ++spans;
    node_seen[static_cast<size_t>(node)] = true;
  }
  const double n = g, k = spans, per_node = n / k;
  const double link = spans > 1 ? hw_.inter_bytes_per_s : hw_.intra_bytes_per_s;
  const bool all_reduce = op == CommOp::AllReduce;
  const bool ring_op = all_reduce || op == CommOp::ReduceScatter || op == CommOp::AllGather || op == CommOp::AllToAll;
  // Ring: N-1 steps per pass (all-reduce: two passes); K-1 of each pass's steps cross a node
  // boundary and pay the inter-node hop latency, the rest the intra-node one. Every rank moves
  // steps/N of the buffer through its slowest link.
  const double passes = all_reduce ? 2 : 1;
  const double steps = ring_op ? passes * (n - 1) : n;
  const double inter_steps = ring_op ? passes * (k - 1) : k - 1;
  CollectiveCost ring;
  ring.algorithm = "ring";
  ring.latency_s = hw_.launch_latency_s + (steps - inter_steps) * hw_.intra_latency_s + inter_steps * hw_.inter_latency_s;
  ring.seconds = ring.latency_s + (ring_op ? steps / n : 1.0) * bytes / link;
  if (!all_reduce || spans == 1) return ring;
  // Tree all-reduce across nodes (reduce up, broadcast down): a chain inside each node and a binary
  // tree over the nodes, each traversed twice; half the link bandwidth reaches the algorithm, and
  // the tree's pipelining reaches 0.9 of the ring's bus bandwidth (NCCL's tuning model).
  CollectiveCost tree;
  tree.algorithm = "tree";
  tree.latency_s = hw_.launch_latency_s + 2 * ((per_node - 1) * hw_.intra_latency_s + std::ceil(std::log2(k)) * hw_.inter_latency_s);
  tree.seconds = tree.latency_s + 2 * bytes / (kTreeBusEfficiency * hw_.inter_bytes_per_s);
  return tree.seconds < ring.seconds ? tree : ring;
}

double CostModel::collective_seconds(CommOp op, double bytes, RankGroup group) const {
  return collective(op, bytes, group).seconds;
}

double optimizer_bytes_per_element(const EngineOptions& o, DType grad_dtype) {
  const double moments = o.optimizer.moment_count() * static_cast<double>(dtype_size(o.moments_dtype));
  return static_cast<double>(dtype_size(o.master_dtype)) + moments + static_cast<double>(dtype_size(grad_dtype)) +
         static_cast<double>(dtype_size(o.compute_dtype));
}

}  // namespace zt
