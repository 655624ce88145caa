// Loss scaler against the [run] traces of docs/config.md §6 and §13.1 items 25-29.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zerotrain/optim/loss_scaler.h"

using zt::LossScaler;
using zt::LossScalerConfig;
using zt::LossScalerFlavor;

namespace {

// Scale before the first update, then after each update of `pattern` ('O' overflow, '.' clean).
std::vector<double> trace(LossScaler& s, const std::string& pattern) {
  std::vector<double> out{s.scale()};
  for (char c : pattern) {
    s.update(c == 'O');
    out.push_back(s.scale());
  }
  return out;
}

LossScalerConfig zero_cfg(int power, int64_t window, int64_t hyst, bool consecutive = false, double min = 1) {
  LossScalerConfig c;
  c.flavor = LossScalerFlavor::Zero;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.hysteresis = hyst;
  c.consecutive_hysteresis = consecutive;
  c.min_loss_scale = min;
  return c;
}

LossScalerConfig nonzero_cfg(int power, int64_t window, double min = 1) {
  LossScalerConfig c = zero_cfg(power, window, 2, false, min);
  c.flavor = LossScalerFlavor::NonZero;
  return c;
}

}  // namespace

TEST(LossScaler, ZeroDefaultsHysteresisTrace) {
  LossScaler s(LossScalerConfig{});
  std::vector<int64_t> hyst{s.state().cur_hysteresis};
  std::vector<double> scales{s.scale()};
  for (char c : std::string("OOO.O")) {
    s.update(c == 'O');
    scales.push_back(s.scale());
    hyst.push_back(s.state().cur_hysteresis);
  }
  EXPECT_EQ(scales, (std::vector<double>{65536, 65536, 32768, 16384, 16384, 8192}));
  EXPECT_EQ(hyst, (std::vector<int64_t>{2, 1, 1, 1, 1, 1}));
}

TEST(LossScaler, ZeroHysteresisOneTrace) {
  LossScaler s(zero_cfg(8, 2, 1));
  EXPECT_EQ(trace(s, "OO.....O"), (std::vector<double>{256, 128, 64, 64, 64, 128, 128, 256, 128}));
}

TEST(LossScaler, ZeroHysteresisTwoTraces) {
  LossScaler a(zero_cfg(8, 2, 2, false));
  EXPECT_EQ(trace(a, "O.O...OO"), (std::vector<double>{256, 256, 256, 128, 128, 128, 256, 256, 128}));
  LossScaler b(zero_cfg(8, 2, 2, true));
  EXPECT_EQ(trace(b, "O.O...OO"), (std::vector<double>{256, 256, 256, 256, 256, 256, 512, 512, 256}));
}

TEST(LossScaler, ZeroThrowsAtMinimum) {
  LossScaler s(zero_cfg(2, 1000, 1, false, 1));
  EXPECT_EQ(trace(s, "OO"), (std::vector<double>{4, 2, 1}));
  try {
    s.update(true);
    FAIL() << "expected LossScaleAtMinimum";
  } catch (const zt::LossScaleAtMinimum& e) {
    EXPECT_NE(std::string(e.what()).find("Current loss scale already at minimum"), std::string::npos);
  }
}

TEST(LossScaler, FirstIncreaseAfterWindowPlusOne) {
  LossScaler s(zero_cfg(0, 3, 2));
  EXPECT_EQ(trace(s, "........"), (std::vector<double>{1, 1, 1, 1, 2, 2, 2, 4, 4}));
}

TEST(LossScaler, Item25FusedCleanDoubling) {
  LossScaler s(nonzero_cfg(8, 2));
  auto t = trace(s, "..........");
  EXPECT_EQ(t[1], 256);
  EXPECT_EQ(t[2], 256);
  EXPECT_EQ(t[3], 512);
  EXPECT_EQ(t[4], 512);
  EXPECT_EQ(t[5], 1024);
  EXPECT_EQ(t[6], 1024);
  EXPECT_EQ(t[10], 256 * 16);
}

TEST(LossScaler, Item26And28NonZeroFloorsWithoutError) {
  LossScaler s(nonzero_cfg(4, 2));
  EXPECT_EQ(trace(s, "OOOOOOOO"), (std::vector<double>{16, 8, 4, 2, 1, 1, 1, 1, 1}));
  LossScaler m(nonzero_cfg(4, 2, 2.0));
  EXPECT_EQ(trace(m, "OOOOOOOO"), (std::vector<double>{16, 8, 4, 2, 2, 2, 2, 2, 2}));
}

TEST(LossScaler, Item27And29) {
  LossScaler s(nonzero_cfg(8, 2));
  EXPECT_EQ(trace(s, "OO...O"), (std::vector<double>{256, 128, 64, 64, 64, 128, 64}));
  LossScaler z(zero_cfg(8, 2, 1));
  EXPECT_EQ(trace(z, "OO...O"), (std::vector<double>{256, 128, 64, 64, 64, 128, 64}));
  LossScaler z8(zero_cfg(8, 2, 1));
  EXPECT_EQ(trace(z8, "OOOOOOOO").back(), 1.0);  // reaches exactly 1 without raising
}

TEST(LossScaler, NonPositiveHysteresisNeverDecreases) {
  for (int64_t h : {0, -1}) {
    LossScaler s(zero_cfg(8, 2, h));
    auto t = trace(s, "OOOOO");
    for (double v : t) EXPECT_EQ(v, 256);
  }
}

TEST(LossScaler, StaticNeverChanges) {
  LossScalerConfig c;
  c.flavor = LossScalerFlavor::Static;
  c.static_scale = 128;
  LossScaler s(c);
  EXPECT_FALSE(s.dynamic());
  EXPECT_EQ(trace(s, "OO..O...."), std::vector<double>(10, 128));
}

TEST(LossScaler, StateRoundTrip) {
  LossScaler a(zero_cfg(8, 2, 2));
  trace(a, "O.O");
  LossScaler b(zero_cfg(8, 2, 2));
  b.set_state(a.state());
  EXPECT_EQ(trace(a, "...OO."), trace(b, "...OO."));
}
