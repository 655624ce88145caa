// The per-rank thread count rule (app/thread_layout.h).
#include <gtest/gtest.h>

#include "zerotrain/app/thread_layout.h"

using zt::plan_thread_layout;

TEST(ThreadLayout, UnboundRanksSplitTheMask) {
  EXPECT_EQ(plan_thread_layout(16, 16, 2, nullptr, nullptr).threads, 8);
  EXPECT_EQ(plan_thread_layout(2, 2, 2, nullptr, nullptr).threads, 1);
  EXPECT_EQ(plan_thread_layout(2, 2, 4, nullptr, nullptr).threads, 1);  // oversubscribed: still 1
  EXPECT_EQ(plan_thread_layout(2, 2, 1, nullptr, nullptr).threads, 2);
  EXPECT_FALSE(plan_thread_layout(2, 2, 1, nullptr, nullptr).from_env);
}

TEST(ThreadLayout, BoundRankUsesItsMask) {
  EXPECT_EQ(plan_thread_layout(4, 16, 4, nullptr, nullptr).threads, 4);  // --bind-to socket/l3 etc.
  EXPECT_EQ(plan_thread_layout(1, 16, 8, nullptr, nullptr).threads, 1);  // --bind-to core
}

TEST(ThreadLayout, UserVariablesWin) {
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "3", nullptr).threads, 3);
  EXPECT_TRUE(plan_thread_layout(16, 16, 2, "3", nullptr).from_env);
  EXPECT_EQ(plan_thread_layout(16, 16, 2, nullptr, "5").threads, 5);
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "4,2", nullptr).threads, 4);  // nested OpenMP list: outer level
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "zero", nullptr).threads, 8);  // not a count: ignored
  EXPECT_EQ(plan_thread_layout(16, 16, 2, "0", nullptr).threads, 8);
  EXPECT_NE(zt::describe(plan_thread_layout(16, 16, 2, nullptr, nullptr)).find("8 threads per rank"), std::string::npos);
}
