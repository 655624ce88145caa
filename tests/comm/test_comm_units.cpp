// Single-process units of the comm layer: the rank-order reduction kernel, the ring log, and the
// watchdog's stall decision and report line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "zerotrain/comm/comm_log.h"
#include "zerotrain/comm/host_reduce.h"
#include "zerotrain/comm/watchdog.h"
#include "zerotrain/core/cpu_isa.h"

using namespace zt;

TEST(HostReduce, Bf16SumsAccumulateInFp32) {
  // 1 + 2^-8 + 2^-8 in bf16 (8 mantissa bits): pairwise rounding loses both small terms
  // (1 + 2^-8 rounds to 1, ties to even), fp32 accumulation keeps them (1 + 2^-7 is exact).
  std::vector<bf16> a{bf16(1.0f)}, b{bf16(1.0f / 256)}, c{bf16(1.0f / 256)}, out(1);
  const void* srcs[] = {a.data(), b.data(), c.data()};
  reduce_in_order(srcs, 3, out.data(), 1, DType::BF16, ReduceOp::Sum, 3);
  EXPECT_EQ(static_cast<float>(out[0]), 1.0f + 1.0f / 128);
  EXPECT_EQ(static_cast<float>(bf16(static_cast<float>(bf16(1.0f + 1.0f / 256)) + 1.0f / 256)), 1.0f);
}

TEST(HostReduce, Fp16AvgAndRankOrder) {
  std::vector<fp16> a{fp16(3.0f)}, b{fp16(4.0f)}, c{fp16(5.0f)}, out(1);
  const void* srcs[] = {a.data(), b.data(), c.data()};
  reduce_in_order(srcs, 3, out.data(), 1, DType::F16, ReduceOp::Avg, 3);
  EXPECT_EQ(static_cast<float>(out[0]), 4.0f);
  // fp32: the order is fixed left to right: (1e8 + 1) + -1e8 = 0 while 1e8 + (1 + -1e8) = ... also
  // order-sensitive; the kernel must give exactly the left-to-right value.
  std::vector<float> x{1e8f}, y{1.0f}, z{-1e8f}, o(1);
  const void* s2[] = {x.data(), y.data(), z.data()};
  reduce_in_order(s2, 3, o.data(), 1, DType::F32, ReduceOp::Sum, 3);
  EXPECT_EQ(o[0], (1e8f + 1.0f) + -1e8f);
  const void* s3[] = {y.data(), x.data(), z.data()};
  reduce_in_order(s3, 3, o.data(), 1, DType::F32, ReduceOp::Sum, 3);
  EXPECT_EQ(o[0], (1.0f + 1e8f) + -1e8f);
}

TEST(HostReduce, MaxIsOrderIndependent) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{1.0f, nan, -0.0f, -5.0f}, b{2.0f, 1.0f, 0.0f, -7.0f}, o1(4), o2(4);
  const void* ab[] = {a.data(), b.data()};
  const void* ba[] = {b.data(), a.data()};
  reduce_in_order(ab, 2, o1.data(), 4, DType::F32, ReduceOp::Max, 2);
  reduce_in_order(ba, 2, o2.data(), 4, DType::F32, ReduceOp::Max, 2);
  EXPECT_EQ(o1[0], 2.0f);
  EXPECT_TRUE(std::isnan(o1[1]) && std::isnan(o2[1]));
  EXPECT_FALSE(std::signbit(o1[2]));
  EXPECT_FALSE(std::signbit(o2[2]));
  EXPECT_EQ(o1[3], -5.0f);
  EXPECT_EQ(o2[3], -5.0f);
}

TEST(HostReduce, InPlaceAliasAndLongRuns) {
  const size_t n = 5000;  // several tiles
  std::vector<float> a(n), b(n);
  for (size_t i = 0; i < n; ++i) { a[i] = static_cast<float>(i); b[i] = 0.5f; }
  const void* srcs[] = {a.data(), b.data()};
  reduce_in_order(srcs, 2, a.data(), n, DType::F32, ReduceOp::Sum, 2);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], static_cast<float>(i) + 0.5f) << i;
}

// The element loop the kernel must equal bit for bit: widen, combine left to right in fp32,
// divide, round once. One source with nothing to divide is copied as is.
template <typename T>
std::vector<T> reduce_reference(const std::vector<std::vector<T>>& src, ReduceOp op, int divisor) {
  std::vector<T> out(src[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = to_f32(src[0][i]);
    for (size_t k = 1; k < src.size(); ++k) {
      const float v = to_f32(src[k][i]);
      if (op != ReduceOp::Max) acc += v;
      else if (std::isnan(acc) || std::isnan(v)) acc = std::numeric_limits<float>::quiet_NaN();
      else if (v > acc || (v == acc && std::signbit(acc))) acc = v;
    }
    if (op == ReduceOp::Avg) acc /= static_cast<float>(divisor);
    out[i] = src.size() == 1 && (op != ReduceOp::Avg || divisor == 1) ? src[0][i] : from_f32<T>(acc);
  }
  return out;
}

template <typename T>
uint32_t bits_of(T v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}

// Random values with specials (±0, ±inf, NaN, bf16 rounding ties, huge values that overflow when
// summed) over lengths that end mid-tile, 1–4 sources, every op, in place and out of place.
template <typename T>
void expect_reduce_matches_reference(DType dt) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-4.0f, 4.0f);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            1.0f + 1.0f / 256, 3.0e38f, -3.0e38f, 1e-40f};
  for (const size_t n : {size_t{1}, size_t{17}, size_t{1024}, size_t{3000}}) {
    for (int nsrc = 1; nsrc <= 4; ++nsrc) {
      std::vector<std::vector<T>> src(static_cast<size_t>(nsrc), std::vector<T>(n));
      for (auto& s : src) {
        for (size_t i = 0; i < n; ++i) s[i] = from_f32<T>(rng() % 8 == 0 ? specials[rng() % 9] : uni(rng));
      }
      std::vector<const void*> ptrs;
      for (auto& s : src) ptrs.push_back(s.data());
      for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        for (const int divisor : {1, nsrc + 1}) {
          const std::vector<T> want = reduce_reference(src, op, divisor);
          std::vector<T> out(n);
          reduce_in_order(ptrs.data(), nsrc, out.data(), n, dt, op, divisor);
          std::vector<T> in_place = src.back();
          std::vector<const void*> alias = ptrs;
          alias.back() = in_place.data();
          reduce_in_order(alias.data(), nsrc, in_place.data(), n, dt, op, divisor);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(bits_of(out[i]), bits_of(want[i])) << dtype_name(dt) << " n=" << n << " sources=" << nsrc
                                                         << " op=" << reduce_op_name(op) << " i=" << i;
            ASSERT_EQ(bits_of(in_place[i]), bits_of(want[i])) << "in place, " << dtype_name(dt) << " i=" << i;
          }
        }
      }
    }
  }
}

// f() on every kernel path the machine has: the scalar loops and the AVX2 sum / avg (at the avx2
// and avx512 levels), chosen by ZT_CPU_ISA as in a run.
template <typename F>
void on_every_isa(const F& f) {
  for (const cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (!cpu::isa_supported(isa)) continue;
    SCOPED_TRACE(cpu::isa_name(isa));
    setenv("ZT_CPU_ISA", cpu::isa_name(isa), 1);
    f();
  }
  unsetenv("ZT_CPU_ISA");
}

TEST(HostReduce, BitwiseTheElementLoopOnEveryDtypeAndIsa) {
  on_every_isa([] {
    expect_reduce_matches_reference<float>(DType::F32);
    expect_reduce_matches_reference<bf16>(DType::BF16);
    expect_reduce_matches_reference<fp16>(DType::F16);
  });
}

// Every 16-bit pattern (signalling NaNs, subnormals, infinities) as a contribution: the sum and
// the avg of two and three sources round exactly as the element loop does, on every path (a NaN
// result as a NaN).
template <typename T>
void expect_every_pattern_matches_reference(DType dt) {
  const size_t n = 65536;
  std::vector<std::vector<T>> src(3, std::vector<T>(n));
  std::mt19937 rng(11);
  for (size_t i = 0; i < n; ++i) {
    src[0][i] = T::from_bits(static_cast<uint16_t>(i));
    src[1][i] = T::from_bits(static_cast<uint16_t>(rng()));
    src[2][i] = T::from_bits(static_cast<uint16_t>(i * 40503u));
  }
  for (const int nsrc : {2, 3}) {
    const std::vector<std::vector<T>> used(src.begin(), src.begin() + nsrc);
    const void* ptrs[] = {src[0].data(), src[1].data(), src[2].data()};
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      const std::vector<T> want = reduce_reference(used, op, nsrc);
      std::vector<T> out(n);
      reduce_in_order(ptrs, nsrc, out.data(), n, dt, op, nsrc);
      for (size_t i = 0; i < n; ++i) {
        // Of two NaN contributions either payload may come out (the compiler may swap an add's
        // operands): a NaN must stay a NaN, every other result is exact.
        if (std::isnan(to_f32(want[i]))) {
          ASSERT_TRUE(std::isnan(to_f32(out[i]))) << dtype_name(dt) << " i=" << i;
          continue;
        }
        ASSERT_EQ(out[i].bits, want[i].bits) << dtype_name(dt) << " sources=" << nsrc << " op=" << reduce_op_name(op)
                                             << " i=" << i;
      }
    }
  }
}

TEST(HostReduce, EverySixteenBitPatternOnEveryIsa) {
  on_every_isa([] {
    expect_every_pattern_matches_reference<bf16>(DType::BF16);
    expect_every_pattern_matches_reference<fp16>(DType::F16);
  });
}

TEST(CommLog, SequenceRingAndStats) {
  CommLog log(4);
  EXPECT_EQ(log.last_issued(), 0u);
  EXPECT_FALSE(log.oldest_incomplete().has_value());
  for (int i = 0; i < 6; ++i) log.issue(CommOp::AllGather, "u" + std::to_string(i), 10, 80, DType::BF16);
  EXPECT_EQ(log.last_issued(), 6u);
  // Seq 1 and 2 left the ring, but the oldest incomplete is still known by number.
  auto old = log.oldest_incomplete();
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->seq, 1u);
  EXPECT_FALSE(log.find(2).has_value());
  ASSERT_TRUE(log.find(3).has_value());
  EXPECT_EQ(log.find(3)->label, "u2");
  for (uint64_t s = 1; s <= 4; ++s) {
    log.mark_started(s);
    log.mark_completed(s);
  }
  EXPECT_EQ(log.oldest_incomplete()->seq, 5u);
  EXPECT_EQ(log.oldest_incomplete()->label, "u4");
  auto recent = log.recent(3);
  ASSERT_EQ(recent.size(), 3u);
  EXPECT_EQ(recent[0].seq, 4u);
  EXPECT_TRUE(recent[0].completed());
  EXPECT_FALSE(recent[1].started());
  CommOpStats st = log.stats(CommOp::AllGather);
  EXPECT_EQ(st.calls, 6u);
  EXPECT_EQ(st.completed, 4u);
  EXPECT_EQ(st.bytes, 480u);
  EXPECT_EQ(log.stats(CommOp::AllReduce).calls, 0u);
}

TEST(Watchdog, StallDecisionAndReportLine) {
  CommLog log(16);
  log.issue(CommOp::ReduceScatter, "bucket 3", 100, 1600, DType::F32);
  log.mark_started(1);
  log.mark_completed(1);
  log.issue(CommOp::AllGather, "unit 5", 64, 512, DType::BF16);
  const double t = log.now_s();
  EXPECT_FALSE(stalled_collective(log, t + 100, 5).has_value()) << "not started: queued, not hung";
  log.mark_started(2);
  const double started = log.find(2)->started_s;
  EXPECT_FALSE(stalled_collective(log, started + 4.9, 5).has_value());
  auto s = stalled_collective(log, started + 5.1, 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->seq, 2u);
  EXPECT_FALSE(stalled_collective(log, started + 50, 0).has_value()) << "timeout 0 disables";
  std::string line = hang_report_line(log, "why");
  EXPECT_NE(line.find("in #2 all_gather label=\"unit 5\" (512 bytes, bf16)"), std::string::npos) << line;
  EXPECT_NE(line.find("last completed #1 reduce_scatter label=\"bucket 3\""), std::string::npos) << line;
  EXPECT_NE(line.find("issued up to #2; why"), std::string::npos) << line;
  log.mark_completed(2);
  EXPECT_FALSE(stalled_collective(log, started + 50, 5).has_value());
  EXPECT_NE(hang_report_line(log, "x").find("not in a collective"), std::string::npos);
}
