// simulate.cpp — the step program on three in-order lanes (zerotrain/sim/simulate.h).
#include "zerotrain/sim/simulate.h"

#include <algorithm>

#include "zerotrain/core/check.h"
#include "sim_lanes.h"

namespace zt {

namespace {

class StepSimulator {
 public:
  StepSimulator(const ZeroPlan& plan, const EngineOptions& opt, const SimWorkload& work, const CostModel& cost)
      : plan_(plan), opt_(opt), work_(work), cost_(cost), lanes_(cost),
        program_(step_program(plan, opt.gradient_accumulation_steps)) {
    gathered_.assign(plan.buckets.size(), Done{});
    consumed_.assign(plan.buckets.size(), Done{});
    groups_.assign(plan.ag_groups.size(), Done{});
  }

  SimResult run() {
    SimResult r;
    for (int step = 0; step < 2; ++step) {
      lanes_.begin_step(step);
      last_reduction_ = {};
      params_up_ = {};
      if (step == 1) window_begin_ = lanes_.free(Lane::Compute);
      program_.for_each([&](int micro, const StepOp& op) {
        if (step == 1) {
          r.ops.push_back(op);
          r.op_micro.push_back(micro);
        }
        lanes_.set_op(step == 1 ? static_cast<int>(r.ops.size()) - 1 : -1);
        if (micro >= 0) micro_op(op);
        else boundary_op(op);
      });
    }
    lanes_.drain_comm();
    lanes_.finish(r, window_begin_);
    return r;
  }

 private:
  bool overlap() const { return opt_.overlap_comm; }
  static std::string position(const StepOp& op) { return (op.backward ? "bwd u" : "fwd u") + std::to_string(op.unit); }

  void micro_op(const StepOp& op) {
    switch (op.kind) {
      case OpKind::Gather:
      case OpKind::Prefetch: gather(op, overlap() ? Done{} : lanes_.handoff()); break;
      case OpKind::Wait: lanes_.wait(op.bucket >= 0 ? gathered_[op.bucket] : groups_[op.group]); break;
      case OpKind::Forward: lanes_.compute(position(op), cost_.unit_seconds(work_.forward[op.unit])); break;
      case OpKind::Backward: lanes_.compute(position(op), cost_.unit_seconds(work_.backward[op.unit])); break;
      case OpKind::Open: open(op); break;
      case OpKind::Close: close(op); break;
      case OpKind::Reduce: reduce(op); break;
      case OpKind::Offload: offload(op); break;
      case OpKind::Release: lanes_.wait(gathered_[op.bucket]); break;
      default: break;  // Loss: the head's forward already computed it
    }
  }

  void boundary_op(const StepOp& op) {
    switch (op.kind) {
      case OpKind::FinishReduce: lanes_.wait(last_reduction_); break;
      case OpKind::StepStats: step_stats(op); break;
      case OpKind::Update: update(op); break;
      case OpKind::ResetGrads:
        if (plan_.flow.grads == Layout::Full)
          lanes_.compute("step: reset grads", cost_.elementwise_seconds(elems_bytes(plan_.padded_numel, plan_.grad_dtype)));
        break;
      case OpKind::HandOff:
        handoff_ = lanes_.handoff();
        if (lanes_.end(params_up_) > lanes_.end(handoff_)) handoff_ = params_up_;
        break;
      case OpKind::GatherGroup: gather_group(op); break;
      case OpKind::Regather: gather(op, overlap() ? handoff_ : lanes_.handoff()); break;
      default: break;  // LossScale: host arithmetic
    }
  }

  static double elems_bytes(int64_t n, DType t) { return static_cast<double>(n) * static_cast<double>(dtype_size(t)); }

  Done issue(const StepOp& op, const Done& dep, double extra_s = 0, double handoff_s = -1) {
    Done d = dep;
    for (const PlannedCollective& c : op_collectives(plan_, op)) d = lanes_.collective(c, plan_.world, d, extra_s, handoff_s);
    return d;
  }

  // Stage 3: all-gather bucket b; without overlap_comm in compute's order, waited for at once.
  void gather(const StepOp& op, const Done& dep) {
    gathered_[op.bucket] = issue(op, dep);
    if (!overlap()) lanes_.wait(gathered_[op.bucket]);
  }

  void gather_group(const StepOp& op) {
    groups_[op.group] = issue(op, handoff_);
    if (overlap() || op.group + 1 < static_cast<int>(groups_.size())) return;
    for (const Done& g : groups_) lanes_.wait(g);
  }

  // Stages 2-3: the ring region is free once every bucket sharing it was consumed; then zeroed.
  void open(const StepOp& op) {
    if (plan_.ring_elems == 0) return;
    for (int j : plan_.ring_overlaps[op.bucket]) lanes_.wait(consumed_[j]);
    lanes_.compute(position(op) + ": open b" + std::to_string(op.bucket),
                   cost_.elementwise_seconds(elems_bytes(plan_.bucket(op.bucket).padded, plan_.compute)));
  }

  // Staged per-parameter gradients are added into the bucket (read both, write one).
  void close(const StepOp& op) {
    if (!plan_.staged_grads) return;
    lanes_.compute(position(op) + ": close b" + std::to_string(op.bucket),
                   cost_.elementwise_seconds(3 * elems_bytes(plan_.bucket(op.bucket).padded, plan_.grad_dtype)));
  }

  void reduce(const StepOp& op) {
    const Done h = lanes_.handoff();
    const PlanBucket& k = plan_.bucket(op.bucket);
    // Stages 2-3 add the reduced slice into the shard accumulator on the comm lane (read both,
    // write one); with host_grads that addition happens on the host instead.
    const bool accumulate = plan_.flow.reduce_every_micro_step && !plan_.host_grads;
    const double post = accumulate ? cost_.elementwise_seconds(3 * elems_bytes(k.slice, plan_.grad_dtype)) : 0;
    const Done d = issue(op, h, post, h.t);
    consumed_[op.bucket] = d;
    if (plan_.host_grads) return;  // the offload op follows
    last_reduction_ = d;
    if (!overlap()) lanes_.wait(d);
  }

  void offload(const StepOp& op) {
    const PlanBucket& k = plan_.bucket(op.bucket);
    const double bytes = elems_bytes(k.slice, plan_.reduced_dtype());
    const Done d = lanes_.copy("grads b" + std::to_string(op.bucket) + " down", "d2h", bytes, cost_.copy_seconds(bytes),
                               consumed_[op.bucket]);
    consumed_[op.bucket] = d;
    last_reduction_ = d;
    if (!overlap()) lanes_.wait(d);
  }

  // Squared norms of the gradients the optimizer reads (on the host with host_grads), then the
  // statistics all-gather; the host reads the verdict, so compute waits for it.
  void step_stats(const StepOp& op) {
    const double bytes = elems_bytes(plan_.numel_in(plan_.optimizer_grads()), plan_.grad_dtype);
    lanes_.compute("step: step stats", plan_.host_grads ? cost_.host_optimizer_seconds(bytes) : cost_.elementwise_seconds(bytes));
    lanes_.wait(issue(op, lanes_.handoff()));
  }

  void update(const StepOp& op) {
    const int64_t n = plan_.numel_in(plan_.flow.optimizer);
    const double per = optimizer_bytes_per_element(opt_, plan_.grad_dtype);
    if (!opt_.offload.optimizer) {
      lanes_.compute("step: update", cost_.optimizer_seconds(static_cast<double>(n) * per));
    } else {
      host_update(n, per);
    }
    if (plan_.param_norms_all_reduce) lanes_.wait(issue(op, lanes_.handoff()));
  }

  // offload_optimizer: the CPU optimizer in sub_group_size chunks (at most kMaxChunks slices),
  // each chunk's compute-dtype parameters up on the copy lane while the next is updated (not with
  // offload_param: the CPU optimizer writes the host shard itself); compute then waits for the
  // last upload before the parameter sync, as HostOptimizer::update does.
  void host_update(int64_t n, double per) {
    constexpr int64_t kMaxChunks = 64;
    const int64_t chunk = std::max({opt_.sub_group_size, (n + kMaxChunks - 1) / kMaxChunks, int64_t(1)});
    for (int64_t at = 0, c = 0; at < n; at += chunk, ++c) {
      const int64_t m = std::min(chunk, n - at);
      lanes_.compute("step: update (host) c" + std::to_string(c), cost_.host_optimizer_seconds(static_cast<double>(m) * per));
      if (opt_.offload.params) continue;
      const double bytes = elems_bytes(m, plan_.compute);
      params_up_ = lanes_.copy("params c" + std::to_string(c) + " up", "h2d", bytes, cost_.copy_seconds(bytes), lanes_.handoff());
    }
    lanes_.wait(params_up_);
  }

  const ZeroPlan& plan_;
  const EngineOptions& opt_;
  const SimWorkload& work_;
  const CostModel& cost_;
  SimLanes lanes_;
  StepProgram program_;
  std::vector<Done> gathered_, consumed_, groups_;
  Done last_reduction_, params_up_, handoff_;
  double window_begin_ = 0;
};

}  // namespace

double SimResult::overlap_pct() const {
  if (comm_busy_s <= 0) return -1;
  return std::clamp(100 * (1 - comm_exposed_s / comm_busy_s), 0.0, 100.0);
}

double SimResult::copy_overlap_pct() const {
  if (copy_busy_s <= 0) return -1;
  return std::clamp(100 * (1 - copy_exposed_s / copy_busy_s), 0.0, 100.0);
}

SimResult simulate_step(const ZeroPlan& plan, const EngineOptions& opt, const SimWorkload& work, const CostModel& cost) {
  ZT_CHECK(static_cast<int>(work.forward.size()) == plan.num_units() && work.backward.size() == work.forward.size(),
           "workload of " + std::to_string(work.forward.size()) + " units for a plan of " + std::to_string(plan.num_units()));
  SimResult r = StepSimulator(plan, opt, work, cost).run();
  r.has_copy_lane = opt.offload.optimizer;
  r.samples = work.micro_batch * std::max(1, opt.gradient_accumulation_steps) * plan.world;
  if (r.step_s > 0) {
    r.samples_per_s = static_cast<double>(r.samples) / r.step_s;
    r.tokens_per_s = r.samples_per_s * work.tokens_per_sample;
    r.model_flops_per_s = r.samples_per_s * work.flops_per_sample;
    r.mfu = r.model_flops_per_s / (cost.peak_flops() * plan.world);
  }
  return r;
}

}  // namespace zt
