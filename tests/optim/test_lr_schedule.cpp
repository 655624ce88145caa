// LR schedules against every [run] trace of docs/config.md §5 and §13.1 items 31-44.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "zerotrain/core/check.h"
#include "zerotrain/config/optim_inputs.h"
#include "zerotrain/optim/lr_schedule.h"

using json = zt::Json;

namespace {

// The `scheduler` section as the trainer builds it: params read by config/, the schedule by optim/.
std::unique_ptr<zt::LrSchedule> make_lr_schedule(const std::string& type, const json& params, double optimizer_lr,
                                                 bool optimizer_has_betas) {
  return zt::make_lr_schedule(zt::parse_lr_schedule(type, params), optimizer_lr, optimizer_has_betas);
}

// LR after steps 1..n (t = 0..n-1), each by one step() as the engine does.
std::vector<double> lrs_after_steps(zt::LrSchedule& s, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    s.step();
    out.push_back(s.current().lr);
  }
  return out;
}

// rel: relative tolerance; abs: half a unit of the last digit the reference prints.
void expect_trace(const std::vector<double>& got, const std::vector<double>& want, double rel, double abs = 0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * std::max(std::fabs(want[i]), 1e-12) + abs + 1e-15) << "after step " << i + 1;
}

}  // namespace

TEST(LrSchedule, WarmupLrLogTrace) {
  auto s = make_lr_schedule("WarmupLR", json{{"warmup_min_lr", 0}, {"warmup_max_lr", 1e-3}, {"warmup_num_steps", 10}},
                            0.5, true);
  EXPECT_EQ(s->current().lr, 0.0);
  EXPECT_EQ(s->last_batch_iteration(), -1);
  expect_trace(lrs_after_steps(*s, 12),
               {0, 3.0103e-4, 4.771213e-4, 6.0206e-4, 6.9897e-4, 7.781513e-4, 8.45098e-4, 9.0309e-4, 9.542425e-4, 1e-3,
                1e-3, 1e-3},
               2e-5);
}

TEST(LrSchedule, WarmupLrLinearTrace) {
  auto s = make_lr_schedule(
      "WarmupLR",
      json{{"warmup_min_lr", 0}, {"warmup_max_lr", 1e-3}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}}, 0.5,
      true);
  expect_trace(lrs_after_steps(*s, 12), {0, 1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4, 7e-4, 8e-4, 9e-4, 1e-3, 1e-3}, 1e-12);
}

TEST(LrSchedule, WarmupLrOneStepBehavesAsTwo) {
  auto a = make_lr_schedule("WarmupLR", json{{"warmup_max_lr", 1.0}, {"warmup_num_steps", 1}, {"warmup_type", "linear"}}, 0, true);
  auto b = make_lr_schedule("WarmupLR", json{{"warmup_max_lr", 1.0}, {"warmup_num_steps", 2}, {"warmup_type", "linear"}}, 0, true);
  expect_trace(lrs_after_steps(*a, 5), lrs_after_steps(*b, 5), 0);
  EXPECT_EQ(a->lr_at(1), 0.5);
}

TEST(LrSchedule, WarmupLrMaxDefaultsToOptimizerLr) {  // item 38
  auto s = make_lr_schedule("WarmupLR", json{{"warmup_num_steps", 10}}, 0.1, true);
  EXPECT_EQ(s->current().lr, 0.0);
  s->step_to(10);
  EXPECT_DOUBLE_EQ(s->current().lr, 0.1);
}

TEST(LrSchedule, WarmupLrItem31AndDecayItem32) {
  for (int n : {10, 15, 19, 33}) {
    for (const char* type : {"log", "linear"}) {
      json p{{"warmup_min_lr", 0.1}, {"warmup_max_lr", 0.2}, {"warmup_num_steps", n}, {"warmup_type", type}};
      auto s = make_lr_schedule("WarmupLR", p, 0.0, true);
      auto lrs = lrs_after_steps(*s, n + 10);
      EXPECT_DOUBLE_EQ(lrs[0], 0.1);
      for (int i = n; i < n + 10; ++i) EXPECT_DOUBLE_EQ(lrs[i], 0.2) << "N=" << n << " " << type;
      p["total_num_steps"] = 2 * n;
      auto d = make_lr_schedule("WarmupDecayLR", p, 0.0, true);
      auto dl = lrs_after_steps(*d, 2 * n);
      EXPECT_DOUBLE_EQ(dl[0], 0.1);
      EXPECT_DOUBLE_EQ(dl[n], 0.2);
      for (int i = n + 1; i < 2 * n; ++i) EXPECT_LT(dl[i], dl[i - 1]) << "strictly decreasing after warm-up";
    }
  }
}

TEST(LrSchedule, WarmupDecayTrace) {
  auto s = make_lr_schedule("WarmupDecayLR",
                            json{{"warmup_min_lr", 0},
                                 {"warmup_max_lr", 1e-3},
                                 {"warmup_num_steps", 10},
                                 {"total_num_steps", 20},
                                 {"warmup_type", "linear"}},
                            0.5, true);
  std::vector<double> want;
  for (int i = 0; i <= 10; ++i) want.push_back(1e-4 * i);
  for (int i = 9; i >= 0; --i) want.push_back(1e-4 * i);
  want.push_back(0);
  expect_trace(lrs_after_steps(*s, 22), want, 1e-12);
}

TEST(LrSchedule, WarmupDecayMaxDefaultIsNotInherited) {
  auto s = make_lr_schedule("WarmupDecayLR", json{{"total_num_steps", 100}, {"warmup_num_steps", 10}}, 0.5, true);
  EXPECT_DOUBLE_EQ(s->lr_at(9), 0.001);
}

TEST(LrSchedule, WarmupCosineLinearTrace) {
  auto s = make_lr_schedule("WarmupCosineLR",
                            json{{"total_num_steps", 20},
                                 {"warmup_num_steps", 5},
                                 {"warmup_min_ratio", 0},
                                 {"cos_min_ratio", 0.1},
                                 {"warmup_type", "linear"}},
                            0.01, true);
  EXPECT_EQ(s->current().lr, 0.0);
  expect_trace(lrs_after_steps(*s, 22),
               {0, 0.002, 0.004, 0.006, 0.008, 0.0099016642, 0.0096109546, 0.0091405765, 0.0085110877, 0.00775,
                0.0068905765, 0.0059703781, 0.0050296219, 0.0041094235, 0.00325, 0.0024889123, 0.0018594235,
                0.0013890454, 0.0010983358, 0.001, 0.001, 0.001},
               0, 5e-11);
}

TEST(LrSchedule, WarmupCosineDefaultsTrace) {
  auto s = make_lr_schedule("WarmupCosineLR", json{{"total_num_steps", 20}, {"warmup_num_steps", 5}}, 0.01, true);
  auto lrs = lrs_after_steps(*s, 22);
  expect_trace({lrs[0], lrs[1], lrs[2], lrs[3], lrs[4], lrs[5], lrs[18], lrs[19], lrs[20], lrs[21]},
               {0, 0.0043067656, 0.0068260619, 0.0086135312, 0.01, 0.0098907489, 0.0001102511, 1e-06, 1e-06, 1e-06},
               0, 5e-11);
}

TEST(LrSchedule, WarmupCosineItem36) {
  struct Case { int T, N; double cmin, wmin; };
  for (Case c : {Case{100, 10, .1, .2}, Case{200, 20, .1, .2}, Case{500, 30, 0, .2}, Case{600, 300, .1, 0},
                 Case{600, 550, 0, 0}}) {
    auto s = make_lr_schedule("WarmupCosineLR",
                              json{{"total_num_steps", c.T}, {"warmup_num_steps", c.N}, {"cos_min_ratio", c.cmin},
                                   {"warmup_min_ratio", c.wmin}},
                              0.0015, true);
    auto lrs = lrs_after_steps(*s, c.T);
    EXPECT_NEAR(lrs[0], 0.0015 * c.wmin, 1e-15);
    EXPECT_NEAR(lrs[c.N - 1], 0.0015, 1e-15);
    EXPECT_NEAR(lrs[c.T - 1], 0.0015 * c.cmin, 1e-15);
    for (int i = 1; i < c.N; ++i) EXPECT_GE(lrs[i], lrs[i - 1]);
    for (int i = c.N; i < c.T; ++i) EXPECT_LE(lrs[i], lrs[i - 1]);
  }
}

TEST(LrSchedule, WarmupCosineItem37And40And42) {
  auto s = make_lr_schedule("WarmupCosineLR", json{{"total_num_steps", 100}, {"warmup_num_steps", 10}}, 0.0015, true);
  EXPECT_EQ(s->current().lr, 0.0);
  s->step_to(1);
  EXPECT_DOUBLE_EQ(s->current().lr / 0.0015, std::log(2.0) / std::log(10.0));
  auto e = make_lr_schedule("WarmupCosineLR", json{{"total_num_steps", 10}, {"warmup_num_steps", 10}, {"cos_min_ratio", 0.1}},
                            1.0, true);
  for (int t = 10; t <= 14; ++t) EXPECT_DOUBLE_EQ(e->lr_at(t), 0.1);
  auto u = make_lr_schedule("WarmupCosineLR", json{{"total_num_steps", 100}, {"warmup_num_steps", 10}, {"warmup_type", "foo"}},
                            1.0, true);
  EXPECT_DOUBLE_EQ(u->lr_at(3), std::log(4.0) / std::log(10.0));
  EXPECT_FALSE(u->warnings().empty());
  auto l = make_lr_schedule("WarmupCosineLR", json{{"total_num_steps", 100}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}},
                            1.0, true);
  EXPECT_DOUBLE_EQ(l->lr_at(3), 0.3);
}

TEST(LrSchedule, LrRangeTestTraces) {
  json p{{"lr_range_test_min_lr", 1e-3}, {"lr_range_test_step_size", 4}, {"lr_range_test_step_rate", 2}};
  auto c = make_lr_schedule("LRRangeTest", p, 0.5, true);
  EXPECT_DOUBLE_EQ(c->current().lr, 1e-3);
  std::vector<double> want;
  for (int i = 1; i <= 9; ++i) want.push_back(0.001 + 0.0005 * i);
  expect_trace(lrs_after_steps(*c, 9), want, 1e-12);
  p["lr_range_test_staircase"] = true;
  auto s = make_lr_schedule("LRRangeTest", p, 0.5, true);
  expect_trace(lrs_after_steps(*s, 9), {0.001, 0.001, 0.001, 0.003, 0.003, 0.003, 0.003, 0.005, 0.005}, 1e-12);
}

TEST(LrSchedule, LrRangeTestItem33) {
  struct Case { double min, rate; int size; bool stair; };
  for (Case c : {Case{1e-4, 1e-5, 1, true}, Case{1e-5, 1e-5, 1, false}, Case{1e-4, 1e-3, 10, true},
                 Case{1e-3, 1e-3, 10, false}, Case{1e-2, 1e-2, 19, true}, Case{1e-2, 1e-2, 19, false}}) {
    auto s = make_lr_schedule("LRRangeTest",
                              json{{"lr_range_test_min_lr", c.min}, {"lr_range_test_step_rate", c.rate},
                                   {"lr_range_test_step_size", c.size}, {"lr_range_test_staircase", c.stair}},
                              0.5, true);
    EXPECT_DOUBLE_EQ(s->current().lr, c.min);
    double prev = s->current().lr;
    for (int t = 0; t < 100; ++t) {
      s->step();
      double lr = s->current().lr;
      if (!c.stair) {
        EXPECT_GT(lr, prev);
      } else if ((t + 1) % c.size != 0) {
        EXPECT_EQ(lr, prev) << "constant within a stair";
      } else {
        EXPECT_GT(lr, prev);
      }
      prev = lr;
    }
  }
}

TEST(LrSchedule, Item39TensorContracts) {
  auto r = make_lr_schedule("LRRangeTest", json::object(), 0.5, true);
  EXPECT_DOUBLE_EQ(r->current().lr, 1e-3);
  r->step_to(1);
  EXPECT_DOUBLE_EQ(r->current().lr, 1e-3 * (1 + 2.0 / 2000));
  auto o = make_lr_schedule("OneCycle",
                            json{{"cycle_min_lr", 0.01}, {"cycle_max_lr", 0.1}, {"cycle_first_step_size", 10},
                                 {"cycle_second_step_size", 10}, {"cycle_momentum", false}},
                            0.5, true);
  EXPECT_DOUBLE_EQ(o->current().lr, 0.01);
  o->step_to(1);
  EXPECT_NEAR(o->current().lr, 0.028, 1e-15);
  EXPECT_FALSE(o->current().has_betas);
  double want = 0.1 * std::log(2.0) / std::log(10.0);
  auto w = make_lr_schedule("WarmupLR", json{{"warmup_num_steps", 10}}, 0.1, true);
  auto d = make_lr_schedule("WarmupDecayLR", json{{"total_num_steps", 100}, {"warmup_num_steps", 10}, {"warmup_max_lr", 0.1}}, 0.7, true);
  auto c = make_lr_schedule("WarmupCosineLR", json{{"total_num_steps", 100}, {"warmup_num_steps", 10}}, 0.1, true);
  for (auto* s : {w.get(), d.get(), c.get()}) {
    EXPECT_EQ(s->current().lr, 0.0) << s->name();
    s->step_to(1);
    EXPECT_NEAR(s->current().lr, want, 1e-15) << s->name();
  }
}

TEST(LrSchedule, OneCycleTrace) {
  auto s = make_lr_schedule("OneCycle",
                            json{{"cycle_min_lr", 1e-3}, {"cycle_max_lr", 1e-2}, {"cycle_first_step_size", 4},
                                 {"cycle_second_step_size", 4}, {"decay_lr_rate", 0.5}, {"decay_step_size", 2},
                                 {"cycle_min_mom", 0.8}, {"cycle_max_mom", 0.9}, {"decay_mom_rate", 0.1}},
                            0.5, true);
  // Construction: lr = min, betas = (min_mom, 0.99).
  EXPECT_DOUBLE_EQ(s->current().lr, 1e-3);
  EXPECT_TRUE(s->current().has_betas);
  EXPECT_DOUBLE_EQ(s->current().beta1, 0.8);
  EXPECT_DOUBLE_EQ(s->current().beta2, 0.99);
  std::vector<double> lrs, b1;
  for (int i = 0; i < 14; ++i) {
    s->step();
    lrs.push_back(s->current().lr);
    b1.push_back(s->current().beta1);
    EXPECT_EQ(s->current().beta2, 0.99);
  }
  expect_trace(lrs, {0.00325, 0.0055, 0.00775, 0.01, 0.00775, 0.0055, 0.00325, 0.001, 0.0008, 0.00066667, 0.00057143,
                     0.0005, 0.00044444, 0.0004},
               0, 5e-9);
  expect_trace({b1.begin(), b1.begin() + 11}, {0.875, 0.85, 0.825, 0.8, 0.825, 0.85, 0.875, 0.9, 0.945, 0.99, 1.035},
               1e-12);
}

TEST(LrSchedule, OneCycleItem34And35) {
  struct Case { double min, max, decay; int cycle, decay_step; };
  for (Case c : {Case{1e-5, 1e-2, 1e-3, 10, 10}, Case{1e-3, 1e-1, 0, 21, 21}, Case{1e-3, 1e-1, 1e-1, 21, 21},
                 Case{1e-5, 1e-1, 0, 10, 0}}) {
    auto s = make_lr_schedule("OneCycle",
                              json{{"cycle_min_lr", c.min}, {"cycle_max_lr", c.max}, {"decay_lr_rate", c.decay},
                                   {"cycle_first_step_size", c.cycle}, {"decay_step_size", c.decay_step}},
                              0.5, true);
    EXPECT_DOUBLE_EQ(s->current().lr, c.min);
    // "before step index cycle" = the value after `cycle` steps: f(cycle-1), the peak.
    EXPECT_NEAR(s->lr_at(c.cycle - 1), c.max, 1e-15);
    for (int t = 0; t < c.cycle - 1; ++t) EXPECT_LT(s->lr_at(t), s->lr_at(t + 1));
    for (int t = c.cycle - 1; t < 2 * c.cycle - 1; ++t) EXPECT_GT(s->lr_at(t), s->lr_at(t + 1));
    if (c.decay > 0 && c.decay_step > 0) {
      for (int t = 2 * c.cycle; t < 2 * c.cycle + 20; ++t) EXPECT_GT(s->lr_at(t), s->lr_at(t + 1));
    }
    // item 35: momentum schedule value at t = -1 is max_mom, min_mom after step_size steps (the peak).
    EXPECT_DOUBLE_EQ(s->beta1_at(-1), 0.9);
    EXPECT_NEAR(s->beta1_at(c.cycle - 1), 0.8, 1e-15);
  }
}

TEST(LrSchedule, OneCycleStairs) {  // item 43
  auto make = [](json extra) {
    json p{{"cycle_min_lr", 0.0}, {"cycle_max_lr", 1.0}, {"cycle_first_step_size", 8}, {"cycle_momentum", false}};
    p.update(extra);
    return make_lr_schedule("OneCycle", p, 0.5, false);
  };
  auto cont = make(json::object());
  auto zero = make(json{{"cycle_first_stair_count", 0}});
  auto two = make(json{{"cycle_first_stair_count", 2}});
  auto full = make(json{{"cycle_first_stair_count", 8}});
  std::set<double> distinct_two, distinct_cont;
  for (int t = -1; t < 16; ++t) {
    EXPECT_DOUBLE_EQ(zero->lr_at(t), cont->lr_at(t));
    EXPECT_NEAR(full->lr_at(t), cont->lr_at(t), 1e-15);
    distinct_two.insert(two->lr_at(t));
    distinct_cont.insert(cont->lr_at(t));
    double b = t + 1, i = std::fmod(b, 16.0);
    double pos = i <= 8 ? i * 2 / 8 : (16 - i) * 2 / 8;
    EXPECT_DOUBLE_EQ(two->lr_at(t), std::floor(pos) / 2) << "t=" << t;
  }
  EXPECT_EQ(distinct_two.size(), 3u);  // 0, 0.5, 1
  EXPECT_GT(distinct_cont.size(), 3u);
  EXPECT_EQ(two->lr_at(2), two->lr_at(1));  // flat pairs: b=2,3 -> pos 0.5,0.75 -> 0 ... b=4,5 -> 1
  EXPECT_EQ(two->lr_at(3), two->lr_at(4));
  // Asymmetric halves (10, 21) with counts (2, 3): exact stair values on both halves.
  auto asym = make(json{{"cycle_first_step_size", 10}, {"cycle_second_step_size", 21}, {"cycle_first_stair_count", 2},
                        {"cycle_second_stair_count", 3}});
  for (int t = -1; t < 30; ++t) {
    double b = t + 1, i = std::fmod(b, 31.0);
    double want = i <= 10 ? std::floor(i * 2 / 10) / 2 : std::floor((31 - i) * 3 / 21) / 3;
    EXPECT_DOUBLE_EQ(asym->lr_at(t), want) << "t=" << t;
  }
}

TEST(LrSchedule, OneCycleSecondZeroAndMomentumDisabledForSgd) {  // item 44 (100, 0)
  auto s = make_lr_schedule("OneCycle",
                            json{{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1.0}, {"cycle_first_step_size", 100},
                                 {"cycle_second_step_size", 0}},
                            0.5, false);
  EXPECT_DOUBLE_EQ(s->current().lr, 0.1);
  EXPECT_FALSE(s->cycles_momentum());
  EXPECT_FALSE(s->current().has_betas);
  EXPECT_FALSE(s->warnings().empty());
  for (int t = -1; t < 50; ++t) EXPECT_LT(s->lr_at(t), s->lr_at(t + 1));
}

TEST(LrSchedule, InvalidParamsAreInputErrors) {  // items 41, 44 (the config layer checks too)
  for (const char* type : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
    for (json bad : {json(nullptr), json(-5), json(0), json(1e3)}) {
      json p{{"total_num_steps", 100}, {"warmup_num_steps", bad}};
      EXPECT_THROW(make_lr_schedule(type, p, 0.1, true), zt::InputError) << type << " " << bad.dump();
    }
  }
  for (int size : {0, -5})
    EXPECT_THROW(make_lr_schedule("LRRangeTest", json{{"lr_range_test_step_size", size}}, 0.1, true), zt::InputError);
  for (auto fs : std::vector<std::pair<json, json>>{{0, 0}, {0, nullptr}, {-1, nullptr}, {0, 100}, {100, -1}}) {
    json p{{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1.0}, {"cycle_first_step_size", fs.first}};
    if (!fs.second.is_null()) p["cycle_second_step_size"] = fs.second;
    EXPECT_THROW(make_lr_schedule("OneCycle", p, 0.1, true), zt::InputError) << p.dump();
  }
  EXPECT_THROW(make_lr_schedule("OneCycle", json{{"cycle_min_lr", 0.1}}, 0.1, true), zt::InputError);
  EXPECT_THROW(make_lr_schedule("WarmupDecayLR", json::object(), 0.1, true), zt::InputError);
  EXPECT_THROW(make_lr_schedule("WarmupLR", nullptr, 0.1, true), zt::InputError);
  EXPECT_THROW(make_lr_schedule("WarmupLR", json{{"warmup_maxlr", 1}}, 0.1, true), zt::InputError);
  EXPECT_THROW(make_lr_schedule("StepLR", json::object(), 0.1, true), zt::InputError);
  EXPECT_THROW(make_lr_schedule("warmuplr", json::object(), 0.1, true), zt::InputError);
  EXPECT_THROW(make_lr_schedule("WarmupLR", json{{"warmup_max_lr", json::array({1, 2})}}, 0.1, true), zt::InputError);
  auto one = make_lr_schedule("WarmupLR", json{{"warmup_max_lr", json::array({2.0})}, {"warmup_num_steps", 2}}, 0.1, true);
  EXPECT_DOUBLE_EQ(one->lr_at(5), 2.0);
}

TEST(LrSchedule, SkippedStepDoesNotAdvance) {
  // The engine steps the schedule only on successful optimizer steps: overflow pattern O . O . .
  auto s = make_lr_schedule("WarmupLR", json{{"warmup_max_lr", 1.0}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}},
                            0.0, true);
  std::vector<bool> overflow{true, false, true, false, false};
  std::vector<double> lr_used;
  for (bool o : overflow) {
    lr_used.push_back(s->current().lr);
    if (!o) s->step();
  }
  expect_trace(lr_used, {0.0, 0.0, 0.0, 0.0, 0.1}, 0);
  EXPECT_EQ(s->last_batch_iteration(), 2 - 1 + 1);
  EXPECT_DOUBLE_EQ(s->current().lr, 0.2);
}

TEST(LrSchedule, ConstantWithoutScheduler) {
  auto s = make_lr_schedule("", nullptr, 3e-4, true);
  EXPECT_EQ(s->current().lr, 3e-4);
  s->step();
  EXPECT_EQ(s->current().lr, 3e-4);
}
