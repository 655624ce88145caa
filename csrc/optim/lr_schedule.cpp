// lr_schedule.cpp — the five DeepSpeed schedules; formulas from deepspeed-config.md §5
// (DeepSpeed 0.19.5 semantics, incl. the v0.19.3+ cosine guards and v0.19.4+ stair counts).
#include "zerotrain/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "param_reader.h"
#include "zerotrain/core/check.h"

namespace zt {

using optim_detail::ParamReader;

void LrSchedule::step_to(int64_t t) {
  t_ = t;
  current_.lr = lr_at(t);
  if (cycles_momentum()) {
    current_.has_betas = true;
    current_.beta1 = beta1_at(t);
    current_.beta2 = 0.99;  // OneCycle keeps beta2 at 0.99 (DeepSpeed forces it)
  }
}

void LrSchedule::init_construction(const LrValues& values) {
  t_ = -1;
  current_ = values;
}

namespace {

constexpr double kPi = 3.14159265358979323846;

// Reads warmup_num_steps: a JSON integer > 0 (v0.19.3+), then N = max(2, value).
int64_t read_warmup_steps(ParamReader& r) {
  int64_t n = r.integer("warmup_num_steps", 1000);
  if (n <= 0) throw InputError(r.where() + ".warmup_num_steps: must be an integer > 0, found " + std::to_string(n));
  return std::max<int64_t>(2, n);
}

// "log" (default) or "linear"; anything else warns and uses log.
bool read_warmup_is_log(ParamReader& r, std::vector<std::string>& warnings) {
  std::string type = r.string("warmup_type", "log");
  if (type == "linear") return false;
  if (type != "log")
    warnings.push_back(r.where() + ".warmup_type '" + type + "' is not 'log' or 'linear'; using 'log'");
  return true;
}

// Warm-up fraction for 0 <= t < N: ln(t+1)/ln(N) (log) or t/N (linear).
double warmup_fraction(int64_t t, int64_t n, bool log_warmup) {
  if (log_warmup) return (1.0 / std::log(static_cast<double>(n))) * std::log(static_cast<double>(t + 1));
  return static_cast<double>(t) / static_cast<double>(n);
}

void reject_nonstart_iteration(ParamReader& r) {
  int64_t lbi = r.integer("last_batch_iteration", -1);
  if (lbi != -1)
    throw InputError(r.where() + ".last_batch_iteration: only -1 is supported (resume restores it from the checkpoint)");
}

class ConstantLr final : public LrSchedule {
 public:
  explicit ConstantLr(double lr) : lr_(lr) { init_construction({lr, false, 0, 0}); }
  std::string name() const override { return "constant"; }
  double lr_at(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// WarmupLR: lr = min + (max - min) * gamma(t); gamma = 0 for t < 0 (lr = min), warm-up for t < N, 1 after.
class WarmupLr : public LrSchedule {
 public:
  WarmupLr(ParamReader& r, double optimizer_lr, double default_max, bool max_from_optimizer) {
    min_lr_ = r.number("warmup_min_lr", 0.0);
    max_lr_ = r.number("warmup_max_lr", max_from_optimizer ? optimizer_lr : default_max, max_from_optimizer);
    n_ = read_warmup_steps(r);
    log_ = read_warmup_is_log(r, warnings_);
    reject_nonstart_iteration(r);
  }
  std::string name() const override { return "WarmupLR"; }
  double lr_at(int64_t t) const override { return min_lr_ + (max_lr_ - min_lr_) * gamma(t); }

 protected:
  virtual double gamma(int64_t t) const {
    if (t < 0) return 0.0;
    if (t < n_) return warmup_fraction(t, n_, log_);
    return 1.0;
  }
  double min_lr_ = 0, max_lr_ = 0;
  int64_t n_ = 2;
  bool log_ = true;
};

// WarmupDecayLR: WarmupLR, then linear decay to 0 at t = T: gamma = max(0, (T - t) / max(1, T - N)).
class WarmupDecayLr final : public WarmupLr {
 public:
  WarmupDecayLr(ParamReader& r, double optimizer_lr) : WarmupLr(r, optimizer_lr, 0.001, false) {
    total_ = r.required_number("total_num_steps");
    if (total_ < static_cast<double>(n_))
      warnings_.push_back(r.where() + ".total_num_steps " + std::to_string(total_) +
                          " is less than warmup_num_steps " + std::to_string(n_));
  }
  std::string name() const override { return "WarmupDecayLR"; }

 protected:
  double gamma(int64_t t) const override {
    if (t < n_) return WarmupLr::gamma(t);
    return std::max(0.0, (total_ - static_cast<double>(t)) / std::max(1.0, total_ - static_cast<double>(n_)));
  }

 private:
  double total_ = 0;
};

// WarmupCosineLR: lr = org_lr * ratio(t); ratio 0 at t < 0, warm-up from warmup_min_ratio to 1,
// then cosine from 1 to cos_min_ratio over T - N steps (p clamped to 1, guard max(1, T - N)).
class WarmupCosineLr final : public LrSchedule {
 public:
  WarmupCosineLr(ParamReader& r, double optimizer_lr) : org_lr_(optimizer_lr) {
    total_ = r.required_number("total_num_steps");
    wmin_ = r.number("warmup_min_ratio", 0.0);
    n_ = read_warmup_steps(r);
    cmin_ = r.number("cos_min_ratio", 0.0001);
    log_ = read_warmup_is_log(r, warnings_);
    reject_nonstart_iteration(r);
  }
  std::string name() const override { return "WarmupCosineLR"; }
  double lr_at(int64_t t) const override { return org_lr_ * ratio(t); }
  double ratio(int64_t t) const {
    if (t < 0) return 0.0;
    if (t < n_) return wmin_ + warmup_fraction(t, n_, log_) * (1.0 - wmin_);
    double p = std::min(1.0, static_cast<double>(t - n_ + 1) / std::max(1.0, total_ - static_cast<double>(n_)));
    return std::max(0.0, cmin_ + (1.0 - cmin_) * (1.0 + std::cos(kPi * p)) / 2.0);
  }

 private:
  double org_lr_, total_ = 0, wmin_ = 0, cmin_ = 0;
  int64_t n_ = 2;
  bool log_ = true;
};

// LRRangeTest: lr = min * (1 + rate * I), I = (t+1)/size, floored when staircase.
class LrRangeTest final : public LrSchedule {
 public:
  explicit LrRangeTest(ParamReader& r) {
    min_lr_ = r.number("lr_range_test_min_lr", 1e-3);
    int64_t size = r.integer("lr_range_test_step_size", 2000);
    if (size <= 0)
      throw InputError(r.where() + ".lr_range_test_step_size: must be an integer > 0, found " + std::to_string(size));
    size_ = static_cast<double>(size);
    rate_ = r.number("lr_range_test_step_rate", 1.0);
    staircase_ = r.boolean("lr_range_test_staircase", false);
    reject_nonstart_iteration(r);
  }
  std::string name() const override { return "LRRangeTest"; }
  double lr_at(int64_t t) const override {
    double interval = static_cast<double>(t + 1) / size_;
    if (staircase_) interval = std::floor(interval);
    return min_lr_ * (1.0 + rate_ * interval);
  }

 private:
  double min_lr_ = 0, size_ = 1, rate_ = 0;
  bool staircase_ = false;
};

// OneCycle: one triangle of length C = F + S from min to max and back (optionally in stairs),
// then decay: lr = min / (1 + decay_lr_rate * d / decay_step_size), d = t - C + 1.
// Momentum runs the mirror image: beta1 = max_mom - (max_mom - min_mom) * s, then
// beta1 = max_mom * (1 + decay_mom_rate * d / decay_step_size); beta2 is 0.99 throughout.
class OneCycle final : public LrSchedule {
 public:
  OneCycle(ParamReader& r, bool optimizer_has_betas) {
    min_lr_ = r.required_number("cycle_min_lr");
    max_lr_ = r.required_number("cycle_max_lr");
    decay_lr_rate_ = r.number("decay_lr_rate", 0.0);
    first_ = r.number("cycle_first_step_size", 2000);
    second_ = r.has("cycle_second_step_size") ? r.number("cycle_second_step_size", 0) : first_;
    r.accept("cycle_second_step_size");
    if (first_ <= 0)
      throw InputError(r.where() + ".cycle_first_step_size: must be > 0, found " + std::to_string(first_));
    if (second_ < 0)
      throw InputError(r.where() + ".cycle_second_step_size: must be >= 0, found " + std::to_string(second_));
    first_stairs_ = r.integer("cycle_first_stair_count", 0);
    second_stairs_ = r.has("cycle_second_stair_count") ? r.integer("cycle_second_stair_count", 0) : first_stairs_;
    r.accept("cycle_second_stair_count");
    if (first_stairs_ < 0 || second_stairs_ < 0)
      throw InputError(r.where() + ": stair counts must be >= 0");
    decay_step_ = r.number("decay_step_size", 0.0);
    momentum_ = r.boolean("cycle_momentum", true);
    min_mom_ = r.number("cycle_min_mom", 0.8);
    max_mom_ = r.number("cycle_max_mom", 0.9);
    decay_mom_rate_ = r.number("decay_mom_rate", 0.0);
    reject_nonstart_iteration(r);
    total_ = first_ + second_;
    ratio_ = first_ / total_;
    if (momentum_ && !optimizer_has_betas) {
      warnings_.push_back("scheduler OneCycle: cycle_momentum is disabled because the optimizer has no betas");
      momentum_ = false;
    }
  }
  std::string name() const override { return "OneCycle"; }
  bool cycles_momentum() const override { return momentum_; }
  // Construction values: lr = cycle_min_lr; betas = (cycle_min_mom, 0.99) when cycling momentum.
  void finish_construction() {
    init_construction({min_lr_, momentum_, momentum_ ? min_mom_ : 0.0, momentum_ ? 0.99 : 0.0});
  }

  double lr_at(int64_t t) const override {
    if (static_cast<double>(t) < total_) return min_lr_ + (max_lr_ - min_lr_) * scale(t);
    double d = static_cast<double>(t) - total_ + 1.0;
    if (near_zero(decay_step_) || near_zero(decay_lr_rate_)) return min_lr_;
    return min_lr_ / (1.0 + decay_lr_rate_ * d / decay_step_);
  }
  double beta1_at(int64_t t) const override {
    if (static_cast<double>(t) < total_) return max_mom_ - (max_mom_ - min_mom_) * scale(t);
    double d = static_cast<double>(t) - total_ + 1.0;
    if (near_zero(decay_step_) || near_zero(decay_mom_rate_)) return max_mom_;
    return max_mom_ * (1.0 + decay_mom_rate_ * d / decay_step_);
  }

 private:
  static bool near_zero(double x) { return std::fabs(x) < 1e-12; }
  // Position in the triangle, 0 at the ends, 1 at the peak (t < C).
  double scale(int64_t t) const {
    double b = static_cast<double>(t + 1);
    double cycle = std::floor(1.0 + b / total_);
    double x = 1.0 + b / total_ - cycle;
    bool rising = x <= ratio_;
    double s = rising ? x / ratio_ : (x - 1.0) / (ratio_ - 1.0);
    int64_t stairs = rising ? first_stairs_ : second_stairs_;
    if (stairs > 0) {
      double i = std::fmod(b, total_);
      double n = static_cast<double>(stairs);
      double pos = i <= first_ ? i * n / first_ : (total_ - i) * n / second_;
      s = std::floor(pos) / n;
    }
    return s;
  }

  double min_lr_ = 0, max_lr_ = 0, decay_lr_rate_ = 0, first_ = 0, second_ = 0, decay_step_ = 0;
  int64_t first_stairs_ = 0, second_stairs_ = 0;
  bool momentum_ = true;
  double min_mom_ = 0.8, max_mom_ = 0.9, decay_mom_rate_ = 0;
  double total_ = 0, ratio_ = 1;

};

}  // namespace

std::unique_ptr<LrSchedule> make_lr_schedule(const std::string& type, const nlohmann::json& params,
                                             double optimizer_lr, bool optimizer_has_betas) {
  if (type.empty()) return std::make_unique<ConstantLr>(optimizer_lr);
  static const char* kKnown[] = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"};
  bool known = false;
  for (const char* k : kKnown) known = known || type == k;
  if (!known)
    throw InputError("scheduler.type: '" + type +
                     "' is not supported (zerotrain implements WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, "
                     "LRRangeTest; names are case-sensitive)");
  if (params.is_null())
    throw InputError("scheduler.params: missing; scheduler " + type + " needs a params object");
  ParamReader r(params, "scheduler.params", "scheduler " + type);
  std::unique_ptr<LrSchedule> s;
  if (type == "WarmupLR") {
    s = std::make_unique<WarmupLr>(r, optimizer_lr, 0.0, true);
  } else if (type == "WarmupDecayLR") {
    s = std::make_unique<WarmupDecayLr>(r, optimizer_lr);
  } else if (type == "WarmupCosineLR") {
    s = std::make_unique<WarmupCosineLr>(r, optimizer_lr);
  } else if (type == "LRRangeTest") {
    s = std::make_unique<LrRangeTest>(r);
  } else {
    auto oc = std::make_unique<OneCycle>(r, optimizer_has_betas);
    r.reject_unknown();
    oc->finish_construction();
    return oc;
  }
  r.reject_unknown();
  s->step_to(-1);  // construction writes f(-1)
  return s;
}

}  // namespace zt
