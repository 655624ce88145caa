// The communication's own exposed time of a step (observe.h own_exposed_ms): at each wait the
// least over the ranks, summed; ranks that logged different numbers of waits give the least total.
#include <gtest/gtest.h>

#include <vector>

#include "../../csrc/app/observe.h"

TEST(OwnExposed, EachWaitsLeastOverRanks) {
  // Rank 0 arrived first at waits 0 and 2 (it also waited for rank 1 there), rank 1 at wait 1.
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms({{1.0, 0.2, 3.0}, {0.1, 2.0, 1.0}}), 0.1 + 0.2 + 1.0);
  // Never above any rank's own total: the least per wait is at most each rank's wait.
  const std::vector<std::vector<double>> three = {{0.5, 0.5, 0.5}, {0.4, 0.6, 0.7}, {0.9, 0.1, 0.6}};
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms(three), 0.4 + 0.1 + 0.5);
  for (const auto& r : three) EXPECT_LE(zt::own_exposed_ms(three), r[0] + r[1] + r[2]);
  // One rank: its own waits. No waits: 0.
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms({{0.25, 0.5}}), 0.75);
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms({{}, {}}), 0.0);
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms({}), 0.0);
}

TEST(OwnExposed, MisalignedWaitsGiveTheLeastTotal) {
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms({{1.0}, {0.3, 0.3}}), 0.6);
  EXPECT_DOUBLE_EQ(zt::own_exposed_ms({{0.2}, {0.3, 0.3}, {}}), 0.0);
}
