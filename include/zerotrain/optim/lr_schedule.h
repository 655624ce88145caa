// lr_schedule.h — DeepSpeed's five LR schedules (WarmupLR, WarmupDecayLR, WarmupCosineLR,
// OneCycle, LRRangeTest) with DeepSpeed's stepping semantics (deepspeed-config.md §5).
//
// Stepping contract (t = last_batch_iteration):
//   construction: t = -1 and the optimizer's values become the construction values
//                 (lr = f(-1); OneCycle with momentum cycling: beta1 = cycle_min_mom, beta2 = 0.99);
//   step():       t += 1, then the optimizer's values become f(t).
// The engine calls step() once per SUCCESSFUL optimizer step (a step skipped for overflow does not
// advance the schedule). So optimizer step k uses current() as it stands before the k-th step():
// f(-1) for k = 1, f(k-2) for k >= 2; after k successful steps current().lr == f(k-1).
// All arithmetic is double; the engine casts to float when it builds AdamParams.
// zerotrain has one parameter group: DeepSpeed's per-group lists are accepted with length 1.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zt {

// Values the optimizer uses now. has_betas: the schedule overrides Adam's (beta1, beta2).
struct LrValues {
  double lr = 0.0;
  bool has_betas = false;
  double beta1 = 0.0, beta2 = 0.0;
};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string name() const = 0;        // DeepSpeed type name, "constant" if none
  virtual double lr_at(int64_t t) const = 0;   // f(t), t >= -1
  // Momentum cycling (OneCycle with cycle_momentum on an optimizer that has betas).
  virtual bool cycles_momentum() const { return false; }
  virtual double beta1_at(int64_t t) const { return 0.0; }  // only when cycles_momentum()

  int64_t last_batch_iteration() const { return t_; }
  const LrValues& current() const { return current_; }
  void step() { step_to(t_ + 1); }
  // DeepSpeed's step(batch_iteration): sets t and applies f(t). Also used to restore a checkpoint
  // (state_dict = {last_batch_iteration}).
  void step_to(int64_t t);
  // Warnings DeepSpeed would log (unknown warmup_type, momentum cycling disabled, T < N, …);
  // the caller prints them once on rank 0.
  const std::vector<std::string>& warnings() const { return warnings_; }

 protected:
  // Sets the construction values; called at the end of each derived constructor.
  void init_construction(const LrValues& values);
  std::vector<std::string> warnings_;

 private:
  int64_t t_ = -1;
  LrValues current_;
};

// Builds a schedule from the DeepSpeed `scheduler` section.
//   type: "" (no scheduler section) => constant optimizer_lr; otherwise one of the five names
//         (case-sensitive, as in DeepSpeed); anything else => InputError "not supported".
//   params: the `params` object (null/absent => InputError for the five types, as DeepSpeed's
//           TypeError); unknown keys => InputError naming the key.
//   optimizer_lr: the optimizer's lr (WarmupLR's default max, WarmupCosineLR's base).
//   optimizer_has_betas: Adam/AdamW true, SGD false (OneCycle then disables momentum cycling).
std::unique_ptr<LrSchedule> make_lr_schedule(const std::string& type, const nlohmann::json& params,
                                             double optimizer_lr, bool optimizer_has_betas);

}  // namespace zt
