// Rotary embedding and SwiGLU: the rotary table against the closed form; forward against double
// references; each reference's analytic backward against central finite differences and the
// kernel's backward against it; rope backward ∘ forward = identity; a position offset equals
// the rows of a longer sequence (bitwise); SwiGLU's in-place (aliased) backward.
#include <limits>

#include "kernel_test_util.h"
#include "llama_ops_ref.h"
#include "zerotrain/core/check.h"
#include "zerotrain/model/rope.h"

namespace zt::test {
namespace {

double op_rel(DType t) { return t == DType::F32 ? 2e-6 : dtype_eps(t); }

TEST(RopeTable, RowsAreCosAndSinOfPositionTimesInverseFrequency) {
  const double theta = 10000.0;
  const int64_t hs = 8, P = 50;
  const std::vector<float> tab = rope_table(theta, hs, P);
  ASSERT_EQ(tab.size(), static_cast<size_t>(P * hs));
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t i = 0; i < hs / 2; ++i) {
      const double angle = static_cast<double>(p) * std::exp(-2.0 * i / hs * std::log(theta));
      EXPECT_NEAR(tab[p * hs + i], std::cos(angle), 1e-7) << "cos p=" << p << " i=" << i;
      EXPECT_NEAR(tab[p * hs + hs / 2 + i], std::sin(angle), 1e-7) << "sin p=" << p << " i=" << i;
    }
  }
  EXPECT_EQ(tab[0], 1.0f);                          // cos 0
  EXPECT_EQ(tab[hs / 2], 0.0f);                     // sin 0
  EXPECT_EQ(tab[hs], static_cast<float>(std::cos(1.0)));  // p = 1, f_0 = 1
  EXPECT_TRUE(rope_table(theta, 2, 0).empty());
}

// Llama 3.2 1B's scaling (head_dim 64, theta 500000, factor 32, low 1, high 4, 8192 positions):
// wavelengths 2π·500000^(i/32) below 8192/4 (i <= 14) keep their frequency, above 8192/1
// (i >= 18) run 32 times slower — row p of the scaled table is row p/32 of the plain one, bitwise
// (dividing by 32 is exact) — and i = 15..17 lie strictly between the two.
TEST(RopeTable, Llama3ScalingKeepsHighDividesLowAndBlendsBetween) {
  const double theta = 500000.0;
  const int64_t hs = 64, half = hs / 2, P = 97;
  RopeScaling r;
  r.factor = 32.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position_embeddings = 8192.0;
  const std::vector<float> plain = rope_table(theta, hs, P), scaled = rope_table(theta, hs, P, r);
  const double kPi = 3.141592653589793;
  for (int64_t p = 1; p < P; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float got = scaled[p * hs + half + i];  // sin(p·f_i'), odd in the angle: tells the angle apart
      if (i <= 14) {
        EXPECT_EQ(got, plain[p * hs + half + i]) << "p=" << p << " i=" << i;
      } else if (i >= 18) {
        if (p % 32 == 0) {
          EXPECT_EQ(got, plain[(p / 32) * hs + half + i]) << "p=" << p << " i=" << i;
        }
      } else {
        const double f = std::pow(theta, -2.0 * static_cast<double>(i) / hs);
        const double a = std::asin(static_cast<double>(got)) / static_cast<double>(p);  // p·f < π/2 here
        ASSERT_LT(p * f, kPi / 2) << "p=" << p << " i=" << i;
        EXPECT_GT(a, f / 32 * (1 + 1e-6)) << "p=" << p << " i=" << i;
        EXPECT_LT(a, f * (1 - 1e-6)) << "p=" << p << " i=" << i;
      }
    }
  }
  RopeScaling bad = r;
  bad.high_freq_factor = 0.5;
  EXPECT_THROW(rope_table(theta, hs, P, bad), InputError);
}

TEST(RopeTable, RejectsBadArgumentsWithInputError) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no InputError");
  };
  EXPECT_NE(message([] { rope_table(10000.0, 7, 4); }).find("even"), std::string::npos);
  EXPECT_NE(message([] { rope_table(10000.0, 0, 4); }).find("head_dim"), std::string::npos);
  EXPECT_NE(message([] { rope_table(0.0, 8, 4); }).find("rope_theta"), std::string::npos);
  EXPECT_NE(message([] { rope_table(-1.0, 8, 4); }).find("rope_theta"), std::string::npos);
  EXPECT_NE(message([] { rope_table(std::numeric_limits<double>::quiet_NaN(), 8, 4); }).find("rope_theta"),
            std::string::npos);
  EXPECT_NE(message([] { rope_table(10000.0, 8, -1); }).find("max_position_embeddings"), std::string::npos);
}

struct RopeDims { int64_t B, T, nh, hs, pos, Tmax; };
const RopeDims kRopeDims[] = {{1, 1, 1, 2, 0, 1}, {2, 5, 3, 8, 0, 5}, {2, 3, 2, 6, 4, 9}, {1, 7, 4, 64, 0, 16},
                              {3, 4, 1, 10, 1, 5}};

std::string rope_tag(DType dt, const RopeDims& d) {
  return dt_tag(dt) + " B" + std::to_string(d.B) + " T" + std::to_string(d.T) + " nh" + std::to_string(d.nh) +
         " hs" + std::to_string(d.hs) + " pos" + std::to_string(d.pos);
}
// |out| bound of a rotated pair element: |x1| + |x2|.
std::vector<double> pair_mag(const std::vector<double>& x, int64_t hs) {
  std::vector<double> mag(x.size());
  const int64_t half = hs / 2;
  for (size_t k = 0; k < x.size(); ++k) {
    const int64_t i = static_cast<int64_t>(k) % hs;
    const size_t partner = i < half ? k + half : k - half;
    mag[k] = std::fabs(x[k]) + std::fabs(x[partner]) + 1e-6;
  }
  return mag;
}

class RopeTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST(RopeReference, AnalyticBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(3);
  for (const RopeDims& d : kRopeDims) {
    const auto table = rope_table(500.0, d.hs, d.Tmax);
    const int64_t n = d.B * d.T * d.nh * d.hs;
    auto x = random_values(rng, n, DType::F32), dy = random_values(rng, n, DType::F32);
    auto loss = [&](const std::vector<double>& xx) { return dot(dy, rope_ref(xx, table, d.B, d.T, d.nh, d.hs, d.pos)); };
    // The loss is linear in x: a wide step has no truncation error and little cancellation.
    expect_close(rope_ref(dy, table, d.B, d.T, d.nh, d.hs, d.pos, -1.0), numeric_grad(loss, x, 1e-3), 1e-8, 1e-7,
                 "rope reference backward" + rope_tag(DType::F32, d));
  }
}

TEST_P(RopeTest, ForwardAndBackwardMatchReference) {
  const DType dt = GetParam();
  for (const RopeDims& d : kRopeDims) {
    const auto table = rope_table(10000.0, d.hs, d.Tmax);
    HostTensor tab(DType::F32, {d.Tmax, d.hs});
    tab.fill(std::vector<double>(table.begin(), table.end()));
    const int64_t n = d.B * d.T * d.nh * d.hs;
    HostTensor x = random_tensor(rng_, dt, {n}, -2.0, 2.0), dx = random_tensor(rng_, dt, {n});
    auto xv = x.values(), dyv = dx.values();
    ops::rope_forward(s(), x.view(), tab.view(), d.B, d.T, d.nh, d.hs, d.pos);
    ops::rope_backward(s(), dx.view(), tab.view(), d.B, d.T, d.nh, d.hs, d.pos);
    sync();
    const std::string tag = rope_tag(dt, d);
    expect_close_mag(x.values(), rope_ref(xv, table, d.B, d.T, d.nh, d.hs, d.pos), pair_mag(xv, d.hs), op_rel(dt),
                     "rope forward" + tag);
    expect_close_mag(dx.values(), rope_ref(dyv, table, d.B, d.T, d.nh, d.hs, d.pos, -1.0), pair_mag(dyv, d.hs),
                     op_rel(dt), "rope backward" + tag);
  }
}

// The rotation is orthogonal: backward (its transpose) undoes forward up to rounding.
TEST_P(RopeTest, BackwardAfterForwardIsIdentity) {
  const DType dt = GetParam();
  const int64_t B = 2, T = 9, nh = 3, hs = 16, n = B * T * nh * hs;
  const auto table = rope_table(10000.0, hs, T);
  HostTensor tab(DType::F32, {T, hs});
  tab.fill(std::vector<double>(table.begin(), table.end()));
  HostTensor x = random_tensor(rng_, dt, {n});
  const auto x0 = x.values();
  ops::rope_forward(s(), x.view(), tab.view(), B, T, nh, hs, 0);
  ops::rope_backward(s(), x.view(), tab.view(), B, T, nh, hs, 0);
  sync();
  expect_close_mag(x.values(), x0, pair_mag(x0, hs), 2 * op_rel(dt), "rope backward(forward(x))" + dt_tag(dt));
}

// Rotating T rows at offset pos is bitwise the rotation of rows pos..pos+T-1 of a longer sequence.
TEST_P(RopeTest, PositionOffsetEqualsRowsOfLongerSequence) {
  const DType dt = GetParam();
  const int64_t B = 2, Tl = 12, nh = 2, hs = 8, pos = 5, T = 4, row = nh * hs;
  const auto table = rope_table(10000.0, hs, Tl);
  HostTensor tab(DType::F32, {Tl, hs});
  tab.fill(std::vector<double>(table.begin(), table.end()));
  HostTensor full = random_tensor(rng_, dt, {B, Tl, row}), part(dt, {B, T, row});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < row; ++j) part.set((b * T + t) * row + j, full.get((b * Tl + pos + t) * row + j));
  ops::rope_forward(s(), full.view(), tab.view(), B, Tl, nh, hs, 0);
  ops::rope_forward(s(), part.view(), tab.view(), B, T, nh, hs, pos);
  sync();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < row; ++j)
        ASSERT_EQ(part.get((b * T + t) * row + j), full.get((b * Tl + pos + t) * row + j))
            << "b" << b << " t" << t << " j" << j << dt_tag(dt);
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, RopeTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Gate values over both signs and both sigmoid branches, with a few far-out points.
std::vector<double> gate_values(std::mt19937_64& rng, int64_t n, DType dt) {
  auto g = random_values(rng, n, dt, -8.0, 8.0);
  const double special[] = {0.0, -20.0, 20.0, -100.0, 1.0, -1.0};
  for (size_t i = 0; i < 6 && i < g.size(); ++i) g[i * 7 % g.size()] = special[i];
  return g;
}

TEST(SwigluReference, AnalyticBackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(5);
  const int64_t n = 40;
  auto g = random_values(rng, n, DType::F32, -6.0, 6.0), u = random_values(rng, n, DType::F32);
  auto dy = random_values(rng, n, DType::F32);
  std::vector<double> dg, du;
  swiglu_backward_ref(dy, g, u, &dg, &du);
  auto loss_g = [&](const std::vector<double>& gg) { return dot(dy, swiglu_ref(gg, u)); };
  auto loss_u = [&](const std::vector<double>& uu) { return dot(dy, swiglu_ref(g, uu)); };
  expect_close(dg, numeric_grad(loss_g, g), 1e-8, 1e-6, "swiglu reference dgate");
  expect_close(du, numeric_grad(loss_u, u), 1e-8, 1e-6, "swiglu reference dup");
}

class SwigluTest : public KernelTest, public ::testing::WithParamInterface<DType> {};

TEST_P(SwigluTest, ForwardAndBackwardMatchReference) {
  const DType dt = GetParam();
  for (int64_t n : {1, 7, 64, 1000, 40000}) {
    HostTensor g(dt, {n}), u = random_tensor(rng_, dt, {n}), dout = random_tensor(rng_, dt, {n});
    g.fill(gate_values(rng_, n, dt));
    HostTensor out = random_tensor(rng_, dt, {n}), dg = random_tensor(rng_, dt, {n}), du = random_tensor(rng_, dt, {n});
    auto gv = g.values(), uv = u.values(), dy = dout.values();
    ops::swiglu_forward(s(), out.view(), g.view(), u.view());
    ops::swiglu_backward(s(), dg.view(), du.view(), dout.view(), g.view(), u.view());
    sync();
    const std::string tag = dt_tag(dt) + " n" + std::to_string(n);
    auto want = swiglu_ref(gv, uv);
    std::vector<double> want_dg, want_du, mag_out(n), mag_dg(n), mag_du(n);
    swiglu_backward_ref(dy, gv, uv, &want_dg, &want_du);
    for (int64_t i = 0; i < n; ++i) {
      const double sg = sigmoid_ref(gv[i]);
      mag_out[i] = std::fabs(want[i]);
      mag_du[i] = std::fabs(want_du[i]);
      mag_dg[i] = std::fabs(dy[i] * uv[i]) * sg * (1.0 + std::fabs(gv[i]) * (1.0 - sg));  // no cancellation
    }
    expect_close_mag(out.values(), want, mag_out, op_rel(dt), "swiglu out" + tag);
    expect_close_mag(dg.values(), want_dg, mag_dg, op_rel(dt), "swiglu dgate" + tag);
    expect_close_mag(du.values(), want_du, mag_du, op_rel(dt), "swiglu dup" + tag);
  }
}

// dgate may alias gate and dup may alias up: bitwise the results into separate buffers.
TEST_P(SwigluTest, BackwardInPlaceEqualsSeparateBuffers) {
  const DType dt = GetParam();
  const int64_t n = 20001;
  HostTensor g(dt, {n}), u = random_tensor(rng_, dt, {n}), dout = random_tensor(rng_, dt, {n});
  g.fill(gate_values(rng_, n, dt));
  HostTensor dg(dt, {n}), du(dt, {n}), g_alias = g, u_alias = u;
  ops::swiglu_backward(s(), dg.view(), du.view(), dout.view(), g.view(), u.view());
  ops::swiglu_backward(s(), g_alias.view(), u_alias.view(), dout.view(), g_alias.view(), u_alias.view());
  sync();
  EXPECT_EQ(g_alias.raw(), dg.raw());
  EXPECT_EQ(u_alias.raw(), du.raw());
}

TEST_P(SwigluTest, IndependentOfThreadCount) {
  const DType dt = GetParam();
  const int64_t n = 100003;
  HostTensor g(dt, {n}), u = random_tensor(rng_, dt, {n}), dout = random_tensor(rng_, dt, {n});
  g.fill(gate_values(rng_, n, dt));
  HostTensor o1(dt, {n}), dg1(dt, {n}), du1(dt, {n}), o4(dt, {n}), dg4(dt, {n}), du4(dt, {n});
  ops::swiglu_forward(s(), o1.view(), g.view(), u.view());
  ops::swiglu_backward(s(), dg1.view(), du1.view(), dout.view(), g.view(), u.view());
  set_stream_omp_threads(s(), 4);
  ops::swiglu_forward(s(), o4.view(), g.view(), u.view());
  ops::swiglu_backward(s(), dg4.view(), du4.view(), dout.view(), g.view(), u.view());
  set_stream_omp_threads(s(), 1);
  sync();
  EXPECT_EQ(o1.raw(), o4.raw());
  EXPECT_EQ(dg1.raw(), dg4.raw());
  EXPECT_EQ(du1.raw(), du4.raw());
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, SwigluTest, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace zt::test
