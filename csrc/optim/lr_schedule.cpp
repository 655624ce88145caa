// lr_schedule.cpp — the five DeepSpeed schedules from their typed parameters (DeepSpeed 0.19.5
// semantics, incl. the v0.19.3+ cosine guards and v0.19.4+ stair counts; docs/config.md).
#include "zerotrain/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "zerotrain/core/check.h"

namespace zt {

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

// Warm-up fraction for 0 <= t < N: ln(t+1)/ln(N) (log) or t/N (linear).
double warmup_fraction(int64_t t, int64_t n, bool log_warmup) {
  if (log_warmup) return (1.0 / std::log(static_cast<double>(n))) * std::log(static_cast<double>(t + 1));
  return static_cast<double>(t) / static_cast<double>(n);
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
  WarmupLr(const LrScheduleSpec& s, double optimizer_lr)
      : min_lr_(s.warmup_min_lr), max_lr_(s.warmup_max_lr.value_or(optimizer_lr)), n_(s.warmup_num_steps),
        log_(s.warmup_log) {
    warnings_ = s.warnings;
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
  WarmupDecayLr(const LrScheduleSpec& s, double optimizer_lr) : WarmupLr(s, optimizer_lr), total_(s.total_num_steps) {}
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
  WarmupCosineLr(const LrScheduleSpec& s, double optimizer_lr)
      : org_lr_(optimizer_lr), total_(s.total_num_steps), wmin_(s.warmup_min_ratio), cmin_(s.cos_min_ratio),
        n_(s.warmup_num_steps), log_(s.warmup_log) {
    warnings_ = s.warnings;
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
  explicit LrRangeTest(const LrScheduleSpec& s)
      : min_lr_(s.range_min_lr), size_(s.range_step_size), rate_(s.range_step_rate), staircase_(s.range_staircase) {
    warnings_ = s.warnings;
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
  OneCycle(const LrScheduleSpec& s, bool optimizer_has_betas)
      : min_lr_(s.cycle_min_lr), max_lr_(s.cycle_max_lr), decay_lr_rate_(s.decay_lr_rate),
        first_(s.cycle_first_step_size), second_(s.cycle_second_step_size), decay_step_(s.decay_step_size),
        first_stairs_(s.cycle_first_stair_count), second_stairs_(s.cycle_second_stair_count),
        momentum_(s.cycle_momentum), min_mom_(s.cycle_min_mom), max_mom_(s.cycle_max_mom),
        decay_mom_rate_(s.decay_mom_rate) {
    warnings_ = s.warnings;
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

std::unique_ptr<LrSchedule> make_lr_schedule(const LrScheduleSpec& spec, double optimizer_lr,
                                             bool optimizer_has_betas) {
  std::unique_ptr<LrSchedule> s;
  switch (spec.type) {
    case LrScheduleType::kConstant: return std::make_unique<ConstantLr>(optimizer_lr);
    case LrScheduleType::kWarmupLR: s = std::make_unique<WarmupLr>(spec, optimizer_lr); break;
    case LrScheduleType::kWarmupDecayLR: s = std::make_unique<WarmupDecayLr>(spec, optimizer_lr); break;
    case LrScheduleType::kWarmupCosineLR: s = std::make_unique<WarmupCosineLr>(spec, optimizer_lr); break;
    case LrScheduleType::kLRRangeTest: s = std::make_unique<LrRangeTest>(spec); break;
    case LrScheduleType::kOneCycle: {
      auto oc = std::make_unique<OneCycle>(spec, optimizer_has_betas);
      oc->finish_construction();
      return oc;
    }
  }
  s->step_to(-1);  // construction writes f(-1)
  return s;
}

}  // namespace zt
