// plan_collectives.cpp — the collectives' vocabulary: the typed label every collective of a step
// carries (the engine passes its to_string() to the communicator), the bytes a ring collective
// moves per rank, and which rank owns which slice of which parameter. Which collectives a step
// issues, in order, is the step program's (step_program.cpp: op_collectives, step_collectives).

#include "zerotrain/zero/plan.h"

#include "zerotrain/kernels/quantize_math.h"

namespace zt {

std::string CollectiveLabel::to_string() const {
  switch (kind) {
    case Kind::Grads: return "b" + std::to_string(bucket);
    case Kind::Gather: return "gather b" + std::to_string(bucket);
    case Kind::QuantizedGather: return "gather b" + std::to_string(bucket) + " int8";
    case Kind::SecondaryGather: return "gather b" + std::to_string(bucket) + " hpz";
    case Kind::QuantizedGradsIntra: return "b" + std::to_string(bucket) + " int4 intra";
    case Kind::QuantizedGradsInter: return "b" + std::to_string(bucket) + " int4 inter";
    case Kind::GroupGather: return "ag" + std::to_string(group) + ".b" + std::to_string(bucket);
    case Kind::StepStats: return "step stats";
    case Kind::LambNorms: return "lamb norms";
  }
  return "?";
}

int64_t ZeroPlan::quantized_gather_words(int64_t slice_elems) const {
  return (quant::payload_bytes(slice_elems, 8) + 3) / 4 + quant::num_blocks(slice_elems, quantized_weights_block);
}

int64_t ZeroPlan::quantized_grad_words(int64_t slice_elems) const {
  return (quant::payload_bytes(slice_elems, 4) + 3) / 4 + quant::num_blocks(slice_elems, quantized_grads_block);
}

double ring_bytes_per_rank(CommOp op, size_t buffer_bytes, int world) {
  const double share = world > 1 ? static_cast<double>(world - 1) / world : 0.0;
  return (op == CommOp::AllReduce ? 2.0 : 1.0) * share * static_cast<double>(buffer_bytes);
}

std::string ZeroPlan::describe_ownership(const std::vector<std::string>& param_names) const {
  std::string out = "ownership (rank r owns slice r of every bucket; elements of each parameter, [begin, end)):\n";
  std::vector<std::vector<std::pair<int, PlanPiece>>> owners(params.size());  // per parameter: (rank, piece)
  for (int r = 0; r < world; ++r)
    for (const PlanPiece& pc : pieces(r)) owners[static_cast<size_t>(pc.param)].push_back({r, pc});
  for (const PlanParam& p : params) {
    const PlanBucket& b = bucket(p.bucket);
    const std::string name = static_cast<size_t>(p.index) < param_names.size() ? param_names[p.index] : "";
    std::string line = "  param " + std::to_string(p.index) + (name.empty() ? "" : " " + name) + " (b" + std::to_string(b.id) + ", " +
                       std::to_string(p.numel) + " elements):";
    bool any = false;
    for (const auto& [r, pc] : owners[static_cast<size_t>(p.index)]) {
      line += (any ? ", r" : " r") + std::to_string(r) + " [" + std::to_string(pc.begin) + ", " +
              std::to_string(pc.begin + pc.count) + ")";
      any = true;
    }
    out += line + (flow.optimizer == Layout::Full ? " (stage 0: every rank updates all of it)" : "") + "\n";
  }
  return out;
}

}  // namespace zt
