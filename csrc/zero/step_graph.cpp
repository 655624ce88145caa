// step_graph.cpp — the host-side rules of train --cuda-graph (zero/step_graph.h): which runs
// have a static enough schedule to capture, and what a captured graph's signature compares.
#include "zerotrain/zero/step_graph.h"

#include <cstdio>
#include <sstream>

namespace zt {

std::string graph_refusal(const GraphEligibility& g) {
  if (g.device != DeviceKind::CUDA)
    return "CUDA graphs need the CUDA backend (this run is on the CPU backend)";
  if (g.stage == 3)
    return "ZeRO stage 3 is not captured: its parameter gathers lease memory-pool blocks per unit and their "
           "prefetch follows host-side budgets, so the schedule is not static";
  if (g.stage < 0 || g.stage > 3) return "unknown ZeRO stage " + std::to_string(g.stage);
  if (g.offload_optimizer || g.offload_params)
    return "ZeRO-Offload is not captured: its CPU optimizer runs on host threads between the copies";
  if (g.timing)
    return "wall_clock_breakdown / --trace time each unit with host-read events, which a graph replay would not "
           "record";
  if (g.comm_log)
    return "--comm-log / comms_logger record every collective on the host, and a graph replay issues them with no "
           "host call";
  if (g.side_stream)
    return "activation_checkpointing.cpu_checkpointing is not captured: its block-input copies run on the model's "
           "own copy stream, outside the captured compute stream";
  if (g.sync_check)
    return "ZT_CUDA_SYNC_CHECK=1 synchronises the stream after every op, which a stream capture forbids";
  if (g.warmup_steps < 1)
    return "at least one eager warm-up step is needed before capture (the cuBLAS workspaces and kernel scratch "
           "must be allocated first)";
  return {};
}

namespace {

template <typename T>
std::string text(const T& v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string list_text(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + text(v[i]);
  return out + "]";
}

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

}  // namespace

std::string signature_difference(const GraphSignature& a, const GraphSignature& b) {
  auto diff = [](const std::string& what, const std::string& x, const std::string& y) {
    return what + ": " + x + " -> " + y;
  };
  if (a.plan_hash != b.plan_hash) return diff("plan hash", text(a.plan_hash), text(b.plan_hash));
  if (a.stage != b.stage) return diff("ZeRO stage", text(a.stage), text(b.stage));
  if (a.world != b.world) return diff("world size", text(a.world), text(b.world));
  if (a.gas != b.gas) return diff("gradient_accumulation_steps", text(a.gas), text(b.gas));
  if (a.first != b.first || a.boundary != b.boundary)
    return diff("micro-step kind", micro_kind_name(a), micro_kind_name(b));
  if (a.wire_next != b.wire_next) return diff("wire slot phase", text(a.wire_next), text(b.wire_next));
  if (a.batch_B != b.batch_B || a.batch_T != b.batch_T)
    return diff("batch shape", "B=" + text(a.batch_B) + " T=" + text(a.batch_T),
                "B=" + text(b.batch_B) + " T=" + text(b.batch_T));
  if (a.model_scalars != b.model_scalars)
    return diff("model launch scalars (loss divisor)", list_text(a.model_scalars), list_text(b.model_scalars));
  if (a.dloss != b.dloss) return diff("dloss (loss scale / accumulation)", text(a.dloss), text(b.dloss));
  if (a.buffers.size() != b.buffers.size())
    return diff("buffer count", text(a.buffers.size()), text(b.buffers.size()));
  for (size_t i = 0; i < a.buffers.size(); ++i)
    if (a.buffers[i] != b.buffers[i])
      return diff("buffer " + text(i) + " address", pointer_text(a.buffers[i]), pointer_text(b.buffers[i]));
  return {};
}

std::string micro_kind_name(const GraphSignature& s) {
  std::string k = s.first && s.boundary ? "only" : s.first ? "first" : s.boundary ? "last" : "middle";
  if (s.wire_next != 0) k += " (wire slot " + text(s.wire_next) + ")";
  return k;
}

}  // namespace zt
