// estimate.cpp — the offline memory estimate (see estimate.h).
#include "estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "zerotrain/app/train_setup.h"
#include "zerotrain/core/check.h"
#include "zerotrain/core/device.h"
#include "zerotrain/model/mlp.h"
#include "zerotrain/model/vocab_pad.h"

namespace zt {

int64_t MemoryEstimate::max_device_total() const {
  int64_t m = 0;
  for (const MemoryPrediction& p : ranks) m = std::max(m, p.device_total());
  return m;
}

int64_t MemoryEstimate::max_host_total() const {
  int64_t m = 0;
  for (const MemoryPrediction& p : ranks) m = std::max(m, p.host_total());
  return m;
}

CommBackend comm_backend_for_device(const std::string& device, const std::string& flag) {
  if (device == "cpu") return CommBackend::MPI;
  if (device == "cuda") return CommBackend::NCCL;
  if (device == "auto") return cuda_device_count() > 0 ? CommBackend::NCCL : CommBackend::MPI;
  throw InputError(flag + " '" + device + "': expected auto, cpu or cuda");
}

PlanOnlyModel plan_only_model(const DsConfig& cfg, const ModelConfig& model, const EngineOptions& eopt,
                              Recompute recompute, CommBackend backend, int world, int nodes) {
  PlanOnlyModel p;
  p.dev = make_cpu_device();  // never allocates: plan-only model
  p.stream = p.dev->create_stream("estimate");
  ModelOptions& mopt = p.options;
  mopt.compute_dtype = eopt.compute_dtype;
  mopt.micro_batch = cfg.train_micro_batch_size_per_gpu;
  mopt.device = p.dev.get();
  mopt.stream = p.stream.get();
  mopt.plan_only = true;
  mopt.recompute = recompute;
  mopt.cpu_checkpointing = cfg.activation_cpu_checkpointing;
  // The plan-only model sits on a CPU device; the logits padding is the training device's.
  mopt.vocab_pad = default_vocab_pad(backend == CommBackend::NCCL ? DeviceKind::CUDA : DeviceKind::CPU);
  p.model = make_model(model, mopt);
  p.plan = plan_for_model(*p.model, eopt, world, nodes);
  return p;
}

MemoryEstimate estimate_memory(const DsConfig& cfg, const ModelConfig& model, int world, Recompute recompute,
                               CommBackend backend, const ClientOptimizer& client) {
  const EngineOptions eopt = engine_options_from(cfg, client);
  const PlanOnlyModel pm = plan_only_model(cfg, model, eopt, recompute, backend, world);
  const Model* m = pm.model.get();
  const ModelOptions& mopt = pm.options;
  const ZeroPlan& plan = pm.plan;
  MemoryEstimate e;
  e.stage = eopt.stage;
  e.world = world;
  e.recompute = recompute;
  e.psi = plan.numel;
  e.offload_optimizer = eopt.offload.optimizer;
  e.offload_params = eopt.offload.params;
  e.backend = backend;
  const std::vector<BufferSpec> buffers = m->buffer_plan();
  // What `train` builds: make_communicator with the default CommOptions.
  const std::vector<CommBufferSpec> comm = comm_buffer_plan(backend, world, CommOptions{});
  // Ranks differ only where the optimizer's chunks do (offloaded host staging); the rest is shared.
  for (int r = 0; r < world; ++r) {
    if (r > 0 && !eopt.offload.optimizer) e.ranks.push_back(e.ranks.front());
    else e.ranks.push_back(predict_memory(plan, eopt, r, buffers, comm));
  }
  for (Recompute rc : {Recompute::None, Recompute::Block, Recompute::Selective}) {
    ModelOptions o = mopt;
    o.recompute = rc;
    int64_t a = 0;
    for (const BufferSpec& b : model_buffer_plan(model, o)) a += b.category == MemCategory::Activations ? b.bytes : 0;
    e.activations_by_recompute[static_cast<int>(rc)] = a;
  }
  return e;
}

OffloadFormula zero_offload_formula(const MemoryEstimate& e) {
  const double psi = static_cast<double>(e.psi), n = e.world;
  OffloadFormula f;
  f.device = e.stage == 3 && e.offload_params ? 0 : 2 * psi + (e.stage == 1 ? 4 * psi : 0);
  f.host = (4 + 12 + (e.offload_params ? 2 : 0)) * psi / n;
  return f;
}

namespace {
std::string mib(int64_t b) {
  char s[64];
  std::snprintf(s, sizeof(s), "%.2f MiB", static_cast<double>(b) / (1 << 20));
  return s;
}

// Offload: the model states this estimate predicts beside the ZeRO-Offload formula's.
std::string offload_formula_lines(const MemoryEstimate& e) {
  const MemoryPrediction& p = e.ranks.front();
  auto sum = [&](std::initializer_list<MemCategory> cs) {
    int64_t t = 0;
    for (MemCategory c : cs) t += std::max<int64_t>(0, p.at(c));
    return t;
  };
  using C = MemCategory;
  const int64_t device = sum({C::Params, C::Grads, C::Master, C::OptimMoments});
  const int64_t host = sum({C::HostGrads, C::HostMaster, C::HostMoments, C::HostParams});
  const OffloadFormula f = zero_offload_formula(e);
  const char* device_terms = e.stage == 3 && e.offload_params ? "0" : e.stage == 1 ? "2Ψ + 4Ψ" : "2Ψ";
  const char* host_terms = e.offload_params ? "(4 + 12 + 2)Ψ/N" : "(4 + 12)Ψ/N";
  char line[512];
  std::snprintf(line, sizeof(line),
                "  model states (params, grads, master, moments), Ψ = %lld parameters:\n"
                "    device: predicted %lld B (%s); ZeRO-Offload formula %s = %.0f B\n"
                "    host:   predicted %lld B (%s); ZeRO-Offload formula %s = %.0f B\n",
                static_cast<long long>(e.psi), static_cast<long long>(device), mib(device).c_str(), device_terms,
                f.device, static_cast<long long>(host), mib(host).c_str(), host_terms, f.host);
  return line;
}
}  // namespace

namespace {

// This config's model states beside the ZeRO paper's formula at every stage (same Ψ and N).
std::string zero_paper_line(const MemoryEstimate& e) {
  const double psi = static_cast<double>(e.psi);
  const int64_t here = model_state_bytes(e.ranks.front());
  char per_param[64];
  std::snprintf(per_param, sizeof(per_param), " (%.2f B per parameter)", psi > 0 ? static_cast<double>(here) / psi : 0.0);
  std::string out = "  model states per rank (params + grads + master + moments): " + std::to_string(here) + " B here" +
                    per_param + "; the ZeRO paper's (16-bit params and grads, fp32 Adam) at N=" +
                    std::to_string(e.world) + ":";
  for (int stage = 0; stage <= 3; ++stage) {
    char b[96];
    std::snprintf(b, sizeof(b), " stage %d %.0f B%s", stage, zero_paper_model_state_bytes(stage, psi, e.world),
                  stage == e.stage ? " (this config's stage)" : "");
    out += b + std::string(stage < 3 ? "," : "\n");
  }
  return out;
}

}  // namespace

std::string estimate_report(const MemoryEstimate& e, int64_t ranks_per_node) {
  const MemoryPrediction& p = e.ranks.front();
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "memory estimate per rank (ZeRO stage %d, N=%d, recompute %s, %s communicator):\n",
                e.stage, e.world, recompute_name(e.recompute), comm_backend_name(e.backend));
  out += line;
  std::snprintf(line, sizeof(line), "  %-20s %16s %14s\n", "category", "bytes (B)", "");
  out += line;
  for (int i = 0; i < kNumMemCategories; ++i) {
    const MemCategory c = static_cast<MemCategory>(i);
    const int64_t b = p.bytes[i];
    if (b < 0) std::snprintf(line, sizeof(line), "  %-20s %16s  (not predicted: grows on demand)\n", mem_category_name(c), "-");
    else std::snprintf(line, sizeof(line), "  %-20s %16lld %14s\n", mem_category_name(c), static_cast<long long>(b), mib(b).c_str());
    out += line;
  }
  out += "  parts:\n";
  int64_t kept_inputs = 0;
  for (const BufferSpec& s : p.items) {
    if (s.category == MemCategory::Activations) continue;  // summarised below
    if (s.category == MemCategory::HostActivations) {
      ++kept_inputs;
      continue;
    }
    std::snprintf(line, sizeof(line), "    %-12s %-24s %16lld B %14s\n", mem_category_name(s.category), s.name.c_str(),
                  static_cast<long long>(s.bytes), mib(s.bytes).c_str());
    out += line;
  }
  if (e.backend == CommBackend::NCCL && e.world > 1) {
    const NcclBufferSizes n = NcclBufferSizes::from_env();
    std::snprintf(line, sizeof(line),
                  "  nccl buffers: an estimate (NCCL allocates them itself): %lld channels x 2 connections x (%lld + "
                  "%lld + %lld) B (docs/design.md)\n",
                  static_cast<long long>(n.channels), static_cast<long long>(n.simple), static_cast<long long>(n.ll),
                  static_cast<long long>(n.ll128));
    out += line;
  }
  if (kept_inputs > 0) {
    const int64_t h = p.at(MemCategory::HostActivations);
    std::snprintf(line, sizeof(line),
                  "  host_activations (cpu_checkpointing): %lld kept block inputs x %lld B, pinned host memory\n",
                  static_cast<long long>(kept_inputs), static_cast<long long>(h / kept_inputs));
    out += line;
  }
  for (Recompute rc : {Recompute::None, Recompute::Block, Recompute::Selective}) {
    const int64_t a = e.activations_by_recompute[static_cast<int>(rc)];
    std::snprintf(line, sizeof(line), "  activations with recompute %-9s %16lld B %14s\n", recompute_name(rc),
                  static_cast<long long>(a), mib(a).c_str());
    out += line;
  }
  std::snprintf(line, sizeof(line), "  device total per rank: %lld B (%s); host total per rank: %lld B (%s)\n",
                static_cast<long long>(e.max_device_total()), mib(e.max_device_total()).c_str(),
                static_cast<long long>(e.max_host_total()), mib(e.max_host_total()).c_str());
  out += line;
  out += zero_paper_line(e);
  if (e.offload_optimizer) out += offload_formula_lines(e);
  if (e.max_host_total() > 0) {  // offload: the ranks of a node share its RAM
    const int64_t node = e.max_host_total() * ranks_per_node;
    std::snprintf(line, sizeof(line), "  host total per node (%lld ranks share its RAM): %lld B (%s)\n",
                  static_cast<long long>(ranks_per_node), static_cast<long long>(node), mib(node).c_str());
    out += line;
  }
  return out;
}

std::string estimate_json(const MemoryEstimate& e) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    nlohmann::json cats = nlohmann::json::object();
    for (int i = 0; i < kNumMemCategories; ++i) {
      const int64_t b = e.ranks[r].bytes[i];
      cats[mem_category_name(static_cast<MemCategory>(i))] = {{"predicted_bytes", b < 0 ? nlohmann::json() : nlohmann::json(b)}};
    }
    ranks.push_back({{"rank", r}, {"categories", cats}});
  }
  return nlohmann::json({{"stage", e.stage}, {"world_size", e.world}, {"ranks", ranks}}).dump(2);
}

}  // namespace zt
